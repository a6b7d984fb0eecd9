"""Reads of the story indexes spread over many keys (:mod:`newsflow.storage.keys`, story section): the live
stories of the ``Keys.story_active`` shards, the article -> story assignments of the ``Keys.story_assign``
buckets and the merge records of the ``Keys.story_merges`` buckets. Each read is one pipeline (one round trip
per node on a Redis Cluster). Written by :class:`newsflow.storage.stories.RedisStoryStore`; read by ranking,
the ``story_assignments`` dataset, the demo and tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from newsflow.storage.keys import Keys


def _str(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


def story_key_names(keys: Keys, story_id: str) -> list[str]:
    """Every key of one story (tag ``{st:<story_id>}``): serving hash, article list, state, groups, outlets."""
    return [
        keys.story(story_id),
        keys.story_articles(story_id),
        keys.story_state(story_id),
        keys.story_groups(story_id),
        keys.story_outlets(story_id),
    ]


def live_stories(client, keys: Keys, since: float | str = "-inf") -> list[tuple[str, float]]:
    """``(story id, latest event time)`` (UTC epoch s) of the live stories whose latest time is at or after
    ``since``, by (latest time, id), from the ``Keys.story_active`` shards (one pipeline)."""
    pipe = client.pipeline(transaction=False)
    for key in keys.story_active_keys:
        pipe.zrangebyscore(key, since, "+inf", withscores=True)
    return [(sid, t) for t, sid in sorted((float(t), _str(s)) for got in pipe.execute() for s, t in got)]


def live_story_ids(client, keys: Keys, since: float | str = "-inf") -> list[str]:
    """Ids of the live stories whose latest event time (UTC epoch s) is at or after ``since``, by (latest
    time, id) (:func:`live_stories`)."""
    return [sid for sid, _ in live_stories(client, keys, since)]


def live_story_count(client, keys: Keys) -> int:
    """Number of live stories (``ZCARD`` of every ``Keys.story_active`` shard, one pipeline)."""
    pipe = client.pipeline(transaction=False)
    for key in keys.story_active_keys:
        pipe.zcard(key)
    return sum(int(n) for n in pipe.execute())


def assigned_count(client, keys: Keys) -> int:
    """Number of stored article -> story assignments (``HLEN`` of every ``Keys.story_assign`` bucket, one
    pipeline)."""
    pipe = client.pipeline(transaction=False)
    for key in keys.story_assign_keys:
        pipe.hlen(key)
    return sum(int(n) for n in pipe.execute())


def assignments(client, keys: Keys) -> dict[str, str]:
    """Every stored article id -> the story id it was first assigned to (``HGETALL`` of every bucket)."""
    pipe = client.pipeline(transaction=False)
    for key in keys.story_assign_keys:
        pipe.hgetall(key)
    return {_str(a): _str(s) for got in pipe.execute() for a, s in got.items()}


def assigned_stories(client, keys: Keys, article_ids: Iterable[str]) -> dict[str, str | None]:
    """Article id -> its stored first story id (``None`` when unassigned); one ``HMGET`` per bucket touched."""
    by_bucket: dict[int, list[str]] = {}
    for aid in dict.fromkeys(article_ids):
        by_bucket.setdefault(keys.story_assign_bucket(aid), []).append(aid)
    pipe = client.pipeline(transaction=False)
    for b, part in by_bucket.items():
        pipe.hmget(keys.story_assign(b), part)
    out: dict[str, str | None] = {}
    for part, got in zip(by_bucket.values(), pipe.execute(), strict=True):
        out.update((aid, _str(v) if v is not None else None) for aid, v in zip(part, got, strict=True))
    return out


def merge_records(client, keys: Keys, article_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Merge records ``{from, into, time, article_id}`` of every step (or of ``article_ids``' steps), by
    (merge time, article id), each step's in the order it made them (``Keys.story_merges``, one pipeline)."""
    pipe = client.pipeline(transaction=False)
    if article_ids is None:
        for key in keys.story_merges_keys:
            pipe.hvals(key)
        raws = [v for got in pipe.execute() for v in got]
    else:
        ids = list(dict.fromkeys(article_ids))
        for aid in ids:
            pipe.hget(keys.story_merges_of(aid), aid)
        raws = [v for v in pipe.execute() if v]
    steps = sorted((json.loads(v) for v in raws), key=lambda recs: (float(recs[0]["time"]), recs[0]["article_id"]))
    return [rec for recs in steps for rec in recs]
