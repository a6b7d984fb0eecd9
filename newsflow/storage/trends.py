"""Trending windows: records, input parsing and the Redis writer behind the streaming job's trending step.

A trending window counts *distinct* new articles per story, per entity and per topic in
a sliding event-time window (1 hour every 5 minutes by default). A story with more than
20 in a window is breaking (:func:`newsflow.core.ranking.decay.is_breaking`); its decay λ
switches to 0.5 while it stays in the breaking set.

Redis keys written by :func:`write_trends` (the table is in :mod:`newsflow.storage.keys`):
``Keys.trending(kind, window_end)`` ZSET key -> count (top ``top_n``, expires after
``2 × window``), ``Keys.trending_windows(kind)`` ZSET of written window ends, and for
breaking stories ``Keys.breaking`` / ``Keys.breaking_windows`` plus a priority re-crawl request
(``Keys.crawl_priority``) for the sources of each newly breaking story.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from newsflow.schemas.trend import TREND_SCHEMA, TrendCount, TrendInput  # noqa: F401  (re-exported; records live in schemas/)
from newsflow.storage.keys import Keys
from newsflow.storage.priority import request_priority_recrawl
from newsflow.storage.ranking import RankingStore


def _entity_text(e: Any) -> str:
    if isinstance(e, str):
        return e.strip()
    if isinstance(e, dict):
        return str(e.get("text") or e.get("name") or "").strip()
    if isinstance(e, (list, tuple)) and e:
        return str(e[0]).strip()
    return ""


def parse_trend_input(element: Any) -> TrendInput:
    """Reads ``article_id``, ``story_id``, ``topics``, ``entities`` and the optional ``counts_from``
    from a dict or NamedTuple.

    Entities may be strings, ``{"text"|"name": ...}`` dicts or ``(text, label)`` pairs;
    topics are lower-cased; empty labels are dropped; duplicates removed (order kept).

    Raises:
      ValueError: ``article_id`` or ``story_id`` missing/empty, topics/entities not lists, or a
        ``counts_from`` that is not a finite number.
    """
    get = element.get if isinstance(element, dict) else (lambda k, d=None: getattr(element, k, d))
    aid, sid = get("article_id"), get("story_id")
    if not isinstance(aid, str) or not aid:
        raise ValueError(f"article_id missing or not a string: {aid!r}")
    if not isinstance(sid, str) or not sid:
        raise ValueError(f"story_id missing or not a string: {sid!r}")
    topics, entities = get("topics") or (), get("entities") or ()
    if isinstance(topics, (str, bytes)) or isinstance(entities, (str, bytes)):
        raise ValueError("topics and entities must be lists, not strings")
    t = tuple(dict.fromkeys(str(x).strip().lower() for x in topics if str(x).strip()))
    e = tuple(dict.fromkeys(x for x in (_entity_text(v) for v in entities) if x))
    cf = get("counts_from")
    if cf is not None:
        if isinstance(cf, bool) or not isinstance(cf, (int, float)) or not math.isfinite(cf):
            raise ValueError(f"counts_from must be a finite number of epoch seconds, got {cf!r}")
        cf = float(cf)
    return TrendInput(aid, sid, t, e, cf)


MAX_INDEXED_WINDOWS = 2016


def write_trends(
    client,
    trends: Sequence[TrendCount],
    window_seconds: float,
    top_n: int = 100,
    breaking_ttl_seconds: float = 3600.0,
    keys: Keys = Keys(),
) -> list[str]:
    """Writes window counts to Redis, updates the breaking set, asks for re-crawls.

    Args:
      client: ``redis.Redis`` client.
      trends: window counts (any kinds/windows); idempotent for a replayed window.
      window_seconds: window size (keys expire after twice this).
      top_n: keys kept per window and kind.
      breaking_ttl_seconds: a breaking story leaves the set this long after the end of the
        last window in which it was breaking.
      keys: the Redis key layout.

    Returns:
      Story ids that became breaking (re-crawl requested for their sources).
    """
    trends = sorted(trends, key=lambda t: (t.window_end, t.kind, t.key))
    pipe = client.pipeline(transaction=False)
    touched = set()
    for t in trends:
        key = keys.trending(t.kind, t.window_end)
        pipe.zadd(key, {t.key: int(t.count)})
        touched.add((t.kind, t.window_end))
    ttl = int(2 * window_seconds)
    for kind, end in touched:
        key = keys.trending(kind, end)
        pipe.zremrangebyrank(key, 0, -(top_n + 1))
        pipe.expire(key, ttl)
        pipe.zadd(keys.trending_windows(kind), {str(int(end)): float(end)})
        # Keep the newest MAX_INDEXED_WINDOWS windows in the index (bounded, ~7 days at a 5-minute
        # period), not only those near the newest one: a replay ranked at its own clock must still
        # find the windows around that clock when newer ones exist. Expired windows are skipped
        # when read.
        pipe.zremrangebyrank(keys.trending_windows(kind), 0, -(MAX_INDEXED_WINDOWS + 1))
    pipe.execute()
    store = RankingStore(client, keys=keys)
    breaking = [(t.key, t.window_end, breaking_ttl_seconds) for t in trends if t.kind == "story" and t.breaking]
    fresh = store.mark_breaking(breaking)
    if breaking:
        client.expire(keys.breaking, int(breaking_ttl_seconds) * 2)
    # Every breaking story asks for its re-crawl at the earliest window end it is breaking in (not only the
    # newly breaking ones: which writer sees a story first depends on bundling, the requests must not).
    when: dict[str, float] = {}
    for sid, end, _ in breaking:
        when[sid] = min(end, when.get(sid, end))
    for sid in sorted(when):
        request_priority_recrawl(
            client, story_sources(client, sid, keys=keys), f"breaking:story {sid}", when[sid], keys=keys
        )
    return list(dict.fromkeys(fresh))


def story_sources(client, story_id: str, limit: int = 20, keys: Keys = Keys()) -> list[str]:
    """Source domains covering a story: its representative domain, then its newest articles'."""
    out = []
    dom = client.hget(keys.story(story_id), "domain")
    if dom:
        out.append(dom.decode() if isinstance(dom, bytes) else str(dom))
    ids = client.zrevrange(keys.story_articles(story_id), 0, limit - 1)
    if ids:
        pipe = client.pipeline(transaction=False)
        for aid in ids:
            pipe.hget(keys.article(aid.decode() if isinstance(aid, bytes) else aid), "source_domain")
        out += [d.decode() if isinstance(d, bytes) else str(d) for d in pipe.execute() if d]
    return list(dict.fromkeys(x.lower() for x in out if x))[:limit]


def trends_to_keys(inp: TrendInput) -> Iterable[tuple[tuple[str, str], tuple[str, tuple]]]:
    """``((kind, key), (article_id, topics))`` for the story, each entity and each topic."""
    value = (inp.article_id, inp.topics)
    yield ("story", inp.story_id), value
    for e in inp.entities:
        yield ("entity", e), value
    for t in inp.topics:
        yield ("topic", t), value
