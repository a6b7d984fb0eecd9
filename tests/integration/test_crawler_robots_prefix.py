"""robots.txt larger than the body cap, served by a real HTTP server on 127.0.0.1.

RFC 9309 section 2.5: a crawler may stop parsing after a limit of at least 500 KiB; a
bigger file is parsed as its prefix (the line the limit cuts dropped), never treated as
unreachable (which would disallow the whole host).
"""

import asyncio
import gzip
import json
import zlib

import pytest

from newsflow.crawler.config import CrawlerConfig
from newsflow.crawler.fetch import Fetcher
from newsflow.crawler.frontier import Frontier
from newsflow.crawler.httpserver import HttpServer, Response
from newsflow.crawler.robots import ROBOTS_MAX_BYTES, RobotsPolicy
from newsflow.crawler.worker import CrawlWorker

BIG = 5 * 1024 * 1024 + 4096  # past CrawlerConfig's default max_body_bytes (5 MiB)
HEAD = b"User-agent: *\nDisallow: /private\nAllow: /\n"
FILLER = b"# " + b"f" * 97 + b"\n"  # 100-byte comment lines


def padded(head: bytes, size: int) -> bytes:
    """``head`` followed by whole filler lines up to at least ``size`` bytes."""
    return head + FILLER * ((size - len(head)) // len(FILLER) + 1)


def cut_mid_line() -> tuple[bytes, int]:
    """A > 5 MiB robots.txt whose parsing limit falls inside ``Disallow: /news/x-and-more``.

    Returns the file and the offset where that line starts (the prefix the crawler must keep).
    """
    kept = b"Disallow: /kept\n"
    cut_line = b"Disallow: /news/x-and-more\n"
    at = ROBOTS_MAX_BYTES - len(b"Disallow: /news")  # the limit leaves "Disallow: /news"
    head = padded(HEAD, 0)
    fill = at - len(kept) - len(head)
    body = head + b"#" * (fill - 1) + b"\n" + kept
    assert len(body) == at
    return padded(body + cut_line, BIG), at


ROBOTS = padded(HEAD, BIG)
STRICT = b"User-agent: *\nDisallow: /\nAllow: /public-only-this\n"


def cut_gzip() -> bytes:
    """``STRICT`` gzipped, flushed after ``Allow: /p`` and stopped there: what inflates is a rule
    ``Allow: /p`` longer than ``Disallow: /`` (it would allow /private/...)."""
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    cut = STRICT.index(b"ublic-only")
    return z.compress(STRICT[:cut]) + z.flush(zlib.Z_SYNC_FLUSH)


CUT_GZIP = cut_gzip()
MIDLINE, MIDLINE_AT = cut_mid_line()


def handler(req):
    host = req.host.split(":")[0]
    if req.path != "/robots.txt":
        return Response(404, {"Content-Type": "text/plain"}, b"nope")
    if host == "plain.test":
        return Response(200, {"Content-Type": "text/plain"}, ROBOTS)
    if host == "gzip.test":
        return Response(200, {"Content-Type": "text/plain", "Content-Encoding": "gzip"}, gzip.compress(ROBOTS))
    if host == "midline.test":
        return Response(200, {"Content-Type": "text/plain"}, MIDLINE)
    if host == "midline-gzip.test":
        return Response(200, {"Content-Type": "text/plain", "Content-Encoding": "gzip"}, gzip.compress(MIDLINE))
    if host == "gzip-cut.test":  # a gzip stream that stops early (no last block, no trailer); Content-Length agrees
        return Response(200, {"Content-Type": "text/plain", "Content-Encoding": "gzip"}, CUT_GZIP)
    if host == "br.test":
        return Response(200, {"Content-Type": "text/plain", "Content-Encoding": "br"}, b"\x0b\x02\x80hello\x03")
    if host == "chunked.test":  # no Content-Length: 1 MiB chunks
        return Response(200, {"Content-Type": "text/plain"}, ((0, ROBOTS[i : i + 2**20]) for i in range(0, BIG, 2**20)))
    return Response(404, {"Content-Type": "text/plain"}, b"no robots")


@pytest.fixture(scope="module")
def http():
    with HttpServer(handler) as s:
        yield s


@pytest.fixture
def redis(server):
    server.flushdb()
    return server


def config(port, **kw):
    return CrawlerConfig(
        allow_hosts=("127.0.0.1",), resolve={"*": f"127.0.0.1:{port}"}, min_host_delay_s=0.0, total_timeout_s=10.0, **kw
    )


def robots_policies(redis, port, hosts):
    """The worker's robots policy for each host (fetched now) and the frontier counters."""
    worker = CrawlWorker(Frontier(redis), publisher=None, config=config(port), clock=lambda: 1000.0)

    async def go():
        worker.fetcher = Fetcher(worker.config, clock=worker.clock)
        try:
            return [await worker.robots_policy(f"http://{h}/news/x") for h in hosts]
        finally:
            await worker.fetcher.aclose()

    policies = asyncio.run(go())
    worker.flush_counters()
    return policies, worker.frontier.stats()


def test_the_test_files_are_what_they_claim():
    assert len(ROBOTS) > BIG > CrawlerConfig().max_body_bytes and ROBOTS.startswith(HEAD)
    assert len(MIDLINE) > BIG
    assert MIDLINE[MIDLINE_AT:].startswith(b"Disallow: /news/x-and-more\n")
    assert MIDLINE[:ROBOTS_MAX_BYTES].endswith(b"\nDisallow: /news")


@pytest.mark.parametrize("host", ["plain.test", "gzip.test", "chunked.test"])
def test_a_robots_txt_over_the_body_cap_is_parsed_as_its_prefix(redis, http, host):
    (pol,), stats = robots_policies(redis, http.port, [host])
    assert pol.status == 200 and not pol.disallow_all
    assert pol.allowed(f"http://{host}/news/x", "newsflow-crawler")
    assert not pol.allowed(f"http://{host}/private/y", "newsflow-crawler")
    # the kept prefix: whole 100-byte filler lines up to the limit (500 KiB = 512,000 bytes)
    n_filler = (ROBOTS_MAX_BYTES - len(HEAD)) // len(FILLER)
    assert pol.body == ROBOTS[: len(HEAD) + n_filler * len(FILLER)]
    assert len(HEAD) == 42 and len(pol.body) == 511_942  # 42 + 5,119 x 100 <= 512,000 < 42 + 5,120 x 100
    assert pol.expires_at == 1000.0 + 24 * 3600  # a 2xx verdict, kept 24 h (not the 30 min of "unreachable")
    assert stats["robots_truncated"] == 1 and stats["robots_fetched"] == 1


@pytest.mark.parametrize("host", ["midline.test", "midline-gzip.test"])
def test_the_line_cut_by_the_parsing_limit_is_ignored(redis, http, host):
    (pol,), stats = robots_policies(redis, http.port, [host])
    assert pol.status == 200 and pol.body == MIDLINE[:MIDLINE_AT]
    # "Disallow: /news" (the cut line's start) would refuse /news/x: it is not a rule
    assert pol.allowed(f"http://{host}/news/x", "newsflow-crawler")
    assert not pol.allowed(f"http://{host}/kept/y", "newsflow-crawler")  # the whole line before the cut
    assert not pol.allowed(f"http://{host}/private/y", "newsflow-crawler")
    assert stats["robots_truncated"] == 1


def test_a_small_robots_txt_is_not_counted_as_truncated(redis, http):
    (pol,), stats = robots_policies(redis, http.port, ["none.test"])
    assert pol.status == 404 and pol.allowed("http://none.test/private/y", "newsflow-crawler")
    assert "robots_truncated" not in stats


@pytest.mark.parametrize("path", ["plain", "gzip"])
def test_fetch_with_a_prefix_limit_keeps_the_prefix_and_ignores_the_body_cap(http, path):
    cfg = config(http.port, max_body_bytes=10_000)

    async def go(**kw):
        f = Fetcher(cfg)
        try:
            return await f.fetch(f"http://{path}.test/robots.txt", **kw)
        finally:
            await f.aclose()

    res = asyncio.run(go(prefix_limit=123_457))
    assert res.ok and res.truncated and res.error_kind == ""
    assert res.body == ROBOTS[:123_457]
    refused = asyncio.run(go())  # without a prefix limit the body cap still refuses it
    assert refused.error_kind == "too_large" and refused.body is None and not refused.truncated


def test_a_gzip_robots_txt_that_stops_early_is_unreachable_not_a_shorter_file(redis, http):
    assert zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(CUT_GZIP).endswith(b"Allow: /p")
    (pol,), stats = robots_policies(redis, http.port, ["gzip-cut.test"])
    assert pol.status == 0 and pol.disallow_all and pol.body == b""
    assert not pol.allowed("http://gzip-cut.test/private/story.html", "newsflow-crawler")
    assert pol.expires_at == 1000.0 + 30 * 60  # unreachable: retried after 30 min
    assert pol.error == "bad_encoding: gzip stream ended before its end"
    assert pol.refusal == "robots.txt unreachable (bad_encoding: gzip stream ended before its end)"
    assert stats["robots_error:bad_encoding"] == 1


def test_why_robots_txt_was_unreachable_is_kept_and_cached(redis, http):
    (pol,), stats = robots_policies(redis, http.port, ["br.test"])
    assert pol.status == 0 and pol.error == "unsupported_encoding: Content-Encoding 'br' is not supported"
    assert stats["robots_error:unsupported_encoding"] == 1
    cached = RobotsPolicy.from_json(Frontier(redis).robots_get("http://br.test"))
    assert cached == pol  # the reason survives the Redis cache (another worker reads it there)
    assert RobotsPolicy.from_json(pol.to_json().replace(', "error": ' + json.dumps(pol.error), "")).error == ""
