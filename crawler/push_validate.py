"""What a pushed document may contain: field, URL and time checks that turn JSON into a RawDocument.

:func:`validate_document` checks one pushed JSON object against the protocol of
:mod:`newsflow.crawler.push` and the limits of its :class:`newsflow.crawler.push.PushConfig`, and
gives back every reason it is refused at once (``ValueError.args``):

* only the fields ``url``, ``title``, ``summary``, ``body``, ``published_time``
  and ``source_name``; a non-empty ``title`` and a ``summary`` or ``body``;
* every string field valid Unicode (a lone surrogate such as JSON ``"\\ud800"``
  is refused); ``url``, ``title`` and ``source_name`` without control characters
  (CR, LF, TAB, NUL ...), ``summary`` and ``body`` without NUL (:func:`text_problem`);
* a URL checked without DNS (:func:`check_push_url`; nothing is fetched from it
  here, the crawler re-checks after resolution before it ever fetches): http(s)
  only, no whitespace, at most ``max_url_chars`` characters, no user info, and no
  host that :func:`newsflow.core.netsafety.literal_host_problem` refuses (a private,
  loopback, link-local or reserved IP literal in any form the C resolver accepts,
  e.g. decimal ``2852039166`` or octal ``0251.0376.0251.0376``; ``localhost``,
  ``*.local``/``*.internal`` names, metadata names, single-label hosts) unless
  allow-listed;
* ``published_time`` as RFC 3339 text with a UTC offset or UTC epoch seconds,
  positive and at most ``future_tolerance_s`` in the future (:func:`published_time`).

The same URL and text checks apply to WebSub deliveries (:mod:`newsflow.crawler.websub`).
"""

from __future__ import annotations

import math
import unicodedata
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from newsflow.core.netsafety import literal_host_problem, parse_ip_literal
from newsflow.core.timeutil import MissingOffsetError, rfc3339_to_epoch
from newsflow.core.urls import canonicalize_url, source_domain
from newsflow.crawler.safety import AddressPolicy
from newsflow.schemas import RawDocument

if TYPE_CHECKING:
    from newsflow.crawler.push import PushConfig

FIELDS = frozenset({"url", "title", "summary", "body", "published_time", "source_name"})
"""The fields a pushed document may have."""


def _printable(value: str, limit: int) -> str:
    """``repr`` of at most ``limit`` characters of ``value``, safe to encode as UTF-8 (surrogates escaped)."""
    return repr(value[:limit]).encode("utf-8", "backslashreplace").decode("utf-8")


def text_problem(name: str, value: str, controls: bool = False) -> str | None:
    """Why a pushed string field cannot be stored, or ``None`` if it can.

    Args:
      name: field name, used in the reason.
      value: the decoded JSON string.
      controls: also refuse every control character (Unicode category ``Cc``: C0, DEL, C1);
        otherwise only NUL is refused.

    Returns:
      A reason naming the field and the character offset: a lone surrogate (JSON
      ``"\\ud800"`` decodes to one; it cannot be encoded as UTF-8), NUL, or a control character.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        return (
            f"{name} contains a lone surrogate U+{ord(value[e.start]):04X} at character {e.start} (not valid Unicode)"
        )
    if controls:
        for i, c in enumerate(value):
            if unicodedata.category(c) == "Cc":
                return f"{name} contains control character U+{ord(c):04X} at character {i}"
        return None
    i = value.find("\0")
    return f"{name} contains control character U+0000 at character {i}" if i >= 0 else None


def check_push_url(url: Any, config: PushConfig) -> str:
    """Validates a pushed article URL without DNS; returns it stripped of surrounding spaces.

    Raises:
      ValueError: with the reason: not a string, a lone surrogate, a control character
        (CR, LF, TAB, NUL ...), whitespace inside, longer than ``max_url_chars``, not
        absolute http(s), user info present, or a host that
        :func:`newsflow.core.netsafety.literal_host_problem` refuses (forbidden IP literal in any
        form, e.g. octal ``0251.0376.0251.0376``; local, metadata or single-label names)
        unless allow-listed.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError("url must be a non-empty string")
    problem = text_problem("url", url, controls=True)
    if problem:
        raise ValueError(problem)
    url = url.strip(" ")
    if len(url) > config.max_url_chars:
        raise ValueError(f"url is longer than {config.max_url_chars} characters")
    if any(c.isspace() for c in url):
        raise ValueError("url contains whitespace (spaces must be percent-encoded as %20)")
    canonicalize_url(url)  # raises ValueError for non-http(s), no host, bad port
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise ValueError("url must not contain user info")
    host = (parts.hostname or "").rstrip(".").lower()
    if host in {h.strip().lower().rstrip(".") for h in config.allow_hosts}:
        return url
    problem = literal_host_problem(host)
    if problem:
        policy = AddressPolicy(config.allow_hosts)
        ip = parse_ip_literal(host)
        if ip is not None and policy.ip_allowed(str(ip)):
            return url
        raise ValueError(f"url host {host!r} is not a public host: {problem}")
    return url


def published_time(value: Any, now: float, config: PushConfig) -> float | None:
    """UTC epoch seconds of a pushed ``published_time``, ``None`` when it is absent.

    Args:
      value: the decoded JSON value: RFC 3339 text with a UTC offset (``"2024-05-01T10:00:00Z"``),
        a number of UTC epoch seconds, or ``None``.
      now: UTC epoch seconds of the server clock.
      config: holds ``future_tolerance_s``.

    Raises:
      ValueError: with the reason: another type (a boolean too), text that is not RFC 3339
        or has no offset, a time that is not positive and finite, or one more than
        ``future_tolerance_s`` after ``now``.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("published_time must be RFC 3339 text or epoch seconds")
    if isinstance(value, (int, float)):
        try:
            t = float(value)
        except OverflowError:  # a JSON integer too large for a float
            raise ValueError("published_time must be a positive finite time") from None
    elif isinstance(value, str):
        try:
            t = rfc3339_to_epoch(value)
        except MissingOffsetError:
            raise ValueError("published_time needs a time zone offset (e.g. 'Z' or '+02:00')") from None
        except ValueError:
            raise ValueError(f"published_time is not RFC 3339: {_printable(value, 40)}") from None
    else:
        raise ValueError("published_time must be RFC 3339 text or epoch seconds")
    if not math.isfinite(t) or t <= 0:
        raise ValueError("published_time must be a positive finite time")
    if t > now + config.future_tolerance_s:
        raise ValueError(f"published_time is more than {config.future_tolerance_s:g} s in the future")
    return t


def validate_document(doc: Any, client: str, now: float, config: PushConfig) -> RawDocument:
    """Turns one pushed JSON object into a RawDocument.

    Args:
      doc: the decoded JSON value.
      client: authenticated client name (kept as ``feed_url = "push:<client>"``).
      now: UTC epoch seconds, becomes ``fetch_time``.
      config: limits.

    Returns:
      A RawDocument with ``http_status`` 0; ``body`` is the UTF-8 of the pushed
      ``body`` (``content_type`` ``text/html; charset=utf-8``) or ``None``.

    Raises:
      ValueError: whose ``args`` are all the reasons the document is refused.
    """
    if not isinstance(doc, dict):
        raise ValueError(f"a document must be a JSON object, got {type(doc).__name__}")
    reasons = []
    unknown = sorted(set(doc) - FIELDS)
    if unknown:
        shown = ", ".join(k[:40].encode("utf-8", "backslashreplace").decode("utf-8") for k in unknown[:10])
        reasons.append(f"unknown field(s): {shown}" + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""))
    url = None
    try:
        url = check_push_url(doc.get("url"), config)
    except ValueError as e:
        reasons.append(str(e))
    title = doc.get("title")
    if not isinstance(title, str) or not title.strip():
        reasons.append("title must be a non-empty string")
    elif len(title) > config.max_title_chars:
        reasons.append(f"title is longer than {config.max_title_chars} characters")
    elif problem := text_problem("title", title, controls=True):
        reasons.append(problem)
    summary, body = doc.get("summary"), doc.get("body")
    for name, value in (("summary", summary), ("body", body), ("source_name", doc.get("source_name"))):
        if value is not None and not isinstance(value, str):
            reasons.append(f"{name} must be a string")
        elif value is not None and (problem := text_problem(name, value, controls=name == "source_name")):
            reasons.append(problem)
    if isinstance(summary, str) and len(summary) > config.max_summary_chars:
        reasons.append(f"summary is longer than {config.max_summary_chars} characters")
    if not any(isinstance(v, str) and v.strip() for v in (summary, body)):
        reasons.append("summary or body is required")
    published = None
    try:
        published = published_time(doc.get("published_time"), now, config)
    except ValueError as e:
        reasons.append(str(e))
    if reasons:
        raise ValueError(*reasons)
    has_body = isinstance(body, str) and body.strip()
    return RawDocument(
        url=url,
        source_domain=source_domain(url),
        fetch_time=now,
        http_status=0,
        content_type="text/html; charset=utf-8" if has_body else "",
        body=body.encode("utf-8") if has_body else None,
        title=title.strip(),
        summary=summary.strip() if isinstance(summary, str) and summary.strip() else None,
        published_time=published,
        source_name=(doc.get("source_name") or "").strip() or None,
        feed_url=f"push:{client}",
    )
