"""An accepted event is never trimmed away before it is flushed: above the backlog bound of its stream shard the
API answers 503 and appends nothing, and every event it answered 202 for reaches the events Parquet dataset.

Real embedded Redis, real HTTP on 127.0.0.1, real Parquet files. (The stream used to be capped with an
approximate ``XADD MAXLEN``: 1,002,000 accepted events left 1,000,035 to flush, 1,965 lost.)
"""

from __future__ import annotations

import time

import httpx
import pyarrow.dataset as ds
import pytest

from newsflow.schemas.event import Event
from newsflow.serving.app import ServingConfig, create_app
from newsflow.serving.tokens import sign_token
from newsflow.storage.events import EventBacklogFull, append_events, backlog, flush_events
from newsflow.storage.keys import Keys
from tests.integration.asgi_server import serve_in_thread

KEYS = Keys()
SECRET = b"b" * 32


def _events(n: int, tag: str) -> list[Event]:
    now = time.time()
    return [Event("reader-1", "click", f"{tag}-{i}", now, now, i, None, "top") for i in range(n)]


def test_append_refuses_above_the_bound_and_appends_nothing(redis_server, tmp_path):
    client, _ = redis_server
    ids = append_events(client, _events(3, "a"), KEYS, max_pending=5)
    ids += append_events(client, _events(2, "b"), KEYS, max_pending=5)  # exactly at the bound: accepted
    with pytest.raises(EventBacklogFull, match="5 unflushed events"):
        append_events(client, _events(1, "c"), KEYS, max_pending=5)
    assert backlog(client, KEYS) == 5
    # the flush moves all five accepted events, then there is room again
    flushed, _ = flush_events(client, str(tmp_path / "events"), keys=KEYS)
    assert flushed == 5 and backlog(client, KEYS) == 0
    append_events(client, _events(1, "c"), KEYS, max_pending=5)
    table = ds.dataset(str(tmp_path / "events"), format="parquet", partitioning="hive").to_table()
    assert sorted(table.column("story_id").to_pylist()) == ["a-0", "a-1", "a-2", "b-0", "b-1"]
    assert len(ids) == 5


def test_api_answers_503_backlog_full_and_every_202_event_is_flushed(redis_server, tmp_path):
    client, _ = redis_server
    cfg = ServingConfig(
        token_secret=SECRET, snapshot_dir=str(tmp_path / "snap"), local_cache_seconds=0, max_pending_events=10
    )
    token = sign_token("reader-1", SECRET, time.time(), 3600)
    accepted, codes = [], []
    with serve_in_thread(create_app(client, cfg)) as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            for b in range(4):  # 4 requests of 3 events: 3, 6, 9 accepted, the 4th (12 > 10) refused
                events = [{"type": "click", "story_id": f"s{b}-{i}", "position": i} for i in range(3)]
                resp = http.post("/v1/events", json={"events": events}, headers={"Authorization": "Bearer " + token})
                codes.append(resp.status_code)
                if resp.status_code == 202:
                    accepted += [e["story_id"] for e in events]
                else:
                    err = resp.json()["error"]
                    assert err["code"] == "backlog_full" and "nightly --step flush" in err["message"]
                    assert resp.headers["retry-after"] == "60"
    assert codes == [202, 202, 202, 503]
    assert backlog(client, KEYS) == 9
    flush_events(client, str(tmp_path / "events"), keys=KEYS)
    table = ds.dataset(str(tmp_path / "events"), format="parquet", partitioning="hive").to_table()
    assert sorted(table.column("story_id").to_pylist()) == sorted(accepted)
