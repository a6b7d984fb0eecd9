"""``newsflow simulate-readers`` end to end on a slice of the bundled corpus (400 headlines): the real
streaming job, the real HTTP API on 127.0.0.1, the nightly jobs between days. Checks the report's
arithmetic against the data it left behind (every posted event is in the events dataset exactly once,
the models of the last night serve), not a lift (too few readers here to measure one)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess

import pyarrow.dataset as ds

from tests.conftest import REPO_ROOT


def test_simulate_readers_small(tmp_path):
    src = os.path.join(REPO_ROOT, "data", "corpus", "headlines.jsonl.gz")
    small = tmp_path / "small.jsonl.gz"
    with gzip.open(src, "rb") as f, gzip.open(small, "wb") as out:
        for i, line in enumerate(f):
            if i >= 400:
                break
            out.write(line)
    data_dir = tmp_path / "sim"
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    proc = subprocess.run(
        [f"{REPO_ROOT}/.venv/bin/newsflow", "simulate-readers", "--readers", "12", "--days", "2", "--sessions", "1"]
        + ["--seed", "3", "--input", str(small), "--data-dir", str(data_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [n["status"] for n in report["nights"]] == ["ok", "ok"]
    assert 0 <= report["ctr_at_10_unpersonalized"] <= 1 and 0 <= report["ctr_at_10_personalized"] <= 1
    if report["ctr_at_10_unpersonalized"]:
        assert report["lift"] == round(report["ctr_at_10_personalized"] / report["ctr_at_10_unpersonalized"], 4)
    assert report["per_day"][-1]["ctr_personalized"] == report["ctr_at_10_personalized"]
    for day in report["per_day"]:
        if day["ctr_top"]:
            assert day["lift"] == round(day["ctr_personalized"] / day["ctr_top"], 4)
    events = ds.dataset(str(data_dir / "output" / "events"), format="parquet", partitioning="hive").to_table()
    ids = events.column("event_id").to_pylist()
    assert len(ids) == len(set(ids)) == report["events_posted"] > 0
    # 12 readers x 2 days x 1 session x 2 surfaces x up to 10 impressions
    assert 0 < sum(t == "impression" for t in events.column("type").to_pylist()) <= 480
    assert set(events.column("user_id").to_pylist()) <= {f"sim{i:05d}" for i in range(12)}


def test_simulate_readers_refuses_bad_flags_before_loading_anything(tmp_path):
    used = tmp_path / "used"
    (used / "redis").mkdir(parents=True)
    (used / "redis" / "newsflow.rdb").write_bytes(b"a reader's own data")
    cases = {
        ("--seed", "-1"): "--seed must be >= 0",
        ("--readers", "0"): "--readers must be >= 1",
        ("--data-dir", str(used)): "already holds redis/",
    }
    for flags, message in cases.items():
        proc = subprocess.run(
            [f"{REPO_ROOT}/.venv/bin/newsflow", "simulate-readers", *flags],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2 and message in json.loads(proc.stdout)["error"], flags
    assert (used / "redis" / "newsflow.rdb").read_bytes() == b"a reader's own data"  # untouched
