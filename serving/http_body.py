"""Request bodies read with a size cap: never more than ``cap`` bytes are held in memory.

``await request.body()`` buffers the whole body before a length check can run, so a chunked upload of
500 MB to any form or JSON endpoint (sign-in needs no account) took ~1 GB of memory before its 413.
:func:`read_capped` refuses a larger declared ``Content-Length`` at once and stops reading a streamed
body as soon as it passes the cap.
"""

from __future__ import annotations


class BodyTooLarge(ValueError):
    """The request body is larger than the cap (``size`` bytes read or declared when it was refused)."""

    def __init__(self, cap: int, size: int):
        super().__init__(f"body larger than {cap} bytes")
        self.cap, self.size = cap, size


async def read_capped(request, cap: int) -> bytes:
    """The body of a Starlette ``request``, at most ``cap`` bytes.

    Raises:
      BodyTooLarge: the declared Content-Length or the bytes streamed so far exceed ``cap``.
    """
    declared = request.headers.get("content-length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > cap:
        raise BodyTooLarge(cap, int(declared))
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise BodyTooLarge(cap, size)
        chunks.append(chunk)
    return b"".join(chunks)
