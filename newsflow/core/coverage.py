"""Full coverage at scale: which reports a story's first page shows, and a timeline that summarises (pure).

A story covered by 300 outlets cannot list every report first. :func:`coverage_order` picks the top
coverage — independent reports (one per near-duplicate group), high-authority first, diverse across
outlets (every outlet's best report before any outlet's second, at most :data:`PER_OUTLET` per outlet),
free before paywalled — and puts every other report after it, earliest first, for the "show more" pages.
:func:`timeline_summary` reduces the story's articles to its first and latest report and its busiest hours.

Inputs are plain tuples (:class:`ReportFacts`, ``(event_time, id)`` pairs); the serving tier maps its coverage
dicts onto them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

TOP_COVERAGE = 30
"""Reports on a full-coverage page (the first page's top coverage and each "show more" page)."""
PER_OUTLET = 2
"""Most reports one outlet places in the top coverage."""
BUSIEST_HOURS = 3
"""Hours :func:`timeline_summary` names as the busiest."""


class ReportFacts(NamedTuple):
    """What the order of one independent report depends on.

    Attributes:
      report_id: its near-duplicate group id (unique within a story).
      outlet: the registrable domain of its lead article.
      authority: the lead article's authority, 0..1 (higher first).
      event_time: the lead article's event time, UTC epoch seconds (earlier first on ties).
      paywalled: whether the lead article is paywalled (free reports first).
    """

    report_id: str
    outlet: str
    authority: float
    event_time: float
    paywalled: bool = False


def coverage_order(
    reports: Iterable[ReportFacts], limit: int = TOP_COVERAGE, per_outlet: int = PER_OUTLET
) -> tuple[list[str], list[str]]:
    """``(top, rest)``: the report ids of the top coverage and of every other report.

    Within an outlet, reports rank by (free first, authority descending, event time, id); an outlet's
    ranks below ``per_outlet`` are candidates. ``top`` is the first ``limit`` candidates ordered by
    (rank in their outlet, free first, authority descending, event time, id): each outlet's best report
    before any outlet's second. ``rest`` holds every report not in ``top``, by (event time, id).

    Raises:
      ValueError: two reports share a ``report_id`` (one report per near-duplicate group), or ``limit`` or
        ``per_outlet`` is below 1.
    """
    if limit < 1 or per_outlet < 1:
        raise ValueError(f"limit and per_outlet must be >= 1, got {limit} and {per_outlet}")
    reports = list(reports)
    ids = [r.report_id for r in reports]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"report {dup!r} appears twice: a story has one report per near-duplicate group")

    def merit(r: ReportFacts):
        return (bool(r.paywalled), -float(r.authority), float(r.event_time), r.report_id)

    rank: dict[str, int] = {}
    seen: dict[str, int] = {}
    for r in sorted(reports, key=merit):
        rank[r.report_id] = seen.get(r.outlet, 0)
        seen[r.outlet] = rank[r.report_id] + 1
    candidates = sorted(
        (r for r in reports if rank[r.report_id] < per_outlet), key=lambda r: (rank[r.report_id], *merit(r))
    )
    top = [r.report_id for r in candidates[:limit]]
    chosen = set(top)
    rest = [
        r.report_id
        for r in sorted(reports, key=lambda r: (float(r.event_time), r.report_id))
        if r.report_id not in chosen
    ]
    return top, rest


class Timeline(NamedTuple):
    """A story's timeline in brief (see :func:`timeline_summary`).

    Attributes:
      first_id / latest_id: the earliest and the latest article (``""`` when there is none).
      busiest: ``[(hour start, UTC epoch s, articles in that hour)]``, most articles first, then earlier.
      articles: how many articles the story has.
      hours: how many distinct clock hours (UTC) they fall in.
    """

    first_id: str
    latest_id: str
    busiest: list[tuple[int, int]]
    articles: int
    hours: int


def timeline_summary(items: Sequence[tuple[float, str]], busiest: int = BUSIEST_HOURS) -> Timeline:
    """Summarises ``items`` (``(event time UTC epoch s, article id)``): the first report (least
    ``(time, id)``), the latest (greatest), and the ``busiest`` clock hours (UTC, ``[h, h + 3600)``) by
    article count, ties to the earlier hour."""
    if not items:
        return Timeline("", "", [], 0, 0)
    ordered = sorted((float(t), str(i)) for t, i in items)
    per_hour: dict[int, int] = {}
    for t, _ in ordered:
        hour = int(t // 3600) * 3600
        per_hour[hour] = per_hour.get(hour, 0) + 1
    top = sorted(per_hour.items(), key=lambda kv: (-kv[1], kv[0]))[: max(0, busiest)]
    return Timeline(ordered[0][1], ordered[-1][1], top, len(ordered), len(per_hour))
