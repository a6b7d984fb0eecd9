"""Reader/writer for the Redis keys that ranking and serving use.

Keys, their types, writers and readers are listed in :mod:`newsflow.storage.keys`; every method here
names keys through the store's :class:`newsflow.storage.keys.Keys`. Read here, written elsewhere: the
story serving hashes and their article ZSETs (stories step), article hashes (near-duplicate
store), ``lambda:topic`` (nightly job), ``user:{id}`` (profile jobs). Written here: pools,
breaking set, feeds. The story hash ``topics`` field is a JSON list, or JSON ``{label:
probability}`` as ``newsflow.storage.stories`` writes it; ``authority`` is a float in [0, 1].

The stories step keeps other keys next to the story hashes (``story:assign``, ``story:active``,
``story:merges``, ``story:{id}:state``); :meth:`RankingStore.iter_story_ids` skips them
and :meth:`RankingStore.get_stories` treats a hash without ``earliest_time`` as no story.

Every method takes a ``redis.Redis`` client (``decode_responses=False``) at construction
and raises ``redis.RedisError`` subclasses unchanged, so callers can degrade.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

from newsflow.core.outlets import outlet

# Re-exported: the records live in schemas/; this module parses them from Redis hashes.
from newsflow.core.ranking.feeds import POOL_SIZE
from newsflow.schemas import EMBEDDING_DIM, ArticleRecord, StoryRecord, TopicScore, UserProfile
from newsflow.schemas.story import split_legacy_topics
from newsflow.storage.events import active_readers
from newsflow.storage.keys import Keys
from newsflow.storage.story_index import live_story_ids

FEED_TTL_SECONDS = 300
TRENDING_KINDS = ("story", "entity", "topic")
PROFILE_PREFERENCE_FIELDS = ("follow_topics", "follow_sources", "block_topics", "block_sources")
"""Preference fields that are also :class:`UserProfile` attributes (ranking reads them)."""
EXTRA_PREFERENCE_FIELDS = ("prefer_sources", "dismiss_topics", "mute_words")
"""Preference fields serving alone reads (:meth:`RankingStore.preference_extras`): outlets whose report
leads a story's coverage, inferred interests (topics) the reader removed from For You, and muted words and
phrases (:mod:`newsflow.core.muting`)."""
PREFERENCE_FIELDS = PROFILE_PREFERENCE_FIELDS + EXTRA_PREFERENCE_FIELDS
"""Fields of the user hash a reader sets (``/v1/me/preferences``, the web UI); JSON lists."""


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


def decode_embedding(value) -> np.ndarray | None:
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
    """Builds a :class:`StoryRecord` from an HGETALL of ``Keys.story(story_id)``; missing fields get
    neutral defaults (``outlets`` and ``article_ids`` are not in the hash and stay empty)."""
    g = lambda name: h.get(name.encode())  # noqa: E731
    # ``types`` is its own field; hashes written before it hold article types inside ``topics`` (read for one
    # release: split_legacy_topics moves them)
    topics, types = split_legacy_topics(_topic_labels(g("topics")), _topic_labels(g("types")))
    topic_scores, _ = split_legacy_topics(_topic_scores(g("topics")), ())
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
        topics=list(topics),
        languages=[str(t) for t in _json_list(g("languages"))],
        authority=min(1.0, max(0.0, _f(g("authority")))),
        embedding=decode_embedding(g("embedding")),
        entities=_json_list(g("entities")),
        merged_into=_s(g("merged_into")),
        topic_scores=topic_scores,
        types=types,
        image=_s(g("image")),
        icon=_s(g("icon")),
    )


def article_from_hash(article_id: str, h: Mapping[bytes, bytes]) -> ArticleRecord:
    """Builds an :class:`ArticleRecord` from an HGETALL of ``Keys.article(article_id)``."""
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
        authority=_f(g("source_authority")),  # the serving hash's name (newsflow.storage.groups)
        language=_s(g("language")),
        paywalled=_s(g("paywalled")) == "1",
        image=_s(g("image")),
        icon=_s(g("icon")),
    )


def extras_from_values(values) -> dict[str, frozenset]:
    """:data:`EXTRA_PREFERENCE_FIELDS` as frozensets from their raw values in that order (an HMGET reply)."""
    prefer, dismiss, mute = (_json_list(v) for v in values)
    return {
        "prefer_sources": frozenset(o for o in (outlet(str(x)) for x in prefer) if o),
        "dismiss_topics": frozenset(str(x).lower() for x in dismiss),
        "mute_words": frozenset(str(x) for x in mute if isinstance(x, str)),
    }


def user_from_hash(user_id: str, h: Mapping[bytes, bytes]) -> UserProfile:
    """Builds a :class:`UserProfile` from an HGETALL of ``Keys.user(user_id)`` (an empty hash is a
    new user). Followed and blocked sources become outlets (:func:`newsflow.core.outlets.outlet`), so a
    stored ``uk.reuters.com`` follows or blocks every ``reuters.com`` host."""
    g = lambda name: h.get(name.encode())  # noqa: E731
    low = lambda name: frozenset(str(x).lower() for x in _json_list(g(name)))  # noqa: E731
    outlets = lambda name: frozenset(o for o in (outlet(str(x)) for x in _json_list(g(name))) if o)  # noqa: E731
    return UserProfile(
        user_id=user_id,
        interest=decode_embedding(g("interest")),
        clicks=max(0, _i(g("clicks"))),
        edition=_s(g("edition")).lower(),
        follow_topics=low("follow_topics"),
        follow_sources=outlets("follow_sources"),
        block_topics=low("block_topics"),
        block_sources=outlets("block_sources"),
    )


#: Breaking window ends kept per story (``Keys.breaking_windows``): 7 days at a 5-minute period.
MAX_BREAKING_WINDOWS = 2016


def breaking_run_start(ends: Sequence[float], ttl: float) -> float:
    """Start of the latest breaking run among a story's breaking window ends (UTC epoch s).

    A window ending at ``e`` keeps the story breaking until ``e + ttl``; the next window ``e'`` is in
    the same run when ``e + ttl > e'`` (the story was still breaking then). Walks back from the latest
    end while that holds.

    Args:
      ends: window ends in ascending order (not empty).
      ttl: breaking TTL in seconds.
    """
    start = ends[-1]
    for e in reversed(ends[:-1]):
        if e + ttl > start:
            start = e
        else:
            break
    return start


class RankingStore:
    """Typed access to the ranking keys (see :mod:`newsflow.storage.keys`).

    Args:
      client: a ``redis.Redis`` client with ``decode_responses=False``.
      keys: the Redis key layout (:class:`newsflow.storage.keys.Keys`, default prefix ``nf``).
    """

    def __init__(self, client, keys: Keys = Keys()):
        self.client = client
        self.keys = keys

    # -- stories and articles -------------------------------------------------------
    def iter_story_ids(self, batch: int = 1000, since: float | None = None) -> Iterator[str]:
        """Yields the ids of live stories from the live-story index shards (``Keys.story_active``, by
        latest event time, then id), never scanning the keyspace: merged stories and stories expired by
        retention are not in it.

        Args:
          batch: unused (the shards are read in one pipeline); kept for callers.
          since: only stories whose latest event time (UTC epoch s) is at or after this.
        """
        yield from live_story_ids(self.client, self.keys, "-inf" if since is None else repr(float(since)))

    def get_stories(self, story_ids: Sequence[str]) -> list[StoryRecord | None]:
        """Fetches stories in one pipeline; ``None`` where the hash does not exist."""
        pipe = self.client.pipeline(transaction=False)
        for sid in story_ids:
            pipe.hgetall(self.keys.story(sid))
        out = []
        for sid, h in zip(story_ids, pipe.execute(), strict=False):
            out.append(story_from_hash(sid, h) if h and b"earliest_time" in h else None)
        return out

    def get_story(self, story_id: str) -> StoryRecord | None:
        """One story, or ``None``."""
        return self.get_stories([story_id])[0]

    def story_articles(self, story_id: str) -> list[ArticleRecord]:
        """The story's articles ordered by event time (ties: article id)."""
        ids = [_s(a) for a in self.client.zrange(self.keys.story_articles(story_id), 0, -1)]
        pipe = self.client.pipeline(transaction=False)
        for aid in ids:
            pipe.hgetall(self.keys.article(aid))
        arts = [article_from_hash(a, h) for a, h in zip(ids, pipe.execute(), strict=False) if h]
        arts.sort(key=lambda a: (a.event_time, a.article_id))
        return arts

    # -- ranking inputs -------------------------------------------------------------
    def lambda_overrides(self) -> dict[str, float]:
        """Per-topic λ overrides from ``Keys.topic_lambdas``; unparsable or ≤ 0 values are skipped."""
        out = {}
        for k, v in self.client.hgetall(self.keys.topic_lambdas).items():
            lam = _f(v, default=-1.0)
            if lam > 0:
                out[_s(k).lower()] = lam
        return out

    def user_profile(self, user_id: str) -> UserProfile:
        """The reader's profile; an unknown user gets an empty (cold-start) profile."""
        return user_from_hash(user_id, self.client.hgetall(self.keys.user(user_id)))

    def preference_extras(self, user_id: str) -> dict[str, frozenset]:
        """The reader's :data:`EXTRA_PREFERENCE_FIELDS` as frozensets (one HMGET); ``prefer_sources`` hold
        outlets (stored hosts are reduced with :func:`newsflow.core.outlets.outlet`), ``dismiss_topics`` lower-case
        labels, ``mute_words`` normalized phrases; missing or unparsable fields are empty."""
        raw = self.client.hmget(self.keys.user(user_id), list(EXTRA_PREFERENCE_FIELDS))
        return extras_from_values(raw)

    def write_preferences(self, user_id: str, prefs: Mapping[str, Iterable[str]]) -> None:
        """Sets some of a reader's :data:`PREFERENCE_FIELDS` (each a JSON list, sorted) in one HSET on
        ``Keys.user(user_id)``; other fields of the hash (the nightly job's interest vector, clicks) are
        left alone. Callers validate and normalize the values (outlets for sources, lower-case topics).

        Raises:
          ValueError: a field outside :data:`PREFERENCE_FIELDS`.
        """
        bad = set(prefs) - set(PREFERENCE_FIELDS)
        if bad:
            raise ValueError(f"not preference fields: {sorted(bad)}")
        if prefs:
            self.client.hset(
                self.keys.user(user_id),
                mapping={name: json.dumps(sorted(set(values))) for name, values in prefs.items()},
            )

    # -- breaking set ----------------------------------------------------------------
    def mark_breaking(self, items: Iterable[tuple[str, float, float]]) -> list[str]:
        """Adds stories to the breaking set.

        Args:
          items: ``(story_id, now, ttl_seconds)``; ``now`` is the event time (window end)
            at which the story was breaking, UTC epoch s.

        Returns:
          The story ids that were not breaking before (newly breaking).

        A story's ``since`` (:meth:`breaking`) is not stored: it is read from the set of its breaking window
        ends (``Keys.breaking_windows``), which ZADD only grows, and the expiry only moves later (``ZADD GT``),
        so writers in any order, in any bundles, concurrent or replayed leave the state of one clean run in
        event order.
        """
        by_story: dict[str, tuple[list[float], float]] = {}
        for sid, now, ttl in items:
            ends, longest = by_story.get(sid, ([], 0.0))
            ends.append(float(now))
            by_story[sid] = (ends, max(longest, float(ttl)))
        if not by_story:
            return []
        sids = sorted(by_story)
        pipe = self.client.pipeline(transaction=False)
        for sid in sids:
            pipe.zscore(self.keys.breaking, sid)
        before = pipe.execute()
        pipe = self.client.pipeline(transaction=False)
        fresh = []
        for sid, old in zip(sids, before, strict=True):
            ends, ttl = by_story[sid]
            if old is None or float(old) <= min(ends):
                fresh.append(sid)
            key = self.keys.breaking_windows(sid)
            pipe.zadd(key, {repr(e): e for e in ends})
            pipe.zremrangebyrank(key, 0, -(MAX_BREAKING_WINDOWS + 1))
            pipe.expire(key, max(1, int(2 * ttl)))
            pipe.zadd(self.keys.breaking, {sid: max(ends) + ttl}, gt=True)
        pipe.execute()
        return fresh

    def breaking(self, now: float) -> dict[str, float]:
        """Live breaking stories at ``now``: ``story_id -> since`` (UTC epoch s), ``since`` the start of the
        story's latest breaking run (:func:`breaking_run_start` over its recorded window ends, the TTL being its
        expiry minus its newest end). A story whose windows have expired is left out. Two round trips."""
        live = self.client.zrangebyscore(self.keys.breaking, f"({float(now)!r}", "+inf", withscores=True)
        if not live:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for sid, _ in live:
            pipe.zrange(self.keys.breaking_windows(_s(sid)), 0, -1, withscores=True)
        out = {}
        for (sid, expiry), rows in zip(live, pipe.execute(), strict=True):
            ends = [float(e) for _, e in rows]
            if ends:
                out[_s(sid)] = breaking_run_start(ends, float(expiry) - ends[-1])
        return out

    # -- trending -------------------------------------------------------------------
    def latest_trending(
        self, kind: str, n: int = 50, now: float | None = None
    ) -> tuple[float | None, list[tuple[str, int]]]:
        """The newest written window of ``kind`` ending at or before ``now`` (UTC epoch s; ``None``:
        any) and its top-``n`` ``(key, count)`` pairs. ``now`` matters when ranking a replay at its
        replay clock: windows from after it do not exist yet."""
        top = "+inf" if now is None else now
        # newest first; a window whose key has expired (TTL) is skipped
        for _, score in self.client.zrevrangebyscore(
            self.keys.trending_windows(kind), top, "-inf", start=0, num=20, withscores=True
        ):
            end = float(score)
            rows = self.client.zrevrange(self.keys.trending(kind, end), 0, n - 1, withscores=True)
            if rows:
                return end, [(_s(k), int(v)) for k, v in rows]
        return None, []

    def recent_windows(self, kind: str, now: float, since: float) -> list[float]:
        """Ends (UTC epoch s) of the written windows of ``kind`` in ``(since, now]``, newest first."""
        return [
            float(score)
            for _, score in self.client.zrevrangebyscore(
                self.keys.trending_windows(kind), now, f"({float(since)!r}", withscores=True
            )
        ]

    def window_rows(self, kind: str, end: float, n: int = 50) -> list[tuple[str, int]]:
        """The top-``n`` ``(key, count)`` pairs of the window of ``kind`` ending at ``end`` (``[]`` if gone)."""
        rows = self.client.zrevrange(self.keys.trending(kind, end), 0, n - 1, withscores=True)
        return [(_s(k), int(v)) for k, v in rows]

    def window_counts(self, kind: str, end: float, keys: list[str]) -> dict[str, int]:
        """The counts of ``keys`` in the window of ``kind`` ending at ``end`` (0 for a key not in it)."""
        if not keys:
            return {}
        pipe = self.client.pipeline(transaction=False)
        for k in keys:
            pipe.zscore(self.keys.trending(kind, end), k)
        return {k: int(v or 0) for k, v in zip(keys, pipe.execute(), strict=True)}

    # -- pools ----------------------------------------------------------------------
    def replace_pool(
        self, kind: str, name: str, scores: Mapping[str, float], size: int = POOL_SIZE, ttl_seconds: int = 86400
    ) -> None:
        """Atomically replaces a pool with the top-``size`` of ``scores``: DEL + ZADD + EXPIRE of the
        pool's own key in one MULTI/EXEC (one key, so it also runs on Redis NearDuplicateGroup)."""
        key = self.keys.pool(kind, name)
        top = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:size]
        if not top:
            self.client.delete(key)
            return
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(key)
        pipe.zadd(key, dict(top))
        pipe.expire(key, ttl_seconds)
        pipe.execute()

    def pool(self, kind: str, name: str, n: int = POOL_SIZE) -> list[tuple[str, float]]:
        """Top-``n`` ``(story_id, score)`` of a pool, best first."""
        rows = self.client.zrevrange(self.keys.pool(kind, name), 0, n - 1, withscores=True)
        return [(_s(k), float(v)) for k, v in rows]

    # -- feeds ----------------------------------------------------------------------
    def write_feeds(self, feeds: Mapping[str, dict], ttl_seconds: int = FEED_TTL_SECONDS) -> None:
        """Writes feed JSON documents (``key -> feed dict``) with a TTL, in one pipeline."""
        pipe = self.client.pipeline(transaction=False)
        for key, feed in feeds.items():
            pipe.set(key, json.dumps(feed, separators=(",", ":"), sort_keys=True), ex=int(ttl_seconds))
        pipe.execute()

    def read_feed_raw(self, key: str) -> bytes | None:
        """The stored feed JSON bytes, or ``None`` when missing/expired."""
        return self.client.get(key)

    def active_users(self, since: float, limit: int = 10000) -> list[str]:
        """Users with an event at or after ``since`` (UTC epoch s), most recent first, over every active-reader
        shard (:func:`newsflow.storage.events.active_readers`)."""
        return active_readers(self.client, since, limit, self.keys)
