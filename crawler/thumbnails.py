"""The thumbnail step: a landed page's lead image and publisher icon, fetched, resized and stored.

It runs in the crawl worker, between fetching an article page and landing it: the page's pictures are found
(:func:`newsflow.core.images.page_images_of_body`), fetched by the worker's own
:class:`newsflow.crawler.fetch.Fetcher` (the same address guard on every hop and on the connected peer, the same
timeouts and bounded body reading), made into WebP thumbnails (:func:`newsflow.core.images.make_thumbnail`, in a
thread) and written to the :class:`newsflow.storage.thumbnails.ThumbnailStore`. The page's RawDocument then
carries the stored names (``image_thumb``, ``icon_thumb``) to the pipeline, and through it to articles, stories
and the site's ``/img/<name>``.

Why here and not as a Beam step after extraction: the crawler tier is the one that may contact the web (its
fetcher and address guard; the Beam tier may not import the crawler, and a second fetcher would be a second guard
to keep right), fetches are async and bounded by the crawl's timeouts, and a replay of landed files (the offline
demo's corpus) never fetches anything: its pages carry no thumbnail names, so its cards show no pictures and no
image fetch can delay it.

A picture that cannot be had is dead-lettered (step ``thumbnail``, the reason from
:data:`newsflow.core.images.IMAGE_ERROR_TYPES` or the fetcher's ``error_kind`` prefixed ``image_``, e.g.
``image_timeout``; a body over :data:`newsflow.core.images.MAX_IMAGE_BYTES` is ``image_too_large``) and the page
lands without it. Icons are fetched once per icon URL per worker (:attr:`Thumbnailer.icon_cache_size` entries).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

from newsflow.core.images import (
    CARD_WIDTH,
    ICON_SIZE,
    MAX_IMAGE_BYTES,
    MIN_IMAGE_SIDE,
    ImageError,
    make_thumbnail,
    page_images_of_body,
)
from newsflow.crawler.fetch import Fetcher
from newsflow.storage.thumbnails import ThumbnailStore

IMAGE_TYPES = (
    "image/jpeg",
    "image/png",
    "image/gif",
    "image/webp",
    "image/x-icon",
    "image/vnd.microsoft.icon",
    "image/bmp",
    "image/pjpeg",
    "application/octet-stream",
)
"""Content types accepted for a picture (a response without one is accepted too; Pillow decides)."""

CARD_BOX = (CARD_WIDTH, 2 * CARD_WIDTH)
ICON_BOX = (ICON_SIZE, ICON_SIZE)


class PagePictures(NamedTuple):
    """The stored thumbnail names of one page ("" when it has none).

    Attributes:
      image_thumb: the lead image's card thumbnail.
      icon_thumb: the publisher icon's thumbnail.
    """

    image_thumb: str = ""
    icon_thumb: str = ""


class Thumbnailer:
    """Fetches, resizes and stores a page's pictures.

    Args:
      fetcher: the crawl worker's fetcher (its address policy and limits apply).
      store: where thumbnails go.
      dead_letter: ``(step, reason, detail, url)`` recorder of pictures that could not be had.
      max_bytes: picture bodies over this many bytes are ``image_too_large``.
      icon_cache_size: icon URLs whose outcome (a name or "") is remembered.
      budget_s: wall-clock limit of one page's pictures, seconds (default: the fetcher's ``total_timeout_s``, so a
        page's fetch plus its pictures stay within two fetch deadlines, under the crawl lease); past it the page
        lands with the pictures stored so far and the rest is dead-lettered ``image_timeout``.
    """

    def __init__(
        self,
        fetcher: Fetcher,
        store: ThumbnailStore,
        dead_letter: Callable[[str, str, str, str], None],
        max_bytes: int = MAX_IMAGE_BYTES,
        icon_cache_size: int = 2048,
        budget_s: float | None = None,
    ):
        self.fetcher = fetcher
        self.store = store
        self.dead_letter = dead_letter
        self.max_bytes = max_bytes
        self.icon_cache_size = icon_cache_size
        self.budget_s = fetcher.config.total_timeout_s if budget_s is None else budget_s
        self._icons: OrderedDict[str, str] = OrderedDict()

    async def page_pictures(self, body: bytes, content_type: str, page_url: str) -> PagePictures:
        """The page's pictures, stored; "" for each it has none of or that could not be had (dead-lettered)."""
        found = await asyncio.to_thread(page_images_of_body, body, content_type, page_url)
        got = {"image": "", "icon": ""}
        pending = {"image": found.image_url, "icon": found.icon_url}
        try:
            async with asyncio.timeout(self.budget_s):
                if found.image_url:
                    got["image"] = await self.thumbnail(found.image_url, CARD_BOX, MIN_IMAGE_SIDE)
                pending["image"] = ""
                if found.icon_url:
                    got["icon"] = await self._icon(found.icon_url)
                pending["icon"] = ""
        except TimeoutError:
            for url in filter(None, pending.values()):
                self.dead_letter("thumbnail", "image_timeout", f"the page's pictures took over {self.budget_s} s", url)
        return PagePictures(got["image"], got["icon"])

    async def _icon(self, url: str) -> str:
        """The icon's thumbnail name, fetched once per URL while it stays among the remembered ones."""
        if url in self._icons:
            self._icons.move_to_end(url)
            return self._icons[url]
        name = await self.thumbnail(url, ICON_BOX, 1)
        self._icons[url] = name
        while len(self._icons) > self.icon_cache_size:
            self._icons.popitem(last=False)
        return name

    async def thumbnail(self, url: str, box: tuple[int, int], min_side: int) -> str:
        """The stored thumbnail name of the picture at ``url``, or "" (the failure dead-lettered)."""
        res = await self.fetcher.fetch(url, accept_types=IMAGE_TYPES)
        if not res.ok:
            kind = res.error_kind or f"http_{res.status}"
            reason = "image_too_large" if kind == "too_large" else f"image_{kind}"
            self.dead_letter("thumbnail", reason, res.error or f"HTTP {res.status}", url)
            return ""
        data = res.body or b""
        try:
            thumb = await asyncio.to_thread(make_thumbnail, data, box, min_side=min_side, max_bytes=self.max_bytes)
        except ImageError as e:
            self.dead_letter("thumbnail", e.error_type, e.message, url)
            return ""
        try:
            await asyncio.to_thread(self.store.put, thumb.name, thumb.data)
        except OSError as e:
            self.dead_letter("thumbnail", "store_failed", f"{type(e).__name__}: {e}"[:300], url)
            return ""
        return thumb.name
