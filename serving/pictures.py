"""``/img/<name>``: the stored thumbnails (:mod:`newsflow.storage.thumbnails`) from the site's own origin.

The pages' ``Content-Security-Policy`` allows images from ``'self'`` only, so pictures are served here, never
hot-linked from publishers. A name is content-addressed (:data:`newsflow.schemas.raw.THUMBNAIL_NAME_RE`: the hash
of its bytes and its size), so a hit is cached for a year as ``immutable``; any other name, or one not stored, is
a 404 (the name rule admits no ``/`` or ``..``, so no path outside the store can be asked for).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from newsflow.storage.thumbnails import ThumbnailStore

IMMUTABLE = "public, max-age=31536000, immutable"


def picture_routes(thumbnail_dir: str | None) -> list[Route]:
    """The ``/img/{name}`` route over the store at ``thumbnail_dir`` (``None``: every name is a 404)."""
    store = ThumbnailStore(thumbnail_dir) if thumbnail_dir else None

    def picture(request: Request) -> Response:  # sync: Starlette runs it in its thread pool (a file read)
        name = request.path_params["name"]
        data = store.get(name) if store is not None else None
        if data is None:
            raise HTTPException(404, f"no picture {name[:100]!r}")
        return Response(
            data,
            media_type="image/webp",
            headers={"Cache-Control": IMMUTABLE, "ETag": f'"{name[:32]}"', "X-Content-Type-Options": "nosniff"},
        )

    return [Route("/img/{name}", picture, methods=["GET"])]
