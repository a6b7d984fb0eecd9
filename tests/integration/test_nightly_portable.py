"""The nightly batch jobs give the same answer on Beam's portable path (PortableRunner, embedded job
service, LOOPBACK workers: what a Flink or Spark job server runs) as on the default DirectRunner: the
same Redis keys and values (model versions written and switched) and the same Parquet rows (story
snapshot and every model dataset).

Input: the nightly corpus of ``tests/integration/test_nightly.py`` (12 stories, a reader clicking the
four tech stories) plus two readers with overlapping clicks on other stories (one user cluster), so
every job and every model dataset has rows. The input is
prepared once (stories in Redis, events flushed to Parquet), copied for each runner, and
``newsflow.jobs.nightly.run_night`` runs its four Beam jobs on each copy.
"""

from __future__ import annotations

import json
import os
import shutil

import pyarrow.parquet as pq

from newsflow.jobs.nightly import MODELS, run_night
from newsflow.runtime.settings import Settings
from newsflow.schemas import Event
from newsflow.storage.events import append_events
from newsflow.storage.feeds import build_feeds
from newsflow.storage.keys import Keys
from tests.helpers import redis_state, state_difference
from tests.integration.nightly_data import DATE, NOW, OTHER, populate, reader_events

PORTABLE = ["--runner", "PortableRunner", "--job_endpoint", "embed", "--environment_type", "LOOPBACK"]
JOBS = ["snapshot_stories", "decay_rates", "interest_vectors", "ranking_weights"]


def _other_reader(user: str, clicked: tuple[str, ...]) -> list[Event]:
    """Impressions of every OTHER story at positions 0..7, clicks and dwells on ``clicked``, 4 rounds."""
    out = []
    for rnd in range(4):
        t0 = NOW - 20000 + rnd * 400
        for j, sid in enumerate(OTHER):
            out.append(Event(user, "impression", sid, t0 + j, t0 + j, j, None, "top"))
        for k, sid in enumerate(clicked):
            t = t0 + 30 + k * 20
            out.append(Event(user, "click", sid, t, t, OTHER.index(sid), None, "top"))
            out.append(Event(user, "dwell", sid, t + 40, t + 40, None, 35.0 + k, "top"))
    return out


def _copy_redis(src, dst) -> None:
    for key in src.keys("*"):
        dst.restore(key, 0, src.dump(key), replace=True)


def _parquet_rows(root: str) -> dict:
    """Relative file path -> sorted rows (repr of sorted items) of every Parquet file under ``root``."""
    out = {}
    for directory, _, names in os.walk(root):
        for name in names:
            if name.endswith(".parquet"):
                path = os.path.join(directory, name)
                rows = pq.read_table(path).to_pylist()
                out[os.path.relpath(path, root)] = sorted(repr(sorted(r.items())) for r in rows)
    return out


def test_nightly_jobs_portable_runner_equal_direct_runner(redis_pair, tmp_path):
    direct_client, portable_client = redis_pair
    keys = Keys()
    # the input, once: stories and candidate pools in Redis, the events flushed to Parquet
    populate(direct_client, keys)
    build_feeds(direct_client, NOW)
    events = reader_events("reader") + _other_reader("r2", ("o2", "o5")) + _other_reader("r3", ("o2", "o5", "o7"))
    append_events(direct_client, events)
    urls = {id(c): f"unix://{c.socket_file}" for c in redis_pair}
    base = str(tmp_path / "direct-output")
    prep = run_night(direct_client, _settings(tmp_path, "direct", urls[id(direct_client)]), DATE, base, step="flush")
    assert prep["status"] == "ok" and prep["events_flushed"] == len(events), prep
    _copy_redis(direct_client, portable_client)
    shutil.copytree(base, str(tmp_path / "portable-output"))
    assert redis_state(direct_client) == redis_state(portable_client)

    results = {}
    for name, client, flags in (("direct", direct_client, []), ("portable", portable_client, PORTABLE)):
        output = str(tmp_path / f"{name}-output")
        summary = run_night(client, _settings(tmp_path, name, urls[id(client)]), DATE, output, beam_args=flags)
        assert summary["status"] == "ok", summary["error"]
        assert [(j["job"], j["state"]) for j in summary["jobs"]] == [(j, "DONE") for j in JOBS]
        assert {j["runner"] for j in summary["jobs"]} == {"DirectRunner" if not flags else "PortableRunner"}
        assert summary["models"] == {m: DATE for m in MODELS}
        results[name] = (redis_state(client), _parquet_rows(output))

    (direct_redis, direct_rows), (portable_redis, portable_rows) = results["direct"], results["portable"]
    model_files = sorted(p for p in direct_rows if p.startswith("models/"))
    # every model dataset was written for the date, with rows
    assert {p.split("/")[1] for p in model_files} >= {"decay", "interest", "weights"}, model_files
    assert all(direct_rows[p] for p in model_files), {p: len(direct_rows[p]) for p in model_files}
    assert sorted(portable_rows) == sorted(direct_rows)
    assert portable_rows == direct_rows
    # the model versions in Redis: written by the jobs, switched to DATE
    manifest = dict(direct_redis[keys.model_manifest.encode()][1])
    assert {m: json.loads(manifest[f"{m}:{DATE}".encode()])["state"] for m in MODELS} == {m: "ready" for m in MODELS}
    assert sorted(portable_redis) == sorted(direct_redis)
    assert portable_redis == direct_redis, state_difference(portable_redis, direct_redis)


def _settings(tmp_path, name: str, url: str) -> Settings:
    return Settings.resolve(None, environ={}, data_dir=str(tmp_path / f"{name}-data"), redis_url=url)
