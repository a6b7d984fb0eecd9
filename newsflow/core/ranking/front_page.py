"""What the front page shows besides the feed: the breaking banner, trending stories and entity chips.

**Breaking banner** (:func:`banner_ok`, :func:`banner`). A story is in the banner when, at ``now``:

* it meets the breaking rule of :mod:`newsflow.core.ranking.decay` — more than 20 new articles in the
  latest trending window (one hour, the streaming job's trending step) ending within the last hour;
  the breaking set keeps a story an hour after its last breaking window, so the set alone is not proof;
* it is not evergreen (an obituary, historical piece or explainer, or a ``service`` article: slow
  stories, λ 0.02), whatever its burst;
* it is not among the first :data:`BANNER_SKIPS_FIRST_CARDS` cards of the page that shows the banner
  (a banner repeating the cards below it adds nothing).

**Trending stories** (:func:`trending_stories`): the stories with the most new articles in the latest
window, each story once (a story merged into another counts as the survivor, its counts added), at most
:data:`TRENDING_SOURCE_CAP` per outlet (the feeds' cap, ``DESIGN.md``: diversity), at least
:data:`TRENDING_MIN` when the windows of the last :data:`TRENDING_LOOKBACK_S` hold that many stories
(an hour's window alone often names only a handful).

**Entity chips** (:func:`entity_chips`): the trending entity texts merged by normalised form
(:func:`chip_key`: case-folded, outer punctuation and a possessive ``'s`` dropped, trailing verbs of
:data:`TRAILING_VERBS` dropped — a headline tagger's span often runs into the verb after a name,
"Shailene Woodley Reveals", "Theo James Had"); a chip shows its most reported form without the verb.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence

from newsflow.core.outlets import outlet
from newsflow.core.ranking.decay import is_breaking, is_evergreen

BANNER_SKIPS_FIRST_CARDS = 10
"""Banner stories that are among this many first cards of the page are left out of the banner."""

TRENDING_MIN = 10
"""Trending lists at least this many stories when the recent windows hold them."""

TRENDING_SOURCE_CAP = 2
"""At most this many trending stories per outlet (registrable domain of the story's lead)."""

TRENDING_LOOKBACK_S = 6 * 3600.0
"""How far back trending reaches for windows when the latest one names fewer than :data:`TRENDING_MIN`
stories (the decay's default half-life is 6.9 h: older stories have lost half their weight)."""

TRAILING_VERBS = frozenset(
    """
    is are was were be been has have had says said say tells told talks talked reveals revealed reveal
    gets got get makes made make takes took take shows showed show wins won win loses lost lose calls called
    slams slammed denies denied admits admitted confirms confirmed announces announced launches launched
    unveils unveiled opens opened joins joined leaves left dies died hits hit faces faced wants wanted
    will would could can may might should must does did do goes went returns returned signs signed
    """.split()
)
"""Verbs (lower case) that end a mis-spanned entity in headlines ("Theo James Had", "Shailene Woodley Reveals",
issue 32): a hand-made list of verbs that follow a name in headlines (said, reveals, talks, ...) with their
tense forms. A one-word chip is kept whatever it is ("Will" may be a name)."""

_EDGE_PUNCT = "\"'“”‘’.,;:!?()[]{}-–—…"
_POSSESSIVE = re.compile(r"(?:'s|’s|s'|s’)$", re.I)


def banner_ok(velocity: int, topics: Sequence[str], article_type: str | None) -> bool:
    """Whether a breaking-set story may be in the banner: it meets the breaking rule at ``now``
    (``velocity``: new articles in the latest window ending within the last hour) and is not evergreen."""
    return is_breaking(velocity) and not is_evergreen(topics, article_type)


def banner(rows: Sequence[Mapping], cards: Sequence[Mapping], first: int = BANNER_SKIPS_FIRST_CARDS) -> list:
    """The banner rows (in order) that are not among the first ``first`` of the page's ``cards`` (by
    ``story_id``)."""
    shown = {c["story_id"] for c in cards[:first]}
    return [r for r in rows if r["story_id"] not in shown]


def trending_stories(
    windows: Iterable[Sequence[tuple[str, int]]],
    records: Mapping[str, object],
    k: int = 20,
    source_cap: int = TRENDING_SOURCE_CAP,
) -> list[tuple[object, int]]:
    """Trending stories: ``[(record, new articles)]``.

    Args:
      windows: each window's ``(story id, new articles)`` rows, newest window first. The newest window's
        stories come first, most new articles first; older windows add stories not yet listed, in the
        same way, until ``k``. ``new articles`` is a story's count in the newest window naming it.
      records: story id -> record (``story_id``, ``domain``, ``merged_into``); a story merged into
        another stands for the survivor (its count added to the survivor's in the same window), so a
        story is listed once; ids without a record are skipped.
      k: at most this many.
      source_cap: at most this many per outlet.
    """
    out: list[tuple[object, int]] = []
    listed: set[str] = set()
    per_outlet: dict[str, int] = {}
    for rows in windows:
        counts: dict[str, int] = {}
        for sid, count in rows:
            rec = records.get(sid)
            seen = {sid}
            while rec is not None and getattr(rec, "merged_into", "") and rec.merged_into not in seen:
                seen.add(rec.merged_into)
                rec = records.get(rec.merged_into)
            if rec is None or getattr(rec, "merged_into", ""):
                continue
            counts[rec.story_id] = counts.get(rec.story_id, 0) + int(count)
        for sid, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            if sid in listed:
                continue
            rec = records[sid]
            o = outlet(getattr(rec, "domain", "") or "")
            if per_outlet.get(o, 0) >= source_cap:
                continue
            per_outlet[o] = per_outlet.get(o, 0) + 1
            listed.add(sid)
            out.append((rec, count))
            if len(out) >= k:
                return out
    return out


def _strip_form(text: str) -> str:
    """The entity text without outer punctuation, a possessive and trailing verbs (case kept)."""
    words = " ".join(unicodedata.normalize("NFKC", text or "").split()).strip(_EDGE_PUNCT + " ").split()
    while len(words) > 1 and words[-1].strip(_EDGE_PUNCT).lower() in TRAILING_VERBS:
        words.pop()
    if words:
        words[-1] = _POSSESSIVE.sub("", words[-1].strip(_EDGE_PUNCT)) or words[-1]
    return " ".join(words).strip(_EDGE_PUNCT + " ")


def chip_key(text: str) -> str:
    """The normalised form chips merge by: ``"Shailene Woodley Reveals"``, ``"Shailene Woodley."`` and
    ``"shailene woodley"`` -> ``"shailene woodley"``."""
    return _strip_form(text).casefold()


def entity_chips(rows: Iterable[tuple[str, int]], k: int = 20) -> list[dict]:
    """Entity chips: ``[{"entity": display form, "key": normalised form, "new_articles": n}]``, most new
    articles first (ties: key).

    Args:
      rows: ``(entity text, new articles)`` of the latest window.
      k: at most this many chips.

    ``new_articles`` of a chip is the sum over its forms (an article naming it in two forms counts twice:
    an upper bound); its display form is the most reported form, stripped (:func:`chip_key`).
    """
    totals: dict[str, int] = {}
    forms: dict[str, dict[str, int]] = {}
    for text, count in rows:
        key = chip_key(text)
        if not key:
            continue
        totals[key] = totals.get(key, 0) + int(count)
        shown = _strip_form(text)
        forms.setdefault(key, {})[shown] = forms.setdefault(key, {}).get(shown, 0) + int(count)
    out = []
    for key, n in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:k]:
        display = min(forms[key].items(), key=lambda kv: (-kv[1], kv[0]))[0]
        out.append({"entity": display, "key": key, "new_articles": n})
    return out
