"""Light on-request re-rank of a cached feed.

Starting from a precomputed feed (already MMR-ordered), the request path:

1. injects breaking stories that became breaking after the feed was generated
   (``since > generated_at``) and are not already in it, newest first, at the top;
2. removes stories the reader blocks (topic, or the outlet of the representative source);
3. reapplies the per-source cap (at most ``source_cap`` stories per outlet, keeping the
   earliest positions);
4. truncates to ``k``.

Pure and allocation-light: it runs on every personal-feed request.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

from newsflow.core.outlets import outlet
from newsflow.core.ranking.mmr import DEFAULT_SOURCE_CAP
from newsflow.schemas import UserProfile

T = TypeVar("T")


def is_blocked(item: Mapping, profile: UserProfile) -> bool:
    """True when the reader blocks the outlet of the item's representative ``domain``
    (:func:`newsflow.core.outlets.outlet`; ``profile.block_sources`` holds outlets) or one of its ``topics``."""
    if profile.block_sources and outlet(str(item.get("domain", ""))) in profile.block_sources:
        return True
    return any(str(t).lower() in profile.block_topics for t in item.get("topics", ()))


def without_blocked(items: Sequence[Mapping], profile: UserProfile) -> list:
    """``items`` minus those :func:`is_blocked` for ``profile`` (order kept); the same list object's
    items are returned, not copies."""
    if not profile.block_sources and not profile.block_topics:
        return list(items)
    return [it for it in items if not is_blocked(it, profile)]


def rerank(
    items: Sequence[Mapping],
    generated_at: float,
    breaking: Sequence[tuple[float, Mapping]],
    profile: UserProfile,
    k: int = 20,
    source_cap: int = DEFAULT_SOURCE_CAP,
) -> list[dict]:
    """Re-ranks a cached feed (rules in the module docstring).

    Args:
      items: cached feed items (dicts with at least ``story_id``, ``domain``, ``topics``).
      generated_at: when the cached feed was built, UTC epoch seconds.
      breaking: ``(since, item)`` for live breaking stories; ``since`` is when the story
        became breaking (UTC epoch s).
      profile: the reader (blocks).
      k: items to return.
      source_cap: max items per outlet of the representative domain.

    Returns:
      New list of item dicts; injected ones carry ``"injected": True``.
    """
    present = {it["story_id"] for it in items}
    injected = [injected_item(it) for it in newer_breaking(breaking, generated_at, present)]
    candidates = (
        (outlet(str(it.get("domain", ""))), it)
        for it in injected + [dict(i) for i in items]
        if not is_blocked(it, profile)
    )
    return take_capped(candidates, k, source_cap)


def newer_breaking(breaking: Sequence[tuple[float, Mapping]], generated_at: float, present: set) -> list[Mapping]:
    """Rule 1's selection: the breaking items with ``since > generated_at`` whose ``story_id`` is not in
    ``present``, newest first (ties by story id); ``present`` gains their ids (a story listed twice in
    ``breaking`` is injected once)."""
    out = []
    for since, it in sorted(breaking, key=lambda p: (-p[0], p[1]["story_id"])):
        if since > generated_at and it["story_id"] not in present:
            out.append(it)
            present.add(it["story_id"])
    return out


def injected_item(item: Mapping) -> dict:
    """A copy of a breaking feed item as injected: ``breaking`` and ``injected`` set to True (keys kept in
    order, new ones appended)."""
    d = dict(item)
    d["breaking"] = True
    d["injected"] = True
    return d


def take_capped(candidates: Iterable[tuple[str, T]], k: int, source_cap: int) -> list[T]:
    """Rules 3-4: the first ``k`` values of ``(outlet, value)`` candidates, in order, skipping a value
    whose outlet already has ``source_cap`` values taken. Shared by :func:`rerank` and
    :func:`newsflow.storage.feed_page.select`, which pass the unblocked candidates."""
    out: list = []
    per_source: dict[str, int] = {}
    for dom, value in candidates:
        n = per_source.get(dom, 0)
        if n >= source_cap:
            continue
        per_source[dom] = n + 1
        out.append(value)
        if len(out) >= k:
            break
    return out
