"""``POST /v1/events`` stamps events on the serving clock (the replay clock when serving a replay), not the
wall clock that signs tokens: received time, default event time and the client-time tolerance all follow it,
so the events land in the replay day's partition (real embedded Redis, real Parquet)."""

from __future__ import annotations

import datetime as dt

import pyarrow.parquet as pq
from starlette.testclient import TestClient

from newsflow.serving.app import ServingConfig, create_app
from newsflow.serving.tokens import sign_token
from newsflow.storage.events import MAX_FUTURE_SECONDS, flush_events
from newsflow.storage.keys import Keys, event_shard

WALL = dt.datetime(2026, 12, 3, 12, 0, tzinfo=dt.UTC).timestamp()
REPLAY = dt.datetime(2014, 3, 12, 4, 49, tzinfo=dt.UTC).timestamp()
SECRET = b"c" * 32


def test_events_are_stamped_on_the_replay_clock(server, tmp_path):
    server.flushall()
    cfg = ServingConfig(
        token_secret=SECRET,
        snapshot_dir=str(tmp_path / "snap"),
        local_cache_seconds=0,
        clock=lambda: WALL,
        ranking_clock=lambda: REPLAY,
    )
    client = TestClient(create_app(server, cfg))
    auth = {"Authorization": "Bearer " + sign_token("u1", SECRET, WALL, 600)}  # tokens stay on the wall clock
    body = {
        "events": [
            {"type": "impression", "story_id": "s1", "position": 0, "surface": "top"},
            {"type": "click", "story_id": "s1", "position": 0, "surface": "top", "time": REPLAY + MAX_FUTURE_SECONDS},
        ]
    }
    resp = client.post("/v1/events", json=body, headers=auth)
    assert resp.status_code == 202 and resp.json()["accepted"] == 2
    # a client time on the wall clock is far in the replay clock's future: refused as the API refuses any
    late = {"events": [{"type": "click", "story_id": "s1", "time": WALL}]}
    assert client.post("/v1/events", json=late, headers=auth).status_code == 400
    assert server.zscore(Keys().active_users(event_shard("u1")), "u1") == REPLAY
    n, out = flush_events(server, str(tmp_path / "events"))
    assert n == 2
    table = pq.read_table(str(tmp_path / "events" / "date=2014-03-12"))
    rows = table.to_pylist()
    assert [r["received_time"].timestamp() for r in rows] == [REPLAY, REPLAY]
    assert [r["event_time"].timestamp() for r in rows] == [REPLAY, REPLAY + MAX_FUTURE_SECONDS]
