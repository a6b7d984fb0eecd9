"""Presentation helpers of the reader web UI (pure: no Redis, no HTTP): the Jinja2 environment and its
filters (UTC times, "3 h ago", outlets), the local-redirect guard, and the context builders of the
full-coverage page and the For You "why" labels. :mod:`newsflow.serving.web` holds the handlers.
"""

from __future__ import annotations

import math
import os
import time
from urllib.parse import quote

import jinja2

from newsflow.core.coverage import TOP_COVERAGE, ReportFacts, coverage_order, timeline_summary
from newsflow.core.outlets import outlet
from newsflow.core.ranking.rerank import is_blocked
from newsflow.schemas import UserProfile
from newsflow.serving.paging import Cursor, encode_cursor, page_of

TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


def utc_text(epoch) -> str:
    """``"2026-12-01 03:10 UTC"`` for UTC epoch seconds; ``""`` for none or a non-number."""
    try:
        t = float(epoch)
    except (TypeError, ValueError):
        return ""
    if not math.isfinite(t) or t <= 0:
        return ""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t))


def iso_text(epoch) -> str:
    """RFC 3339 UTC (``2026-12-01T03:10:00Z``) for a ``<time datetime>`` attribute; ``""`` for none."""
    try:
        t = float(epoch)
    except (TypeError, ValueError):
        return ""
    if not math.isfinite(t) or t <= 0:
        return ""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def ago_text(epoch, now: float) -> str:
    """How long before ``now`` (UTC epoch s) ``epoch`` was: ``"just now"``, ``"5 min ago"``,
    ``"3 h ago"``, ``"2 days ago"``; ``""`` for none."""
    try:
        d = float(now) - float(epoch)
    except (TypeError, ValueError):
        return ""
    if not math.isfinite(d):
        return ""
    if d < 60:
        return "just now"
    if d < 3600:
        return f"{int(d // 60)} min ago"
    if d < 86400:
        return f"{int(d // 3600)} h ago"
    days = int(d // 86400)
    return "1 day ago" if days == 1 else f"{days} days ago"


def safe_next(value: str | None, default: str = "/") -> str:
    """A local path to redirect to: ``value`` when it starts with one ``/`` (not ``//`` nor ``/\\``), else
    ``default`` (no open redirect)."""
    if not value or not value.startswith("/") or value.startswith("//") or value.startswith("/\\"):
        return default
    if any(c in value for c in "\r\n\t"):
        return default
    return value


def templates() -> jinja2.Environment:
    """The Jinja2 environment of :data:`TEMPLATE_DIR` (autoescaping on, filters ``utc``, ``iso``,
    ``outlet``, ``urlpart``)."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        autoescape=jinja2.select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["utc"] = utc_text
    env.filters["iso"] = iso_text
    env.filters["outlet"] = outlet
    env.filters["language_name"] = language_name
    env.filters["urlpart"] = lambda v: quote(str(v), safe="")
    return env


def language_name(code: str | None) -> str:
    """English name of a language code (CLDR via ``babel``): ``"es"`` -> ``"Spanish"``, ``"pt-br"`` ->
    ``"Portuguese"``; ``"und"``/empty -> ``"Unknown language"``; an unknown code is returned as is."""
    from babel import Locale

    code = (code or "").strip().lower()
    if not code or code == "und":
        return "Unknown language"
    return Locale.parse("en").languages.get(code.split("-")[0], code)


def coverage_context(
    cov: dict,
    articles,
    profile: UserProfile | None,
    prefer_sources: frozenset = frozenset(),
    cursor: Cursor | None = None,
) -> dict:
    """Template context of a full-coverage page from :func:`newsflow.serving.pages.coverage_page`'s ``cov``.

    The lead report, in order of precedence: the earliest article (an independent report's lead or a
    syndicated copy) from an outlet in ``prefer_sources`` that the reader does not block; the story's
    representative article unless the reader blocks its outlet; the earliest report from an outlet
    they do not block; none (the page says every outlet is blocked). Free reports come first: a
    paywalled lead gives way to the earliest free report the reader does not block, and among
    preferred outlets a free article wins.

    The other reports are paged (``cursor``: :mod:`newsflow.serving.paging`, ids are near-duplicate group
    ids): the first page is the top coverage of :func:`newsflow.core.coverage.coverage_order` (at most
    :data:`~newsflow.core.coverage.TOP_COVERAGE`, two per outlet), the next pages every other report, earliest
    first, :data:`~newsflow.core.coverage.TOP_COVERAGE` at a time (``page``, ``next_cursor``, ``page_start``:
    the 1-based position of the page's first report). ``timeline`` summarises every article
    (:func:`newsflow.core.coverage.timeline_summary`): ``{"first", "latest": article row, "busiest": [(hour
    start, count)], "articles", "hours"}``, an article row marking a syndicated copy (``copy_of``).
    """
    reports = cov["reports"]
    blocked = profile.block_sources if profile else frozenset()
    lead_url = cov.get("url")
    lead = next((r for r in reports if r["article"]["url"] == lead_url), reports[0] if reports else None)
    preferred = [
        (bool(a.get("paywalled")), a["event_time"], a["article_id"], r, a)
        for r in reports
        for a in [r["article"], *r["syndicated_copies"], *r.get("own_duplicates", [])]
        if outlet(a["source_domain"]) in prefer_sources and outlet(a["source_domain"]) not in blocked
    ]
    lead_is_preferred = False
    if preferred:
        *_, report, article = min(preferred, key=lambda p: (p[0], p[1], p[2]))
        lead = report if article is report["article"] else {"article": article, "syndicated_copies": []}
        lead_is_preferred = True
    elif lead is not None and outlet(lead["article"]["source_domain"]) in blocked:
        lead = next((r for r in reports if outlet(r["article"]["source_domain"]) not in blocked), None)
    if not lead_is_preferred and lead is not None and lead["article"].get("paywalled"):
        # a free report leads over a paywalled one (the earliest free report the reader does not block)
        free = next(
            (
                r
                for r in reports
                if not r["article"].get("paywalled") and outlet(r["article"]["source_domain"]) not in blocked
            ),
            None,
        )
        lead = free or lead
    others = [r for r in reports if r is not lead]
    page, next_cursor, start = _report_page(others, articles, cursor)
    outlets = sorted({outlet(s["domain"]) for s in cov["sources"]})
    return {
        "story": cov,
        "lead": lead,
        "lead_is_preferred": lead_is_preferred,
        "lead_blocked": bool(profile and lead is None and reports),
        "others_count": len(others),
        "page": page,
        "page_start": start,
        "next_cursor": next_cursor,
        "first_page": cursor is None,
        # the page's reports by language (the groups of ``cov["by_language"]``), when there are several
        "others_by_language": _others_by_language(cov, page),
        "timeline": _timeline(reports, articles),
        "outlets": outlets,
        "outlet_count": len(outlets),
        "topic_blocked": bool(profile and is_blocked({"domain": "", "topics": cov.get("topics", [])}, profile)),
    }


def _report_page(others: list[dict], articles, cursor: Cursor | None) -> tuple[list[dict], str | None, int]:
    """``(reports, next cursor, 1-based position of the first)`` of the page ``cursor`` names (see
    :func:`coverage_context`)."""
    authority = {a.article_id: float(a.authority or 0.0) for a in articles}
    facts = [
        ReportFacts(
            r["cluster_id"],
            outlet(r["article"]["source_domain"]),
            authority.get(r["article"]["article_id"], 0.0),
            float(r["article"]["event_time"] or 0.0),
            bool(r["article"].get("paywalled")),
        )
        for r in others
    ]
    top, rest = coverage_order(facts)
    by_id = {r["cluster_id"]: r for r in others}
    ordered = [by_id[i] for i in top + rest]
    if cursor is None:
        more = encode_cursor(len(top), top[-1]) if top and rest else None
        return ordered[: len(top)], more, 1
    page, more = page_of(ordered, cursor, TOP_COVERAGE, id_of=lambda r: r["cluster_id"])
    start = ordered.index(page[0]) + 1 if page else len(ordered) + 1
    return page, more, start


def _timeline(reports: list[dict], articles) -> dict:
    """The story's timeline in brief (see :func:`coverage_context`)."""
    copy_of = {}
    for r in reports:
        for c in [*r["syndicated_copies"], *r.get("own_duplicates", [])]:
            copy_of[c["article_id"]] = r["article"]["source_domain"]
    articles = list(articles)
    brief = timeline_summary([(a.event_time, a.article_id) for a in articles])
    by_id = {a.article_id: a for a in articles}

    def row(aid: str) -> dict | None:
        a = by_id.get(aid)
        if a is None:
            return None
        return {
            "time": a.event_time,
            "outlet": outlet(a.source_domain),
            "source_domain": a.source_domain,
            "title": a.title,
            "url": a.url,
            "copy_of": copy_of.get(a.article_id, ""),
        }

    return {
        "first": row(brief.first_id),
        "latest": row(brief.latest_id) if brief.latest_id != brief.first_id else None,
        "busiest": brief.busiest,
        "articles": brief.articles,
        "hours": brief.hours,
    }


def _others_by_language(cov: dict, others: list[dict]) -> list[tuple[str, list[dict]]]:
    """``[(language, reports)]`` in the order of ``cov["by_language"]``; ``[]`` for a one-language story."""
    groups = cov.get("by_language") or []
    if len(groups) < 2:
        return []
    lang_of = {cid: g["language"] for g in groups for cid in g["reports"]}
    out = []
    for g in groups:
        rs = [r for r in others if lang_of.get(r["cluster_id"]) == g["language"]]
        if rs:
            out.append((g["language"], rs))
    return out


def why_labels(item: dict, profile: UserProfile | None, velocity: dict) -> list[str]:
    """Why a story is on the reader's For You page, most specific first.

    Reads the feed item's ``why`` signals when the feed builder attached them
    (:func:`newsflow.core.ranking.personalize.personal_signals`: ``followed``, ``interest``,
    ``covisitation``, ``similar_readers``, ``trending``, ``top``), else falls back to the profile and
    ``velocity`` (``{story_id: new articles in the latest trending window}``).

    Returns:
      Labels among "Breaking news", "You follow <topic>", "You follow <outlet>", "Similar to stories
      you read", "Readers like you read this", "Trending now"; "Top story in your edition" when none
      applies.
    """
    out = []
    why = item.get("why") if isinstance(item.get("why"), dict) else {}
    if item.get("breaking"):
        out.append("Breaking news")
    if profile is not None:
        for t in item.get("topics") or ():
            if str(t).lower() in profile.follow_topics:
                out.append(f"You follow {str(t).lower()}")
                break
        src = outlet(str(item.get("domain", "")))
        if src in profile.follow_sources:
            out.append(f"You follow {src}")
    if why:
        if _num(why.get("interest")) >= INTEREST_LABEL_MIN or why.get("top") == "interest":
            out.append("Similar to stories you read")
        if _num(why.get("covisitation")) > 0 or _num(why.get("similar_readers")) > 0:
            out.append("Readers like you read this")
        if _num(why.get("trending")) > 0 and "Breaking news" not in out:
            out.append("Trending now")
    else:
        if velocity.get(item.get("story_id"), 0) > 0 and "Breaking news" not in out:
            out.append("Trending now")
        if profile is not None and profile.interest is not None and profile.clicks > 0 and not out:
            out.append("Similar to stories you read")
    return out or ["Top story in your edition"]


MAX_SEEN_REPORTS = 500
"""Independent reports remembered per story view (the earliest ones), which bounds the seen-hash."""


def coverage_snapshot(cov: dict, now: float) -> dict:
    """What a reader saw of a story's coverage at ``now`` (UTC epoch s), stored to tell them later what
    changed: ``{"t", "title", "outlets": [outlet], "reports": [cluster id]}`` (reports earliest first,
    at most :data:`MAX_SEEN_REPORTS`)."""
    return {
        "t": float(now),
        "title": cov.get("title") or "",
        "outlets": sorted({outlet(s["domain"]) for s in cov["sources"]}),
        "reports": [r["cluster_id"] for r in cov["reports"][:MAX_SEEN_REPORTS]],
    }


def coverage_changes(seen: dict | None, cov: dict, now: float) -> dict | None:
    """What changed in a story's coverage since the reader last looked.

    Args:
      seen: the stored :func:`coverage_snapshot` of their last view, or ``None`` (first view).
      cov: the coverage now (:func:`newsflow.serving.pages.coverage_page`).
      now: UTC epoch seconds.

    Returns:
      ``None`` on a first view or a malformed snapshot, else ``{"since": last view time, "new_outlets":
      [outlet], "new_reports": [report dict], "old_title": previous headline or "" when unchanged}``
      (``new_reports``: independent reports whose near-duplicate group was not there, earliest first).
    """
    if not seen:
        return None
    try:
        since = float(seen["t"])
        old_outlets = {str(o) for o in seen.get("outlets", [])}
        old_reports = {str(c) for c in seen.get("reports", [])}
        old_title = str(seen.get("title") or "")
    except (KeyError, TypeError, ValueError):
        return None
    now_outlets = sorted({outlet(s["domain"]) for s in cov["sources"]})
    title = cov.get("title") or ""
    return {
        "since": since,
        "new_outlets": [o for o in now_outlets if o not in old_outlets],
        "new_reports": [r for r in cov["reports"] if r["cluster_id"] not in old_reports],
        "old_title": old_title if old_title and old_title != title else "",
    }


def is_inferred(labels: list[str]) -> bool:
    """Whether :func:`why_labels` placed a story by inference (interest, similar readers, trending,
    edition) rather than by a follow or breaking news: only those can be removed as an interest."""
    return not any(label.startswith("You follow") or label == "Breaking news" for label in labels)


INTEREST_LABEL_MIN = 0.3
"""Cosine between a story and the reader's interest vector from which "Similar to stories you read" shows."""


def _num(value) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0
