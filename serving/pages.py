"""Assembly of API pages from precomputed feeds and stored records (pure: no Redis, no HTTP).

* :func:`feed_page` — one page of a precomputed feed document;
* :func:`topic_feed_state` — whether a topic page is a 404, an empty topic or a feed;
* :func:`coverage_page` — a story's full coverage: independent reports (near-duplicate groups) with
  their syndicated copies, and the sources;
* :func:`trending_page` — trending stories, entities and topics, and the breaking set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from newsflow.core.syndication import split_copies
from newsflow.core.topics import SECTIONS
from newsflow.serving.paging import Cursor, page_of

MODEL_TOPICS = frozenset(label.lower() for label in SECTIONS)
"""Topic names the shipped topic model can assign (lower case, as topic feeds are named); article types
(obituary, explainer, historical) are not topics."""


def feed_page(
    kind: str,
    name: str,
    doc: dict | None,
    limit: int,
    stale: str,
    cursor: Cursor | None = None,
    keep: Callable[[list], list] | None = None,
) -> dict:
    """A page of ``limit`` stories of a feed document, the first or the one ``cursor`` points at
    (:mod:`newsflow.serving.paging`), as ``{kind: name, generated_at, stale, count, stories, next_cursor}``;
    ``doc`` ``None`` gives an empty page. ``keep`` (a reader's rules, ``ReaderView.stories``) filters the whole
    feed before it is paged, so a reader's page holds ``limit`` stories they see while the feed has them."""
    stories = (doc or {}).get("stories", [])
    stories, next_cursor = page_of(keep(stories) if keep else stories, cursor, limit)
    return {
        kind: name,
        "generated_at": (doc or {}).get("generated_at"),
        "stale": bool(stale),
        "count": len(stories),
        "stories": stories,
        "next_cursor": next_cursor,
    }


def topic_feed_state(topic: str, doc: dict | None, stale: str) -> str:
    """How ``/v1/topics/{topic}`` and ``/topics/{topic}`` answer a topic's feed read
    (:func:`newsflow.serving.resilience.feed_with_fallback`'s ``(doc, stale)``):

    * ``"unknown"`` (404): neither a feed nor a snapshot, and ``topic`` (lower case) is not one of
      :data:`MODEL_TOPICS`;
    * ``"empty"``: neither a feed nor a snapshot, but the topic model can assign ``topic``: the topic exists
      and has no stories now, an ordinary (not degraded) empty page;
    * ``"feed"``: anything else, as read (fresh, or a snapshot with its stale reason; while Redis is
      unreachable nothing is a 404, and a topic of another model is known by its feed).
    """
    if doc is None and stale == "feed-missing":
        return "empty" if topic in MODEL_TOPICS else "unknown"
    return "feed"


class UnknownTopic(LookupError):
    """A topic page whose :func:`topic_feed_state` is ``"unknown"`` (a 404); the message says why."""

    def __init__(self, topic: str):
        super().__init__(f"no topic {topic!r}: no stories carry it and it is not a label of the topic model")


def article_json(a) -> dict:
    """The public fields of an :class:`ArticleRecord` (times UTC epoch seconds)."""
    return {
        "article_id": a.article_id,
        "title": a.title,
        "url": a.url,
        "source_domain": a.source_domain,
        "source_name": a.source_name,
        "event_time": a.event_time,
        "language": a.language,
        "paywalled": bool(getattr(a, "paywalled", False)),
        "image": getattr(a, "image", "") or "",
        "icon": getattr(a, "icon", "") or "",
    }


def coverage_page(summary: Mapping, entities: Sequence, articles: Iterable) -> dict:
    """A story's full coverage.

    Articles are grouped by near-duplicate group (``cluster_id``); each group is one independent
    report whose lead copy is free to read if any copy is, then has the highest authority (ties:
    earliest, then id). Its other members are syndicated copies when another outlet republished the
    text, else the lead outlet's own duplicates (:func:`newsflow.core.syndication.split_copies`; earliest
    first). Reports are ordered by their lead's event time, then id; sources by article count, then
    domain. ``by_language`` groups the coverage by the language of each report's lead article (one
    event's reports in every language are one story): per language its independent reports' cluster
    ids (in report order), article count and outlets, languages by report count, then code.

    Args:
      summary: the story's summary fields (:meth:`StoryRecord.summary`).
      entities: the story's entities.
      articles: its :class:`ArticleRecord` members.
    """
    articles = list(articles)
    groups: dict[str, list] = {}
    for a in articles:
        groups.setdefault(a.cluster_id, []).append(a)
    reports = []
    for cid, members in groups.items():
        # a free copy leads over a paywalled one, then the highest authority, earliest, id
        members.sort(key=lambda a: (bool(getattr(a, "paywalled", False)), -a.authority, a.event_time, a.article_id))
        head = members[0]
        copies = sorted(members[1:], key=lambda a: (a.event_time, a.article_id))
        split = split_copies(head.source_domain, copies)
        reports.append(
            {
                "cluster_id": cid,
                "article": article_json(head),
                "syndicated_copies": [article_json(c) for c in split.syndicated],
                "own_duplicates": [article_json(c) for c in split.own_duplicates],
            }
        )
    reports.sort(key=lambda r: (r["article"]["event_time"], r["article"]["article_id"]))
    sources: dict[str, int] = {}
    for a in articles:
        sources[a.source_domain] = sources.get(a.source_domain, 0) + 1
    by_language = _by_language(reports, articles)
    return dict(
        summary,
        entities=entities,
        coverage={
            "articles": len(articles),
            "independent_reports": len(reports),
            "syndicated_copies": sum(len(r["syndicated_copies"]) for r in reports),
            "own_duplicates": sum(len(r["own_duplicates"]) for r in reports),
            "sources": len(sources),
            "languages": len(by_language),
        },
        by_language=by_language,
        sources=[{"domain": d, "articles": n} for d, n in sorted(sources.items(), key=lambda kv: (-kv[1], kv[0]))],
        reports=reports,
    )


def _by_language(reports: list[dict], articles: list) -> list[dict]:
    """``[{"language", "reports": [cluster_id ...], "articles", "outlets": [domain ...]}]`` (see
    :func:`coverage_page`); a missing language is ``"und"``."""
    lang_of_report = {r["cluster_id"]: (r["article"].get("language") or "und") for r in reports}
    groups: dict[str, dict] = {}
    for r in reports:
        g = groups.setdefault(lang_of_report[r["cluster_id"]], {"reports": [], "articles": 0, "outlets": set()})
        g["reports"].append(r["cluster_id"])
    for a in articles:
        g = groups.get(lang_of_report.get(a.cluster_id, ""))
        if g is not None:
            g["articles"] += 1
            g["outlets"].add(a.source_domain)
    return [
        {"language": lang, "reports": g["reports"], "articles": g["articles"], "outlets": sorted(g["outlets"])}
        for lang, g in sorted(groups.items(), key=lambda kv: (-len(kv[1]["reports"]), kv[0]))
    ]


def trending_page(window_end, stories, chips, topic_rows, breaking: Mapping[str, float], records: Mapping) -> dict:
    """Trending stories/entities/topics and the breaking set (newest first).

    Args:
      window_end: end of the latest trending window (UTC epoch s) or ``None``.
      stories: ``[(StoryRecord, new_articles)]`` (:func:`newsflow.core.ranking.front_page.trending_stories`).
      chips: entity chips (:func:`newsflow.core.ranking.front_page.entity_chips`).
      topic_rows: ``[(topic, new_articles)]``, highest first.
      breaking: ``{story_id: breaking_since}`` (stories that meet the banner rule).
      records: ``{story_id: StoryRecord}`` of the breaking stories (missing ones are skipped).
    """
    return {
        "window_end": window_end,
        "stories": [dict(rec.summary(), new_articles=c) for rec, c in stories],
        "entities": chips,
        "topics": [{"topic": k, "new_articles": c} for k, c in topic_rows],
        "breaking": [
            dict(records[sid].summary(), breaking_since=since)
            for sid, since in sorted(breaking.items(), key=lambda kv: -kv[1])
            if sid in records
        ],
    }
