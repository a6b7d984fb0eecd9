"""Reader events are durable and land exactly once, checked with real kills.

* 202-acknowledged events (real HTTP ``POST /v1/events`` on 127.0.0.1) survive a ``kill -9`` of the
  embedded Redis server (append-only file) and of the API process.
* The Parquet flush killed (SIGKILL) between writing its files and moving its cursor, with more
  events arriving before the rerun, leaves every event exactly once in ``events/date=D/``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow.dataset as ds

from newsflow.runtime.redis_conn import stop_embedded
from newsflow.schemas.event import Event
from newsflow.storage.events import (
    active_readers,
    append_events,
    backlog,
    flush_events,
    mark_active,
    read_cursor,
    trim_active_readers,
)
from newsflow.storage.keys import Keys, event_shard
from newsflow.storage.retention import expire
from tests.conftest import REPO_ROOT

SECRET = "k" * 32

_API_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    import httpx
    from newsflow.runtime.redis_conn import connect
    from newsflow.serving.app import ServingConfig, create_app
    from newsflow.serving.tokens import sign_token
    from tests.integration.asgi_server import serve_in_thread

    rdb, snap, batches, secret = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4].encode()
    client = connect(embedded_path=rdb)
    app = create_app(client, ServingConfig(token_secret=secret, snapshot_dir=snap, local_cache_seconds=0))
    token = sign_token("reader-1", secret, time.time(), 3600)
    acked = 0
    with serve_in_thread(app) as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as http:
            for b in range(batches):
                events = [{"type": "click", "story_id": f"s{b}-{i}", "position": i} for i in range(3)]
                resp = http.post("/v1/events", json={"events": events}, headers={"Authorization": "Bearer " + token})
                if resp.status_code == 202:
                    acked += resp.json()["accepted"]
        print(json.dumps({"server_pid": client.pid, "acked": acked}), flush=True)
        sys.stdin.readline()  # stays up until killed
    """
)

_COUNT_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from newsflow.runtime.redis_conn import connect
    client = connect(embedded_path=sys.argv[1])
    from newsflow.storage.events import backlog, pending_events
    ids = [f["story_id"] for _, f in pending_events(client)]
    print(json.dumps({"xlen": backlog(client), "story_ids": ids, "pid": client.pid}))
    """
)

_FLUSH_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    import redis
    from newsflow.storage.events import flush_events
    client = redis.Redis.from_url(sys.argv[1])
    die = lambda: os.kill(os.getpid(), signal.SIGKILL)
    flush_events(client, sys.argv[2], max_rows=int(sys.argv[3]), after_write=die)
    """
)


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("REDIS_URL", None)
    return env


def _wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} still alive")


def test_acknowledged_events_survive_kill_9_of_embedded_redis(tmp_path):
    rdb = str(tmp_path / "redis" / "newsflow.rdb")
    api = subprocess.Popen(
        [sys.executable, "-c", _API_SCRIPT, rdb, str(tmp_path / "snap"), "34", SECRET],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,
        env=_env(),
    )
    try:
        line = api.stdout.readline()
        assert line, "the API process printed nothing"
        info = json.loads(line)
        assert info["acked"] == 102
        assert not os.path.exists(rdb), "an RDB snapshot was written: the test would not show the AOF at work"
        os.kill(info["server_pid"], signal.SIGKILL)  # kill -9 the Redis server...
        _wait_gone(info["server_pid"])
    finally:
        api.kill()  # ...and the API process holding it (no clean exit, no save)
        api.wait(10)
    assert os.path.getsize(str(tmp_path / "redis" / "newsflow.aof")) > 0
    out = subprocess.run(
        [sys.executable, "-c", _COUNT_SCRIPT, rdb],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        env=_env(),
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    stop_embedded(rdb, save=False)
    assert got["pid"] != info["server_pid"]  # a new server, loaded from the append-only file
    assert got["xlen"] == 102
    assert sorted(got["story_ids"]) == sorted(f"s{b}-{i}" for b in range(34) for i in range(3))


def _events(day: dt.date, n: int, start: int, user: str = "u0") -> list[Event]:
    t0 = dt.datetime(day.year, day.month, day.day, 23, 59, tzinfo=dt.UTC).timestamp()
    return [Event(user, "impression", f"s{start + i}", t0 + i, t0 + i, i, None, "feed") for i in range(n)]


def _stream_id(event_id: str) -> str:
    return event_id.split("/", 1)[1]


def test_flush_killed_between_write_and_cursor_never_loses_or_doubles(redis_server, tmp_path):
    client, url = redis_server
    keys = Keys()
    out = str(tmp_path / "events")
    d1, d2 = dt.date(2026, 11, 29), dt.date(2026, 11, 30)
    shard = event_shard("u0")
    ids = append_events(client, _events(d1, 4, 0) + _events(d2, 6, 100), keys)
    assert len(ids) == 10 and {i.split("/")[0] for i in ids} == {str(shard)}
    sids = [_stream_id(i) for i in ids]
    # the flusher dies (SIGKILL) after writing the files of its first range (7 events, 2 dates)
    proc = subprocess.run(
        [sys.executable, "-c", _FLUSH_SCRIPT, url, out, "7"], cwd=REPO_ROOT, env=_env(), capture_output=True, timeout=60
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    cursor, pending = read_cursor(client, shard, keys)
    assert cursor == "0-0" and pending == (sids[0], sids[6])
    written = sorted(os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs)
    name = f"events-{shard}-{sids[0]}-{sids[6]}.parquet"
    assert written == [f"date=2026-11-29/{name}", f"date=2026-11-30/{name}"]
    assert backlog(client, keys) == 10  # nothing trimmed: the cursor never moved
    # more events arrive before the rerun; the rerun must redo exactly the recorded range first
    late = [_stream_id(i) for i in append_events(client, _events(d2, 5, 200), keys)]
    n1, _ = flush_events(client, out, max_rows=7, keys=keys)
    assert n1 == 7 and read_cursor(client, shard, keys) == (sids[6], None)
    n2, _ = flush_events(client, out, max_rows=7, keys=keys)
    assert n2 == 7 and read_cursor(client, shard, keys) == (late[-2], None)
    n3, _ = flush_events(client, out, max_rows=7, keys=keys)
    assert n3 == 1 and read_cursor(client, shard, keys) == (late[-1], None)
    assert flush_events(client, out, max_rows=7, keys=keys) == (0, None)
    assert backlog(client, keys) == 0
    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    event_ids = table.column("event_id").to_pylist()
    assert sorted(event_ids) == sorted(ids + [f"{shard}/{x}" for x in late]) and len(set(event_ids)) == 15
    by_date = {}
    for row in table.select(["date", "story_id"]).to_pylist():
        by_date.setdefault(str(row["date"]), set()).add(row["story_id"])
    assert by_date == {
        "2026-11-29": {f"s{i}" for i in range(4)},
        "2026-11-30": {f"s{i}" for i in range(100, 106)} | {f"s{i}" for i in range(200, 205)},
    }


def test_events_of_many_readers_spread_over_shards_and_each_lands_once(redis_server, tmp_path):
    client, _ = redis_server
    keys = Keys()
    day = dt.date(2026, 11, 30)
    events = [e for u in range(40) for e in _events(day, 3, 10 * u, user=f"r{u}")]
    ids = append_events(client, events, keys)
    shards = {event_shard(f"r{u}") for u in range(40)}
    assert len(shards) > 30 and {int(i.split("/")[0]) for i in ids} == shards
    assert {k: client.xlen(keys.events(k)) for k in shards} == {
        k: 3 * sum(1 for u in range(40) if event_shard(f"r{u}") == k) for k in shards
    }
    out, total = str(tmp_path / "ev"), []
    while (n := flush_events(client, out, max_rows=50, keys=keys)[0]) > 0:
        total.append(n)
    assert sum(total) == 120 and max(total) <= 50 and backlog(client, keys) == 0
    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    assert sorted(table.column("event_id").to_pylist()) == sorted(ids)
    assert sorted(table.column("story_id").to_pylist()) == sorted(e.story_id for e in events)


def test_flush_trims_entries_left_by_a_crash_after_the_cursor_moved(redis_server, tmp_path):
    client, _ = redis_server
    keys = Keys()
    ids = append_events(client, _events(dt.date(2026, 11, 30), 3, 0), keys)
    shard = event_shard("u0")
    client.set(keys.events_flushed(shard), _stream_id(ids[1]))  # as left by a flusher killed after the cursor
    n, _ = flush_events(client, str(tmp_path / "ev"), keys=keys)
    assert n == 1 and backlog(client, keys) == 0
    rows = ds.dataset(str(tmp_path / "ev"), format="parquet", partitioning="hive").to_table().to_pylist()
    assert [r["event_id"] for r in rows] == [ids[2]]


def test_trim_active_readers_removes_idle_readers_in_bounded_steps(redis_server):
    client, _ = redis_server
    keys = Keys()
    pipe = client.pipeline(transaction=False)
    mark_active(pipe, {f"r{i}": 1000.0 + i for i in range(3000)}, keys)
    pipe.execute()
    assert active_readers(client, 3990.0, keys=keys) == ["r2999"] + [f"r{i}" for i in range(2998, 2989, -1)]
    for limit in (1, 7, 100, 1000, 2600):  # paged reads give the same answer as sorting every member
        want = [f"r{i}" for i in range(2999, 499, -1)][:limit]
        assert active_readers(client, 1500.0, limit=limit, keys=keys) == want
    pipe = client.pipeline(transaction=False)
    mark_active(pipe, {"tie-b": 3999.0, "tie-a": 3999.0}, keys)  # ties are ordered by id
    pipe.execute()
    assert active_readers(client, 0.0, limit=3, keys=keys) == ["r2999", "tie-a", "tie-b"]
    client.config_resetstat()
    assert trim_active_readers(client, 3500.0, keys, step=100) == 2500
    kept = ["r2999", "tie-a", "tie-b"] + [f"r{i}" for i in range(2998, 2499, -1)]
    assert active_readers(client, 0.0, limit=5000, keys=keys) == kept
    # one script call per step of <= 100 members: at least 2,500 / 100 calls
    assert int(client.info("commandstats")["cmdstat_zrem"]["calls"]) >= 25
    # newsflow retention trims the readers idle since its cutoff the same way
    out = expire(client, 3600.0, keys)
    assert out["idle_readers"] == 100 and active_readers(client, 0.0, keys=keys)[-1] == "r2600"
