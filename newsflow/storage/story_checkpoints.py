"""Checkpoints of the story state at event-time boundaries, and the rewind to one (continuous local mode).

A checkpoint at boundary ``B`` holds the story keys, as Redis held them when the ordered story step had
assigned every article ordered before ``B`` and none after, of every live story a later article can reach:
the stories of the ``Keys.story_active`` shards whose latest time is at or after ``B - window_s``
(:attr:`newsflow.core.stories.StoryConfig.window_s`: an article at ``t >= B`` compares itself with, joins
and merges only stories whose latest time is at or after ``t - window_s``). Per story: its live-index score
(its entry in its ``{sx:<k>}`` shard) and each of its ``{st:<id>}`` keys
(:func:`newsflow.storage.story_index.story_key_names`) with its type and full value. The genesis checkpoint
(boundary ``None``: before every logged article) is taken when a log starts, from the stories whose latest
time is at or after its ``since``.

Files: ``ckpt-b<bucket>-<sha256 of the bytes, 20 hex>.json.gz`` (genesis: ``ckpt-genesis-<sha>``) in the
story input log's directory, gzipped canonical JSON (values base64), so the same state gives the same
bytes and name; written to a ``.tmp-`` name and renamed.

:func:`rewind` makes Redis hold the story state of a checkpoint again, given the articles assigned after it
(the logged articles ordered at or after its boundary): their assignments (``Keys.story_assign`` buckets)
and the merge records their steps made (their fields of the ``Keys.story_merges`` buckets) are deleted, and
every story their steps touched (the stories they were assigned to and both sides of those merges) gets the
checkpoint's keys and live-index entry back (and leaves the retired index), or is deleted with its index
entries when the checkpoint does not hold it (it was founded after the boundary). The rewind is one write
set of value-setting commands through the story writer's fenced redo journal
(:meth:`newsflow.storage.stories.RedisStoryStore.commit`), so a crash part-way is completed by the next
lease holder. Its cost is that of the rewound window, not of the history. :func:`clear_trends_after` drops
the trending windows ending after the boundary and the breaking windows among them, so that the re-run's
trending step writes them whole.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from newsflow.storage.keys import Keys
from newsflow.storage.story_index import assigned_stories, live_stories, merge_records, story_key_names
from newsflow.storage.story_inputs import _write_atomic

if TYPE_CHECKING:
    from newsflow.storage.stories import RedisStoryStore

_FILE = re.compile(r"^ckpt-(genesis|b-?\d+)-[0-9a-f]{20}\.json\.gz$")
TREND_KINDS = ("story", "entity", "topic")


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _b64(v) -> str:
    return base64.b64encode(v if isinstance(v, bytes) else str(v).encode()).decode("ascii")


def _unb64(v: str) -> bytes:
    return base64.b64decode(v)


def snapshot(client, keys: Keys, since: float) -> dict:
    """``{"since": since, "stories": {story id: [live score, {key: [type, value]}]}}`` of the live stories
    whose latest time is at or after ``since`` (values: a string's bytes, a hash's sorted ``[field, value]``
    pairs, a zset's ``[member, score]`` pairs in rank order; bytes base64). Three pipelined rounds: the index
    shards, the key types, the values.

    Raises:
      ValueError: a story key holds a type the story layout does not use (not a string, hash or zset).
    """
    lo = "-inf" if since == -math.inf else repr(float(since))
    live = live_stories(client, keys, lo)
    names = [k for sid, _ in live for k in story_key_names(keys, sid)]
    pipe = client.pipeline(transaction=False)
    for k in names:
        pipe.type(k)
    types = [_s(t) for t in pipe.execute()]
    pipe = client.pipeline(transaction=False)
    for k, t in zip(names, types, strict=True):
        if t == "string":
            pipe.get(k)
        elif t == "hash":
            pipe.hgetall(k)
        elif t == "zset":
            pipe.zrange(k, 0, -1, withscores=True)
        elif t == "none":
            pipe.exists(k)
        else:
            raise ValueError(f"story key {k} has type {t}, which a checkpoint does not hold")
    values = iter(pipe.execute())
    stories: dict[str, list] = {}
    it = iter(zip(names, types, strict=True))
    for sid, score in live:
        held = {}
        for _ in range(len(story_key_names(keys, sid))):
            k, t = next(it)
            v = next(values)
            if t == "none":
                continue
            if t == "string":
                v = _b64(v)
            elif t == "hash":
                v = sorted([_b64(f), _b64(x)] for f, x in v.items())
            else:
                v = [[_b64(m), float(sc)] for m, sc in v]
            held[k] = [t, v]
        stories[sid] = [score, held]
    return {"since": None if since == -math.inf else float(since), "stories": stories}


def _name(bucket: int | None, data: bytes) -> str:
    tag = "genesis" if bucket is None else f"b{bucket}"
    return f"ckpt-{tag}-{hashlib.sha256(data).hexdigest()[:20]}.json.gz"


class Checkpoints:
    """The checkpoint files of the log in ``directory`` (see the module docstring)."""

    def __init__(self, directory: str):
        self.directory = directory

    def list(self) -> list[tuple[int | None, str]]:
        """``(bucket or None for genesis, path)``: genesis first, then by bucket (the latest file of a bucket
        wins when a crash left two: :meth:`put` deletes the one it replaces after writing)."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        found: dict[int | None, str] = {}
        ours = [(m.group(1), os.path.join(self.directory, n)) for n in names if (m := _FILE.match(n))]
        for tag, path in sorted(ours, key=lambda x: os.path.getmtime(x[1])):
            found[None if tag == "genesis" else int(tag[1:])] = path
        return sorted(found.items(), key=lambda x: -math.inf if x[0] is None else x[0])

    def put(self, bucket: int | None, content: dict) -> str:
        """Writes a checkpoint (``bucket``: its boundary's bucket, ``None`` for genesis) and deletes the
        other files of the same bucket; returns its path."""
        data = gzip.compress(json.dumps(content, sort_keys=True, separators=(",", ":")).encode("utf-8"), mtime=0)
        name = _name(bucket, data)
        path = os.path.join(self.directory, name)
        if not os.path.exists(path):
            _write_atomic(self.directory, name, data)
        for n in os.listdir(self.directory):  # the one it replaces (list() takes the newest if a crash left two)
            m = _FILE.match(n)
            if m and n != name and m.group(1) == ("genesis" if bucket is None else f"b{bucket}"):
                os.remove(os.path.join(self.directory, n))
        return path

    @staticmethod
    def read(path: str) -> dict:
        """The content of a checkpoint file."""
        with gzip.open(path, "rb") as f:
            return json.loads(f.read())

    def drop(self, keep: Iterable[int | None] | None = None) -> int:
        """Deletes every checkpoint whose bucket is not in ``keep`` (``None``: all); returns how many."""
        kept = set(keep) if keep is not None else set()
        n = 0
        for b, path in self.list():
            if b not in kept:
                os.remove(path)
                n += 1
        return n


def rewind(store: RedisStoryStore, checkpoint: dict, article_ids: set[str]) -> dict:
    """Makes Redis hold ``checkpoint``'s story state again, ``article_ids`` being every article assigned after
    it (see the module docstring). Reads the articles' assignments and merge records (two pipelines), then
    writes one write set through ``store``'s fenced journal (:meth:`RedisStoryStore.commit`), in the order
    index removals, the touched stories' keys, their live-index entries, the merge records, the assignments.
    Call it inside the story writer lease (``store.writer_lease()``) and drop the store's cache after it.

    Returns:
      ``{"stories": touched story ids, "merges": the deleted merge records (in step order),
      "restored_losers": {story id: [(member id, event time)] at the checkpoint} of the merged-away stories
      it brought back}``.

    Raises:
      ValueError: the checkpoint holds a key that is not one of its story's keys in ``store.keys`` (a
        checkpoint of another key layout or prefix); nothing was written.
      LeaseLost: the lease is no longer ``store``'s; nothing was written.
    """
    client, keys = store.r, store.keys
    ids = sorted(article_ids)
    merges = merge_records(client, keys, ids)
    touched = {sid for sid in assigned_stories(client, keys, ids).values() if sid is not None}
    for rec in merges:
        touched.update((rec["from"], rec["into"]))
    held = checkpoint["stories"]
    removals: list[list] = []
    restores: list[list] = []
    live: list[list] = []
    for sid in sorted(touched):
        removals.append(["ZREM", keys.story_retired_of(sid), sid])
        snap = held.get(sid)
        if snap is None:
            removals.append(["ZREM", keys.story_active_of(sid), sid])
        restores += [["UNLINK", k] for k in story_key_names(keys, sid)]
        if snap is None:
            continue
        score, values = snap
        foreign = set(values) - set(story_key_names(keys, sid))
        if foreign:
            raise ValueError(f"checkpoint key(s) {sorted(foreign)} are not keys of story {sid} in this layout")
        for k, (t, v) in sorted(values.items()):
            if t == "string":
                restores.append(["SET", k, _unb64(v)])
            elif t == "hash":
                restores.append(["HSET", k, *(x for f, val in v for x in (_unb64(f), _unb64(val)))])
            else:
                restores.append(["ZADD", k, *(x for m, sc in v for x in (repr(float(sc)), _unb64(m)))])
        live.append(["ZADD", keys.story_active_of(sid), repr(float(score)), sid])
    by_bucket: dict[int, list[str]] = {}
    for aid in ids:
        by_bucket.setdefault(keys.story_assign_bucket(aid), []).append(aid)
    drops = [["HDEL", keys.story_merges(b), *part] for b, part in sorted(by_bucket.items())]
    drops += [["HDEL", keys.story_assign(b), *part] for b, part in sorted(by_bucket.items())]
    store.commit([*removals, *restores, *live, *drops])
    losers: dict[str, list[tuple[str, float]]] = {}
    for rec in merges:
        snap = held.get(rec["from"])
        if snap is not None:
            zset = snap[1].get(keys.story_articles(rec["from"]), ["zset", []])[1]
            losers[rec["from"]] = [(_unb64(m).decode(), float(sc)) for m, sc in zset]
    return {"stories": sorted(touched), "merges": merges, "restored_losers": losers}


def clear_trends_after(client, keys: Keys, boundary: float) -> int:
    """Deletes the trending windows (every kind) ending after ``boundary`` with their index entries, and the
    breaking windows ending after it: each breaking story keeps its earlier windows (its expiry recomputed from
    them, the TTL read back from its expiry; the start of its run is read from them) or leaves the breaking set.
    Returns how many window keys it deleted. Cost: the windows after ``boundary``."""
    lo = f"({float(boundary)!r}"
    deleted = 0
    for kind in TREND_KINDS:
        ends = [float(s) for _, s in client.zrangebyscore(keys.trending_windows(kind), lo, "+inf", withscores=True)]
        if ends:
            deleted += int(client.delete(*(keys.trending(kind, e) for e in ends)))
            client.zremrangebyscore(keys.trending_windows(kind), lo, "+inf")
    for sid, expiry in client.zrangebyscore(keys.breaking, lo, "+inf", withscores=True):
        sid = _s(sid)
        wkey = keys.breaking_windows(sid)
        ends = [float(s) for _, s in client.zrange(wkey, 0, -1, withscores=True)]
        keep = [e for e in ends if e <= boundary]
        if len(keep) == len(ends):
            continue
        ttl = float(expiry) - ends[-1]
        pipe = client.pipeline(transaction=False)
        if keep:
            pipe.zremrangebyscore(wkey, lo, "+inf")
            pipe.zadd(keys.breaking, {sid: keep[-1] + ttl})
        else:
            pipe.delete(wkey)
            pipe.zrem(keys.breaking, sid)
        pipe.execute()
    return deleted
