"""Pictures of an article: where a page says its lead image and publisher icon are, and card thumbnails.

Two pure parts (no network, no storage):

1. :func:`page_images` reads a parsed page and returns :class:`PageImages`:

   * the **lead image**: ``<meta property="og:image">`` (also ``og:image:url``/``og:image:secure_url``),
     else ``<meta name="twitter:image">`` (or ``twitter:image:src``), else the ``image`` of a schema.org
     ``NewsArticle``/``Article``/... JSON-LD object (a URL string, an ``ImageObject`` with ``url`` or
     ``contentUrl``, or a list of either: the first usable), else the ``src`` (or lazy ``data-src``) of the
     first ``<figure>`` ``<img>`` inside ``<article>`` (else ``<main>``, else the body);
   * the **publisher icon**: ``<link rel="apple-touch-icon">`` (large, scales down well), else
     ``<link rel="icon">``/``"shortcut icon"`` that is not SVG (Pillow cannot read SVG), else ``/favicon.ico``
     of the page's origin.

   Every candidate is resolved against the page URL and must pass :func:`image_url_problem` (the document URL
   rules of :func:`newsflow.core.urls.check_document_url`: http(s), no user info, no private or metadata host
   by literal, at most 2048 characters); a candidate that fails is skipped for the next one.

2. :func:`make_thumbnail` turns fetched image bytes into a resized WebP :class:`Thumbnail` whose name is
   content-addressed (:func:`thumbnail_name`: the first 128 bits of SHA-256 of the WebP bytes, then
   ``-<width>x<height>.webp``), or raises :class:`ImageError` with a dead-letter reason
   (:data:`IMAGE_ERROR_TYPES`): bytes over :data:`MAX_IMAGE_BYTES` (``image_too_large``), more pixels than
   ``max_pixels`` (``image_bomb``: Pillow's ``DecompressionBombError``/``DecompressionBombWarning`` or the header's
   size over the cap; nothing is decoded), bytes Pillow cannot read (``not_an_image``, ``unreadable_image``),
   or an image too small to show (``image_too_small``: tracking pixels, spacers).

WebP only (no JPEG fallback): every browser the site supports decodes it (Chrome, Firefox, Safari 14+, Edge).
"""

from __future__ import annotations

import hashlib
import io
import json
from typing import NamedTuple
from urllib.parse import urljoin, urlsplit

from newsflow.schemas.raw import THUMBNAIL_NAME_RE

MAX_IMAGE_BYTES = 5_000_000
"""Image bodies larger than this (bytes) are refused: ``image_too_large``."""
MAX_IMAGE_PIXELS = 40_000_000
"""Pillow's ``Image.MAX_IMAGE_PIXELS`` for thumbnails (40 Mpx: a 8000 x 5000 photo); Pillow raises
``DecompressionBombError`` past twice this, and :func:`make_thumbnail` refuses anything past it."""
CARD_WIDTH = 320
"""Width of a card's lead-image thumbnail, CSS pixels."""
ICON_SIZE = 32
"""Largest side of a publisher icon thumbnail, pixels."""
MIN_IMAGE_SIDE = 16
"""A lead image narrower or lower than this (pixels) is a spacer or tracking pixel: ``image_too_small``."""
WEBP_QUALITY = 80

IMAGE_ERROR_TYPES = frozenset(
    {"image_too_large", "image_bomb", "not_an_image", "unreadable_image", "image_too_small", "bad_image_url"}
)
"""Dead-letter reasons of the thumbnail step (``bad_image_url`` is the fetcher's refusal of the URL)."""

_READABLE_FORMATS = ("JPEG", "PNG", "GIF", "WEBP", "ICO", "BMP")


class ImageError(Exception):
    """Image bytes that cannot become a thumbnail.

    Attributes:
      error_type: one of :data:`IMAGE_ERROR_TYPES` (the dead letter's reason).
      message: detail (also ``str(error)``).
    """

    def __init__(self, error_type: str, message: str):
        if error_type not in IMAGE_ERROR_TYPES:
            raise ValueError(f"unknown image error_type {error_type!r}; expected one of {sorted(IMAGE_ERROR_TYPES)}")
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message


class PageImages(NamedTuple):
    """Where a page's pictures are (absolute http(s) URLs, "" when none).

    Attributes:
      image_url: the lead image.
      icon_url: the publisher icon (``/favicon.ico`` of the page's origin when the page names none).
    """

    image_url: str = ""
    icon_url: str = ""


class Thumbnail(NamedTuple):
    """A resized picture ready to store.

    Attributes:
      name: its content-addressed file name (:data:`THUMBNAIL_NAME_RE`).
      data: WebP bytes.
      width / height: pixels.
    """

    name: str
    data: bytes
    width: int
    height: int


def image_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be fetched as a picture (``None`` when it can): the document URL rules of
    :func:`newsflow.core.urls.check_document_url` with the URL's own host as its domain (a picture may live on
    another host than its page, e.g. a CDN)."""
    from newsflow.core.urls import check_document_url
    from newsflow.schemas import RecordError

    host = (urlsplit(url).hostname or "").rstrip(".").lower() if url else ""
    try:
        check_document_url(url, host)
    except RecordError as e:
        return str(e)
    except ValueError as e:  # urlsplit on a malformed netloc (e.g. "http://[::1")
        return f"bad_url: {e}"
    return None


def _resolved(candidate: str | None, base: str) -> str:
    """``candidate`` resolved against ``base`` when it is a usable picture URL, else ""."""
    if not isinstance(candidate, str):
        return ""
    c = candidate.strip()
    if not c or c.startswith("data:"):
        return ""
    try:
        url = urljoin(base, c).split("#")[0]
    except ValueError:
        return ""
    return url if image_url_problem(url) is None else ""


def _meta_content(tree, names: tuple[str, ...]) -> list[str]:
    found = {n: [] for n in names}
    for el in tree.iter("meta"):
        key = (el.get("property") or el.get("name") or "").strip().lower()
        if key in found and el.get("content"):
            found[key].append(el.get("content"))
    return [c for n in names for c in found[n]]


_ARTICLE_TYPES = frozenset(
    {"newsarticle", "article", "reportagenewsarticle", "analysisnewsarticle", "blogposting", "report", "webpage"}
)


def _jsonld_objects(tree):
    """Every JSON object of the page's JSON-LD scripts (``@graph`` members and nested lists included)."""
    for script in tree.iter("script"):
        if (script.get("type") or "").strip().lower() != "application/ld+json" or not script.text:
            continue
        try:
            data = json.loads(script.text)
        except (ValueError, RecursionError):
            continue
        stack = [data]
        while stack:
            item = stack.pop(0)
            if isinstance(item, list):
                stack[0:0] = item
            elif isinstance(item, dict):
                yield item
                if isinstance(item.get("@graph"), list):
                    stack[0:0] = item["@graph"]


def _jsonld_image_candidates(tree) -> list[str]:
    out = []
    for obj in _jsonld_objects(tree):
        types = obj.get("@type")
        types = [types] if isinstance(types, str) else types if isinstance(types, list) else []
        if not any(isinstance(t, str) and t.lower() in _ARTICLE_TYPES for t in types):
            continue
        image = obj.get("image")
        for item in image if isinstance(image, list) else [image]:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, dict):
                out.extend(v for v in (item.get("url"), item.get("contentUrl")) if isinstance(v, str))
    return out


def _figure_candidates(tree) -> list[str]:
    for scope in ("article", "main", "body"):
        for root in tree.iter(scope):
            for img in root.xpath(".//figure//img"):
                src = img.get("src") or img.get("data-src") or ""
                if src.strip() and not src.strip().startswith("data:"):
                    return [src]
    return []


def _icon_candidates(tree) -> list[str]:
    touch, icons = [], []
    for el in tree.iter("link"):
        rel = (el.get("rel") or "").lower().split()
        href = el.get("href") or ""
        if not href.strip():
            continue
        svg = (el.get("type") or "").lower() == "image/svg+xml" or urlsplit(href.strip()).path.lower().endswith(".svg")
        if "apple-touch-icon" in rel or "apple-touch-icon-precomposed" in rel:
            touch.append(href)
        elif "icon" in rel and not svg:
            icons.append(href)
    return touch + icons


def page_images(tree, page_url: str) -> PageImages:
    """The lead image and publisher icon a parsed page declares (module docstring, part 1).

    Args:
      tree: an lxml HTML element tree (``lxml.html.document_fromstring`` or trafilatura's ``load_html``).
      page_url: the page's URL as fetched: relative references resolve against it (a ``<base href>`` is
        not followed).

    Returns:
      :class:`PageImages`; a field is "" when no candidate passes :func:`image_url_problem`.
    """
    image = ""
    for candidates in (
        lambda: _meta_content(tree, ("og:image", "og:image:url", "og:image:secure_url")),
        lambda: _meta_content(tree, ("twitter:image", "twitter:image:src")),
        lambda: _jsonld_image_candidates(tree),
        lambda: _figure_candidates(tree),
    ):
        image = next((u for u in (_resolved(c, page_url) for c in candidates()) if u), "")
        if image:
            break
    icon = next((u for u in (_resolved(c, page_url) for c in _icon_candidates(tree)) if u), "")
    if not icon:
        icon = _resolved("/favicon.ico", page_url)
    return PageImages(image, icon)


def page_images_of_body(body: bytes, content_type: str, page_url: str) -> PageImages:
    """:func:`page_images` of an HTML body as fetched (bytes); empty :class:`PageImages` when it does not decode or
    parse. Never raises."""
    import lxml.html  # lxml is a trafilatura dependency

    from newsflow.core.decoding import decode_html

    try:
        text, _enc = decode_html(body, content_type)
        if not text.strip():
            return PageImages()
        return page_images(lxml.html.document_fromstring(text), page_url)
    except Exception:  # noqa: BLE001 - undecodable or unparsable page: it declares no pictures we can read
        return PageImages()


def thumbnail_name(data: bytes, width: int, height: int) -> str:
    """The content-addressed name of thumbnail bytes: first 128 bits of SHA-256 (32 hex), ``-WxH.webp``."""
    return f"{hashlib.sha256(data).hexdigest()[:32]}-{width}x{height}.webp"


def thumbnail_size(name: str) -> tuple[int, int] | None:
    """``(width, height)`` of a thumbnail name, ``None`` when ``name`` is not one (:data:`THUMBNAIL_NAME_RE`)."""
    m = THUMBNAIL_NAME_RE.match(name or "")
    return (int(m.group(2)), int(m.group(3))) if m else None


def make_thumbnail(
    data: bytes,
    box: tuple[int, int],
    *,
    min_side: int = 1,
    max_bytes: int = MAX_IMAGE_BYTES,
    max_pixels: int = MAX_IMAGE_PIXELS,
) -> Thumbnail:
    """A WebP thumbnail of image bytes that fits in ``box`` (aspect kept, never enlarged; the first frame of an
    animation; EXIF orientation applied).

    Args:
      data: the image file as fetched.
      box: ``(max width, max height)`` in pixels, e.g. ``(CARD_WIDTH, 2 * CARD_WIDTH)`` or ``(ICON_SIZE, ICON_SIZE)``.
      min_side: a source image narrower or lower than this is ``image_too_small``.
      max_bytes: larger ``data`` is ``image_too_large`` (checked before Pillow sees it).
      max_pixels: Pillow's ``Image.MAX_IMAGE_PIXELS``; an image with more pixels is ``image_bomb``.

    Raises:
      ImageError: see :data:`IMAGE_ERROR_TYPES` and the module docstring.
    """
    from PIL import Image, ImageOps, UnidentifiedImageError

    if len(data) > max_bytes:
        raise ImageError("image_too_large", f"{len(data)} bytes, over {max_bytes}")
    Image.MAX_IMAGE_PIXELS = max_pixels
    try:
        # between max_pixels and twice that Pillow only warns (an exception where warnings are errors); the
        # size check below refuses those without touching the process's warning filters (threads share them)
        im = Image.open(io.BytesIO(data), formats=_READABLE_FORMATS)
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as e:
        raise ImageError("image_bomb", f"{type(e).__name__}: {e}") from None
    except UnidentifiedImageError as e:
        raise ImageError("not_an_image", str(e)[:300]) from None
    except (OSError, SyntaxError, ValueError) as e:
        raise ImageError("unreadable_image", f"{type(e).__name__}: {e}"[:300]) from None
    with im:
        w, h = im.size
        if w * h > max_pixels:
            raise ImageError("image_bomb", f"{w}x{h} = {w * h} pixels, over {max_pixels}")
        if w < min_side or h < min_side:
            raise ImageError("image_too_small", f"{w}x{h} pixels, under {min_side} a side")
        try:
            im.draft("RGB", (box[0] * 2, box[1] * 2))  # JPEG: decode at a reduced scale
            frame = ImageOps.exif_transpose(im)
            frame = frame.convert("RGBA" if frame.mode in ("RGBA", "LA", "P", "PA") else "RGB")
            frame.thumbnail(box, Image.Resampling.LANCZOS)
            out = io.BytesIO()
            frame.save(out, "WEBP", quality=WEBP_QUALITY, method=4)
        except (OSError, SyntaxError, ValueError, EOFError) as e:  # truncated or corrupt pixel data
            raise ImageError("unreadable_image", f"{type(e).__name__}: {e}"[:300]) from None
    webp = out.getvalue()
    return Thumbnail(thumbnail_name(webp, *frame.size), webp, *frame.size)
