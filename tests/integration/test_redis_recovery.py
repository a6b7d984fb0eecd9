"""``kill -9`` of the embedded Redis while ``newsflow serve``, ``newsflow crawl`` and ``newsflow run-continuous`` run:
within 30 s all three work again, and every reader event answered 202 before the kill is kept.

Everything is a real process on 127.0.0.1 with a temporary data directory and no Redis configuration (the
embedded server, started by whichever command needs it first): ``newsflow replay-web`` publishes a small corpus
built from the bundled pages, ``crawl`` fetches it, ``run-continuous`` runs the job over the landing files and
builds the feeds, ``serve`` answers ``/v1/top`` and ``POST /v1/events``. Each process' output is in
``<tmp>/logs/<name>.log``, quoted by the assertion that fails.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import signal
import time

import httpx
import pyarrow.dataset as ds
import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from benchmarks.crawl_to_display import Processes, _build_corpus, _landed, _story_ids
from newsflow.core.urls import article_id
from newsflow.runtime.redis_conn import embedded_paths, embedded_status, stop_embedded
from newsflow.serving.tokens import sign_token
from newsflow.storage.events import pending_events
from newsflow.storage.keys import Keys
from newsflow.storage.stories import RedisStoryStore
from tests.conftest import REPO_ROOT

SECRET = "r" * 32
RECOVERY_S = 30.0
WARMUP_S = 240.0
PAGES = os.path.join(REPO_ROOT, "data", "corpus", "pages.jsonl.gz")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pid(rdb: str) -> int:
    with open(embedded_paths(rdb).pid) as f:
        return int(f.read())


def _log(logs: str, name: str) -> str:
    with open(os.path.join(logs, f"{name}.log"), errors="replace") as f:
        return f.read()[-3000:]


def _post_events(http: httpx.Client, port: int, token: str, tag: str, batch: int) -> tuple[int, set[str]]:
    """One ``POST /v1/events`` of 3 clicks on stories ``{tag}-{batch}-{i}``; (status, story ids sent)."""
    events = [{"type": "click", "story_id": f"{tag}-{batch}-{i}", "position": i} for i in range(3)]
    try:
        resp = http.post(
            f"http://127.0.0.1:{port}/v1/events", json={"events": events}, headers={"Authorization": f"Bearer {token}"}
        )
    except httpx.HTTPError:
        return 0, set()
    accepted = resp.json().get("accepted") if resp.status_code == 202 else 0
    assert resp.status_code != 202 or accepted == 3, resp.text
    return resp.status_code, {e["story_id"] for e in events}


def _fresh_page(index: int) -> dict:
    """A bundled corpus page (``index``) that the replayed web does not publish."""
    with gzip.open(PAGES, "rb") as f:
        return json.loads(next(line for i, line in enumerate(f) if i == index))


def _landing_line(page: dict, now: float) -> bytes:
    return json.dumps({**page, "fetch_time": now, "published_time": now - 60}).encode() + b"\n"


def _until(deadline: float, check, what: str, procs: Processes, logs: str, names: tuple[str, ...]):
    """Polls ``check()`` until it returns a truthy value; fails with the named processes' logs after ``deadline``."""
    while True:
        procs.check()
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            quoted = "\n".join(f"--- {n}.log ---\n{_log(logs, n)}" for n in names)
            pytest.fail(f"{what() if callable(what) else what} not within the deadline\n{quoted}")
        time.sleep(0.2)


def test_serve_crawl_and_run_continuous_work_again_within_30_s_of_a_kill_9_of_redis(tmp_path):
    data, logs = str(tmp_path / "data"), str(tmp_path / "logs")
    os.makedirs(logs)
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(
        NEWSFLOW_DATA_DIR=data,
        NEWSFLOW_MODEL_DIR=os.path.join(REPO_ROOT, "var", "models"),
        NEWSFLOW_TOKEN_SECRET=SECRET,
        PYTHONUNBUFFERED="1",
    )
    rdb = os.path.join(data, "redis", "newsflow.rdb")
    held = _build_corpus(str(tmp_path / "corpus"), 20, 1, time.time(), random.Random(7))
    replay_port, api_port = _free_port(), _free_port()
    landing = os.path.join(data, "landing")
    os.makedirs(landing)
    seeds = str(tmp_path / "seeds.txt")
    procs = Processes(env, logs)
    http = httpx.Client(timeout=5.0)
    token = sign_token("reader-1", SECRET.encode(), time.time(), 3600)
    try:
        procs.start(
            "replay-web",
            *("replay-web", "--corpus-dir", str(tmp_path / "corpus"), "--port", str(replay_port)),
            *("--start-time", "now", "--speed", "1", "--no-failures", "--seeds-out", seeds),
        )
        procs.start("serve", "serve", "--port", str(api_port), "--refresh-feeds", "0", "--now", "wall")
        procs.start("run-continuous", "run-continuous", "--input-dir", landing, "--every", "1", "--now", "wall")
        _until(time.monotonic() + 60, lambda: os.path.exists(seeds), "replay-web's seeds", procs, logs, ("replay-web",))
        procs.start(
            "crawl",
            *("crawl", "--seeds", seeds, "--resolve", f"*=127.0.0.1:{replay_port}", "--allow-host", "127.0.0.1"),
            *(
                "--min-poll-interval",
                "2",
                "--max-poll-interval",
                "5",
                "--landing-max-age",
                "1",
                "--progress-every",
                "0",
            ),
        )

        def top_served():
            try:
                return _story_ids(http.get(f"http://127.0.0.1:{api_port}/v1/top").json())
            except (httpx.HTTPError, ValueError):
                return set()

        names = ("serve", "crawl", "run-continuous")
        _until(
            time.monotonic() + WARMUP_S, top_served, "the baseline crawled, processed and served", procs, logs, names
        )

        acked: set[str] = set()
        for b in range(20):
            status, sent = _post_events(http, api_port, token, "pre", b)
            assert status == 202, f"POST /v1/events before the kill: {status}"
            acked |= sent
        fresh = _fresh_page(60)
        sock = embedded_paths(rdb).sock
        killed = _pid(rdb)
        os.kill(killed, signal.SIGKILL)
        t_kill = time.monotonic()
        # after the kill: a page published on the replayed web (for crawl), a landing file (for run-continuous)
        page = held[0]
        http.post(
            f"http://127.0.0.1:{replay_port}/_replay/publish",
            json={
                "url": page["url"],
                "title": page.get("title") or page["url"],
                "body": base64.b64decode(page["body_b64"]).decode("utf-8", "replace"),
                "content_type": page.get("content_type") or "text/html; charset=utf-8",
            },
        ).raise_for_status()
        name = f"raw-{int(time.time() * 1000)}-recovery-000001.jsonl"
        with open(os.path.join(landing, "." + name + ".tmp"), "wb") as f:
            f.write(_landing_line(fresh, time.time()))
        os.replace(os.path.join(landing, "." + name + ".tmp"), os.path.join(landing, name))

        # this process never starts the server: a plain client, no retries, so only the three commands can
        plain = redis.Redis(unix_socket_path=sock, socket_timeout=2, retry=Retry(NoBackoff(), 0))
        after, answers, seen = iter(range(10_000)), [], {}

        def serve_works() -> bool:
            status, _ = _post_events(http, api_port, token, "post", next(after))
            try:
                health = http.get(f"http://127.0.0.1:{api_port}/healthz")
                answers.append((status, health.status_code, health.text[:60]))
            except httpx.HTTPError as e:
                answers.append((status, type(e).__name__))
            return status == 202 and answers[-1][1:] == (200, '{"redis":true}')

        def job_works() -> bool:
            try:
                return RedisStoryStore(plain).assigned_story(article_id(fresh["url"])) is not None
            except redis.RedisError:
                return False

        pending = {
            "serve": serve_works,
            "crawl": lambda: _landed(landing, page["url"], seen) is not None,
            "run-continuous": job_works,
        }
        recovered = {}
        while pending and time.monotonic() - t_kill < RECOVERY_S:
            procs.check()
            for who, works in list(pending.items()):
                if works():
                    recovered[who] = round(time.monotonic() - t_kill, 2)
                    del pending[who]
            time.sleep(0.2)
        print(json.dumps({"recovered_s": recovered, "redis": embedded_status(rdb)}))
        quoted = "\n".join(f"--- {n}.log ---\n{_log(logs, n)}" for n in pending)
        assert not pending, (
            f"not working again within {RECOVERY_S} s of the kill: {sorted(pending)} (recovered: {recovered}; "
            f"Redis: {embedded_status(rdb)}; serve's last (events, healthz) answers: {answers[-3:]})\n{quoted}"
        )
        assert _pid(rdb) != killed
        client = plain

        # every event answered 202 before the kill is in Redis or in the events Parquet
        kept = {f["story_id"] for _, f in pending_events(client, Keys()) if "story_id" in f}
        parquet = [os.path.join(r, "") for r, _, fs in os.walk(data) if os.path.basename(r) == "events" and fs]
        for directory in parquet:
            table = ds.dataset(directory, format="parquet", partitioning="hive").to_table(columns=["story_id"])
            kept |= set(table.column("story_id").to_pylist())
        assert acked - kept == set(), f"{len(acked - kept)} of {len(acked)} acknowledged events lost"
    finally:
        http.close()
        procs.stop()
        stop_embedded(rdb, save=False)
