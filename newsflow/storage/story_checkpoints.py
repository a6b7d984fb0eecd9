"""Checkpoints of the story state at event-time boundaries, and the rewind to one (continuous local mode).

A checkpoint at boundary ``B`` holds the story keys, as Redis held them when the ordered story step had
assigned every article ordered before ``B`` and none after, of every live story a later article can reach:
the stories of ``Keys.story_active`` whose latest time is at or after ``B - window_s``
(:attr:`newsflow.core.stories.StoryConfig.window_s`: an article at ``t >= B`` compares itself with, joins
and merges only stories whose latest time is at or after ``t - window_s``). Per story: its live score and
each of its keys (:func:`story_key_names`) with its type and full value. The genesis checkpoint (boundary
``None``: before every logged article) is taken when a log starts, from the stories whose latest time is
at or after its ``since``.

Files: ``ckpt-b<bucket>-<sha256 of the bytes, 20 hex>.json.gz`` (genesis: ``ckpt-genesis-<sha>``) in the
story input log's directory, gzipped canonical JSON (values base64), so the same state gives the same
bytes and name; written to a ``.tmp-`` name and renamed.

:func:`rewind` makes Redis hold the story state of a checkpoint again, given the articles assigned after it
(the logged articles ordered at or after its boundary): their assignments are deleted, the merge records
their steps appended are trimmed from the end of ``Keys.story_merges``, and every story their steps touched
(the stories they were assigned to and both sides of those merges) gets the checkpoint's keys back, or is
deleted when the checkpoint does not hold it (it was founded after the boundary). Its cost is that of the
rewound window, not of the history. :func:`clear_trends_after` drops the trending windows ending after the
boundary and the breaking windows among them, so that the re-run's trending step writes them whole.
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

from newsflow.storage.keys import Keys
from newsflow.storage.ranking import breaking_run_start
from newsflow.storage.story_inputs import _write_atomic

_FILE = re.compile(r"^ckpt-(genesis|b-?\d+)-[0-9a-f]{20}\.json\.gz$")
TREND_KINDS = ("story", "entity", "topic")


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else v


def _b64(v) -> str:
    return base64.b64encode(v if isinstance(v, bytes) else str(v).encode()).decode("ascii")


def _unb64(v: str) -> bytes:
    return base64.b64decode(v)


def story_key_names(keys: Keys, story_id: str) -> list[str]:
    """Every per-story key of the story layout (:mod:`newsflow.storage.stories`): serving hash, article list,
    state, groups, outlets."""
    return [
        keys.story(story_id),
        keys.story_articles(story_id),
        keys.story_state(story_id),
        keys.story_groups(story_id),
        keys.story_outlets(story_id),
    ]


def snapshot(client, keys: Keys, since: float) -> dict:
    """``{"since": since, "stories": {story id: [live score, {key: [type, value]}]}}`` of the live stories
    whose latest time is at or after ``since`` (values: a string's bytes, a hash's sorted ``[field, value]``
    pairs, a zset's ``[member, score]`` pairs in rank order, a list's items; bytes base64). Two pipelined
    rounds plus one for the index."""
    lo = "-inf" if since == -math.inf else repr(float(since))
    live = [
        (_s(sid), float(score)) for sid, score in client.zrangebyscore(keys.story_active, lo, "+inf", withscores=True)
    ]
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
        elif t == "list":
            pipe.lrange(k, 0, -1)
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
            elif t == "zset":
                v = [[_b64(m), float(sc)] for m, sc in v]
            else:
                v = [_b64(x) for x in v]
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


def merges_after(client, keys: Keys, article_ids: set[str], chunk: int = 256) -> list[dict]:
    """The merge records at the end of ``Keys.story_merges`` made by the steps of ``article_ids`` (read back
    from the end until a record of another article), oldest first."""
    out: list[dict] = []
    end = -1
    while True:
        raw = client.lrange(keys.story_merges, end - chunk + 1, end)
        if not raw:
            break
        recs = [json.loads(x) for x in raw]
        for rec in reversed(recs):
            if rec.get("article_id") not in article_ids:
                return out[::-1]
            out.append(rec)
        if len(raw) < chunk:
            break
        end -= chunk
    return out[::-1]


def rewind(client, keys: Keys, checkpoint: dict, article_ids: set[str]) -> dict:
    """Makes Redis hold ``checkpoint``'s story state again, ``article_ids`` being every article assigned after
    it (see the module docstring). One MULTI/EXEC (every key is under the ``{story}`` tag); call it inside the
    story writer lease and drop the store's cache after it.

    Returns:
      ``{"stories": touched story ids, "merges": the trimmed merge records, "restored_losers": {story id:
      [(member id, event time)] at the checkpoint} of the merged-away stories it brought back}``.
    """
    ids = sorted(article_ids)
    merges = merges_after(client, keys, article_ids)
    touched: set[str] = set()
    for i in range(0, len(ids), 1000):
        touched.update(_s(v) for v in client.hmget(keys.story_assign, ids[i : i + 1000]) if v is not None)
    for rec in merges:
        touched.update((rec["from"], rec["into"]))
    held = checkpoint["stories"]
    losers: dict[str, list[str]] = {}
    pipe = client.pipeline(transaction=True)
    for sid in sorted(touched):
        pipe.delete(*story_key_names(keys, sid))
        pipe.zrem(keys.story_retired, sid)
        snap = held.get(sid)
        if snap is None:
            pipe.zrem(keys.story_active, sid)
            continue
        score, values = snap
        for k, (t, v) in sorted(values.items()):
            if t == "string":
                pipe.set(k, _unb64(v))
            elif t == "hash":
                pipe.hset(k, mapping={_unb64(f): _unb64(x) for f, x in v})
            elif t == "zset":
                pipe.zadd(k, {_unb64(m): sc for m, sc in v})
            else:
                pipe.rpush(k, *(_unb64(x) for x in v))
        pipe.zadd(keys.story_active, {sid: score})
    for rec in merges:
        snap = held.get(rec["from"])
        if snap is not None:
            zset = snap[1].get(keys.story_articles(rec["from"]), ["zset", []])[1]
            losers[rec["from"]] = [(_unb64(m).decode(), float(sc)) for m, sc in zset]
    for i in range(0, len(ids), 1000):
        pipe.hdel(keys.story_assign, *ids[i : i + 1000])
    if merges:
        pipe.ltrim(keys.story_merges, 0, -(len(merges) + 1))
    pipe.execute()
    return {"stories": sorted(touched), "merges": merges, "restored_losers": losers}


def clear_trends_after(client, keys: Keys, boundary: float) -> int:
    """Deletes the trending windows (every kind) ending after ``boundary`` with their index entries, and the
    breaking windows ending after it: each breaking story keeps its earlier windows (its expiry and the start
    of its breaking run recomputed from them, the TTL read back from its expiry) or leaves the breaking set.
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
            pipe.hset(keys.breaking_since, sid, repr(breaking_run_start(keep, ttl)))
        else:
            pipe.delete(wkey)
            pipe.zrem(keys.breaking, sid)
            pipe.hdel(keys.breaking_since, sid)
        pipe.execute()
    return deleted
