"""Near-duplicate group state in Redis: LSH band buckets, index records, groups, merges, revisions.

Keys: the near-duplicate section of :mod:`newsflow.storage.keys`. Every key carries a hash tag naming ONE
entity, so on Redis Cluster the index spreads over every slot: a band bucket ``{lsh:<band>:<4 hex>}`` (two
strings: the members' 8-byte SimHashes and their ids, aligned), an article ``{art:<id>}`` (serving hash,
index record ``fp``/``mh``/``rev``, versions), a group ``{ndg:<cluster id>}`` (hash and member, source and
language sets) and a shard of the group indexes ``{ndx:<shard>}`` (1024 shards by CRC-32 of the cluster id).
No key holds one entry per article of the whole index.

**Lookups on the worker.** Redis only stores and returns bytes: an assignment fetches the 4 probed buckets
of each article with pipelined ``GET`` s, computes Hamming distances with numpy (:func:`_hits`), compares
borderline pairs' MinHash signatures with numpy, and reads the candidates' records, articles and groups in
pipelined rounds (one round each: buckets, candidate records and articles, their groups). Band
membership is exact (a pair within 3 bits agrees on at least one of the 4 16-bit bands, by pigeonhole), so
there are no false negatives at Hamming <= 3.

**Concurrency, crashes and replays: a writer lease and a redo journal.** Every write (assignment,
retention, bulk load) runs as one cycle under the single-key lease ``Keys.nd_lease`` (a HASH ``token``,
``deadline`` in epoch ms, ``journal``):

1. *acquire*: one script on the lease key takes it when it is free or its deadline has passed (the clock
   is the store's injectable ``clock``) and returns any journal left by a holder that died after step 3;
   that journal is applied before anything else (recovery);
2. *read and compute*: every read goes through a per-cycle overlay (:class:`_Tx`) that records each write
   as a final value (``HSET``/``HDEL`` of fields, ``SADD``/``SREM`` of members, ``ZADD``/``ZREM``,
   ``SETRANGE`` at the offset read in this cycle, ``SET``, ``DEL``): no increments, no appends;
3. *commit*: one compare-and-set script stores the whole write set as the lease's ``journal`` only if the
   lease token is still this writer's (the fence: a writer that lost its lease writes nothing);
4. *apply*: the write set goes out in one pipeline (any number of nodes);
5. *release*: one script deletes the lease with its journal, only if the token is still this writer's.

Because every recorded write sets a value, applying a write set twice, or a prefix of it and then all of
it, leaves what applying it once leaves; so a crash anywhere leaves either nothing (before 3) or a
journal that the next writer completes (after 3): each cycle is all-or-nothing, and writers are
serialized by the lease as the Lua script serialized them. The fence leaves one window: a holder that
stalls longer than the lease TTL (:attr:`StoreConfig.lease_ttl_ms`) between its commit and its apply
re-applies its (already recovered) write set over later writes; the TTL must exceed such stalls.

**Order independence.** A group's members are the connected components of "near-duplicate" (Hamming
distance <= threshold, or borderline and confirmed by MinHash); its id is ``"c" + founder`` where the
founder is the member with the earliest ``(event time, article id)`` (a min-label over the component),
and its representative (highest authority, then earliest, then smallest id) and time range are
order-free functions of the members. An earlier copy that arrives late renames the group: the old group
is merged into ``"c" + earlier id`` and deleted, and the members' ``cluster_id`` fields are rewritten. So
the same articles in any arrival order, in any batches, by any number of concurrent writers, leave
identical keys and values, except that a band bucket's two strings list their entries in arrival order
(the same set of entries; every reader treats them as a set); no merge history is stored (ids are only
handed downstream after the write that may still rename them, and sinks re-read them:
:func:`current_clusters`).

**Borderline pairs.** Fingerprints 4-5 bits apart (:attr:`StoreConfig.borderline_max_distance`) that
share a band are near-duplicates when their MinHash signatures (:mod:`newsflow.core.minhash_check`, stored
in the version's index record, 512 bytes) agree on at least :attr:`StoreConfig.borderline_jaccard` of
their 128 slots.

**Revisions.** Near-duplicates of one outlet with the same publish and event time, and URLs with one stable
URL id (same host and numeric id, :func:`newsflow.core.revisions.stable_url_id`) published at most a minute
apart, are versions of one article (rule 5 of "Article identity" in :mod:`newsflow.core.urls`,
:mod:`newsflow.core.revisions`). The near-duplicate candidates come from the band buckets; the stable-id
candidates from ``Keys.stable_url_versions`` (every indexed version with that id; the version's index record
names its id, ``sid``). The versions are stored
once, under the earliest ``(fetch time, id)`` version's id with the latest version's fields; each other
version's index record names that id (``rev``), every version's fields are in ``Keys.article_versions``;
the groups a revision touches are rebuilt from their members. Sinks call :func:`resolve_revisions`.

**Idempotence.** An article id already stored (its serving hash has a ``cluster_id``, or its record a
``rev``) is a no-op that returns its cluster, so replaying the same input leaves Redis exactly as after
one pass.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import numpy as np
import redis

from newsflow.core.articles import fingerprint_text
from newsflow.core.minhash_check import BORDERLINE, JACCARD_THRESHOLD, text_signature_hex
from newsflow.core.outlets import outlet
from newsflow.core.revisions import Version, same_stable_id, stable_url_id
from newsflow.core.timeutil import format_epoch
from newsflow.schemas import Article, NearDuplicateGroup
from newsflow.storage.keys import ND_SHARDS, Keys

T = TypeVar("T")

# -- the writer lease (one key; newsflow.storage.keys.Keys.nd_lease) --------------------------------------
# KEYS[1] = lease; ARGV = token, now (epoch ms), ttl (ms). Returns {1, journal or false} when taken, {0} when
# another holder's deadline is still ahead.
_ACQUIRE = """
local h = redis.call('HMGET', KEYS[1], 'token', 'deadline', 'journal')
if h[1] and h[1] ~= ARGV[1] and tonumber(h[2]) >= tonumber(ARGV[2]) then return {0} end
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'deadline', tonumber(ARGV[2]) + tonumber(ARGV[3]))
return {1, h[3]}
"""
# KEYS[1] = lease; ARGV = token, now, ttl, journal. 1 = stored (deadline renewed), 0 = the lease is not ours.
_COMMIT = """
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'journal', ARGV[4], 'deadline', tonumber(ARGV[2]) + tonumber(ARGV[3]))
return 1
"""
# KEYS[1] = lease; ARGV = token, "drop" (delete the lease and its journal) or "keep" (free the lease, keep
# the journal for the next holder to apply).
_RELEASE = """
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then return 0 end
if ARGV[2] == 'drop' then redis.call('DEL', KEYS[1]) else redis.call('HDEL', KEYS[1], 'token', 'deadline') end
return 1
"""


class LeaseLost(redis.exceptions.LockError):
    """The writer lease was taken over before this writer committed; nothing of the cycle was written."""


def _u(b) -> str:
    """Redis bytes -> str, losslessly (binary values such as MinHash signatures survive the round trip)."""
    return b.decode("utf-8", "surrogateescape") if isinstance(b, bytes) else str(b)


def _b(s) -> bytes:
    return s if isinstance(s, bytes) else str(s).encode("utf-8", "surrogateescape")


def _pack(ops: list[list[bytes]]) -> bytes:
    """A write set as bytes: per command its argument count, then per argument its length and bytes (4-byte
    big-endian lengths; binary values are not escaped)."""
    out = []
    for op in ops:
        out.append(len(op).to_bytes(4, "big"))
        for arg in op:
            out.append(len(arg).to_bytes(4, "big"))
            out.append(arg)
    return b"".join(out)


def _unpack(data: bytes) -> list[list[bytes]]:
    """The inverse of :func:`_pack`."""
    ops, pos = [], 0
    while pos < len(data):
        n, pos = int.from_bytes(data[pos : pos + 4], "big"), pos + 4
        op = []
        for _ in range(n):
            size, pos = int.from_bytes(data[pos : pos + 4], "big"), pos + 4
            op.append(data[pos : pos + size])
            pos += size
        ops.append(op)
    return ops


def _num(s) -> float | None:
    """Lua's ``tonumber``: the number in ``s``, or ``None``."""
    if s is None:
        return None
    try:
        return float(s)
    except ValueError:
        return None


class AssignResult(NamedTuple):
    """Outcome of assigning one article.

    Attributes:
      article_id: the article.
      cluster_id: its cluster after the assignment.
      new_article: False when the article was already stored (a replay).
      created: True when the article is its cluster's founder (a new cluster, or an earlier copy that
        renamed the cluster it joined).
      merged: ids of clusters merged into ``cluster_id`` by this assignment.
    stored_id: the id the article is stored under: ``article_id``, or the id of the article it is a
      revision of (:mod:`newsflow.core.urls`, "Article identity" rule 5; may change when a version with an
      earlier fetch time arrives later, so sinks re-read it: :func:`resolve_revisions`).
    """

    article_id: str
    cluster_id: str
    new_article: bool
    created: bool
    merged: tuple[str, ...]
    stored_id: str = ""


@dataclass(frozen=True)
class StoreConfig:
    """Configuration of :class:`RedisGroupStore`.

    Attributes:
      prefix: key prefix, a plain namespace (``"nf"``); hash tags are placed by :mod:`newsflow.storage.keys`.
      max_distance: Hamming distance at or below which two fingerprints are near-duplicates
        (DESIGN: 3, Manku et al. 2007). Must be <= 3 for the 4-band index to have no false negatives.
      borderline_jaccard: MinHash re-check of borderline pairs (:mod:`newsflow.core.minhash_check`): a
        pair ``max_distance + 1 .. borderline_max_distance`` bits apart that shares an LSH band is a
        near-duplicate when the estimated Jaccard of its shingle sets is at least this; ``None``
        turns the re-check off.
      borderline_max_distance: the largest borderline Hamming distance (DESIGN: 5).
      lease_ttl_ms: how long a writer's lease lasts without a renewal (ms); a writer that dies holding it
        blocks the others this long at most, and one that stalls longer loses it (module docstring).
      lease_wait_s: how long a writer waits for the lease before raising :class:`LeaseLost` (s).
    """

    prefix: str = "nf"
    max_distance: int = 3
    borderline_jaccard: float | None = JACCARD_THRESHOLD
    borderline_max_distance: int = BORDERLINE[1]
    lease_ttl_ms: int = 30_000
    lease_wait_s: float = 120.0

    def __post_init__(self):
        Keys(self.prefix)  # validates the prefix
        if not 0 <= self.max_distance <= 3:
            raise ValueError(f"max_distance must be in 0..3 for a 4 x 16-bit band index, got {self.max_distance}")
        j = self.borderline_jaccard
        if j is not None and not (isinstance(j, int | float) and 0.0 < float(j) <= 1.0):
            raise ValueError(f"borderline_jaccard must be in (0, 1] or None, got {j!r}")
        if not self.max_distance <= self.borderline_max_distance <= 64:
            raise ValueError(f"borderline_max_distance must be in max_distance..64, got {self.borderline_max_distance}")
        if self.lease_ttl_ms < 1 or self.lease_wait_s < 0:
            raise ValueError(
                f"lease_ttl_ms must be >= 1 and lease_wait_s >= 0, got {self.lease_ttl_ms}, {self.lease_wait_s}"
            )

    @property
    def keys(self) -> Keys:
        """The key layout of :attr:`prefix`."""
        return Keys(self.prefix)


def _singleton(cid: str, h: dict) -> NearDuplicateGroup | None:
    """The group of one article ``cid[1:]`` from its serving hash, or ``None`` when it is not one."""
    if not h or h.get(b"cluster_id", b"").decode() != cid:
        return None
    g = {k.decode(): v.decode() for k, v in h.items()}
    t = float(g["event_time"])
    return NearDuplicateGroup(
        cluster_id=cid,
        representative_id=g["article_id"],
        representative_title=g.get("title", ""),
        representative_url=g.get("url", ""),
        representative_domain=g.get("source_domain", ""),
        article_count=1,
        source_domains=[g.get("source_domain", "")],
        languages=[g.get("language", "")],
        earliest_time=t,
        latest_time=t,
        merged_into=None,
    )


def _text(v) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


class _Tx:
    """One write cycle's view of Redis: reads cached (loaded in pipelined rounds or lazily), writes recorded.

    Hashes and sets are known field by field (``None`` = absent) with a ``complete`` flag (every field is
    known); strings (band buckets, the counter) are loaded whole. :meth:`write_set` turns what changed
    into final-value commands (module docstring, "Concurrency").
    """

    def __init__(self, store: RedisGroupStore):
        self.store = store
        self.client = store.client
        self.h: dict[str, dict[str, str | None]] = {}
        self.h_complete: set[str] = set()
        self.s: dict[str, dict[str, bool]] = {}
        self.s_complete: set[str] = set()
        self.dirty_h: dict[str, set[str]] = {}  # hash key -> fields written
        self.dirty_s: dict[str, set[str]] = {}  # set key -> members written
        self.dropped: set[str] = set()  # hash/set keys deleted (then rewritten from scratch)
        self.blob: dict[str, bytes | None] = {}
        self.blob_orig: dict[str, bytes | None] = {}
        self.blob_replaced: set[str] = set()
        self.z: dict[tuple[str, str], float | None] = {}

    # -- loading ----------------------------------------------------------------------------------
    def load(self, hashes: Iterable[str] = (), sets: Iterable[str] = (), blobs: Iterable[str] = ()) -> None:
        """Loads the keys not loaded yet, in one pipelined round trip."""
        hs = [k for k in dict.fromkeys(hashes) if k not in self.h_complete]
        ss = [k for k in dict.fromkeys(sets) if k not in self.s_complete]
        bs = [k for k in dict.fromkeys(blobs) if k not in self.blob]
        if not (hs or ss or bs):
            return
        pipe = self.client.pipeline(transaction=False)
        for k in hs:
            pipe.hgetall(k)
        for k in ss:
            pipe.smembers(k)
        for k in bs:
            pipe.get(k)
        raw = self.store._execute(pipe)
        for k, v in zip(hs, raw[: len(hs)], strict=True):
            known = self.h.setdefault(k, {})
            for f, x in v.items():
                known.setdefault(_u(f), _u(x))  # this cycle's writes win over what was stored
            self.h_complete.add(k)
        for k, v in zip(ss, raw[len(hs) : len(hs) + len(ss)], strict=True):
            known = self.s.setdefault(k, {})
            for m in v:
                known.setdefault(_u(m), True)
            self.s_complete.add(k)
        for k, v in zip(bs, raw[len(hs) + len(ss) :], strict=True):
            self.blob[k] = v
            self.blob_orig[k] = v

    def known_empty(self, *keys: str) -> None:
        """Marks hashes/sets known not to exist (no read needed), e.g. the keys of a group a new article founds."""
        for k in keys:
            if k not in self.h_complete and k not in self.s_complete:
                self.h.setdefault(k, {})
                self.s.setdefault(k, {})
                self.h_complete.add(k)
                self.s_complete.add(k)

    # -- hashes -------------------------------------------------------------------------------------
    def hget(self, key: str, field: str) -> str | None:
        known = self.h.get(key)
        if known is not None and field in known:
            return known[field]
        if key not in self.h_complete:
            self.load(hashes=[key])
            return self.h[key].get(field)
        return None

    def hgetall(self, key: str) -> dict[str, str]:
        if key not in self.h_complete:
            self.load(hashes=[key])
        return {f: v for f, v in self.h[key].items() if v is not None}

    def hexists(self, key: str) -> bool:
        return bool(self.hgetall(key))

    def hset(self, key: str, mapping: dict[str, str]) -> None:
        known = self.h.setdefault(key, {})
        dirty = self.dirty_h.setdefault(key, set())
        for f, v in mapping.items():
            known[f] = _u(v)
            dirty.add(f)

    def hdel(self, key: str, *fields: str) -> None:
        known = self.h.setdefault(key, {})
        dirty = self.dirty_h.setdefault(key, set())
        for f in fields:
            known[f] = None
            dirty.add(f)

    def delete(self, key: str) -> None:
        """DEL of a hash or set key."""
        self.h[key] = {}
        self.s[key] = {}
        self.h_complete.add(key)
        self.s_complete.add(key)
        self.dirty_h.pop(key, None)
        self.dirty_s.pop(key, None)
        self.dropped.add(key)

    # -- sets ---------------------------------------------------------------------------------------
    def smembers(self, key: str) -> list[str]:
        if key not in self.s_complete:
            self.load(sets=[key])
        return sorted(m for m, present in self.s[key].items() if present)

    def scard(self, key: str) -> int:
        return len(self.smembers(key))

    def sadd(self, key: str, *members: str) -> None:
        known = self.s.setdefault(key, {})
        dirty = self.dirty_s.setdefault(key, set())
        for m in members:
            known[m] = True
            dirty.add(m)

    # -- sorted sets (write only) and strings ---------------------------------------------------------
    def zadd(self, key: str, member: str, score: float) -> None:
        self.z[(key, member)] = float(score)

    def zrem(self, key: str, member: str) -> None:
        self.z[(key, member)] = None

    def get(self, key: str) -> bytes | None:
        if key not in self.blob:
            self.load(blobs=[key])
        return self.blob[key]

    def append(self, key: str, data: bytes) -> None:
        """Appends to a loaded string; written as ``SETRANGE`` at the length read in this cycle."""
        self.blob[key] = (self.get(key) or b"") + data

    def put(self, key: str, data: bytes | None) -> None:
        """Replaces a string (``None``: deletes it)."""
        self.get(key)
        self.blob[key] = data or None
        self.blob_replaced.add(key)

    # -- the write set --------------------------------------------------------------------------------
    def write_set(self) -> list[list[str]]:
        """Final-value commands for everything this cycle changed (each key's commands in order)."""
        ops: list[list[str]] = [["DEL", key] for key in sorted(self.dropped)]  # before the key's new content
        for key, fields in self.dirty_h.items():
            known = self.h[key]
            put = [x for f in sorted(fields) if known.get(f) is not None for x in (f, known[f])]
            rem = sorted(f for f in fields if known.get(f) is None)
            if put:
                ops.append(["HSET", key, *put])
            if rem and key not in self.dropped:
                ops.append(["HDEL", key, *rem])
        for key, members in self.dirty_s.items():
            add = sorted(m for m in members if self.s[key].get(m))
            if add:
                ops.append(["SADD", key, *add])
        for key, value in self.blob.items():
            orig = self.blob_orig.get(key)
            if value == orig:
                continue
            if value is None:
                ops.append(["DEL", key])
            elif key in self.blob_replaced or orig is None or not value.startswith(orig):
                ops.append(["SET", key, _u(value)])
            else:
                ops.append(["SETRANGE", key, str(len(orig)), _u(value[len(orig) :])])
        for (key, member), score in self.z.items():
            ops.append(["ZREM", key, member] if score is None else ["ZADD", key, repr(score), member])
        return ops


def _hits(fps: bytes | None, fp: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions and Hamming distances of the bucket entries (``fps``: 8-byte big-endian each) within ``limit``."""
    if not fps:
        return np.empty(0, dtype=np.intp), np.empty(0, dtype=np.uint8)
    d = np.bitwise_count(np.frombuffer(fps, dtype=">u8") ^ np.uint64(fp))
    pos = np.flatnonzero(d <= limit)
    return pos, d[pos]


def _jaccard(sa: str, sb: str) -> float:
    """Share of equal slots of two MinHash signatures (128 big-endian uint32; datasketch's ``MinHash.jaccard``)."""
    a, b = _b(sa), _b(sb)
    if len(a) != len(b) or not a or len(a) % 4:
        return 0.0
    return float(np.mean(np.frombuffer(a, dtype=">u4") == np.frombuffer(b, dtype=">u4")))


def _earlier(t_a: float, id_a: str, t_b: float, id_b: str) -> bool:
    """``(time a, id a)`` before ``(time b, id b)``: the founder order of a group."""
    return (t_a, id_a) < (t_b, id_b)


def _better(auth_a: float, t_a: float, id_a: str, auth_b: float, t_b: float, id_b: str) -> bool:
    """a ranks before b as representative: higher authority, then earlier event time, then smaller id."""
    if auth_a != auth_b:
        return auth_a > auth_b
    return (t_a, id_a) < (t_b, id_b)


# a version's fields, in the fixed order of its JSON in Keys.article_versions
_VERSION_FIELDS = (
    "auth",
    "domain",
    "feed",
    "fp",
    "ft",
    "icon",
    "id",
    "img",
    "lang",
    "name",
    "outlet",
    "paywall",
    "pt",
    "t",
    "title",
    "url",
)
_ARTICLE_FIELDS = (
    ("title", "title"),
    ("url", "url"),
    ("domain", "source_domain"),
    ("name", "source_name"),
    ("t", "event_time"),
    ("pt", "publish_time"),
    ("lang", "language"),
    ("fp", "simhash"),
    ("auth", "source_authority"),
    ("feed", "feed_only"),
    ("paywall", "paywalled"),
    ("img", "image"),
    ("icon", "icon"),
    ("ft", "fetch_time"),
    ("outlet", "outlet"),
)


def _encode_version(v: dict) -> str:
    return "{" + ",".join(f"{json.dumps(k)}:{json.dumps(v.get(k) or '')}" for k in _VERSION_FIELDS) + "}"


class _Assigner:
    """The assignment of one batch inside one write cycle (the group logic; reads and writes go to ``tx``)."""

    def __init__(self, tx: _Tx, keys: Keys, config: StoreConfig):
        self.tx, self.k = tx, keys
        self.maxd = config.max_distance
        self.jmin = config.borderline_jaccard
        self.bmax = config.borderline_max_distance if self.jmin is not None else config.max_distance

    # -- candidates ---------------------------------------------------------------------------------
    def candidates(self, fp_hex: str) -> dict[str, int]:
        """Indexed version id -> Hamming distance, for every version sharing a band within the borderline limit."""
        fp = int(fp_hex, 16)
        out: dict[str, int] = {}
        for fk, ik in zip(self.k.lsh_bands(fp_hex), self.k.lsh_band_id_keys(fp_hex), strict=True):
            pos, dist = _hits(self.tx.get(fk), fp, self.bmax)
            if len(pos):
                ids = (self.tx.get(ik) or b"").split(b"\n")
                for p, d in zip(pos.tolist(), dist.tolist(), strict=True):
                    out.setdefault(_u(ids[p]), int(d))
        return out

    def near(self, sig: str | None, cand: str, d: int) -> bool:
        if d <= self.maxd:
            return True
        if self.jmin is None or d > self.bmax or sig is None:
            return False
        other = self.tx.hget(self.k.article_record(cand), "mh")
        return other is not None and _jaccard(sig, other) >= self.jmin

    def node_of(self, vid: str) -> str:
        return self.tx.hget(self.k.article_record(vid), "rev") or vid

    # -- groups -------------------------------------------------------------------------------------
    def ckeys(self, cid: str) -> list[str]:
        k = self.k
        return [k.cluster(cid), k.cluster_articles(cid), k.cluster_sources(cid), k.cluster_languages(cid)]

    def is_singleton(self, cid: str) -> bool:
        """A group of one article has no keys of its own: its data is the article's serving hash."""
        return not self.tx.hexists(self.k.cluster(cid))

    def founder(self, cid: str) -> tuple[str, float]:
        tx, k = self.tx, self.k
        created_by = tx.hget(k.cluster(cid), "created_by")
        if created_by is not None:
            return created_by, _num(tx.hget(k.cluster(cid), "founder_time")) or 0.0
        aid = cid[1:]
        return aid, _num(tx.hget(k.article(aid), "event_time")) or 0.0

    def offer(self, cid: str, aid: str, title, url, domain, auth_s, t_s) -> None:
        tx, ck = self.tx, self.k.cluster(cid)
        rid = tx.hget(ck, "representative_id")
        if rid is None or _better(
            float(auth_s), float(t_s), aid, float(tx.hget(ck, "rep_authority")), float(tx.hget(ck, "rep_time")), rid
        ):
            tx.hset(
                ck,
                {
                    "representative_id": aid,
                    "representative_title": title,
                    "representative_url": url,
                    "representative_domain": domain,
                    "rep_authority": auth_s,
                    "rep_time": t_s,
                },
            )

    def extend(self, cid: str, t_s: str | None) -> None:
        if not t_s:
            return
        tx, ck = self.tx, self.k.cluster(cid)
        t = float(t_s)
        earliest, latest = tx.hget(ck, "earliest_time"), tx.hget(ck, "latest_time")
        if earliest is None or t < float(earliest):
            tx.hset(ck, {"earliest_time": t_s})
        if latest is None or t > float(latest):
            tx.hset(ck, {"latest_time": t_s})
            tx.zadd(self.k.clusters_by_latest(Keys.cluster_shard(cid)), cid, t)

    def refresh_size(self, cid: str) -> None:
        self.tx.zadd(self.k.clusters_by_size(Keys.cluster_shard(cid)), cid, self.tx.scard(self.k.cluster_articles(cid)))

    def add_member(self, dst: str, m: str) -> None:
        """Adds stored article ``m`` (fields from its serving hash) to group ``dst``'s keys."""
        tx, k = self.tx, self.k
        h = tx.hgetall(k.article(m))
        tx.sadd(k.cluster_articles(dst), m)
        tx.hset(k.article(m), {"cluster_id": dst})
        tx.sadd(k.cluster_sources(dst), h.get("source_domain", ""))
        tx.sadd(k.cluster_languages(dst), h.get("language", ""))
        self.offer(
            dst, m, h.get("title"), h.get("url"), h.get("source_domain"), h.get("source_authority"), h.get("event_time")
        )
        self.extend(dst, h.get("event_time"))

    def drop_group(self, cid: str) -> None:
        for key in self.ckeys(cid):
            self.tx.delete(key)
        shard = Keys.cluster_shard(cid)
        self.tx.zrem(self.k.clusters_by_size(shard), cid)
        self.tx.zrem(self.k.clusters_by_latest(shard), cid)

    def merge(self, src: str, dst: str) -> None:
        """Merges group ``src`` into ``dst``: members, sources, languages, representative and time range."""
        tx, k = self.tx, self.k
        if self.is_singleton(src):
            self.add_member(dst, src[1:])
            tx.zrem(k.clusters_by_latest(Keys.cluster_shard(src)), src)
            self.refresh_size(dst)
            return
        for m in tx.smembers(k.cluster_articles(src)):
            tx.sadd(k.cluster_articles(dst), m)
            tx.hset(k.article(m), {"cluster_id": dst})
        tx.sadd(k.cluster_sources(dst), *tx.smembers(k.cluster_sources(src)))
        tx.sadd(k.cluster_languages(dst), *tx.smembers(k.cluster_languages(src)))
        h = tx.hgetall(k.cluster(src))
        if h.get("representative_id") is not None:
            self.offer(
                dst,
                h["representative_id"],
                h.get("representative_title"),
                h.get("representative_url"),
                h.get("representative_domain"),
                h.get("rep_authority"),
                h.get("rep_time"),
            )
            self.extend(dst, h.get("earliest_time"))
            self.extend(dst, h.get("latest_time"))
        self.drop_group(src)
        self.refresh_size(dst)

    def members_of(self, cid: str) -> list[str]:
        if self.is_singleton(cid):
            return [cid[1:]]
        return self.tx.smembers(self.k.cluster_articles(cid))

    # -- articles and versions ----------------------------------------------------------------------
    def write_article(self, aid: str, v: dict, cid: str) -> None:
        fields = {"article_id": aid, "cluster_id": cid}
        for src, dst in _ARTICLE_FIELDS:
            fields[dst] = v.get(src) or ""
        fields["paywalled"] = v.get("paywall") or "0"
        self.tx.hset(self.k.article(aid), fields)

    def versions_of(self, n: str) -> list[dict]:
        """The versions of stored article ``n``: its versions hash, or (one version) its serving hash."""
        raw = self.tx.hgetall(self.k.article_versions(n))
        if raw:
            return [json.loads(v) for v in raw.values()]
        h = self.tx.hgetall(self.k.article(n))
        v = {src: h.get(dst) for src, dst in _ARTICLE_FIELDS}
        v["id"] = n
        return [v]

    def is_revision(self, a: dict, n: str) -> bool:
        """Stored article ``n`` and the new article ``a`` are versions of one article (rule 5)."""
        if not a.get("outlet") or not a.get("pt"):
            return False
        h = self.tx.hgetall(self.k.article(n))
        return h.get("outlet") == a["outlet"] and h.get("publish_time") == a["pt"] and h.get("event_time") == a["t"]

    def stable_revisions(self, a: dict) -> set[str]:
        """Stored articles with a version that has ``a``'s stable URL id and a publish time within
        :data:`newsflow.core.revisions.PUBLISH_TOLERANCE_S` of ``a``'s (rule 5, stable id)."""
        sid = a.get("sid")
        if not sid:
            return set()
        mine = Version(a["id"], a.get("outlet", ""), _num(a.get("pt")), 0.0, 0.0, sid)
        out: set[str] = set()
        for vid in self.stable_members(sid):
            if vid == a["id"]:
                continue
            n = self.node_of(vid)
            for v in self.versions_of(n):
                if v["id"] == vid and same_stable_id(
                    mine, Version(vid, v.get("outlet") or "", _num(v.get("pt")), 0.0, 0.0, sid)
                ):
                    out.add(n)
        return out

    def stable_members(self, sid: str) -> list[str]:
        """The version ids indexed under stable URL id ``sid`` (``Keys.stable_url_versions``), sorted."""
        return [_u(v) for v in (self.tx.get(self.k.stable_url_versions(sid)) or b"").split(b"\n")[:-1]]

    def set_stable_members(self, sid: str, ids: Iterable[str]) -> None:
        """Rewrites the stable-id string whole, sorted (deleted when empty): its bytes depend on the ids only."""
        ids = sorted(set(ids))
        self.tx.put(self.k.stable_url_versions(sid), "".join(f"{i}\n" for i in ids).encode() if ids else None)

    def index_version(self, a: dict, sig: str | None) -> None:
        tx, k = self.tx, self.k
        sid = a.get("sid")
        record = {"fp": a["fp"], **({"mh": sig} if sig is not None else {}), **({"sid": sid} if sid else {})}
        tx.hset(k.article_record(a["id"]), record)
        if sid:
            self.set_stable_members(sid, [*self.stable_members(sid), a["id"]])
        entry_fp, entry_id = int(a["fp"], 16).to_bytes(8, "big"), _b(a["id"]) + b"\n"
        for fk, ik in zip(k.lsh_bands(a["fp"]), k.lsh_band_id_keys(a["fp"]), strict=True):
            tx.append(fk, entry_fp)
            tx.append(ik, entry_id)
        tx.put(k.nd_count, str(int(tx.get(k.nd_count) or 0) + 1).encode())

    def rebuild(self, members: list[str]) -> str:
        """Rebuilds one group from its member article ids (all stored): name, founder, sets, representative."""
        tx, k = self.tx, self.k
        fid, ft = None, 0.0
        for m in members:
            t = _num(tx.hget(k.article(m), "event_time")) or 0.0
            if fid is None or _earlier(t, m, ft, fid):
                fid, ft = m, t
        cid = "c" + fid
        if len(members) == 1:
            tx.hset(k.article(fid), {"cluster_id": cid})
            tx.zadd(k.clusters_by_latest(Keys.cluster_shard(cid)), cid, ft)
            return cid
        tx.hset(
            k.cluster(cid),
            {"cluster_id": cid, "created_by": fid, "founder_time": tx.hget(k.article(fid), "event_time")},
        )
        for m in members:
            self.add_member(cid, m)
        self.refresh_size(cid)
        return cid

    def assign_revision(self, a: dict, sig: str | None, revs: set[str], others: set[str]) -> dict:
        """``a`` is a version of the stored articles ``revs``; ``others`` are the groups of its other
        near-duplicates. The versions become one article and every touched group is rebuilt."""
        tx, k = self.tx, self.k
        versions: list[dict] = []
        touched = set(others)
        for n in revs:
            versions.extend(self.versions_of(n))
            touched.add(tx.hget(k.article(n), "cluster_id"))
        versions.append({f: a.get(f) for f in _VERSION_FIELDS} | {"paywall": a.get("paywall") or "0"})
        versions.sort(key=lambda v: (_num(v.get("ft")) or 0.0, v["id"]))
        keep, latest = versions[0]["id"], versions[-1]
        members: list[str] = []
        seen: set[str] = set()
        groups = sorted(touched)
        for g in groups:
            for m in self.members_of(g):
                if m not in revs and m not in seen:
                    seen.add(m)
                    members.append(m)
            self.drop_group(g)
        members.append(keep)
        for n in revs:
            tx.delete(k.article_versions(n))
            if n != keep:
                tx.delete(k.article(n))
        vh = {}
        for v in versions:
            vh[v["id"]] = _encode_version(v)
            if v["id"] != keep:
                tx.hset(k.article_record(v["id"]), {"rev": keep})
        tx.hdel(k.article_record(keep), "rev")
        tx.hset(k.article_versions(keep), vh)
        self.write_article(keep, latest, "")
        self.index_version(a, sig)
        cid = self.rebuild(members)
        merged = [g for g in groups if g != cid]
        return {
            "id": a["id"],
            "cluster": cid,
            "article": keep,
            "new": True,
            "created": cid == "c" + keep,
            "merged": merged,
        }

    def assign(self, a: dict, sig: str | None) -> dict:
        tx, k = self.tx, self.k
        existing = tx.hget(k.article(a["id"]), "cluster_id")
        revised = tx.hget(k.article_record(a["id"]), "rev")
        if existing:
            return {
                "id": a["id"],
                "cluster": existing,
                "article": a["id"],
                "new": False,
                "created": False,
                "merged": [],
            }
        if revised:
            return {
                "id": a["id"],
                "cluster": tx.hget(k.article(revised), "cluster_id"),
                "article": revised,
                "new": False,
                "created": False,
                "merged": [],
            }
        groups: set[str] = set()
        revs: set[str] = set()
        for cand, d in self.candidates(a["fp"]).items():
            if cand == a["id"] or not self.near(sig, cand, d):
                continue
            n = self.node_of(cand)
            if n in revs:
                continue
            if self.is_revision(a, n):
                revs.add(n)
            else:
                groups.add(tx.hget(k.article(n), "cluster_id"))
        revs |= self.stable_revisions(a)
        if revs:
            return self.assign_revision(a, sig, revs, groups)
        t_a = _num(a["t"]) or 0.0
        fid, ft = a["id"], t_a
        for g in groups:
            gid, gt = self.founder(g)
            if _earlier(gt, gid, ft, fid):
                fid, ft = gid, gt
        cid = "c" + fid
        joins = bool(groups)
        if joins and fid == a["id"]:
            tx.hset(k.cluster(cid), {"cluster_id": cid, "created_by": a["id"], "founder_time": a["t"]})
        elif joins and self.is_singleton(cid):
            # the founder was alone so far: its group gets keys now
            tx.hset(
                k.cluster(cid),
                {"cluster_id": cid, "created_by": fid, "founder_time": tx.hget(k.article(fid), "event_time")},
            )
            self.add_member(cid, fid)
        merged = []
        for g in sorted(groups - {cid}):
            self.merge(g, cid)
            merged.append(g)
        self.index_version(a, sig)
        self.write_article(a["id"], a, cid)
        if joins:
            tx.sadd(k.cluster_articles(cid), a["id"])
            tx.sadd(k.cluster_sources(cid), a["domain"])
            tx.sadd(k.cluster_languages(cid), a["lang"])
            self.offer(cid, a["id"], a["title"], a["url"], a["domain"], a["auth"], a["t"])
            self.extend(cid, a["t"])
            self.refresh_size(cid)
        else:
            tx.zadd(k.clusters_by_latest(Keys.cluster_shard(cid)), cid, t_a)  # a group of one: no keys
        return {
            "id": a["id"],
            "cluster": cid,
            "article": a["id"],
            "new": True,
            "created": fid == a["id"],
            "merged": merged,
        }


def resolve_revisions(client, keys: Keys, elements: Sequence[T]) -> list[T | None]:
    """Maps pipeline elements onto the articles Redis stores them as (revisions, rule 5 of "Article identity").

    An element whose id is a version of an article with two or more versions (``rev`` of
    ``Keys.article_record``, ``Keys.article_versions``) is that article only when it is the version whose
    URL the article's serving hash holds (the latest fetched): it is returned with ``article_id`` set to
    the stored id and, when it has an ``aliases`` field (``schemas.Article``), the sorted ids of the other
    versions (each resolves to the stored id). The other versions return ``None`` (the sinks and the story
    step drop them: one article, one row, one report). Elements of single-version articles are returned
    unchanged. The answer depends only on the Redis state, so it is the same whatever order the versions
    arrived in. A streaming sink that flushed a version before another arrived keeps what it wrote: the
    older version first gives a second row under the same stored id (the later ``fetch_time`` is the
    article), the newer version first keeps its row under its own id (an alias of the stored id); a bounded
    run writes one row.

    Args:
      client: a redis-py client.
      keys: the key layout.
      elements: records with ``article_id`` and ``url`` and a ``_replace`` method (``schemas.Article``,
        ``schemas.StoryArticle``).

    Returns:
      One element or ``None`` per input element, in input order. Two pipelined Redis round trips.
    """
    elements = list(elements)
    if not elements:
        return []
    ids = stored_ids(client, keys, [e.article_id for e in elements])
    unique = sorted(set(ids))
    pipe = client.pipeline(transaction=False)
    for aid in unique:
        pipe.hkeys(keys.article_versions(aid))
        pipe.hget(keys.article(aid), "url")
    raw = pipe.execute()
    current = {
        aid: (_text(raw[2 * i + 1]) if raw[2 * i + 1] is not None else None)
        for i, aid in enumerate(unique)
        if raw[2 * i]
    }
    aliases = {aid: tuple(sorted(_text(v) for v in raw[2 * i] if _text(v) != aid)) for i, aid in enumerate(unique)}
    out: list = []
    for e, aid in zip(elements, ids, strict=True):
        if aid not in current:
            out.append(e)
        elif current[aid] == e.url:
            fields = {"article_id": aid, **({"aliases": list(aliases[aid])} if "aliases" in e._fields else {})}
            out.append(e._replace(**fields))
        else:
            out.append(None)
    return out


def stored_ids(client, keys: Keys, ids: Sequence[str]) -> list[str]:
    """The id each article (version) id is stored under: itself, or the article it is a revision of
    (``rev`` of its ``Keys.article_record``). One pipelined round trip; input order."""
    if not ids:
        return []
    pipe = client.pipeline(transaction=False)
    for aid in ids:
        pipe.hget(keys.article_record(aid), "rev")
    return [aid if r is None else _text(r) for aid, r in zip(ids, pipe.execute(), strict=True)]


def current_clusters(client, keys: Keys, ids: Sequence[str]) -> list[str | None]:
    """Each stored article's near-duplicate group id as Redis holds it now (``cluster_id`` of its serving
    hash), ``None`` for an id that is not stored (never assigned, or a revision: see :func:`stored_ids`).
    One pipelined round trip; input order."""
    if not ids:
        return []
    pipe = client.pipeline(transaction=False)
    for aid in ids:
        pipe.hget(keys.article(aid), "cluster_id")
    return [None if c is None else _text(c) for c in pipe.execute()]


def group_ids(client, keys: Keys, min_articles: int = 2) -> list[str]:
    """Ids of the live groups of at least ``min_articles`` (>= 2) articles, sorted: the ``ND_SHARDS`` shards
    of ``Keys.clusters_by_size`` in one pipelined round trip."""
    pipe = client.pipeline(transaction=False)
    for shard in range(ND_SHARDS):
        pipe.zrangebyscore(keys.clusters_by_size(shard), max(2, int(min_articles)), "+inf")
    return sorted(_text(c) for ids in pipe.execute() for c in ids)


class RedisGroupStore:
    """Near-duplicate index and cluster state in Redis (see the module docstring for keys and guarantees).

    Args:
      client: a ``redis.Redis`` or ``redis.RedisCluster`` client (bytes responses).
      config: :class:`StoreConfig`.
      clock: UTC epoch seconds now, for the writer lease's deadlines (tests inject one).

    Attributes:
      round_trips: Redis round trips made by this store's writes and lookups so far (pipelines and
        script calls count one each).
    """

    def __init__(
        self, client: redis.Redis, config: StoreConfig = StoreConfig(), clock: Callable[[], float] = time.time
    ):
        self.client = client
        self.config = config
        self.keys = config.keys
        self.clock = clock
        self.round_trips = 0
        self._acquire = client.register_script(_ACQUIRE)
        self._commit = client.register_script(_COMMIT)
        self._release = client.register_script(_RELEASE)

    def _execute(self, pipe) -> list:
        self.round_trips += 1
        return pipe.execute()

    # -- the write cycle (module docstring, "Concurrency") --------------------------------------------
    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _apply(self, ops: list[list[bytes]]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for op in ops:
            pipe.execute_command(op[0].decode("ascii"), *op[1:])  # a cluster pipeline routes by a str name
        self._execute(pipe)

    def _take_lease(self, token: str) -> None:
        """Takes the writer lease (waiting while another holder's deadline is ahead) and completes any
        journal a previous holder left.

        Raises:
          LeaseLost: not taken within :attr:`StoreConfig.lease_wait_s`.
        """
        give_up = time.monotonic() + self.config.lease_wait_s
        pause = 0.001
        while True:
            self.round_trips += 1
            r = self._acquire(keys=[self.keys.nd_lease], args=[token, self._now_ms(), self.config.lease_ttl_ms])
            if int(r[0]) == 1:
                break
            if time.monotonic() > give_up:
                raise LeaseLost(f"the near-duplicate writer lease was not free within {self.config.lease_wait_s} s")
            time.sleep(pause)  # another writer's cycle: a few ms
            pause = min(pause * 2, 0.05)
        journal = r[1] if len(r) > 1 else None
        if journal:
            self._apply(_unpack(journal))
            self._commit(keys=[self.keys.nd_lease], args=[token, self._now_ms(), self.config.lease_ttl_ms, ""])
            self.round_trips += 1

    def _cycle(self, work: Callable[[_Tx], T]) -> T:
        """Runs ``work`` on a fresh :class:`_Tx` under the lease and writes what it changed, all or nothing.

        Raises:
          LeaseLost: the lease was lost before the commit (nothing written; the caller may retry).
          redis.RedisError: transient errors; a cycle that failed after its commit is completed by the next
            writer (the journal stays), one that failed before writes nothing.
        """
        token = uuid.uuid4().hex
        self._take_lease(token)
        committed = False
        try:
            tx = _Tx(self)
            result = work(tx)
            ops = [[_b(x) for x in op] for op in tx.write_set()]
            if ops:
                self.round_trips += 1
                args = [token, self._now_ms(), self.config.lease_ttl_ms, _pack(ops)]
                if not int(self._commit(keys=[self.keys.nd_lease], args=args)):
                    raise LeaseLost("the near-duplicate writer lease was taken over before the commit")
                committed = True
                self._apply(ops)
        except BaseException:
            try:  # free the lease at once; a committed journal stays for the next holder to apply
                self._release(keys=[self.keys.nd_lease], args=[token, "keep" if committed else "drop"])
            except redis.RedisError:
                pass  # the lease expires after lease_ttl_ms
            raise
        self.round_trips += 1
        self._release(keys=[self.keys.nd_lease], args=[token, "drop"])
        return result

    # -- writes ---------------------------------------------------------------------------------
    def assign_batch(self, articles: Sequence[Article]) -> list[AssignResult]:
        """Assigns each article to a near-duplicate group, in one write cycle for the whole batch.

        Articles are processed in the given order; the resulting state does not depend on that order
        (module docstring). Round trips: lease, the probed buckets, the candidates' records and articles,
        their groups (each one pipeline, the last two only when there are candidates), commit, apply,
        release; rarer paths (revisions, groups formed inside the batch) may read a few keys more.

        Args:
          articles: Articles with ``article_id`` (no newline) and ``simhash`` (16 hex) set.

        Returns:
          One :class:`AssignResult` per article, in input order.

        Raises:
          ValueError: an article has no valid 16-hex SimHash, or an id with a newline.
          LeaseLost, redis.RedisError: transient (callers retry; a replay is a no-op per stored article).
        """
        if not articles:
            return []
        recheck = self.config.borderline_jaccard is not None
        payload = []
        for a in articles:
            fp = (a.simhash or "").lower()
            if len(fp) != 16 or any(c not in "0123456789abcdef" for c in fp):
                raise ValueError(f"article {a.article_id}: simhash must be 16 hex chars, got {a.simhash!r}")
            if not a.article_id or "\n" in a.article_id:
                raise ValueError(f"article id must be non-empty without newlines, got {a.article_id!r}")
            payload.append(
                {
                    "id": a.article_id,
                    "fp": fp,
                    "title": a.title or "",
                    "url": a.url,
                    "domain": a.source_domain,
                    "name": a.source_name or "",
                    "t": format_epoch(a.event_time),
                    "pt": format_epoch(a.publish_time),
                    "lang": a.language or "und",
                    "auth": repr(float(a.source_authority)),
                    "feed": "1" if a.feed_only else "0",
                    "paywall": "1" if getattr(a, "paywalled", None) else "0",
                    "img": getattr(a, "image_thumb", "") or "",
                    "icon": getattr(a, "icon_thumb", "") or "",
                    "ft": format_epoch(a.fetch_time),
                    "outlet": outlet(a.url) or "",
                    "sid": stable_url_id(a.url) or "",
                }
            )
        sigs = [_u(bytes.fromhex(text_signature_hex(fingerprint_text(a)))) if recheck else None for a in articles]

        def work(tx: _Tx) -> list[AssignResult]:
            k = self.keys
            asg = _Assigner(tx, k, self.config)
            # round 1: the batch's own records and articles, the probed buckets, the stable-id sets, the counter
            tx.load(
                hashes=[key for a in payload for key in (k.article_record(a["id"]), k.article(a["id"]))],
                blobs=[key for a in payload for key in (*k.lsh_bands(a["fp"]), *k.lsh_band_id_keys(a["fp"]))]
                + [k.stable_url_versions(a["sid"]) for a in payload if a["sid"]]
                + [k.nd_count],
            )
            batch_ids = {a["id"] for a in payload}
            for a in payload:
                if not tx.hexists(k.article(a["id"])) and not tx.hexists(k.article_record(a["id"])):
                    tx.known_empty(*asg.ckeys("c" + a["id"]), k.article_versions(a["id"]))
            # round 2: records and articles of the stored candidates (filtered by distance on this worker)
            cands = {c for a in payload for c in asg.candidates(a["fp"])}
            cands |= {v for a in payload if a["sid"] for v in asg.stable_members(a["sid"])}
            cands = sorted(cands - batch_ids)
            tx.load(hashes=[key for c in cands for key in (k.article_record(c), k.article(c))])
            # round 3: the groups of the candidates (and the stored articles of revision candidates)
            nodes = {asg.node_of(c) for c in cands}
            tx.load(hashes=[k.article(n) for n in nodes])
            cids = {tx.hget(k.article(n), "cluster_id") for n in nodes} - {None, ""}
            tx.load(
                hashes=[k.cluster(c) for c in cids],
                sets=[key for c in cids for key in asg.ckeys(c)[1:]],
            )
            out = []
            for a, sig in zip(payload, sigs, strict=True):
                r = asg.assign(a, sig)
                out.append(
                    AssignResult(r["id"], r["cluster"], r["new"], r["created"], tuple(r["merged"]), r["article"])
                )
            return out

        return self._cycle(work)

    def resolve_revisions(self, elements: Sequence[T]) -> list[T | None]:
        """:func:`resolve_revisions` against this store's Redis and keys."""
        return resolve_revisions(self.client, self.keys, elements)

    def stored_id(self, article_id: str) -> str:
        """The id an article (version) is stored under: itself, or the article it is a revision of."""
        return stored_ids(self.client, self.keys, [article_id])[0]

    def expire_before(self, cutoff: float, batch: int = 50) -> tuple[int, int]:
        """Retention: deletes every group whose latest member's event time is before ``cutoff``.

        A group goes as a whole with all its members' (and their versions') band entries, index records and
        serving hashes, in write cycles of at most ``batch`` groups (each cycle all-or-nothing), so what
        stays is still a function of the input: no id, founder or representative changes.

        Each removed version rewrites its 4 band buckets whole (``SET``; ~31 KB each at 763 entries), and a
        cycle's write set passes through the lease's journal, so ``batch`` bounds the journal (about
        ``batch`` x 4 x bucket size) and the time of the commit.

        Args:
          cutoff: UTC epoch seconds (exclusive).
          batch: groups per write cycle.

        Returns:
          ``(groups deleted, articles deleted)``.
        """
        groups = articles = 0
        while True:
            g, a = self._cycle(lambda tx: self._expire_step(tx, float(cutoff), int(batch)))
            groups, articles = groups + g, articles + a
            if g == 0:
                return groups, articles

    def _expire_step(self, tx: _Tx, cutoff: float, limit: int) -> tuple[int, int]:
        k = self.keys
        per_shard = max(1, -(-limit // 64))  # a shard with expired groups always gives some: the loop ends
        pipe = self.client.pipeline(transaction=False)
        for shard in range(ND_SHARDS):
            pipe.zrangebyscore(k.clusters_by_latest(shard), "-inf", f"({cutoff!r}", start=0, num=per_shard)
        found = [_text(c) for ids in self._execute(pipe) for c in ids]
        found = sorted(found)[:limit]
        if not found:
            return 0, 0
        asg = _Assigner(tx, k, self.config)
        tx.load(hashes=[k.cluster(c) for c in found], sets=[k.cluster_articles(c) for c in found])
        members = {c: asg.members_of(c) for c in found}
        tx.load(
            hashes=[key for ms in members.values() for m in ms for key in (k.article_versions(m), k.article_record(m))]
        )
        vids = {m: [*tx.hgetall(k.article_versions(m)), m] for ms in members.values() for m in ms}
        tx.load(hashes=[k.article_record(v) for vs in vids.values() for v in vs])
        gone: dict[tuple[str, str], set[str]] = {}  # (fps key, ids key) -> version ids to remove
        count = 0
        for cid in found:
            for aid in members[cid]:
                for vid in vids[aid]:
                    sid = tx.hget(k.article_record(vid), "sid")
                    if sid:
                        asg.set_stable_members(sid, [v for v in asg.stable_members(sid) if v != vid])
                    fp = tx.hget(k.article_record(vid), "fp")
                    if fp:
                        for fk, ik in zip(k.lsh_bands(fp), k.lsh_band_id_keys(fp), strict=True):
                            gone.setdefault((fk, ik), set()).add(vid)
                        count += 1
                    tx.delete(k.article_record(vid))
                tx.delete(k.article_versions(aid))
                tx.delete(k.article(aid))
            asg.drop_group(cid)
        tx.load(blobs=[key for pair in gone for key in pair] + [k.nd_count])
        for (fk, ik), drop in gone.items():
            fps, ids = tx.get(fk) or b"", (tx.get(ik) or b"").split(b"\n")[:-1]
            keep = [i for i, v in enumerate(ids) if _u(v) not in drop]
            arr = np.frombuffer(fps, dtype=">u8")
            tx.put(fk, arr[keep].tobytes() if keep else None)
            tx.put(ik, b"".join(ids[i] + b"\n" for i in keep) if keep else None)
        left = int(tx.get(k.nd_count) or 0) - count
        tx.put(k.nd_count, str(left).encode() if left > 0 else None)
        return len(found), sum(len(ms) for ms in members.values())

    def add(self, item_id: str, fp: int) -> None:
        """Adds a bare fingerprint to the band index (no cluster state); idempotent.

        Raises:
          ValueError: ``item_id`` is stored with a different fingerprint.
        """
        self.add_many([(item_id, fp)])

    def add_many(self, items: Iterable[tuple[str, int]], batch: int = 10_000) -> int:
        """Bulk-loads ``(item_id, fingerprint)`` pairs into the band index (index records and bucket entries,
        no cluster state), ``batch`` per write cycle; ids already stored with the same fingerprint are
        skipped. Returns the number of pairs read.

        Raises:
          ValueError: an id is stored with a different fingerprint, or has a newline.
        """
        n = 0
        chunk: list[tuple[str, str]] = []

        def work(tx: _Tx) -> None:
            k = self.keys
            tx.load(
                hashes=[k.article_record(i) for i, _ in chunk],
                blobs=[key for _, f in chunk for key in (*k.lsh_bands(f), *k.lsh_band_id_keys(f))] + [k.nd_count],
            )
            asg = _Assigner(tx, k, self.config)
            for item_id, fp_hex in chunk:
                old = tx.hget(k.article_record(item_id), "fp")
                if old is not None and old != fp_hex:
                    raise ValueError(f"{item_id} already stored with fingerprint {old}")
                if old is None:
                    asg.index_version({"id": item_id, "fp": fp_hex}, None)

        for item_id, fp in items:
            if not item_id or "\n" in item_id:
                raise ValueError(f"item id must be non-empty without newlines, got {item_id!r}")
            chunk.append((item_id, f"{int(fp):016x}"))
            n += 1
            if len(chunk) >= batch:
                self._cycle(work)
                chunk = []
        if chunk:
            self._cycle(work)
        return n

    # -- reads ----------------------------------------------------------------------------------
    def query(self, fp: int, max_distance: int | None = None) -> list[tuple[str, int]]:
        """Stored items within ``max_distance`` (default: the configured one) of ``fp``.

        One pipelined round trip (the 4 buckets' strings); distances are computed here with numpy.

        Returns:
          ``[(item_id, distance), ...]`` sorted by (distance, item_id).
        """
        maxd = self.config.max_distance if max_distance is None else max_distance
        if not 0 <= maxd <= 3:
            raise ValueError(f"max_distance must be in 0..3, got {maxd}")
        fp_hex = f"{fp:016x}"
        pipe = self.client.pipeline(transaction=False)
        for fk, ik in zip(self.keys.lsh_bands(fp_hex), self.keys.lsh_band_id_keys(fp_hex), strict=True):
            pipe.get(fk)
            pipe.get(ik)
        raw = self._execute(pipe)
        found: dict[str, int] = {}
        for i in range(4):
            pos, dist = _hits(raw[2 * i], fp, maxd)
            if len(pos):
                ids = raw[2 * i + 1].split(b"\n")
                for p, d in zip(pos.tolist(), dist.tolist(), strict=True):
                    found.setdefault(_u(ids[p]), int(d))
        return sorted(found.items(), key=lambda x: (x[1], x[0]))

    def nearest(self, fp: int, max_distance: int | None = None) -> tuple[str, int] | None:
        """The closest stored item (ties: smallest id) within the distance, else ``None``."""
        found = self.query(fp, max_distance)
        return found[0] if found else None

    def __len__(self) -> int:
        return int(self.client.get(self.keys.nd_count) or 0)

    def __contains__(self, item_id: str) -> bool:
        return bool(self.client.exists(self.keys.article_record(item_id)))

    def cluster_of(self, article_id: str) -> str | None:
        """Current cluster id of an article, or ``None`` if it was never assigned."""
        return current_clusters(self.client, self.keys, [article_id])[0]

    def get_clusters(self, cluster_ids: Sequence[str]) -> list[NearDuplicateGroup | None]:
        """Reads clusters in one pipeline; ``None`` for unknown ids (and for ids merged away or renamed).

        A group of one article has no keys of its own: it is read from the
        article's serving hash (``"c" + article id``, while the article's ``cluster_id`` is that id).

        Args:
          cluster_ids: ids to read.
        """
        ids = list(cluster_ids)
        pipe = self.client.pipeline(transaction=False)
        for cid in ids:
            pipe.hgetall(self.keys.cluster(cid))
            pipe.scard(self.keys.cluster_articles(cid))
            pipe.smembers(self.keys.cluster_sources(cid))
            pipe.smembers(self.keys.cluster_languages(cid))
        raw = pipe.execute()
        keyless = [cid for i, cid in enumerate(ids) if not raw[4 * i]]  # groups of one, or unknown ids
        pipe = self.client.pipeline(transaction=False)
        for cid in keyless:
            pipe.hgetall(self.keys.article(cid[1:]))
        singles = dict(zip(keyless, pipe.execute() if keyless else [], strict=True))
        out: list[NearDuplicateGroup | None] = []
        for i, cid in enumerate(ids):
            h, count, sources, langs = raw[4 * i : 4 * i + 4]
            if not h:
                out.append(_singleton(cid, singles[cid]))
                continue
            h = {k.decode(): v.decode() for k, v in h.items()}
            out.append(
                NearDuplicateGroup(
                    cluster_id=cid,
                    representative_id=h.get("representative_id", ""),
                    representative_title=h.get("representative_title", ""),
                    representative_url=h.get("representative_url", ""),
                    representative_domain=h.get("representative_domain", ""),
                    article_count=int(count),
                    source_domains=sorted(s.decode() for s in sources),
                    languages=sorted(s.decode() for s in langs),
                    earliest_time=float(h["earliest_time"]),
                    latest_time=float(h["latest_time"]),
                    merged_into=h.get("merged_into") or None,
                )
            )
        return out

    def get_cluster(self, cluster_id: str) -> NearDuplicateGroup | None:
        """One cluster, or ``None``."""
        return self.get_clusters([cluster_id])[0]

    def top_clusters(self, n: int = 10, min_articles: int = 2) -> list[NearDuplicateGroup]:
        """The ``n`` live groups with the most articles (ties: larger cluster id first), at least ``min_articles``
        (>= 2) each (groups of one are not in the size index). One pipelined round trip over the shards."""
        pipe = self.client.pipeline(transaction=False)
        for shard in range(ND_SHARDS):
            pipe.zrevrangebyscore(
                self.keys.clusters_by_size(shard), "+inf", max(2, min_articles), start=0, num=n, withscores=True
            )
        best = sorted(((s, _text(c)) for rows in self._execute(pipe) for c, s in rows), reverse=True)[:n]
        return [c for c in self.get_clusters([cid for _, cid in best]) if c is not None]

    def cluster_count(self) -> int:
        """Number of live (not merged) clusters, groups of one included."""
        pipe = self.client.pipeline(transaction=False)
        for shard in range(ND_SHARDS):
            pipe.zcard(self.keys.clusters_by_latest(shard))
        return sum(int(x) for x in self._execute(pipe))
