"""The nightly loop survives its faults (real embedded Redis, real Parquet files, a real process):
an unreadable events file is quarantined with a dead letter and the night runs on the rest; events
dated beyond the API's future tolerance are refused and counted; ``kill -9`` of ``newsflow nightly``
mid-run, then a rerun once its lease expired, leaves the outputs of a clean run.

The corpus is ``tests/integration/nightly_data.py``'s (twelve stories, one reader clicking the tech ones).
"""

from __future__ import annotations

import datetime as dt
import math
import os
import signal
import subprocess
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from newsflow.jobs.nightly import MODELS, run_night
from newsflow.jobs.nightly_common import is_future_event
from newsflow.runtime.settings import Settings
from newsflow.schemas import Event
from newsflow.schemas.event import EVENT_SCHEMA
from newsflow.storage.events import MAX_FUTURE_SECONDS, append_events, flush_events
from newsflow.storage.feeds import build_feeds
from newsflow.storage.keys import Keys
from newsflow.storage.lease import Lease, LeaseLost
from newsflow.storage.models import ModelStore
from tests.conftest import REPO_ROOT
from tests.integration.nightly_data import DATE, NOW, OTHER, TECH, populate, reader_events

UTC = dt.UTC


def _setup(client, url: str, root) -> tuple[Settings, str]:
    populate(client, Keys())
    build_feeds(client, NOW)
    settings = Settings.resolve(None, environ={}, data_dir=str(root / "data"), redis_url=url)
    return settings, str(root / "output")


def _url(client) -> str:
    return f"unix://{client.socket_file}"


def _ts(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, tz=UTC)


def _write_events(path: str, events: list[Event]) -> None:
    """Events as one Parquet file of the events schema (as :func:`flush_events` writes them)."""
    cols = {name: [] for name in EVENT_SCHEMA.names}
    for i, e in enumerate(events):
        cols["event_id"].append(f"9{i:05d}-0")
        cols["user_id"].append(e.user_id)
        cols["type"].append(e.type)
        cols["story_id"].append(e.story_id)
        cols["event_time"].append(_ts(e.event_time))
        cols["received_time"].append(_ts(e.received_time))
        cols["position"].append(e.position)
        cols["dwell_seconds"].append(e.dwell_seconds)
        cols["surface"].append(e.surface)
    table = pa.Table.from_arrays([pa.array(cols[f.name], type=f.type) for f in EVENT_SCHEMA], schema=EVENT_SCHEMA)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path)


def _table(output: str, name: str, date: str = DATE) -> pa.Table:
    return pq.read_table(os.path.join(output, name, f"date={date}", "part-00000.parquet"))


def _rows(table: pa.Table) -> list[dict]:
    """Rows with NaN spelled ``"nan"`` (NaN != NaN), to compare two runs' outputs."""
    nan = lambda v: "nan" if isinstance(v, float) and math.isnan(v) else v  # noqa: E731
    return [{k: nan(v) for k, v in row.items()} for row in table.to_pylist()]


def test_future_event_rule_is_the_apis_tolerance():
    end = dt.datetime(2026, 12, 1, tzinfo=UTC).timestamp()  # end of the partition date=2026-11-30

    def ev(event_time, received):
        return Event("u", "click", "s", event_time, received)

    assert not is_future_event(ev(NOW + MAX_FUTURE_SECONDS, NOW), end)
    assert is_future_event(ev(NOW + MAX_FUTURE_SECONDS + 1, NOW), end)
    assert not is_future_event(ev(end + MAX_FUTURE_SECONDS, end + MAX_FUTURE_SECONDS), end)
    assert is_future_event(ev(end + MAX_FUTURE_SECONDS + 1, end + MAX_FUTURE_SECONDS + 1), end)
    assert not is_future_event(ev(NOW - 86400 * 3, NOW), end)  # late events are the API's past rule, kept
    assert not is_future_event(ev(end + 3600, end + 3600), None)  # no partition: only the API's own rule


def test_unreadable_events_files_are_quarantined_and_the_night_runs_on_the_rest(redis_server, tmp_path):
    client, url = redis_server
    settings, output = _setup(client, url, tmp_path)
    events = reader_events("reader")
    append_events(client, events)
    assert flush_events(client, f"{output}/events")[0] == len(events)
    part = os.path.join(output, "events", f"date={DATE}")
    good = [os.path.join(part, n) for n in os.listdir(part)]
    assert len(good) == 1
    # a second reader's events, truncated half way (a crash mid-copy), and a file that is not Parquet at all
    other = os.path.join(tmp_path, "other.parquet")
    _write_events(other, [Event("other", "click", sid, NOW - 600, NOW - 600, 0, None, "feed") for sid in OTHER])
    data = open(other, "rb").read()
    with open(os.path.join(part, "events-truncated.parquet"), "wb") as f:
        f.write(data[: len(data) // 2])
    with open(os.path.join(part, "events-garbage.parquet"), "wb") as f:
        f.write(b"PAR1 this is not a parquet file")
    summary = run_night(client, settings, DATE, output)
    assert summary["status"] == "ok", summary["error"]
    moved = {os.path.basename(q["file"]): q for q in summary["quarantined"]}
    assert sorted(moved) == ["events-garbage.parquet", "events-truncated.parquet"]
    for name, q in moved.items():
        assert q["quarantined_to"] == os.path.join(output, "quarantine", "events", f"date={DATE}", name)
        assert os.path.exists(q["quarantined_to"]) and not os.path.exists(q["file"])
        assert q["error"]
    assert sorted(os.listdir(part)) == [os.path.basename(good[0])]
    letters = pq.read_table(os.path.join(output, "deadletters", "step=nightly_events")).to_pylist()
    assert sorted((d["url"], d["payload"].decode(), d["error_type"]) for d in letters) == sorted(
        (q["file"], q["quarantined_to"], "unreadable_parquet") for q in moved.values()
    )
    assert all(d["error"] == moved[os.path.basename(d["url"])]["error"] for d in letters)
    # the night learned from the readable file: the reader's 20 clicks, nothing of "other"
    interest = _table(output, "models/interest").to_pylist()
    assert [(r["user_id"], r["clicks"]) for r in interest] == [("reader", 20)]
    assert ModelStore(client).current() == {name: DATE for name in MODELS}
    # the next night's window covers the partition: nothing left to trip on
    nxt = run_night(client, settings, "2026-12-01", output)
    assert nxt["status"] == "ok", nxt["error"] and nxt["quarantined"] == []


def test_events_dated_beyond_the_api_tolerance_are_refused_and_counted(redis_server, tmp_path):
    client, url = redis_server
    settings, output = _setup(client, url, tmp_path)
    append_events(client, reader_events("reader"))
    # 300 clicks dated 2027 in the night's partition: 150 received on DATE, 150 claiming a 2027 receipt too
    t2027 = dt.datetime(2027, 3, 1, tzinfo=UTC).timestamp()
    forged = []
    for i in range(300):
        sid = (TECH + OTHER)[i % 12]
        received = NOW - 600 if i < 150 else t2027
        forged.append(Event(f"intruder{i % 3}", "click", sid, t2027 + i, received, 0, None, "feed"))
    _write_events(os.path.join(output, "events", f"date={DATE}", "events-forged.parquet"), forged)
    summary = run_night(client, settings, DATE, output)
    assert summary["status"] == "ok", summary["error"]
    refused = {j["job"]: j.get("future_events_refused") for j in summary["jobs"]}
    assert refused == {
        "snapshot_stories": None,
        "decay_rates": 300,
        "interest_vectors": 300,
        "ranking_weights": 300,
    }
    # the models hold the reader only: the forged clicks reached neither interests, clusters nor co-visitation
    interest = _table(output, "models/interest").to_pylist()
    assert [(r["user_id"], r["clicks"]) for r in interest] == [("reader", 20)]
    assert {r["user_id"] for r in _table(output, "models/cluster").to_pylist()} <= {"reader"}
    users = {k.decode() for k in ModelStore(client).read("history")} - {"_empty"}
    assert users == {"reader"}


def _redis_models(client) -> dict:
    models = ModelStore(client)
    return {name: models.read(name, DATE) for name in MODELS}


def test_kill_9_mid_run_then_a_rerun_after_the_lease_expires_leaves_a_clean_runs_outputs(redis_pair, tmp_path):
    killed, clean = redis_pair
    ttl = 5.0  # injected (production: 60 s); the rerun waits for it, not for two minutes
    settings, output = _setup(killed, _url(killed), tmp_path / "a")
    clean_settings, clean_output = _setup(clean, _url(clean), tmp_path / "b")
    events = reader_events("reader")
    append_events(killed, events)
    append_events(clean, events)
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    cmd = [f"{REPO_ROOT}/.venv/bin/newsflow", "nightly", "--date", DATE, "--redis-url", _url(killed)]
    cmd += ["--data-dir", settings.data_dir, "--output", output, "--lock-ttl", str(ttl)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        stories = os.path.join(output, "stories", f"date={DATE}", "part-00000.parquet")
        deadline = time.monotonic() + 300
        while not os.path.exists(stories) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # polls for the first job's output: the kill lands mid-run
        assert proc.poll() is None, proc.communicate()
        lease = Keys().nightly_lock(DATE)
        assert killed.get(lease)  # held and renewed by the run
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert ModelStore(killed).current() == {}  # killed before the switch
    # a scheduler coming back now is locked out, by a lease that ends within its TTL of the kill
    assert run_night(killed, settings, DATE, output, lock_ttl=ttl)["status"] == "locked"
    assert 0 < killed.pttl(lease) <= ttl * 1000
    deadline = time.monotonic() + 10 * ttl
    while killed.exists(lease) and time.monotonic() < deadline:
        time.sleep(0.05)  # Redis expires the dead run's lease; nothing renews it
    assert not killed.exists(lease)
    rerun = run_night(killed, settings, DATE, output, lock_ttl=ttl)
    assert rerun["status"] == "ok", rerun["error"]
    reference = run_night(clean, clean_settings, DATE, clean_output, lock_ttl=ttl)
    assert reference["status"] == "ok", reference["error"]
    assert reference["events_flushed"] == len(events)
    for name in ("stories", "models/decay", "models/interest", "models/covisit", "models/cluster", "models/weights"):
        a, b = _table(output, name), _table(clean_output, name)
        assert a.schema == b.schema and _rows(a) == _rows(b), name
    assert _table(output, "models/interest").num_rows == 1 and _table(output, "models/decay").num_rows > 0
    events_a = pq.read_table(os.path.join(output, "events")).drop(["event_id"]).sort_by("received_time")
    events_b = pq.read_table(os.path.join(clean_output, "events")).drop(["event_id"]).sort_by("received_time")
    assert events_a.num_rows == len(events) and events_a.equals(events_b)
    assert ModelStore(killed).current() == ModelStore(clean).current() == {name: DATE for name in MODELS}
    assert _redis_models(killed) == _redis_models(clean)
    assert not killed.exists(lease)  # released by the rerun


def test_an_owner_that_lost_its_lease_is_refused_at_its_next_fenced_write(redis_server):
    client, _ = redis_server
    lease = Lease(client, Keys().nightly_lock(DATE), 60.0)
    assert lease.acquire()
    client.set(lease.key, "another-run")  # expired and taken by another run while this one was paused
    with pytest.raises(LeaseLost, match="no longer held"):
        lease.check()
    assert not lease.release()  # never deletes another run's lease
    assert client.get(lease.key) == b"another-run"
    with pytest.raises(ValueError, match="got 61"):
        Lease(client, "k", 61)
