"""Revisions: one article fetched under two URLs after its permalink was re-slugged.

Two URLs are versions of one article by either of two relations:

* **stable URL id** (:func:`same_stable_id`): the same host and the same numeric id of at least 4 digits in
  the path or query (:func:`stable_url_id`), and publish times at most :data:`PUBLISH_TOLERANCE_S` apart.
  ``https://harbour-gazette.example/news/ferry-fares-rise-in-spring/a/57312`` and
  ``https://harbour-gazette.example/news/ferry-operator-confirms-fare-rise/a/57312``, both published at
  07:40 UTC, are one article whatever their texts say; ``/a/57329`` is another;
* **near-duplicate text**: two URLs of the same outlet (:func:`newsflow.core.outlets.outlet`) with the same
  publish time and event time whose texts are near-duplicates (SimHash within the Hamming threshold, or
  borderline and confirmed by MinHash, :mod:`newsflow.core.minhash_check`), for URLs with no stable id
  (``/city/mayor-opens-library-b2210/`` becomes ``/city/mayor-opens-new-central-library-b2210/``).

This is rule 5 of "Article identity" (:mod:`newsflow.core.urls`): when a headline is edited, many CMSs
re-slug the permalink and redirect the old URL. The two URLs have different ids, but they are one article,
two *versions*. The stable id decides even when the edit rewrote the text past the near-duplicate
threshold; the text relation covers URLs that carry no id.

Versions form connected components of the union of both relations. A component is stored as ONE article:

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

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple
from urllib.parse import parse_qsl, urlsplit

from newsflow.core.urls import identity_key

PUBLISH_TOLERANCE_S = 60.0
"""How far apart (seconds) the publish times of two URLs with one stable URL id may be for one article."""

# a run of 4+ digits that is a whole token: not touching a letter or another digit (``/a/57312``,
# ``story-57312.html``, ``?id=57312``; not ``b2210`` or hex hashes such as ``5f3a91234c``)
_ID_RUN_RE = re.compile(r"(?<![0-9A-Za-z])[0-9]{4,}(?![0-9A-Za-z])")


def _in(two: str, lo: int, hi: int) -> bool:
    return lo <= int(two) <= hi


def _md(m: str, d: str) -> bool:
    return _in(m, 1, 12) and _in(d, 1, 31)


def _year(y: str) -> bool:
    return _in(y, 1900, 2099)


def _is_date(run: str) -> bool:
    """Whether a digit run reads as a date or time stamp, which many articles of one host share:
    4 digits: a year 1900-2099, ``mmdd`` or ``ddmm``; 6: ``yyyymm``, ``yymmdd``, ``ddmmyy`` or ``mmddyy``;
    8: ``yyyymmdd``, ``ddmmyyyy`` or ``mmddyyyy``; 10, 12, 14: ``yyyymmdd`` then ``hh``, ``mm``, ``ss``."""
    n = len(run)
    if n == 4:
        return _year(run) or _md(run[:2], run[2:]) or _md(run[2:], run[:2])
    if n == 6:
        y_m = _year(run[:4]) and _in(run[4:], 1, 12)
        return y_m or _md(run[2:4], run[4:]) or _md(run[2:4], run[:2]) or _md(run[:2], run[2:4])
    if n == 8:
        return (_year(run[:4]) and _md(run[4:6], run[6:])) or (
            _year(run[4:]) and (_md(run[2:4], run[:2]) or _md(run[:2], run[2:4]))
        )
    if n in (10, 12, 14):
        clock = all(_in(run[i : i + 2], 0, hi) for i, hi in ((8, 23), (10, 59), (12, 59)) if i < n)
        return _year(run[:4]) and _md(run[4:6], run[6:8]) and clock
    return False


def stable_url_id(url: str) -> str | None:
    """The stable id of an article URL: its host and the numeric id it carries, or ``None``.

    The numeric id is the last run of at least 4 digits that is a whole token (not touching a letter or
    another digit) and does not read as a date or time stamp (:func:`_is_date`: ``2024``, ``0307``,
    ``140311``, ``20240512``, ...), in the path; when the path has none, in the query values (tracking
    parameters removed, keys sorted: :func:`newsflow.core.urls.canonicalize_url`). The host is the identity
    key's (:func:`newsflow.core.urls.identity_key`: ``www.``/``m.`` dropped where rule 1 drops them, a
    non-default port kept), so another host (``news.example.org`` vs ``example.org``) gives another id.

    Examples: ``https://harbour-gazette.example/news/ferry-fares-rise-in-spring/a/57312`` and
    ``http://harbour-gazette.example/news/ferry-operator-confirms-fare-rise/a/57312?utm_source=rss`` give one id;
    ``https://example.org/view?id=123456`` has one; ``https://example.org/2024/05/12/ferry-fares`` (a date)
    and ``https://example.org/city/mayor-opens-library-b2210`` have none.

    Args:
      url: absolute http(s) URL.

    Returns:
      32 hex chars (first 128 bits of SHA-256 of ``"<host>/<digits>"``), or ``None`` when the URL has no
      such id or cannot be canonicalized.
    """
    try:
        key = identity_key(url)
    except ValueError:
        return None
    parts = urlsplit(key)
    runs = [m.group() for m in _ID_RUN_RE.finditer(parts.path) if not _is_date(m.group())]
    if not runs:
        values = [v for _, v in parse_qsl(parts.query, keep_blank_values=True)]
        runs = [m.group() for v in values for m in _ID_RUN_RE.finditer(v) if not _is_date(m.group())]
    if not runs:
        return None
    return hashlib.sha256(f"{parts.netloc}/{runs[-1]}".encode()).hexdigest()[:32]


class Version(NamedTuple):
    """One fetched version of an article.

    Attributes:
      article_id: the id of the URL it was fetched under (32 hex, :func:`newsflow.core.urls.article_id`).
      outlet: registrable domain (:func:`newsflow.core.outlets.outlet`), ``""`` when unknown.
      publish_time: UTC epoch seconds, ``None`` when unknown.
      event_time: UTC epoch seconds.
      fetch_time: UTC epoch seconds.
      stable_id: :func:`stable_url_id` of its URL, ``""`` when it has none.
    """

    article_id: str
    outlet: str
    publish_time: float | None
    event_time: float
    fetch_time: float
    stable_id: str = ""


def same_stable_id(a: Version, b: Version) -> bool:
    """True when ``a`` and ``b`` have one stable URL id (:func:`stable_url_id`: same host, same numeric id)
    and known publish times at most :data:`PUBLISH_TOLERANCE_S` apart (the boundary included)."""
    return (
        bool(a.stable_id)
        and a.stable_id == b.stable_id
        and a.publish_time is not None
        and b.publish_time is not None
        and abs(float(a.publish_time) - float(b.publish_time)) <= PUBLISH_TOLERANCE_S
    )


def is_revision(a: Version, b: Version, near: bool) -> bool:
    """True when ``a`` and ``b`` are versions of one article.

    Args:
      a, b: the two versions.
      near: whether their texts are near-duplicates (the near-duplicate step's decision).

    Returns:
      Different ids, and either :func:`same_stable_id` (whatever ``near`` is), or ``near`` with the same
      known outlet, the same known publish time and the same event time.
    """
    if a.article_id == b.article_id:
        return False
    if same_stable_id(a, b):
        return True
    return (
        near
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
