"""Reader/writer for the Redis keys that ranking and serving use.

Written by the streaming job and the stories step (read here, never written):

==============================  ======  ==================================================
key                             type    content
==============================  ======  ==================================================
``nf:story:{story_id}``         HASH    title, url, domain, representative_id,
                                        article_count, source_count, independent_count,
                                        earliest_time, latest_time (UTC epoch s), topics
                                        (JSON list, or JSON {label: probability} as
                                        ``newsflow.stores.story_store`` writes it),
                                        languages (JSON list), authority
                                        (float in [0, 1]), embedding (128 float32 LE
                                        bytes), entities (JSON), merged_into
``nf:story:{story_id}:articles`` ZSET   article_id -> event_time
``nf:article:{article_id}``     HASH    title, url, source_domain, source_name, event_time,
                                        cluster_id (near-duplicate cluster), story_id,
                                        authority, language
``nf:lambda:topic``             HASH    topic label -> learned λ (1/hours), nightly job
``nf:user:{user_id}``           HASH    interest (128 float32 LE bytes), clicks (int),
                                        edition, follow_topics / follow_sources /
                                        block_topics / block_sources (JSON lists)
==============================  ======  ==================================================

Written by ranking (this package, the streaming job's trending step and the feed-building job):

==================================  ======  ===============================================
``nf:pool:edition:{edition}``       ZSET    story_id -> score; top ~500 per edition
                                            (language code, or ``global``)
``nf:pool:topic:{topic}``           ZSET    story_id -> score; top ~500 per topic label
``nf:breaking``                     ZSET    story_id -> expiry time (UTC epoch s)
``nf:breaking:since``               HASH    story_id -> when it (last) became breaking
``nf:trending:windows:{kind}``      ZSET    window_end -> window_end, kind in
                                            story/entity/topic
``nf:trending:{kind}:{window_end}`` ZSET    key -> new articles in that window
``nf:feed:edition:{edition}``       STRING  feed JSON, 5-minute TTL
``nf:feed:topic:{topic}``           STRING  feed JSON, 5-minute TTL
``nf:feed:user:{user_id}``          STRING  feed JSON, 5-minute TTL
``nf:users:active``                 ZSET    user_id -> last event time (UTC epoch s)
``nf:events``                       STREAM  reader events (see :mod:`newsflow.ranking.events`)
==================================  ======  ===============================================

The stories step keeps other keys under the same prefix (``nf:story:assign``, ``nf:story:active``,
``nf:story:merges``, ``nf:story:{id}:state``); :meth:`RankingStore.iter_story_ids` skips them
and :meth:`RankingStore.get_stories` treats a hash without ``earliest_time`` as no story.

Every method takes a ``redis.Redis`` client (``decode_responses=False``) at construction
and raises ``redis.RedisError`` subclasses unchanged, so callers can degrade.
"""

from __future__ import annotations

import json
from typing import Iterable, Iterator, Mapping, Optional, Sequence

import numpy as np

# Re-exported: the records live in schemas/; this module parses them from Redis hashes.
from schemas import EMBEDDING_DIM, ArticleRecord, StoryRecord, TopicScore, UserProfile

POOL_SIZE = 500
FEED_TTL_SECONDS = 300
GLOBAL_EDITION = "global"
TRENDING_KINDS = ("story", "entity", "topic")

STORY_PREFIX = "nf:story:"
ARTICLE_PREFIX = "nf:article:"
LAMBDA_KEY = "nf:lambda:topic"
USER_PREFIX = "nf:user:"
BREAKING_KEY = "nf:breaking"
BREAKING_SINCE_KEY = "nf:breaking:since"
ACTIVE_USERS_KEY = "nf:users:active"
RESERVED_STORY_NAMES = frozenset({"assign", "active", "merges"})


def pool_key(kind: str, name: str) -> str:
    """Key of a candidate pool: ``kind`` is ``"edition"`` or ``"topic"``."""
    if kind not in ("edition", "topic"):
        raise ValueError(f"pool kind must be 'edition' or 'topic', got {kind!r}")
    return f"nf:pool:{kind}:{name}"


def feed_key(kind: str, name: str) -> str:
    """Key of a precomputed feed: ``kind`` is ``"edition"``, ``"topic"`` or ``"user"``."""
    if kind not in ("edition", "topic", "user"):
        raise ValueError(f"feed kind must be 'edition', 'topic' or 'user', got {kind!r}")
    return f"nf:feed:{kind}:{name}"


def trending_key(kind: str, window_end: float) -> str:
    """Key of one trending window's counts (``kind`` in :data:`TRENDING_KINDS`)."""
    return f"nf:trending:{kind}:{int(window_end)}"


def trending_windows_key(kind: str) -> str:
    """Key of the ZSET listing the windows written for ``kind``."""
    return f"nf:trending:windows:{kind}"


def _s(value) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _f(value, default: float = 0.0) -> float:
    try:
        return float(_s(value)) if value not in (None, b"", "") else default
    except ValueError:
        return default


def _i(value, default: int = 0) -> int:
    try:
        return int(float(_s(value))) if value not in (None, b"", "") else default
    except ValueError:
        return default


def _json_list(value) -> list:
    if value in (None, b"", ""):
        return []
    try:
        out = json.loads(_s(value))
    except ValueError:
        return []
    return out if isinstance(out, list) else []


def _topic_labels(value) -> list[str]:
    """Topic labels from either a JSON list (most confident first) or a JSON object
    ``{label: probability}`` (sorted by probability, descending; ties by label)."""
    if value in (None, b"", ""):
        return []
    try:
        out = json.loads(_s(value))
    except ValueError:
        return []
    if isinstance(out, dict):
        pairs = []
        for label, p in out.items():
            try:
                pairs.append((-float(p), str(label)))
            except (TypeError, ValueError):
                pairs.append((0.0, str(label)))
        return [label for _, label in sorted(pairs)]
    return [str(t) for t in out] if isinstance(out, list) else []


def decode_embedding(value) -> Optional[np.ndarray]:
    """Decodes 128 little-endian float32 values; ``None`` when absent or malformed."""
    if not isinstance(value, (bytes, bytearray)) or len(value) != 4 * EMBEDDING_DIM:
        return None
    return np.frombuffer(bytes(value), dtype="<f4").astype(np.float32)


def encode_embedding(vector: Sequence[float]) -> bytes:
    """Encodes a 128-dim vector as little-endian float32 bytes.

    Raises:
      ValueError: the vector does not have 128 entries.
    """
    arr = np.asarray(vector, dtype="<f4").reshape(-1)
    if arr.shape[0] != EMBEDDING_DIM:
        raise ValueError(f"embedding must have {EMBEDDING_DIM} values, got {arr.shape[0]}")
    return arr.tobytes()


def _topic_scores(value) -> tuple:
    """:class:`TopicScore` pairs from a JSON object ``{label: probability}`` (most probable first,
    ties by label); empty for a JSON list of labels or anything unparseable."""
    if value in (None, b"", ""):
        return ()
    try:
        out = json.loads(_s(value))
    except ValueError:
        return ()
    if not isinstance(out, dict):
        return ()
    pairs = []
    for label, p in out.items():
        try:
            pairs.append((-float(p), str(label)))
        except (TypeError, ValueError):
            continue
    return tuple(TopicScore(label, -neg) for neg, label in sorted(pairs))


def story_from_hash(story_id: str, h: Mapping[bytes, bytes]) -> StoryRecord:
    """Builds a :class:`StoryRecord` from an HGETALL of ``nf:story:{story_id}``; missing fields get
    neutral defaults (``outlets`` and ``article_ids`` are not in the hash and stay empty)."""
    g = lambda name: h.get(name.encode())  # noqa: E731
    return StoryRecord(
        story_id=story_id,
        title=_s(g("title")),
        url=_s(g("url")),
        domain=_s(g("domain")).lower(),
        representative_id=_s(g("representative_id")),
        article_count=_i(g("article_count")),
        source_count=_i(g("source_count")),
        independent_count=_i(g("independent_count")),
        earliest_time=_f(g("earliest_time")),
        latest_time=_f(g("latest_time")),
        topics=_topic_labels(g("topics")),
        languages=[str(t) for t in _json_list(g("languages"))],
        authority=min(1.0, max(0.0, _f(g("authority")))),
        embedding=decode_embedding(g("embedding")),
        entities=_json_list(g("entities")),
        merged_into=_s(g("merged_into")),
        topic_scores=_topic_scores(g("topics")),
    )


def article_from_hash(article_id: str, h: Mapping[bytes, bytes]) -> ArticleRecord:
    """Builds an :class:`ArticleRecord` from an HGETALL of ``nf:article:{article_id}``."""
    g = lambda name: h.get(name.encode())  # noqa: E731
    return ArticleRecord(
        article_id=article_id,
        title=_s(g("title")),
        url=_s(g("url")),
        source_domain=_s(g("source_domain")).lower(),
        source_name=_s(g("source_name")),
        event_time=_f(g("event_time")),
        cluster_id=_s(g("cluster_id")) or f"solo:{article_id}",
        story_id=_s(g("story_id")),
        authority=_f(g("authority")),
        language=_s(g("language")),
    )


def user_from_hash(user_id: str, h: Mapping[bytes, bytes]) -> UserProfile:
    """Builds a :class:`UserProfile` from an HGETALL of ``nf:user:{user_id}`` (an empty hash is a
    new user)."""
    g = lambda name: h.get(name.encode())  # noqa: E731
    low = lambda name: frozenset(str(x).lower() for x in _json_list(g(name)))  # noqa: E731
    return UserProfile(
        user_id=user_id,
        interest=decode_embedding(g("interest")),
        clicks=max(0, _i(g("clicks"))),
        edition=_s(g("edition")).lower(),
        follow_topics=low("follow_topics"),
        follow_sources=low("follow_sources"),
        block_topics=low("block_topics"),
        block_sources=low("block_sources"),
    )


class RankingStore:
    """Typed access to the ranking keys above.

    Args:
      client: a ``redis.Redis`` client with ``decode_responses=False``.
    """

    def __init__(self, client):
        self.client = client

    # -- stories and articles -------------------------------------------------------
    def iter_story_ids(self, batch: int = 1000) -> Iterator[str]:
        """Yields every story id (keys ``nf:story:{id}`` without a further ``:`` part,
        except the stories step's reserved names)."""
        for key in self.client.scan_iter(match=STORY_PREFIX + "*", count=batch):
            rest = _s(key)[len(STORY_PREFIX):]
            if rest and ":" not in rest and rest not in RESERVED_STORY_NAMES:
                yield rest

    def get_stories(self, story_ids: Sequence[str]) -> list[Optional[StoryRecord]]:
        """Fetches stories in one pipeline; ``None`` where the hash does not exist."""
        pipe = self.client.pipeline(transaction=False)
        for sid in story_ids:
            pipe.hgetall(STORY_PREFIX + sid)
        out = []
        for sid, h in zip(story_ids, pipe.execute()):
            out.append(story_from_hash(sid, h) if h and b"earliest_time" in h else None)
        return out

    def get_story(self, story_id: str) -> Optional[StoryRecord]:
        """One story, or ``None``."""
        return self.get_stories([story_id])[0]

    def story_articles(self, story_id: str) -> list[ArticleRecord]:
        """The story's articles ordered by event time (ties: article id)."""
        ids = [_s(a) for a in self.client.zrange(f"{STORY_PREFIX}{story_id}:articles", 0, -1)]
        pipe = self.client.pipeline(transaction=False)
        for aid in ids:
            pipe.hgetall(ARTICLE_PREFIX + aid)
        arts = [article_from_hash(a, h) for a, h in zip(ids, pipe.execute()) if h]
        arts.sort(key=lambda a: (a.event_time, a.article_id))
        return arts

    # -- ranking inputs -------------------------------------------------------------
    def lambda_overrides(self) -> dict[str, float]:
        """Per-topic λ overrides from ``nf:lambda:topic``; unparsable or ≤ 0 values are skipped."""
        out = {}
        for k, v in self.client.hgetall(LAMBDA_KEY).items():
            lam = _f(v, default=-1.0)
            if lam > 0:
                out[_s(k).lower()] = lam
        return out

    def user_profile(self, user_id: str) -> UserProfile:
        """The reader's profile; an unknown user gets an empty (cold-start) profile."""
        return user_from_hash(user_id, self.client.hgetall(USER_PREFIX + user_id))

    # -- breaking set ----------------------------------------------------------------
    def mark_breaking(self, items: Iterable[tuple[str, float, float]]) -> list[str]:
        """Adds stories to the breaking set.

        Args:
          items: ``(story_id, now, ttl_seconds)``; ``now`` is the event time (window end)
            at which the story was breaking, UTC epoch s.

        Returns:
          The story ids that were not breaking before (newly breaking).

        ``since`` is the earliest breaking time of the current run: a window that arrives
        out of order (earlier than the stored ``since`` while the story is still in the
        set) moves ``since`` back; after the entry expired, a new run starts.
        """
        items = list(items)
        if not items:
            return []
        pipe = self.client.pipeline(transaction=False)
        for sid, _, _ in items:
            pipe.zscore(BREAKING_KEY, sid)
            pipe.hget(BREAKING_SINCE_KEY, sid)
        res = pipe.execute()
        state = {}
        for (sid, _, _), old, since in zip(items, res[0::2], res[1::2]):
            state.setdefault(sid, (None if old is None else float(old), None if since is None else _f(since)))
        pipe = self.client.pipeline(transaction=False)
        fresh = []
        for sid, now, ttl in items:
            now = float(now)
            exp, since = state[sid]
            if exp is not None and exp > now:  # still breaking at `now`: same run
                since = now if since is None else min(since, now)
            else:  # not in the set at `now`: a new run starts
                since = now
                fresh.append(sid)
            exp = max(exp or 0.0, now + float(ttl))
            state[sid] = (exp, since)
            pipe.hset(BREAKING_SINCE_KEY, sid, repr(since))
            pipe.zadd(BREAKING_KEY, {sid: exp}, gt=True)
        pipe.execute()
        return list(dict.fromkeys(fresh))

    def breaking(self, now: float) -> dict[str, float]:
        """Live breaking stories at ``now``: ``story_id -> since`` (UTC epoch s)."""
        ids = [_s(x) for x in self.client.zrangebyscore(BREAKING_KEY, f"({float(now)!r}", "+inf")]
        if not ids:
            return {}
        since = self.client.hmget(BREAKING_SINCE_KEY, ids)
        return {sid: _f(s) for sid, s in zip(ids, since)}

    # -- trending -------------------------------------------------------------------
    def latest_trending(self, kind: str, n: int = 50, now: Optional[float] = None) -> tuple[Optional[float], list[tuple[str, int]]]:
        """The newest written window of ``kind`` ending at or before ``now`` (UTC epoch s; ``None``:
        any) and its top-``n`` ``(key, count)`` pairs. ``now`` matters when ranking a replay at its
        replay clock: windows from after it do not exist yet."""
        top = "+inf" if now is None else now
        # newest first; a window whose key has expired (TTL) is skipped
        for _, score in self.client.zrevrangebyscore(trending_windows_key(kind), top, "-inf", start=0, num=20,
                                                      withscores=True):
            end = float(score)
            rows = self.client.zrevrange(trending_key(kind, end), 0, n - 1, withscores=True)
            if rows:
                return end, [(_s(k), int(v)) for k, v in rows]
        return None, []

    # -- pools ----------------------------------------------------------------------
    def replace_pool(self, kind: str, name: str, scores: Mapping[str, float], size: int = POOL_SIZE,
                     ttl_seconds: int = 86400) -> None:
        """Atomically replaces a pool with the top-``size`` of ``scores`` (temp key + RENAME)."""
        key = pool_key(kind, name)
        top = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:size]
        if not top:
            self.client.delete(key)
            return
        tmp = key + ":tmp"
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(tmp)
        pipe.zadd(tmp, dict(top))
        pipe.rename(tmp, key)
        pipe.expire(key, ttl_seconds)
        pipe.execute()

    def pool(self, kind: str, name: str, n: int = POOL_SIZE) -> list[tuple[str, float]]:
        """Top-``n`` ``(story_id, score)`` of a pool, best first."""
        rows = self.client.zrevrange(pool_key(kind, name), 0, n - 1, withscores=True)
        return [(_s(k), float(v)) for k, v in rows]

    # -- feeds ----------------------------------------------------------------------
    def write_feeds(self, feeds: Mapping[str, dict], ttl_seconds: int = FEED_TTL_SECONDS) -> None:
        """Writes feed JSON documents (``key -> feed dict``) with a TTL, in one pipeline."""
        pipe = self.client.pipeline(transaction=False)
        for key, feed in feeds.items():
            pipe.set(key, json.dumps(feed, separators=(",", ":"), sort_keys=True), ex=int(ttl_seconds))
        pipe.execute()

    def read_feed_raw(self, key: str) -> Optional[bytes]:
        """The stored feed JSON bytes, or ``None`` when missing/expired."""
        return self.client.get(key)

    def active_users(self, since: float, limit: int = 10000) -> list[str]:
        """Users with an event at or after ``since`` (UTC epoch s), most recent first."""
        rows = self.client.zrevrangebyscore(ACTIVE_USERS_KEY, "+inf", float(since), start=0, num=limit)
        return [_s(r) for r in rows]
