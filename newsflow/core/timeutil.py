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
- :func:`feed_zone_date_to_epoch`: an RFC 822 feed date whose zone is an abbreviation
  (``AEDT``, ``CET``); ``(None, True)`` when the abbreviation cannot be resolved, never UTC.

Time-zone abbreviations (:func:`zone_abbreviation_offset_s`): the RFC 5322 section 4.3
names (``UT``, ``GMT``, ``EST``/``EDT``, ``CST``/``CDT``, ``MST``/``MDT``, ``PST``/``PDT``,
US zones by definition) plus every abbreviation that the IANA time zone database (the pinned
``tzdata`` package, read from the package, never from the host) uses with one single UTC offset
in the years 2019-2030. An abbreviation the database uses with several offsets (``IST``: India
+05:30, Ireland +01:00, Israel +02:00) resolves only with a country (ISO 3166 code, from the
feed's declared language region or the outlet's country-code TLD): the offsets it has in that
country's zones (the database's ``zone.tab``) when they are one. Without that evidence, or for a
name the database does not use (``QQT``), the time is unknown, never UTC.

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
import functools
import re

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


# RFC 5322 section 4.3 obs-zone names: fixed by the standard, they win over the database
_RFC5322_ZONES = {
    "UT": 0,
    "UTC": 0,
    "GMT": 0,
    "EST": -5 * 3600,
    "EDT": -4 * 3600,
    "CST": -6 * 3600,
    "CDT": -5 * 3600,
    "MST": -7 * 3600,
    "MDT": -6 * 3600,
    "PST": -8 * 3600,
    "PDT": -7 * 3600,
}
_ZONE_YEARS = range(2019, 2031)
_ZONE_TAIL_RE = re.compile(r"^(?P<head>.*\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?)\s*(?P<zone>[A-Za-z]{2,6})\s*$")


@functools.cache
def _zone_abbreviations() -> dict[str, int | None]:
    """``{ABBREVIATION: offset seconds or None when ambiguous}`` from the tzdata package (see module doc)."""
    import importlib.resources

    offsets = _zone_offsets(importlib.resources.files("tzdata").joinpath("zones").read_text(encoding="ascii").split())
    table: dict[str, int | None] = {k: (next(iter(v)) if len(v) == 1 else None) for k, v in offsets.items()}
    table.update(_RFC5322_ZONES)
    return table


def _zone_offsets(zone_names) -> dict[str, set[int]]:
    """``{ABBREVIATION: {offset seconds}}`` the given tzdata zones use in :data:`_ZONE_YEARS`."""
    import importlib.resources
    import zoneinfo

    root = importlib.resources.files("tzdata")
    offsets: dict[str, set[int]] = {}
    for name in zone_names:
        with root.joinpath("zoneinfo", *name.split("/")).open("rb") as fh:
            zone = zoneinfo.ZoneInfo.from_file(fh, key=name)
        for year in _ZONE_YEARS:
            for month in (1, 4, 7, 10):
                local = _dt.datetime(year, month, 15, 12, tzinfo=_UTC).astimezone(zone)
                abbr = local.tzname() or ""
                if abbr and abbr[0] not in "+-":
                    offsets.setdefault(abbr.upper(), set()).add(int(local.utcoffset().total_seconds()))
    return offsets


@functools.cache
def _country_zone_abbreviations(country: str) -> dict[str, set[int]]:
    """The abbreviations of one country's zones (tzdata ``zone.tab``: ``CC  coordinates  zone``)."""
    import importlib.resources

    text = importlib.resources.files("tzdata").joinpath("zoneinfo", "zone.tab").read_text(encoding="utf-8")
    rows = (line.split("\t") for line in text.splitlines() if line and line[0] != "#")
    zones = [f[2] for f in rows if f[0] == country]
    return _zone_offsets(zones)


def zone_abbreviation_offset_s(abbr: str, country: str | None = None) -> int | None:
    """UTC offset in seconds of a time-zone abbreviation, ``None`` when it is unknown or ambiguous.

    Args:
      abbr: the name, case-insensitive.
      country: ISO 3166-1 alpha-2 code of the publisher's country, used only for a name the
        database gives several offsets (module doc).

    Examples: ``"AEDT"`` -> ``39600``, ``"CET"`` -> ``3600``, ``"EST"`` -> ``-18000``, ``"IST"`` ->
    ``None`` (three offsets), ``("IST", "IN")`` -> ``19800``, ``("IST", "IE")`` -> ``3600``,
    ``("IST", "IL")`` -> ``7200``, ``"XYZ"`` -> ``None``.
    """
    key = abbr.strip().upper()
    table = _zone_abbreviations()
    offset = table.get(key)
    if offset is None and key in table and country and len(country) == 2 and country.isalpha():
        local = _country_zone_abbreviations(country.upper()).get(key, set())
        return next(iter(local)) if len(local) == 1 else None
    return offset


def feed_zone_date_to_epoch(text: str, country: str | None = None) -> tuple[float | None, bool]:
    """Reads a date whose zone is a name: RFC 822 (``"Mon, 04 Nov 2024 08:00:00 AEDT"``) or ISO 8601
    date and time followed by a name (``"2024-03-06 10:00:00 CET"``).

    Args:
      text: the date text.
      country: the publisher's ISO 3166 country code, for names with several offsets (``IST``).

    Returns:
      ``(epoch, True)`` when the text ends in a zone name that resolves
      (:func:`zone_abbreviation_offset_s`) and the rest is an RFC 822 or a naive ISO 8601 date-time;
      ``(None, True)`` when it ends in a zone name that does not resolve or the date part does not
      parse (the time is unknown: never read as UTC);
      ``(None, False)`` when the text does not end in a zone name (numeric offsets, ISO 8601 with
      ``Z`` or an offset: the caller's other parser applies). Example: ``"Wed, 06 Mar 2024 10:00:00 CET"`` ->
      ``(1709715600.0, True)`` (09:00Z).
    """
    m = _ZONE_TAIL_RE.match((text or "").strip())
    if not m:
        return None, False
    offset = zone_abbreviation_offset_s(m.group("zone"), country)
    if offset is None:
        return None, True
    sign = "-" if offset < 0 else "+"
    hh, mm = divmod(abs(offset) // 60, 60)
    try:
        parsed = email.utils.parsedate_tz(f"{m.group('head')} {sign}{hh:02d}{mm:02d}")
    except (TypeError, ValueError, IndexError):
        parsed = None
    if parsed is not None and parsed[9] is not None:
        try:
            return float(email.utils.mktime_tz(parsed)), True
        except (OverflowError, ValueError):
            return None, True
    try:  # an ISO 8601 date-time followed by a zone name ("2024-03-06 10:00:00 CET")
        local = iso_datetime(m.group("head").strip(), replace_z=False)
    except ValueError:
        return None, True
    if local.tzinfo is not None:
        return None, True  # an offset and a zone name: contradictory, unknown
    return local.replace(tzinfo=_UTC).timestamp() - offset, True


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
