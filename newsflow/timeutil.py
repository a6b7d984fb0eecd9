"""Time parsing and formatting: the text forms of a time in feeds, pages, pushes, HTTP and Redis.

Every time in newsflow is a ``float`` of UTC epoch seconds (seconds since
1970-01-01T00:00:00Z, leap seconds ignored, as :func:`time.time` gives). This
module turns the text forms the system meets into that number and back. It is
pure standard library and never reads the clock.

Parsers, by caller (their rules differ on purpose, so that each caller keeps
exactly the behaviour it had):

- :func:`iso_to_epoch`: ISO 8601 text, naive means UTC; raises ``ValueError``.
- :func:`iso_to_epoch_or_none`: sitemap ``<lastmod>`` / ``<news:publication_date>``; ``None`` when bad.
- :func:`page_date_to_epoch`: htmldate page dates, with whether a time of day was given; ``(None, False)`` when bad.
- :func:`epoch_or_iso_to_epoch`: ``--now`` / ``--replay-clock`` values (epoch seconds or ISO 8601);
  raises ``ValueError``.
- :func:`rfc3339_to_epoch`: a pushed ``published_time`` (the UTC offset is required); raises ``ValueError``.
- :func:`http_date_to_epoch`: HTTP-date headers (``Retry-After``); ``None`` when bad.
- :func:`struct_time_to_epoch`: feedparser's ``*_parsed`` UTC ``struct_time``.

Formatters: :func:`format_epoch` (the exact text a time is stored as in Redis
hashes; ``float()`` reads it back bit for bit) and :func:`utc_date`
(``YYYY-MM-DD`` of the UTC day, for date partitions and date limits).

``"Z"`` handling: Python 3.11's :meth:`datetime.fromisoformat` accepts a
trailing ``Z``. The feed and page parsers also rewrite every ``Z`` to
``+00:00`` first (``replace_z=True``, as they always have); the flag
and push parsers pass the text unchanged (``replace_z=False``). Both read
``2024-05-02T06:00:00Z`` the same; they differ only on malformed text such as
``2024-05-02Z`` (naive midnight with the rewrite, ``ValueError`` without).
"""

from __future__ import annotations

import calendar
import datetime as _dt
import email.utils

_UTC = _dt.UTC
_PAGE_DATE_FORMATS = ("%Y-%m-%dT%H:%M:%S%z", "%Y-%m-%d")


class MissingOffsetError(ValueError):
    """An ISO 8601 time without a UTC offset where one is required (see :func:`rfc3339_to_epoch`)."""


def iso_datetime(text: str, *, replace_z: bool = True) -> _dt.datetime:
    """Parses ISO 8601 text with :meth:`datetime.datetime.fromisoformat`; no stripping.

    Args:
      text: e.g. ``"2024-05-02T06:00:00Z"``, ``"2024-05-02T08:00:00+02:00"``, ``"2024-05-02"``.
      replace_z: rewrite every ``"Z"`` to ``"+00:00"`` before parsing (see the module docstring).

    Returns:
      The datetime; aware when the text has an offset, naive otherwise.

    Raises:
      ValueError: the text is not ISO 8601 in a form Python accepts.
    """
    return _dt.datetime.fromisoformat(text.replace("Z", "+00:00") if replace_z else text)


def _epoch(d: _dt.datetime) -> float:
    """UTC epoch seconds of ``d``; a naive ``d`` is taken as UTC."""
    if d.tzinfo is None:
        d = d.replace(tzinfo=_UTC)
    return d.timestamp()


def iso_to_epoch(text: str, *, replace_z: bool = True) -> float:
    """UTC epoch seconds of ISO 8601 text; a time without offset is UTC.

    Example: ``iso_to_epoch("2024-05-02T06:00:00Z") == 1714629600.0``.

    Args:
      text: ISO 8601 date or date-time (not stripped).
      replace_z: see :func:`iso_datetime`.

    Raises:
      ValueError: the text does not parse.
    """
    return _epoch(iso_datetime(text, replace_z=replace_z))


def iso_to_epoch_or_none(text: str | None) -> float | None:
    """UTC epoch seconds of ISO 8601 text (stripped; naive means UTC), ``None`` if empty or invalid.

    The sitemap parser's rule: a bad ``<lastmod>`` is simply unknown.
    """
    text = (text or "").strip()
    if not text:
        return None
    try:
        return iso_to_epoch(text)
    except ValueError:
        return None


def page_date_to_epoch(value: str) -> tuple[float | None, bool]:
    """Parses a page date (htmldate output or ISO 8601) to ``(UTC epoch seconds, has_time_of_day)``.

    The text is stripped and tried as ISO 8601 (``Z`` rewritten), then with
    ``strptime`` as ``%Y-%m-%dT%H:%M:%S%z`` and ``%Y-%m-%d`` (which also accept
    unpadded fields such as ``2024-5-2``). A time without offset is UTC.
    ``has_time_of_day`` is True when the text has an offset, or is longer than a
    date and its time is not exactly midnight: htmldate writes ``T00:00:00``
    for a page that gave only a day.

    Examples: ``"2024-05-02T06:00:00Z"`` -> ``(1714629600.0, True)``;
    ``"2024-05-02"`` -> ``(1714608000.0, False)``.

    Returns:
      ``(None, False)`` for "" or text that does not parse; never raises.
    """
    if not value:
        return None, False
    value = value.strip()
    try:
        d = iso_datetime(value)
    except ValueError:
        for fmt in _PAGE_DATE_FORMATS:
            try:
                d = _dt.datetime.strptime(value, fmt)
                break
            except ValueError:
                continue
        else:
            return None, False
    has_time = d.tzinfo is not None or (len(value) > 10 and (d.hour, d.minute, d.second) != (0, 0, 0))
    return _epoch(d), has_time


def epoch_or_iso_to_epoch(value: str) -> float:
    """UTC epoch seconds from epoch seconds text (``"1714629600"``) or ISO 8601 (naive means UTC).

    The text is tried with :func:`float` first (which allows surrounding spaces,
    ``"nan"`` and ``"inf"``), then as ISO 8601 without stripping and without the
    ``Z`` rewrite (``replace_z=False``).

    Raises:
      ValueError: neither form parses.
    """
    try:
        return float(value)
    except ValueError:
        pass
    return iso_to_epoch(value, replace_z=False)


def rfc3339_to_epoch(text: str) -> float:
    """UTC epoch seconds of an RFC 3339 / ISO 8601 date-time that states its UTC offset.

    The text is stripped and parsed without the ``Z`` rewrite; ``Z`` and
    ``+02:00`` style offsets are accepted.

    Raises:
      MissingOffsetError: (a ``ValueError``) the text parses but has no offset.
      ValueError: the text does not parse.
    """
    d = iso_datetime(text.strip(), replace_z=False)
    if d.tzinfo is None:
        raise MissingOffsetError(f"time has no UTC offset: {text[:40]!r}")
    return d.timestamp()


def http_date_to_epoch(value: str) -> float | None:
    """UTC epoch seconds of an HTTP-date (RFC 9110, e.g. ``"Thu, 02 May 2024 06:00:00 GMT"``).

    Parsed with :func:`email.utils.parsedate_to_datetime` (RFC 5322 date syntax,
    which covers HTTP's IMF-fixdate). A date with the ``-0000`` zone comes back naive and is converted by
    :meth:`datetime.datetime.timestamp` as local time (as the crawler always did;
    on a UTC host that is UTC).

    Returns:
      The time, or ``None`` when the text is not a date.
    """
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return when.timestamp()


def struct_time_to_epoch(t) -> float:
    """UTC epoch seconds of a UTC :class:`time.struct_time` (or 6+-tuple), as feedparser's ``*_parsed`` give.

    Raises:
      TypeError, ValueError: ``t`` is not a time tuple.
    """
    return float(calendar.timegm(t))


def format_epoch(value: float | None) -> str:
    """Text of a UTC epoch time as stored in Redis hashes: ``repr(float(value))``, "" for ``None``.

    ``float(format_epoch(t)) == t`` exactly. Example: ``format_epoch(1714629600) == "1714629600.0"``.
    """
    return "" if value is None else repr(float(value))


def utc_date(epoch_s: float) -> str:
    """``YYYY-MM-DD`` of the UTC day holding ``epoch_s`` (UTC epoch seconds).

    Example: ``utc_date(1714629600.0) == "2024-05-02"``.

    Raises:
      OverflowError, OSError, ValueError: the time is outside what :mod:`datetime` represents.
    """
    return _dt.datetime.fromtimestamp(epoch_s, tz=_UTC).strftime("%Y-%m-%d")
