"""A story's title: one of its members' headlines, cleaned of wire furniture, complete and representative.

Rules (issue 32, item 3), applied by :func:`choose_title` over a story's independent reports:

1. **Clean** every headline (:func:`clean_headline`): strip the wire slugs and source tags below. The lists
   come from the 4,588 bundled aggregator headlines (UCI News Aggregator, March 2014), where they appear
   as written here, and from Reuters' own slug conventions (a run of capitals and a hyphen before the
   headline: "UPDATE 2-", "RPT-", "US STOCKS-").

   * Leading slugs, repeated ("RPT-UPDATE 1-..."): :data:`WIRE_SLUGS` (``UPDATE 2-``, ``WRAPUP 1-``,
     ``TABLE-``, ``HIGHLIGHTS-``, ...), and any run of two or more all-capital words right before a ``-``
     that is followed by the headline ("US STOCKS-", "GLOBAL MARKETS-", "EM ASIA FX-", "ECB FOCUS-"),
     unless the whole headline is in capitals ("THE BACHELOR THE THREE-HOUR LIVE SEASON FINALE").
   * Trailing tags: anonymous attributions (``-source``, ``- sources``, ``- traders``, ``- analysts``,
     ``— Report``), update and media markers (``-- Update``, ``-- 2nd Update``, ``- VIDEO``, ``- WATCH``,
     ``- Analyst Blog``, ``- Quick Facts``), a site name after ``" | "`` (HTML ``<title>`` convention:
     "... | The Republic"), and a site name after ``" - "`` that names the member's outlet ("... - WDRB 41
     Louisville News" from wdrb.com). A named speaker ("... - Carney") is part of the news and stays.

2. **Complete**: a headline ending in "..." or "…" (a feed's truncation: 630 of the 4,588) is used only
   when no member has a complete one.
3. **Not a body sentence**: a headline that reads as a sentence — ending in one full stop that is not an
   abbreviation's ("Stacy Keibler has married Jared Pobre.", 27 of the 4,588 end so, mostly body
   sentences an outlet put in its feed) — is used only when nothing else is left.
4. **Representative**: among the remaining reports whose authority is within :data:`AUTHORITY_MARGIN` of
   the best one's (the high-authority reports), the headline whose TF-IDF vector is closest (cosine) to
   the story's centroid, i.e. the one sharing most weight with what the reports say together
   ("Stocks to Watch: American Eagle, Boyd Gaming, Dick's..." loses to a Dick's headline in a story of
   Dick's results). Ties: higher authority, earlier event time, smaller article id.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from newsflow.core.outlets import outlet

WIRE_SLUGS = (
    "UPDATE",
    "WRAPUP",
    "RPT",
    "REFILE",
    "CORRECTED",
    "CORRECTION",
    "TABLE",
    "HIGHLIGHTS",
    "TIMELINE",
    "FACTBOX",
    "EXCLUSIVE",
    "ANALYSIS",
    "INTERVIEW",
    "INSIGHT",
    "BRIEF",
    "BREAKINGVIEWS",
    "FOREX",
    "PRECIOUS",
    "METALS",
    "TREASURIES",
    "OIL",
    "GRAINS",
    "SOFTS",
)
"""Single-word leading wire slugs (optionally numbered, "UPDATE 2"), stripped before a ``-``."""

TRAILING_TAGS = (
    "source",
    "sources",
    "source says",
    "sources say",
    "report",
    "reports",
    "traders",
    "analyst",
    "analysts",
    "update",
    "video",
    "watch",
    "photos",
    "analyst blog",
    "quick facts",
)
"""Trailing tags (case-insensitive) stripped after ``-``, ``--`` or ``—``; ``update`` also numbered
("-- 2nd Update")."""

AUTHORITY_MARGIN = 0.1
"""Reports with authority >= best - this are "high-authority" for rule 4. Article authority is 0.7 x source
authority + 0.3 x quality and the source tiers of ``data/SOURCES.md`` are 0.95 (wire), 0.90 (record), 0.75
(national), 0.60 (popular): a wire's and a paper of record's reports (0.035 apart) compete for the title, a
national outlet's against a popular site's (0.105 apart) do not."""

MAX_CANDIDATES = 25
"""At most this many high-authority reports (by authority, then time) are compared with the centroid, so
the cost per story update is bounded."""

_SLUGS = "|".join(WIRE_SLUGS)
_SLUG_RE = re.compile(rf"^\s*(?:(?:{_SLUGS})(?: \d+)?|[A-Z]{{2,}}(?: [A-Z]{{2,}})+)\s?-(?=\s?[\"'‘“A-Z0-9$])")
_TAGS = "|".join(re.escape(t) for t in TRAILING_TAGS)
_TAIL_RE = re.compile(rf"\s*(?:--?|—|–)\s*(?:\d+(?:st|nd|rd|th)\s+)?(?:{_TAGS})\s*$", re.I)
_PIPE_RE = re.compile(r"\s+\|\s+[^|]{1,60}$")
_DASH_SITE_RE = re.compile(r"\s+[-–—]\s+([^-–—]{2,60})$")
_ELLIPSIS_RE = re.compile(r"(?:\.\.\.|…)\s*$")
_ABBREV_RE = re.compile(r"(?:\b[A-Za-z]\.){2,}$|\b[A-Z][a-z]{0,3}\.$|\b(?:[ap]\.m|etc|Inc|Co|Corp|Ltd|Jr|Sr|St|No)\.$")
_WORD_RE = re.compile(r"[a-z0-9]+")


def _site_label(domain: str) -> str:
    """The outlet's name part, letters and digits only: ``"www.wdrb.com"`` -> ``"wdrb"``."""
    o = outlet(domain) if domain else ""
    return re.sub(r"[^a-z0-9]", "", o.split(".")[0]) if o else ""


def clean_headline(title: str, domain: str = "") -> str:
    """``title`` without the wire slugs and source tags of rule 1 (module docstring).

    Args:
      title: a member's headline.
      domain: the member's source domain (a trailing ``" - <site name>"`` is stripped when it names it).

    Returns:
      The cleaned headline, whitespace collapsed; ``title`` (collapsed) when cleaning would leave nothing.
    """
    text = " ".join((title or "").split())
    out = text
    if not out.isupper():
        while True:
            m = _SLUG_RE.match(out)
            if not m:
                break
            out = out[m.end() :].lstrip()
    label = _site_label(domain)
    while True:
        before = out
        out = _TAIL_RE.sub("", out)
        if len(_PIPE_RE.sub("", out).split()) >= 3:
            out = _PIPE_RE.sub("", out)
        m = _DASH_SITE_RE.search(out)
        if m and label and len(label) >= 3:
            name = re.sub(r"[^a-z0-9]", "", _ELLIPSIS_RE.sub("", m.group(1)).lower())
            if name and (name.startswith(label) or label.startswith(name)):
                out = out[: m.start()]
        if out == before:
            break
    out = out.strip()
    return out if out else text


def is_truncated(headline: str) -> bool:
    """Whether ``headline`` ends in "..." or "…" (a feed's truncation)."""
    return bool(_ELLIPSIS_RE.search(headline or ""))


def is_sentence(headline: str) -> bool:
    """Whether ``headline`` reads as a body sentence: it ends in one full stop that is not an abbreviation's
    ("U.S.", "Feb.", "p.m.") nor an ellipsis."""
    h = (headline or "").rstrip()
    if not h.endswith(".") or is_truncated(h):
        return False
    return not _ABBREV_RE.search(h)


def choose_title(
    reports: Iterable[list],
    centroid: dict[str, float],
    vector: Callable[[str], dict[str, float]],
) -> list | None:
    """The report whose headline is the story's title (rules 2-4 of the module docstring).

    Args:
      reports: the story's independent reports as ``[t, article id, authority, domain, title, url]``
        (:attr:`newsflow.core.story_state.StoryState.groups` values), titles already cleaned.
      centroid: the story's sparse TF-IDF centroid, term -> weight (any scale).
      vector: headline -> its TF-IDF vector, term -> weight (unit length), the one the centroid sums.

    Returns:
      The chosen report (one of ``reports``), or ``None`` when there is none with a headline.
    """
    with_title = [r for r in reports if r[4]]
    if not with_title:
        return None
    complete = [r for r in with_title if not is_truncated(r[4])] or with_title
    pool = [r for r in complete if not is_sentence(r[4])] or complete
    best_authority = max(r[2] for r in pool)
    high = sorted((r for r in pool if r[2] >= best_authority - AUTHORITY_MARGIN), key=_order)[:MAX_CANDIDATES]
    if len(high) == 1 or not centroid:
        return high[0]

    def closeness(r: list) -> float:
        v = vector(r[4])
        return sum(w * centroid.get(term, 0.0) for term, w in v.items())

    return max(high, key=lambda r: round(closeness(r), 9))  # the first of equals in `high`'s order


def _order(r: list) -> tuple:
    """Highest authority, then earliest event time, then smallest article id."""
    return (-r[2], r[0], r[1])
