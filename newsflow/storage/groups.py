"""Near-duplicate group state in Redis: LSH bands, fingerprints, clusters, merges.

Keys: the near-duplicate group of :mod:`newsflow.storage.keys` (LSH bands, fingerprints, article -> cluster,
article serving hashes, clusters), all under the ``{nd}`` hash tag (``nf:{nd}:lsh:0:abcd``).

**Concurrency.** Every assignment runs inside one Lua script (``lua/assign.lua``);
Redis runs scripts atomically, so two workers assigning near-duplicates at the same
moment are serialized: the second sees the first's bands and joins its cluster. If two
clusters both hold near-duplicates of a new article (a chain A~B~C), the script merges them.

**Order independence.** A group's members are the connected components of "Hamming distance
<= threshold" (each new article joins every group it is near), its id is ``"c" + founder``, where
the founder is the member with the earliest ``(event time, article id)``, and its representative
and time range are order-free functions of the members. An earlier copy that arrives late renames
the group: the old group is merged into ``"c" + earlier id`` and deleted, ``a2c`` and the article
hashes are rewritten. So the same articles in any arrival order, in any batches, by any number of
concurrent writers, leave identical keys and values; no merge history is stored (ids are only
handed downstream after the write that may still rename them, and sinks re-read ``a2c``).

**Borderline pairs.** Fingerprints 4-5 bits apart (:attr:`StoreConfig.borderline_max_distance`) that
share a band are near-duplicates when their MinHash signatures (:mod:`newsflow.core.minhash_check`, stored
per article in ``Keys.minhashes``, 512 bytes) agree on at least :attr:`StoreConfig.borderline_jaccard`
of their 128 slots, compared inside the script, so the decision is atomic and order-free like the rest.

**Revisions.** Near-duplicates of one outlet with the same publish and event time are versions of one
article (rule 5 of "Article identity" in :mod:`newsflow.core.urls`, :mod:`newsflow.core.revisions`): stored once,
under the earliest ``(fetch time, id)`` version's id with the latest version's fields, the other
version ids in ``Keys.article_revisions``, every version in ``Keys.article_versions``; the groups a
revision touches are rebuilt from their members. Sinks call :func:`resolve_revisions`.

**Idempotence.** An article id already in ``a2c`` is a no-op that returns its cluster, and every
membership is a SET, so replaying the same input leaves Redis exactly as after one pass.

The script addresses keys it computes from the tagged prefix Python hands it (:attr:`Keys.nd`), and
every one of them carries the ``{nd}`` hash tag, so on Redis Cluster they all live in one slot.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

import redis

from newsflow.core.articles import fingerprint_text
from newsflow.core.minhash_check import BORDERLINE, JACCARD_THRESHOLD, text_signature_hex
from newsflow.core.outlets import outlet
from newsflow.core.timeutil import format_epoch
from newsflow.schemas import Article, NearDuplicateGroup
from newsflow.storage.keys import Keys

T = TypeVar("T")

_LUA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lua")


def _lua(name: str) -> str:
    with open(os.path.join(_LUA_DIR, name), encoding="utf-8") as f:
        return f.read()


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
    """

    prefix: str = "nf"
    max_distance: int = 3
    borderline_jaccard: float | None = JACCARD_THRESHOLD
    borderline_max_distance: int = BORDERLINE[1]

    def __post_init__(self):
        Keys(self.prefix)  # validates the prefix
        if not 0 <= self.max_distance <= 3:
            raise ValueError(f"max_distance must be in 0..3 for a 4 x 16-bit band index, got {self.max_distance}")
        j = self.borderline_jaccard
        if j is not None and not (isinstance(j, int | float) and 0.0 < float(j) <= 1.0):
            raise ValueError(f"borderline_jaccard must be in (0, 1] or None, got {j!r}")
        if not self.max_distance <= self.borderline_max_distance <= 64:
            raise ValueError(f"borderline_max_distance must be in max_distance..64, got {self.borderline_max_distance}")

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


def resolve_revisions(client, keys: Keys, elements: Sequence[T]) -> list[T | None]:
    """Maps pipeline elements onto the articles Redis stores them as (revisions, rule 5 of "Article identity").

    An element whose id is a version of an article with two or more versions (``Keys.article_revisions``,
    ``Keys.article_versions``) is that article only when it is the version whose URL the article's
    serving hash holds (the latest fetched): it is returned with ``article_id`` set to the stored id.
    The other versions return ``None`` (the sinks and the story step drop them: one article, one row,
    one report). Elements of single-version articles are returned unchanged. The answer depends only
    on the Redis state, so it is the same whatever order the versions arrived in. A streaming sink that
    flushed a version before another arrived keeps what it wrote: the older version first gives a
    second row under the same stored id (the later ``fetch_time`` is the article), the newer version
    first keeps its row under its own id (an alias of the stored id); a bounded run writes one row.

    Args:
      client: a redis-py client.
      keys: the key layout.
      elements: records with ``article_id`` and ``url`` and a ``_replace`` method (``schemas.Article``,
        ``schemas.StoryArticle``).

    Returns:
      One element or ``None`` per input element, in input order. Two Redis round trips.
    """
    elements = list(elements)
    if not elements:
        return []
    stored = client.hmget(keys.article_revisions, [e.article_id for e in elements])
    ids = [_text(r) if r is not None else e.article_id for e, r in zip(elements, stored, strict=True)]
    unique = sorted(set(ids))
    pipe = client.pipeline(transaction=False)
    for aid in unique:
        pipe.exists(keys.article_versions(aid))
        pipe.hget(keys.article(aid), "url")
    raw = pipe.execute()
    current = {
        aid: (_text(raw[2 * i + 1]) if raw[2 * i + 1] is not None else None)
        for i, aid in enumerate(unique)
        if raw[2 * i]
    }
    out: list = []
    for e, aid in zip(elements, ids, strict=True):
        if aid not in current:
            out.append(e)
        elif current[aid] == e.url:
            out.append(e if aid == e.article_id else e._replace(article_id=aid))
        else:
            out.append(None)
    return out


class RedisGroupStore:
    """Near-duplicate index and cluster state in Redis (see the module docstring for keys).

    Args:
      client: a ``redis.Redis`` client (bytes responses).
      config: :class:`StoreConfig`.
    """

    def __init__(self, client: redis.Redis, config: StoreConfig = StoreConfig()):
        self.client = client
        self.config = config
        self.keys = config.keys
        self._assign = client.register_script(_lua("assign.lua"))
        self._expire = client.register_script(_lua("expire.lua"))

    # -- writes ---------------------------------------------------------------------------------
    def assign_batch(self, articles: Sequence[Article]) -> list[AssignResult]:
        """Assigns each article to a near-duplicate group, atomically for the whole batch.

        Articles are processed in the given order inside one Lua script call; the resulting state does
        not depend on that order (module docstring).

        Args:
          articles: Articles with ``article_id`` and ``simhash`` (16 hex) set.

        Returns:
          One :class:`AssignResult` per article, in input order.

        Raises:
          ValueError: an article has no valid 16-hex SimHash.
          redis.RedisError: transient server errors (callers retry; the script is idempotent).
        """
        if not articles:
            return []
        recheck = self.config.borderline_jaccard is not None
        payload = []
        for a in articles:
            fp = (a.simhash or "").lower()
            if len(fp) != 16 or any(c not in "0123456789abcdef" for c in fp):
                raise ValueError(f"article {a.article_id}: simhash must be 16 hex chars, got {a.simhash!r}")
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
                    "ft": format_epoch(a.fetch_time),
                    "outlet": outlet(a.url) or "",
                }
            )
        # signatures as raw bytes in their own arguments (512 bytes each; no JSON or hex decoding in the script)
        sigs = [bytes.fromhex(text_signature_hex(fingerprint_text(a))) if recheck else b"" for a in articles]
        raw = self._assign(
            keys=[self.keys.fingerprints],
            args=[
                self.keys.nd,
                self.config.max_distance,
                json.dumps(payload),
                repr(float(self.config.borderline_jaccard)) if recheck else "",
                self.config.borderline_max_distance,
                *sigs,
            ],
        )
        out = []
        for r in json.loads(raw):
            merged = r.get("merged") or []
            if isinstance(merged, dict):  # cjson encodes an empty table as {}
                merged = list(merged.values())
            out.append(
                AssignResult(
                    r["id"],
                    r["cluster"],
                    bool(r["new"]),
                    bool(r["created"]),
                    tuple(merged),
                    r.get("article") or r["id"],
                )
            )
        return out

    def resolve_revisions(self, elements: Sequence[T]) -> list[T | None]:
        """:func:`resolve_revisions` against this store's Redis and keys."""
        return resolve_revisions(self.client, self.keys, elements)

    def stored_id(self, article_id: str) -> str:
        """The id an article (version) is stored under: itself, or the article it is a revision of."""
        r = self.client.hget(self.keys.article_revisions, article_id)
        return article_id if r is None else _text(r)

    def expire_before(self, cutoff: float, batch: int = 500) -> tuple[int, int]:
        """Retention: deletes every group whose latest member's event time is before ``cutoff``.

        A group goes as a whole with all its members' index entries and serving hashes
        (``lua/expire.lua``), in script calls of at most ``batch`` groups (each call atomic).

        Args:
          cutoff: UTC epoch seconds (exclusive).
          batch: groups per script call.

        Returns:
          ``(groups deleted, articles deleted)``.
        """
        groups = articles = 0
        while True:
            g, a = self._expire(keys=[self.keys.fingerprints], args=[self.keys.nd, repr(float(cutoff)), int(batch)])
            groups, articles = groups + int(g), articles + int(a)
            if int(g) == 0:
                return groups, articles

    def add(self, item_id: str, fp: int) -> None:
        """Adds a bare fingerprint to the band index (no cluster state); idempotent.

        Raises:
          ValueError: ``item_id`` is stored with a different fingerprint.
        """
        fp_hex = f"{fp:016x}"
        old = self.client.hget(self.keys.fingerprints, item_id)
        if old is not None and old.decode() != fp_hex:
            raise ValueError(f"{item_id} already stored with fingerprint {old.decode()}")
        self.add_many([(item_id, fp)])

    def add_many(self, items: Iterable[tuple[str, int]], batch: int = 10_000) -> int:
        """Bulk-loads ``(item_id, fingerprint)`` pairs into the band index with pipelines; returns the count."""
        n = 0
        pipe = self.client.pipeline(transaction=False)
        for item_id, fp in items:
            fp_hex = f"{fp:016x}"
            pipe.hset(self.keys.fingerprints, item_id, fp_hex)
            member = f"{fp_hex}:{item_id}"
            for key in self.keys.lsh_bands(fp_hex):
                pipe.sadd(key, member)
            n += 1
            if n % batch == 0:
                pipe.execute()
        pipe.execute()
        return n

    # -- reads ----------------------------------------------------------------------------------
    def query(self, fp: int, max_distance: int | None = None) -> list[tuple[str, int]]:
        """Stored items within ``max_distance`` (default: the configured one) of ``fp``.

        One ``SUNION`` of the 4 band sets (one round trip); distances are computed client-side
        from the fingerprints stored in the band members.

        Returns:
          ``[(item_id, distance), ...]`` sorted by (distance, item_id).
        """
        maxd = self.config.max_distance if max_distance is None else max_distance
        if not 0 <= maxd <= 3:
            raise ValueError(f"max_distance must be in 0..3, got {maxd}")
        found: dict[str, int] = {}
        # one SUNION of the 4 band sets: one command, one round trip
        for member in self.client.sunion(self.keys.lsh_bands(f"{fp:016x}")):
            item_id = member[17:].decode()
            if item_id not in found:
                found[item_id] = (int(member[:16], 16) ^ fp).bit_count()
        return sorted(((i, d) for i, d in found.items() if d <= maxd), key=lambda x: (x[1], x[0]))

    def nearest(self, fp: int, max_distance: int | None = None) -> tuple[str, int] | None:
        """The closest stored item (ties: smallest id) within the distance, else ``None``."""
        found = self.query(fp, max_distance)
        return found[0] if found else None

    def __len__(self) -> int:
        return int(self.client.hlen(self.keys.fingerprints))

    def __contains__(self, item_id: str) -> bool:
        return bool(self.client.hexists(self.keys.fingerprints, item_id))

    def cluster_of(self, article_id: str) -> str | None:
        """Current cluster id of an article, or ``None`` if it was never assigned."""
        cid = self.client.hget(self.keys.article_clusters, article_id)
        return None if cid is None else cid.decode()

    def get_clusters(self, cluster_ids: Sequence[str]) -> list[NearDuplicateGroup | None]:
        """Reads clusters in one pipeline; ``None`` for unknown ids (and for ids merged away or renamed).

        A group of one article has no keys of its own (``lua/assign.lua``): it is read from the
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
        """The ``n`` live groups with the most articles (ties: cluster id), at least ``min_articles`` (>= 2) each
        (groups of one are not in the size index)."""
        ids = [
            c.decode()
            for c in self.client.zrevrangebyscore(self.keys.clusters_by_size, "+inf", min_articles, start=0, num=n)
        ]
        return [c for c in self.get_clusters(ids) if c is not None]

    def cluster_count(self) -> int:
        """Number of live (not merged) clusters, groups of one included."""
        return int(self.client.zcard(self.keys.clusters_by_latest))
