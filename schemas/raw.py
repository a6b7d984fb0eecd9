"""RawDocument: what the crawl tier lands for the pipeline."""

import base64
import json
import math
import re
from typing import NamedTuple, Optional

import pyarrow as pa

from newsflow.schemas._arrow import UTC_TS


class RawDocument(NamedTuple):
    """One fetched page or feed entry, exactly as landed by a crawler or a push.

    Either ``body`` holds the fetched page bytes (``http_status`` is the HTTP
    status), or the document is *feed-only*: ``body`` is ``None`` and
    ``title``/``summary`` come from the feed entry.

    Attributes:
      url: the URL as fetched (after redirects), absolute http(s).
      source_domain: registrable host of the publisher, lower case, e.g. ``"reuters.com"``.
      fetch_time: when the bytes were fetched, UTC epoch seconds.
      http_status: HTTP status code; 0 for feed-only or pushed documents.
      content_type: the ``Content-Type`` header value ("" when unknown).
      content_language: the ``Content-Language`` header value ("" when unknown).
      etag: the ``ETag`` header ("" when absent), kept for conditional GET.
      last_modified: the ``Last-Modified`` header ("" when absent).
      body: raw response body bytes, undecoded; ``None`` for feed-only documents.
      title: feed entry title as an HTML fragment (a title the feed marks as text is escaped by the
        crawl tier's feed parser), feed-only or as a hint, else ``None``.
      summary: feed entry summary/description, else ``None``.
      published_time: feed entry publish time, UTC epoch seconds, else ``None``.
      source_name: human name of the publisher ("Reuters"), else ``None``.
      feed_url: the feed the URL was discovered in, else ``None``.
      image_thumb: the stored card thumbnail of the page's lead image (a :data:`THUMBNAIL_NAME_RE` name in the
        thumbnail store, written by the crawler's thumbnail step), else ``None``.
      icon_thumb: the stored thumbnail of the publisher's icon, likewise, else ``None``.
    """

    url: str
    source_domain: str
    fetch_time: float
    http_status: int = 0
    content_type: str = ""
    content_language: str = ""
    etag: str = ""
    last_modified: str = ""
    body: Optional[bytes] = None
    title: Optional[str] = None
    summary: Optional[str] = None
    published_time: Optional[float] = None
    source_name: Optional[str] = None
    feed_url: Optional[str] = None
    image_thumb: Optional[str] = None
    icon_thumb: Optional[str] = None

    @property
    def is_feed_only(self) -> bool:
        """True when there is no page body, only feed fields."""
        return self.body is None

    def to_json_dict(self) -> dict:
        """JSON-safe dict for landing files (JSONL); ``body`` becomes ``body_b64``."""
        d = self._asdict()
        body = d.pop("body")
        d["body_b64"] = None if body is None else base64.b64encode(body).decode("ascii")
        return d

    @classmethod
    def from_json_dict(cls, d: dict) -> "RawDocument":
        """Parses and type-checks a landing-file dict (see :meth:`to_json_dict`).

        Times must be finite UTC epoch seconds within :data:`MIN_EPOCH_S`..:data:`MAX_EPOCH_S`;
        strings must be valid Unicode (no lone surrogates); optional text fields are strings or null.

        Raises:
          RecordError: with ``error_type`` ``"not_an_object"``, ``"missing_fields"``,
            ``"invalid_field"`` (wrong type, out of range, bad base64, a thumbnail that is not a
            :data:`THUMBNAIL_NAME_RE` name) or ``"invalid_unicode"``.
        """
        if not isinstance(d, dict):
            raise RecordError("not_an_object", f"landing record must be a JSON object, got {type(d).__name__}")
        missing = [k for k in ("url", "source_domain", "fetch_time") if d.get(k) in (None, "")]
        if missing:
            raise RecordError("missing_fields", f"missing required field(s): {', '.join(missing)}")
        url = _text(d, "url", required=True)
        domain = _text(d, "source_domain", required=True)
        fetch_time = _epoch(d, "fetch_time")
        published = None if d.get("published_time") is None else _epoch(d, "published_time")
        body_b64 = d.get("body_b64")
        body = d.get("body")
        if body_b64 is not None:
            if not isinstance(body_b64, str):
                raise RecordError("invalid_field", f"body_b64 must be a base64 string, got {type(body_b64).__name__}")
            try:
                body = base64.b64decode(body_b64, validate=True)
            except (ValueError, TypeError) as e:
                raise RecordError("invalid_field", f"body_b64 is not valid base64: {e}") from None
        elif isinstance(body, str):
            body = _text(d, "body").encode("utf-8")
        elif body is not None:
            raise RecordError("invalid_field", f"body must be a string or absent, got {type(body).__name__}")
        status = d.get("http_status")
        if status is None or status == "":
            status = 0
        elif isinstance(status, bool) or not isinstance(status, (int, str)):
            raise RecordError("invalid_field", f"http_status must be an integer, got {status!r}"[:300])
        try:
            status = int(status)
        except ValueError:
            raise RecordError("invalid_field", f"http_status must be an integer, got {status!r}"[:300]) from None
        if not 0 <= status <= 999:
            raise RecordError("invalid_field", f"http_status {status} outside 0..999")
        return cls(
            url=url,
            source_domain=domain.strip().lower(),
            fetch_time=fetch_time,
            http_status=status,
            content_type=_text(d, "content_type") or "",
            content_language=_text(d, "content_language") or "",
            etag=_text(d, "etag") or "",
            last_modified=_text(d, "last_modified") or "",
            body=body,
            title=_text(d, "title"),
            summary=_text(d, "summary"),
            published_time=published,
            source_name=_text(d, "source_name"),
            feed_url=_text(d, "feed_url"),
            image_thumb=_thumb(d, "image_thumb"),
            icon_thumb=_thumb(d, "icon_thumb"),
        )


THUMBNAIL_NAME_RE = re.compile(r"\A([0-9a-f]{32})-([1-9][0-9]{0,3})x([1-9][0-9]{0,3})\.webp\Z")
"""A stored thumbnail's name (:mod:`newsflow.core.images`): the first 128 bits of SHA-256 of its WebP bytes as
32 hex chars, ``-``, width ``x`` height in pixels (1..9999), ``.webp``."""


def _thumb(d: dict, key: str) -> str | None:
    value = _text(d, key)
    if value in (None, ""):
        return None
    if not THUMBNAIL_NAME_RE.match(value):
        raise RecordError("invalid_field", f"{key} is not a thumbnail name: {value[:100]!r}")
    return value


# Plausible range of news timestamps, UTC epoch seconds: 1970-01-01 .. 2100-01-01.
MIN_EPOCH_S = 0.0
MAX_EPOCH_S = 4_102_444_800.0


MAX_INT_DIGITS = 4000  # below Python's int/str conversion limit (4,300 digits), far above any real field


class TooLongNumber(NamedTuple):
    """Stands in for a JSON integer of more than :data:`MAX_INT_DIGITS` digits, so that the record still
    parses (its URL is known for the dead letter) and the field fails validation with a clear reason."""

    digits: int

    def __repr__(self) -> str:
        return f"<a number of {self.digits} digits>"


def bounded_int(text: str) -> int | TooLongNumber:
    """``parse_int`` hook for ``json.loads``: ``int(text)``, or :class:`TooLongNumber` past the digit cap."""
    digits = len(text) - (text[:1] in "+-")
    return TooLongNumber(digits) if digits > MAX_INT_DIGITS else int(text)


def loads_record(text: str):
    """``json.loads`` for landing records: integers past :data:`MAX_INT_DIGITS` digits become
    :class:`TooLongNumber` instead of raising.

    Raises:
      json.JSONDecodeError: not JSON. RecursionError: nested too deeply.
    """
    return json.loads(text, parse_int=bounded_int)


class RecordError(ValueError):
    """A landing record that cannot become a RawDocument; ``error_type`` names the reason."""

    def __init__(self, error_type: str, message: str):
        super().__init__(message)
        self.error_type = error_type


def _text(d: dict, key: str, required: bool = False) -> str | None:
    value = d.get(key)
    if value is None:
        if required:
            raise RecordError("missing_fields", f"missing required field: {key}")
        return None
    if not isinstance(value, str):
        raise RecordError("invalid_field", f"{key} must be a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise RecordError("invalid_unicode", f"{key} contains invalid Unicode (a lone surrogate)") from None
    return value


def _epoch(d: dict, key: str) -> float:
    value = d.get(key)
    if isinstance(value, TooLongNumber):
        raise RecordError("invalid_field", f"{key} is not a UTC epoch time between 1970 and 2100 ({value!r})")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise RecordError("invalid_field", f"{key} must be epoch seconds, got {type(value).__name__}")
    try:
        t = float(value)
    except OverflowError:  # an integer too large for a float (e.g. 1 followed by 400 zeros)
        raise RecordError(
            "invalid_field",
            f"{key} is not a UTC epoch time between 1970 and 2100 (a number of {len(str(value))} digits)",
        ) from None
    except ValueError:
        raise RecordError("invalid_field", f"{key} must be epoch seconds, got {value!r}"[:300]) from None
    if not math.isfinite(t) or not MIN_EPOCH_S <= t <= MAX_EPOCH_S:
        raise RecordError("invalid_field", f"{key} {value!r} is not a UTC epoch time between 1970 and 2100"[:300])
    return t


RAW_DOCUMENT_SCHEMA = pa.schema(
    [
        pa.field("url", pa.string(), nullable=False),
        pa.field("source_domain", pa.string(), nullable=False),
        pa.field("fetch_time", UTC_TS, nullable=False),
        pa.field("http_status", pa.int32()),
        pa.field("content_type", pa.string()),
        pa.field("content_language", pa.string()),
        pa.field("etag", pa.string()),
        pa.field("last_modified", pa.string()),
        pa.field("body", pa.binary()),
        pa.field("title", pa.string()),
        pa.field("summary", pa.string()),
        pa.field("published_time", UTC_TS),
        pa.field("source_name", pa.string()),
        pa.field("feed_url", pa.string()),
        pa.field("image_thumb", pa.string()),
        pa.field("icon_thumb", pa.string()),
    ]
)
