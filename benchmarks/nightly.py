"""Nightly jobs at scale: events/s of each job on synthetic events, peak memory, and the night's cost at
10M users extrapolated from measured sizes.

Run::

    python -m benchmarks.nightly --json                   # 1M events, 100k readers, 5k stories
    python -m benchmarks.nightly --events 100000 --json   # a quicker look

Synthetic night (seeded): readers draw stories from a Zipf(1.1) popularity over ``--stories`` stories with
128-dim unit embeddings and one of 8 topics; 80 % impressions (positions 0-19), 15 % clicks, 5 % dwell
events, all received on one date. Each job runs in its own process on the DirectRunner (``python -m
jobs.<job>``) against an embedded Redis, so its peak RSS (``wait4`` rusage) and CPU seconds are its own.

Cost at 10M readers: the measured CPU seconds per event and Parquet bytes per event, scaled to
``10M × events per reader`` events a night (the synthetic night's events per reader), priced at the
Dataflow batch list prices below (us-central1, 2025: $0.056 per vCPU-hour, $0.003557 per GB-hour of memory
at 3.75 GB per vCPU, $0.011 per GB of shuffle), plus the measured Redis bytes per reader of the interest
model times 10M, twice (current and previous version). A figure to size a deployment, not a bill.
"""

from __future__ import annotations

import atexit
import datetime as dt
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks._common import emit, environment, parse_args, sig

VCPU_HOUR_USD = 0.056
GB_HOUR_USD = 0.003557
GB_PER_VCPU = 3.75
SHUFFLE_GB_USD = 0.011
TARGET_READERS = 10_000_000
DATE = "2026-11-30"
JOBS = ("snapshot_stories", "decay_rates", "interest_vectors", "ranking_weights")


def synthetic_night(client, root: str, events: int, readers: int, stories: int, seed: int = 7) -> dict:
    """Writes the stories to Redis (serving hashes + live index, as the streaming job leaves them) and the
    night's events as ``events/date=DATE`` Parquet under ``root``; returns sizes."""
    import json

    from newsflow.schemas.event import EVENT_SCHEMA
    from newsflow.storage.keys import Keys
    from newsflow.storage.ranking import encode_embedding

    rng = np.random.default_rng(seed)
    day = dt.datetime.fromisoformat(DATE).replace(tzinfo=dt.UTC).timestamp()
    emb = rng.normal(size=(stories, 128)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    topics = [f"topic{i % 8}" for i in range(stories)]
    keys, pipe = Keys(), client.pipeline(transaction=False)
    for i in range(stories):
        first = day - 3600.0 * float(rng.uniform(0, 48))
        pipe.hset(
            keys.story(f"s{i}"),
            mapping={
                "title": f"story {i}",
                "url": f"https://o{i % 500}.com/{i}",
                "domain": f"o{i % 500}.com",
                "representative_id": f"a{i}",
                "article_count": 3,
                "source_count": 2,
                "independent_count": 2,
                "earliest_time": repr(first),
                "latest_time": repr(day),
                "topics": json.dumps([topics[i]]),
                "languages": '["en"]',
                "authority": repr(float(rng.uniform(0.3, 1.0))),
                "embedding": encode_embedding(emb[i]),
                "entities": "[]",
                "merged_into": "",
            },
        )
        pipe.zadd(keys.story_active_of(f"s{i}"), {f"s{i}": day})
    pipe.execute()
    ranks = np.arange(1, stories + 1, dtype=np.float64)
    pop = ranks**-1.1
    pop /= pop.sum()
    story_idx = rng.choice(stories, size=events, p=pop)
    users = rng.integers(0, readers, size=events)
    kind = rng.choice(3, size=events, p=[0.8, 0.15, 0.05])
    t = day + np.sort(rng.uniform(0, 86399, size=events))
    types = np.array(["impression", "click", "dwell"])[kind]
    ts = pa.array((t * 1e6).astype("int64"), pa.timestamp("us", tz="UTC"))
    positions = rng.integers(0, 20, size=events)
    dwell = rng.uniform(1, 300, size=events)
    table = pa.Table.from_arrays(
        [
            pa.array([f"{int(t[0] * 1000)}-{i}" for i in range(events)]),
            pa.array([f"u{u}" for u in users]),
            pa.array(types),
            pa.array([f"s{s}" for s in story_idx]),
            ts,
            ts,
            pa.array([None if k == 2 else int(p) for k, p in zip(kind, positions, strict=True)], pa.int32()),
            pa.array([float(d) if k == 2 else None for k, d in zip(kind, dwell, strict=True)], pa.float32()),
            pa.array(["feed"] * events),
        ],
        schema=EVENT_SCHEMA,
    )
    edir = os.path.join(root, "events", f"date={DATE}")
    os.makedirs(edir)
    path = os.path.join(edir, "events-synthetic.parquet")
    pq.write_table(table, path)
    return {"events_parquet_bytes": os.path.getsize(path), "readers_with_events": int(len(np.unique(users)))}


def run_job(job: str, root: str, redis_url: str) -> dict:
    """One job in its own process; wall seconds, CPU seconds and peak RSS of that process."""
    argv = [sys.executable, "-m", f"jobs.{job}", "--date", DATE, "--output", root, "--redis_url", redis_url]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{job} failed: {err[-2000:]}")
    return {
        "seconds": sig(seconds),
        "cpu_seconds": sig(usage.ru_utime + usage.ru_stime),
        "peak_rss_mb": sig(usage.ru_maxrss / 1024.0),
        "summary": out.strip().splitlines()[-1] if out.strip() else "",
    }


def main(argv=None) -> None:
    """Runs the benchmark and prints its JSON."""

    def extra(p):
        p.add_argument("--events", type=int, default=1_000_000, help="synthetic events (default 1M)")
        p.add_argument("--readers", type=int, default=100_000, help="synthetic readers")
        p.add_argument("--stories", type=int, default=5_000, help="synthetic stories")

    args = parse_args(__doc__.splitlines()[0], argv, extra)
    from newsflow.runtime.redis_conn import connect, stop_embedded
    from newsflow.storage.keys import Keys
    from newsflow.storage.models import ModelStore

    tmp = tempfile.mkdtemp(prefix="nf-bench-nightly-")
    atexit.register(shutil.rmtree, tmp, True)
    root = os.path.join(tmp, "output")
    rdb = os.path.join(tmp, "redis", "bench.rdb")
    atexit.register(stop_embedded, rdb, False)  # before the removal (atexit is LIFO): the server outlives this process
    client = connect(embedded_path=rdb)
    url = f"unix://{client.socket_file}"
    sizes = synthetic_night(client, root, args.events, args.readers, args.stories)
    jobs = {}
    for job in JOBS:
        jobs[job] = run_job(job, root, url)
        if job != "snapshot_stories":
            jobs[job]["events_per_second"] = sig(args.events / max(jobs[job]["seconds"], 1e-9))
    keys = Keys()
    store = ModelStore(client, keys)
    n_vectors = store.manifest("interest", DATE)["fields"]
    interest_bytes = sum(store.key_sizes("interest", DATE).values())
    models_bytes = sum(
        sum(store.key_sizes(name, DATE).values())
        for name in ("decay", "weights", "interest", "history", "cluster", "covisit")
    )
    parquet_bytes = sum(
        os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(os.path.join(root, "models")) for f in fs
    )
    events_per_reader = args.events / max(sizes["readers_with_events"], 1)
    target_events = TARGET_READERS * events_per_reader
    cpu_per_event = sum(j["cpu_seconds"] for n, j in jobs.items() if n != "snapshot_stories") / args.events
    vcpu_hours = cpu_per_event * target_events / 3600.0
    # each of the three event-reading jobs shuffles the night's events once
    shuffle_gb = sizes["events_parquet_bytes"] / args.events * target_events * 3 / 1e9
    redis_gb = (models_bytes / max(sizes["readers_with_events"], 1)) * TARGET_READERS * 2 / 1e9
    result = {
        "benchmark": "nightly",
        "events": args.events,
        "readers": sizes["readers_with_events"],
        "stories": args.stories,
        "jobs": jobs,
        "peak_rss_mb": max(j["peak_rss_mb"] for j in jobs.values()),
        "sizes": {
            "events_parquet_bytes_per_event": sig(sizes["events_parquet_bytes"] / args.events),
            "interest_redis_bytes_per_reader": sig(interest_bytes / max(n_vectors, 1)),
            "models_redis_bytes_per_reader": sig(models_bytes / max(sizes["readers_with_events"], 1)),
            "models_parquet_bytes": parquet_bytes,
        },
        "at_10m_readers": {
            "events_per_night": sig(target_events),
            "vcpu_hours": sig(vcpu_hours),
            "shuffle_gb": sig(shuffle_gb),
            "dataflow_usd": sig(vcpu_hours * (VCPU_HOUR_USD + GB_PER_VCPU * GB_HOUR_USD) + shuffle_gb * SHUFFLE_GB_USD),
            "redis_gb_two_versions": sig(redis_gb),
            "assumes": "DirectRunner CPU-seconds per event = Dataflow's; list prices in the module docstring",
        },
        "environment": environment(),
    }
    emit(result, args.json)


if __name__ == "__main__":
    main()
