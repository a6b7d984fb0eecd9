"""Revisions: one article fetched under two URLs after its permalink was re-slugged.

Rule 5 of "Article identity" (:mod:`newsflow.core.urls`): when a headline is edited, many CMSs re-slug the
permalink (``/city/mayor-opens-library-b2210/`` becomes ``/city/mayor-opens-new-central-library-b2210/``)
and redirect the old URL. The two URLs have different ids, but they are one article: two *versions*
of the same outlet (:func:`newsflow.core.outlets.outlet`) with the same publish time and event time whose
texts are near-duplicates (SimHash within the Hamming threshold, or borderline and confirmed by
MinHash, :mod:`newsflow.core.minhash_check`).

Versions form connected components of that relation. A component is stored as ONE article:

* its id is the id of the version with the earliest ``(fetch time, id)`` (the first one fetched,
  so an id already issued keeps being the article's id when a newer version arrives);
* its fields (title, URL, ...) are those of the version with the latest ``(fetch time, id)``;
* every other version id is an alias of it (``rev`` of ``Keys.article_record``).

Both choices are functions of the component, not of arrival order, so a replay, a shuffled input
or two concurrent writers store the same article. The streaming job applies the rule inside the
near-duplicate step (:mod:`newsflow.storage.groups`, in the same write cycle as the group assignment); this
module is its plain-Python statement, used by tests as the reference and by anyone reasoning about
the rule without Redis.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple


class Version(NamedTuple):
    """One fetched version of an article.

    Attributes:
      article_id: the id of the URL it was fetched under (32 hex, :func:`newsflow.core.urls.article_id`).
      outlet: registrable domain (:func:`newsflow.core.outlets.outlet`), ``""`` when unknown.
      publish_time: UTC epoch seconds, ``None`` when unknown.
      event_time: UTC epoch seconds.
      fetch_time: UTC epoch seconds.
    """

    article_id: str
    outlet: str
    publish_time: float | None
    event_time: float
    fetch_time: float


def is_revision(a: Version, b: Version, near: bool) -> bool:
    """True when ``a`` and ``b`` are versions of one article.

    Args:
      a, b: the two versions.
      near: whether their texts are near-duplicates (the near-duplicate step's decision).

    Returns:
      ``near`` and the same known outlet, the same known publish time and the same event time,
      and different ids.
    """
    return (
        near
        and a.article_id != b.article_id
        and bool(a.outlet)
        and a.outlet == b.outlet
        and a.publish_time is not None
        and a.publish_time == b.publish_time
        and a.event_time == b.event_time
    )


def _order(v: Version) -> tuple[float, str]:
    return (float(v.fetch_time), v.article_id)


def stored_id(versions: Sequence[Version]) -> str:
    """The id a component of versions is stored under: the earliest ``(fetch time, id)``.

    Raises:
      ValueError: ``versions`` is empty.
    """
    if not versions:
        raise ValueError("no versions")
    return min(versions, key=_order).article_id


def current_version(versions: Sequence[Version]) -> Version:
    """The version whose fields the stored article shows: the latest ``(fetch time, id)``.

    Raises:
      ValueError: ``versions`` is empty.
    """
    if not versions:
        raise ValueError("no versions")
    return max(versions, key=_order)


def revision_components(versions: Sequence[Version], near: Callable[[Version, Version], bool]) -> list[list[Version]]:
    """Connected components of :func:`is_revision` over ``versions`` (union-find, O(n^2) pair tests).

    Args:
      versions: distinct versions (by id).
      near: the near-duplicate decision for a pair.

    Returns:
      Components as lists in input order, ordered by their first member's position; an article
      with no revision is a component of one.
    """
    parent = list(range(len(versions)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(versions)):
        for j in range(i + 1, len(versions)):
            if is_revision(versions[i], versions[j], near(versions[i], versions[j])):
                ri, rj = find(i), find(j)
                if ri != rj:
                    parent[max(ri, rj)] = min(ri, rj)
    groups: dict[int, list[Version]] = {}
    for i, v in enumerate(versions):
        groups.setdefault(find(i), []).append(v)
    return [groups[k] for k in sorted(groups)]
