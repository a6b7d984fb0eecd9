"""``newsflow sources authority``: recompute outlet authority from the rubric and the near-duplicate groups.

The nightly step of the authority rubric (``newsflow/authority.py``, ``data/SOURCES.md``): reads every
live near-duplicate group of two or more articles from Redis (``Keys.clusters_by_size``, each group's
articles and their ``source_domain``/``event_time``), counts per outlet how often it was first and how
often a syndicated copy (:func:`newsflow.authority.originality_counts`), and writes
``authority = tier base + 0.2 * (originality - 0.5)`` to every outlet record that is not a manual
override. Prints one JSON line ``{"groups", "outlets_counted", "outlets_written"}``.
"""

from __future__ import annotations

import json

from crawler.commands.sources_common import CommandError, fail, open_registry
from newsflow.settings import add_settings_arguments

COMMAND = "authority"
HELP = "recompute outlet authority (rubric + originality from near-duplicate groups; the nightly step)"


def add_arguments(parser) -> None:
    """Adds the settings flags."""
    add_settings_arguments(parser)


def read_groups(client, keys, batch: int = 500):
    """Yields each live near-duplicate group of >= 2 articles as ``[(event_time, article_id, outlet)]``."""
    from newsflow.outlets import outlet

    def s(v):
        return v.decode("utf-8") if isinstance(v, bytes) else v

    cids = [s(c) for c in client.zrangebyscore(keys.clusters_by_size, 2, "+inf")]
    for start in range(0, len(cids), batch):
        chunk = cids[start : start + batch]
        pipe = client.pipeline(transaction=False)
        for cid in chunk:
            pipe.smembers(keys.cluster_articles(cid))
        members = [sorted(s(a) for a in m) for m in pipe.execute()]
        pipe = client.pipeline(transaction=False)
        for ids in members:
            for aid in ids:
                pipe.hmget(keys.article(aid), "event_time", "source_domain")
        fields = iter(pipe.execute())
        for ids in members:
            group = []
            for aid in ids:
                t, domain = next(fields)
                if t is not None and domain:
                    group.append((float(s(t)), aid, outlet(s(domain))))
            yield group


def run(args) -> int:
    """Recomputes; returns 0, or 2 when Redis cannot be reached."""
    import redis

    from newsflow.authority import originality_counts

    try:
        settings, registry = open_registry(args)
        groups = list(read_groups(registry.r, settings.keys))
        counts = originality_counts(groups)
        written = registry.recompute_authority(counts)
    except CommandError as e:
        return fail(str(e))
    except redis.RedisError as e:
        return fail(f"Redis error: {e}")
    print(json.dumps({"groups": len(groups), "outlets_counted": len(counts), "outlets_written": written}))
    return 0
