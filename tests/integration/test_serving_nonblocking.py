"""A Redis that never answers does not stall the event loop: other requests are served meanwhile."""

from __future__ import annotations

import threading
import time

import httpx
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from newsflow.serving.app import ServingConfig, create_app
from tests.helpers import silent_server
from tests.integration.asgi_server import serve_in_thread


def test_slow_redis_never_blocks_other_requests(tmp_path):
    # A "Redis" on 127.0.0.1 that accepts connections and never answers: every Redis call waits for
    # the client's socket timeout (2 s).
    done: list[tuple[str, float, int]] = []
    with silent_server() as silent_port:
        client = redis.Redis(
            host="127.0.0.1",
            port=silent_port,
            socket_timeout=2.0,
            socket_connect_timeout=2.0,
            retry=Retry(NoBackoff(), 0),
        )
        cfg = ServingConfig(
            token_secret=b"k" * 32,
            snapshot_dir=str(tmp_path / "snap"),
            local_cache_seconds=0,
            redis_backoff_seconds=0.0,
        )
        with serve_in_thread(create_app(client, cfg), lifespan="off") as port:

            def get(path: str) -> None:
                resp = httpx.get(f"http://127.0.0.1:{port}{path}", timeout=30)
                done.append((path, time.monotonic(), resp.status_code))

            slow = [threading.Thread(target=get, args=(f"/v1/top?edition={ed}",)) for ed in ("en", "de", "fr", "es")]
            for th in slow:
                th.start()
            time.sleep(0.3)  # the four requests are now waiting on the silent Redis
            get("/openapi.json")
            for th in slow:
                th.join(30)
    order = [path for path, _, _ in sorted(done, key=lambda d: d[1])]
    assert order[0] == "/openapi.json", order  # answered while the Redis-bound requests still waited
    statuses = {path: status for path, _, status in done}
    assert statuses["/openapi.json"] == 200
    # the Redis-bound requests degrade to stale (empty) pages, not errors
    assert all(statuses[f"/v1/top?edition={ed}"] == 200 for ed in ("en", "de", "fr", "es"))
