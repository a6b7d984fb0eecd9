"""Cursor paging, one scheme for every list the API and the web serve (``?cursor=``).

A list answer carries ``next_cursor``: an opaque string for the next page, ``null`` on the last one. The
cursor holds the position after the page and the id of the page's last item, base64url-encoded
(``"v1:<offset>:<last id>"``, no padding). The next page starts right after that item where the list
still holds it, so a feed rebuilt between two requests (every few minutes) neither repeats nor skips
what moved above it; when the item left the list, the page starts at the offset.

Errors: a cursor that does not decode to that form is :class:`BadCursor` (the API answers 400).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

_FORM = re.compile(r"v1:([0-9]{1,6}):([A-Za-z0-9_.:-]{1,128})\Z")
MAX_CURSOR_CHARS = 200


class BadCursor(ValueError):
    """A ``cursor`` parameter that is not one this module issued."""


class Cursor(NamedTuple):
    """A decoded cursor: the next page's ``offset`` and the ``last_id`` of the page before."""

    offset: int
    last_id: str


def encode_cursor(offset: int, last_id: str) -> str:
    """The cursor of the page starting after item ``last_id`` at position ``offset``."""
    return base64.urlsafe_b64encode(f"v1:{int(offset)}:{last_id}".encode()).decode("ascii").rstrip("=")


def decode_cursor(raw: str | None) -> Cursor | None:
    """Parses a ``cursor`` parameter (``None`` or ``""``: the first page).

    Raises:
      BadCursor: not a cursor of :func:`encode_cursor`'s form.
    """
    if not raw:
        return None
    if len(raw) > MAX_CURSOR_CHARS or not raw.isascii():
        raise BadCursor("cursor is not one this server issued (use next_cursor of the previous page)")
    try:
        text = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        raise BadCursor("cursor is not one this server issued (use next_cursor of the previous page)") from None
    m = _FORM.match(text)
    if not m:
        raise BadCursor("cursor is not one this server issued (use next_cursor of the previous page)")
    return Cursor(int(m.group(1)), m.group(2))


def page_of(
    items: Sequence, cursor: Cursor | None, limit: int, id_of: Callable[[object], str] = lambda it: it["story_id"]
) -> tuple[list, str | None]:
    """One page of ``items``: ``(page, next cursor or None)``.

    Args:
      items: the whole list, in order.
      cursor: the decoded ``cursor`` parameter (``None``: the first page).
      limit: page size (>= 1).
      id_of: an item's stable id.
    """
    start = 0
    if cursor is not None:
        start = cursor.offset
        for i, it in enumerate(items):
            if id_of(it) == cursor.last_id:
                start = i + 1
                break
    page = list(items[start : start + limit])
    end = start + len(page)
    more = end < len(items) and page
    return page, (encode_cursor(end, id_of(page[-1])) if more else None)
