"""Opaque paging cursors: ``"next"`` of one page, ``?cursor=`` of the next.

A cursor is the URL-safe base64 (no padding) of a compact JSON object; clients treat it as opaque and send it
back unchanged. :func:`encode_cursor` signs nothing: a cursor only says where a listing goes on, never grants
anything, so a forged one can do no more than ask for another page. Each listing puts what it needs in the
object (search: ``{"o": offset, "q": query fingerprint}``) and checks it with :func:`decode_cursor`.
"""

from __future__ import annotations

import base64
import binascii
import json

MAX_CURSOR_CHARS = 512


def encode_cursor(state: dict) -> str:
    """The cursor of ``state`` (a JSON-safe dict)."""
    raw = json.dumps(state, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str) -> dict:
    """The state of a cursor made by :func:`encode_cursor`.

    Raises:
      ValueError: longer than :data:`MAX_CURSOR_CHARS`, not base64url, or not a JSON object.
    """
    if not isinstance(cursor, str) or not 0 < len(cursor) <= MAX_CURSOR_CHARS or not cursor.isascii():
        raise ValueError(f"cursor must be 1-{MAX_CURSOR_CHARS} ASCII chars as sent in 'next'")
    try:
        state = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (binascii.Error, ValueError):
        raise ValueError("cursor is not one this server sent (send 'next' back unchanged)") from None
    if not isinstance(state, dict):
        raise ValueError("cursor is not one this server sent (send 'next' back unchanged)")
    return state
