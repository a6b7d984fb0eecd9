"""The messy web against real HTTP servers on 127.0.0.1: decompression bombs, throttling answers,
robots.txt politeness and validators that arrive with a 304."""

import json
import os
import subprocess
import sys
import zlib

import pytest

from crawler.httpserver import HttpServer, Response

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def gzip_bomb():
    """1 GiB of spaces gzipped (about 1 MB), compressed 1 MiB at a time (never 1 GiB in memory)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b" " * MIB
    return b"".join([c.compress(block) for _ in range(1024)] + [c.flush()])


BOMB_CHILD = r"""
import asyncio, json, sys
from crawler.config import CrawlerConfig
from crawler.fetch import Fetcher

def status_kib(field):
    with open("/proc/self/status") as f:
        return int(next(line for line in f if line.startswith(field + ":")).split()[1])

def reset_peak():
    # VmHWM is this process's own peak RSS (ru_maxrss would also count the forking parent's RSS);
    # writing 5 to clear_refs resets it to the current RSS (Linux >= 4.0)
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass

async def main():
    cfg = CrawlerConfig(allow_hosts=("127.0.0.1",), max_body_bytes=10 * 1024 * 1024, total_timeout_s=60.0)
    f = Fetcher(cfg)
    try:
        warm = await f.fetch(sys.argv[1] + "/small")  # imports, zlib and the connection pool warmed up
        reset_peak()
        before = status_kib("VmRSS")
        r = await f.fetch(sys.argv[1] + "/bomb")
        peak = status_kib("VmHWM")
    finally:
        await f.aclose()
    print(json.dumps({"warm": warm.ok, "kind": r.error_kind, "body": r.body, "growth_kib": peak - before}))

asyncio.run(main())
"""


def test_gzip_bomb_is_refused_with_bounded_memory(gzip_bomb):
    assert len(gzip_bomb) < 1.1 * MIB
    small = zlib.compress(b"<p>fine</p>" * 1000)

    def handler(req):
        if req.path == "/bomb":
            return Response(200, {"Content-Type": "text/html", "Content-Encoding": "gzip"}, gzip_bomb)
        return Response(200, {"Content-Type": "text/html", "Content-Encoding": "deflate"}, small)

    with HttpServer(handler) as srv:
        env = dict(os.environ, PYTHONPATH=os.getcwd())
        out = subprocess.run([sys.executable, "-c", BOMB_CHILD, srv.base_url], capture_output=True, text=True,
                             env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads(out.stdout)
    assert res["warm"] and res["kind"] == "too_large" and res["body"] is None
    # peak RSS growth of the fetching process (measured in a child process): the kept 10 MiB cap plus a few 64 KiB steps
    # (before bounded inflating it was about 64 MiB)
    assert res["growth_kib"] < 16 * 1024, res
