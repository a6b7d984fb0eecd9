"""Exact snapshots of a run's output for "same answer" comparisons: every Redis key, every Parquet row."""

from __future__ import annotations

from newsflow.storage.parquet import read_dataset

DATASETS = ("articles", "clusters", "deadletters", "trends")


def redis_state(client) -> dict:
    """Every key with its type and full value (hashes and sets sorted, lists in order, zsets with scores).

    ``client`` may be a ``RedisCluster``: keys are then listed on every primary.
    """
    out = {}
    if hasattr(client, "get_primaries"):
        all_keys = client.keys("*", target_nodes=client.PRIMARIES)
    else:
        all_keys = client.keys("*")
    for key in sorted(all_keys):
        kind = client.type(key).decode()
        if kind == "hash":
            out[key] = (kind, sorted(client.hgetall(key).items()))
        elif kind == "set":
            out[key] = (kind, sorted(client.smembers(key)))
        elif kind == "zset":
            out[key] = (kind, client.zrange(key, 0, -1, withscores=True))
        elif kind == "list":
            out[key] = (kind, client.lrange(key, 0, -1))
        elif kind == "string":
            out[key] = (kind, client.get(key))
        else:
            out[key] = (kind, client.dump(key))
    return out


def parquet_rows(root: str) -> dict:
    """Dataset name -> sorted list of rows (each a repr of its sorted items); duplicates are kept."""
    out = {}
    for dataset in DATASETS:
        try:
            rows = read_dataset(root, dataset).to_pylist()
        except (FileNotFoundError, OSError, ValueError):
            rows = []
        out[dataset] = sorted(repr(sorted(r.items())) for r in rows)
    return out


def state_difference(a: dict, b: dict, limit: int = 8) -> list[str]:
    """Human-readable differences between two :func:`redis_state` snapshots (at most ``limit``)."""
    diff = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            diff.append(f"{key!r}: {str(a.get(key))[:200]} != {str(b.get(key))[:200]}")
            if len(diff) >= limit:
                break
    return diff
