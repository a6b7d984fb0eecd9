"""RawDocument: what the crawl tier lands for the pipeline."""

from __future__ import annotations

import base64
from typing import NamedTuple, Optional

import pyarrow as pa

from schemas._arrow import UTC_TS


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
      title: feed entry title (feed-only or as a hint), else ``None``.
      summary: feed entry summary/description, else ``None``.
      published_time: feed entry publish time, UTC epoch seconds, else ``None``.
      source_name: human name of the publisher ("Reuters"), else ``None``.
      feed_url: the feed the URL was discovered in, else ``None``.
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
        """Parses a landing-file dict (see :meth:`to_json_dict`).

        Raises:
          ValueError: a required field is missing or has the wrong type, or
            ``body_b64`` is not valid base64.
        """
        if not isinstance(d, dict):
            raise ValueError(f"landing record must be a JSON object, got {type(d).__name__}")
        missing = [k for k in ("url", "source_domain", "fetch_time") if d.get(k) in (None, "")]
        if missing:
            raise ValueError(f"missing required field(s): {', '.join(missing)}")
        if not isinstance(d["url"], str) or not isinstance(d["source_domain"], str):
            raise ValueError("url and source_domain must be strings")
        try:
            fetch_time = float(d["fetch_time"])
        except (TypeError, ValueError):
            raise ValueError(f"fetch_time must be epoch seconds, got {d['fetch_time']!r}") from None
        body_b64 = d.get("body_b64")
        body = d.get("body")
        if body_b64 is not None:
            try:
                body = base64.b64decode(body_b64, validate=True)
            except (ValueError, TypeError) as e:
                raise ValueError(f"body_b64 is not valid base64: {e}") from None
        elif isinstance(body, str):
            body = body.encode("utf-8")
        elif body is not None and not isinstance(body, bytes):
            raise ValueError("body must be bytes, a string or absent")
        published = d.get("published_time")
        if published is not None:
            try:
                published = float(published)
            except (TypeError, ValueError):
                raise ValueError(f"published_time must be epoch seconds, got {published!r}") from None

        def _s(key: str) -> str:
            v = d.get(key)
            return "" if v is None else str(v)

        def _opt(key: str) -> Optional[str]:
            v = d.get(key)
            return None if v is None else str(v)

        try:
            status = int(d.get("http_status") or 0)
        except (TypeError, ValueError):
            raise ValueError(f"http_status must be an integer, got {d.get('http_status')!r}") from None
        return cls(
            url=d["url"],
            source_domain=d["source_domain"].lower(),
            fetch_time=fetch_time,
            http_status=status,
            content_type=_s("content_type"),
            content_language=_s("content_language"),
            etag=_s("etag"),
            last_modified=_s("last_modified"),
            body=body,
            title=_opt("title"),
            summary=_opt("summary"),
            published_time=published,
            source_name=_opt("source_name"),
            feed_url=_opt("feed_url"),
        )


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
    ]
)
