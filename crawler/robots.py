"""robots.txt (RFC 9309) for the crawl tier: matching on protego, status-code policy, cache records.

Allow/disallow decisions and ``Crawl-delay``/``Request-rate`` come from
`protego <https://github.com/scrapy/protego>`_. In front of it sits a thin
normalization layer, written from RFC 9309 and RFC 3986, that rewrites a
robots.txt into the plain ``field: value`` lines protego reads and fixes the
cases where protego on its own disagrees with the conformance vectors in
``../shared/data/robotstxt-conformance``:

1. **Bytes and lines.** A leading UTF-8 byte-order mark (or a truncated one)
   is dropped; lines end at CR, LF or CRLF (RFC 9309 section 2.2, ``EOL``) and
   nothing else (protego's ``str.splitlines`` would also split on form feeds,
   U+2028 and others); only the first :data:`ROBOTS_MAX_BYTES` (500 KiB, the
   minimum parsing limit of RFC 9309 section 2.5) are read, up to the end of the
   last line that is whole within them (:func:`parse_prefix`: a line cut by the
   limit is dropped, so a rule cut mid-path never becomes a shorter, different
   rule), and each line is cut after :data:`MAX_LINE_BYTES`, so a very long rule
   still applies as its prefix. The crawler fetches no more than that limit
   either (``Fetcher.fetch(prefix_limit=...)``): a bigger file is parsed as its
   prefix, like Google, which ignores content after its limit, instead of being
   refused as too large.
2. **Records.** ``#`` starts a comment (section 2.2.3); a field name is matched
   case-insensitively (section 2.1); a missing colon is tolerated when the line
   is ``name value`` with a one-word value (``disallow /``). Lines that are not
   ``user-agent``/``allow``/``disallow`` or one of the other records protego
   knows (``sitemap``, ``crawl-delay``, ``request-rate``, ``visit-time``,
   ``host``) are dropped, because other records "MUST NOT terminate a group"
   (section 2.2.4) and protego ends a group on any unknown line.
3. **User agents** (section 2.2.1). A ``user-agent`` value is reduced to its
   product token, the leading run of ``[A-Za-z_-]`` (``FOO BAR`` -> ``FOO``,
   ``FooBot/2.1`` -> ``FooBot``), or ``*``. Groups are then matched to the
   crawler by case-insensitive *equality* of product tokens: protego on its own
   applies a group to every crawler name that contains its token at a word
   start (group ``foo`` would govern crawler ``foobar``), so the layer renames
   each group to either the crawler's token, ``*`` or :data:`_UNMATCHED_GROUP`
   before protego sees it. The crawler passes its product token
   (``CrawlerConfig.robots_agent``), not its full ``User-Agent`` header; a name
   that is not a valid product token only ever gets the ``*`` group.
4. **Percent-encoding** (section 2.2.2, RFC 3986 section 2.1). In rule paths,
   octets outside printable ASCII and the characters RFC 3986 never allows
   in a URI (space, ``"<>\\^`{|}``) are percent-encoded, and the hex digits of
   existing escapes are upper-cased; in request paths the same is done except
   for non-ASCII characters, which are left as they are (a URL with raw
   non-ASCII characters is not a URI; callers that will send the request
   percent-encode it first, see :func:`to_request_uri`). Escapes are then
   compared as written: protego decodes escapes of unreserved characters
   (``/%62az`` == ``/baz``), the conformance vectors do not, so every ``%XX``
   reaches protego as ``%25XX``, which protego keeps verbatim on both sides.

:class:`RobotsPolicy` adds the RFC 9309 section 2.3.1 status rules:
2xx parse the body; 4xx other than 429 (unavailable) allow everything; 5xx,
429 Too Many Requests or an unreachable host disallow everything until a retry
time, :data:`ROBOTS_ERROR_RETRY_S` (30 min) or the response's ``Retry-After``
when longer (at most 24 h); other results are cached 24 hours (section 2.4).
Times are UTC epoch seconds.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass

from protego import Protego

ROBOTS_MAX_BYTES = 500 * 1024
"""Bytes of a robots.txt that are fetched and parsed (RFC 9309 section 2.5: crawlers SHOULD impose a
parsing limit, which MUST be at least 500 KiB); what follows is ignored (:func:`parse_prefix`)."""

MAX_LINE_BYTES = 16 * 1024
"""A line is cut after this many bytes; the rest of it is ignored."""

_UNMATCHED_GROUP = "0"
"""Name given to groups that do not match the crawler. Digits are not allowed in a
product token (RFC 9309 section 2.2.1), so protego can never match it to a crawler name."""

_UNMATCHED_QUERY = "unmatched-agent"
"""Name asked of protego when the caller's name is not a product token (only ``*`` applies)."""

_EOL = re.compile(rb"\r\n|\r|\n")
_TOKEN = re.compile(r"[A-Za-z_-]+")
_FIELDS = {
    "user-agent": "user-agent",
    "useragent": "user-agent",
    "user agent": "user-agent",
    "allow": "allow",
    # protego's accepted misspellings; RFC 9309 section 2.2.4 lets crawlers be lenient
    "disallow": "disallow",
    "dissallow": "disallow",
    "dissalow": "disallow",
    "disalow": "disallow",
    "diasllow": "disallow",
    "disallaw": "disallow",
    "sitemap": "sitemap",
    "sitemaps": "sitemap",
    "site-map": "sitemap",
    "crawl-delay": "crawl-delay",
    "crawl delay": "crawl-delay",
    "request-rate": "request-rate",
    "request rate": "request-rate",
    "visit-time": "visit-time",
    "visit time": "visit-time",
    "host": "host",
}
# an escape, or an octet that must be escaped in a rule path: not printable ASCII, or excluded by RFC 3986
_PATTERN_OCTET = re.compile(rb'%[0-9A-Fa-f]{2}|[^\x21-\x7e]|["<>\\^`{|}]')
# the same for a request path, minus non-ASCII octets (left for the caller to encode)
_PATH_OCTET = re.compile(rb'%[0-9A-Fa-f]{2}|[\x00-\x20\x7f]|["<>\\^`{|}]')
_ESCAPE = re.compile(r"%([0-9A-F]{2})")
_SCHEME_AUTHORITY = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_LINE_BREAKERS = re.compile("[\x00-\x1f\x7f\x85\u2028\u2029]")


def is_product_token(name: str) -> bool:
    """True when ``name`` is a valid robots.txt product token (RFC 9309 section 2.2.1).

    A product token is one or more of ``A-Z a-z - _``; e.g. ``"Foo_Bar-bot"`` is
    valid, ``""``, ``"Foobot/2.1"``, ``"Foo Bar"`` and ``"Foobot*"`` are not.
    """
    return bool(_TOKEN.fullmatch(name or ""))


def product_token(value: str) -> str:
    """The product token at the start of a ``user-agent`` value (``""`` when there is none).

    Example: ``product_token("FooBot/1.0 (+http://x)") == "FooBot"``.
    """
    m = _TOKEN.match(value)
    return m.group(0) if m else ""


def normalize_pattern(pattern: str | bytes) -> str:
    """Percent-encoding normal form of an allow/disallow path (RFC 9309 2.2.2, RFC 3986 2.1).

    Octets outside printable ASCII (UTF-8 of non-ASCII characters, controls,
    space) and ``"<>\\^`{|}`` are percent-encoded with upper-case hex; the hex of
    existing ``%xx`` escapes is upper-cased; everything else, including ``*`` and
    ``$``, is kept. Example: ``"/á/%aa"`` -> ``"/%C3%A1/%AA"``.

    Args:
      pattern: the rule value; ``str`` is taken as UTF-8.

    Returns:
      An ASCII string.
    """
    raw = pattern.encode("utf-8", "surrogateescape") if isinstance(pattern, str) else pattern
    return _PATTERN_OCTET.sub(_escape_octet, raw).decode("ascii")


def _escape_octet(m: re.Match) -> bytes:
    s = m.group(0)
    return s.upper() if len(s) == 3 else b"%%%02X" % s[0]


def path_and_query(url: str) -> str:
    """The part of ``url`` that robots.txt rules are matched against: path, params and query.

    The fragment is dropped; ``scheme://authority``, ``//authority`` or, for a
    URL written without a scheme (``example.com/a``), the leading host is
    removed; the result always starts with ``/`` (``"/"`` when there is no path).
    Nothing is decoded or encoded.

    Examples: ``"http://h/a/b?c=http://d.e/#f"`` -> ``"/a/b?c=http://d.e/"``,
    ``"example.com?a"`` -> ``"/?a"``, ``""`` -> ``"/"``.
    """
    s = url.partition("#")[0]
    m = _SCHEME_AUTHORITY.match(s)
    if m:
        rest = s[m.end() :]
    elif s.startswith("//"):
        rest = s[2:]
    elif s.startswith("/"):
        return s
    else:
        rest = s
    cut = [i for i in (rest.find("/"), rest.find("?")) if i != -1]
    if not cut:
        return "/"
    path = rest[min(cut) :]
    return path if path.startswith("/") else "/" + path


def to_request_uri(url: str) -> str:
    """``url`` as an HTTP client sends it: non-ASCII characters percent-encoded as UTF-8 (RFC 3986 2.1).

    Example: ``"http://h/ツ"`` -> ``"http://h/%E3%83%84"``. ASCII is left unchanged.
    """
    if url.isascii():
        return url
    return "".join(
        c if c.isascii() else "".join(f"%{b:02X}" for b in c.encode("utf-8", "surrogateescape")) for c in url
    )


def _protect_escapes(text: str) -> str:
    """Writes each ``%XX`` as ``%25XX`` so protego compares escapes as written instead of decoding them."""
    return _ESCAPE.sub(r"%25\1", text)


def parse_prefix(body: bytes, truncated: bool = False, limit: int = ROBOTS_MAX_BYTES) -> bytes:
    """The part of a robots.txt that is parsed (RFC 9309 section 2.5 parsing limit).

    A body of at most ``limit`` bytes that was not cut (``truncated`` False) is returned whole.
    Otherwise its first ``limit`` bytes are kept up to and including the last end of line
    (CR or LF) among them: the line the limit cuts is dropped, since its start may be a
    different rule (``Disallow: /news-archive`` cut to ``Disallow: /ne``). With no end of
    line in the prefix nothing is left (``b""``, which allows everything).

    Args:
      body: robots.txt bytes as received (after content decoding).
      truncated: the fetch kept only this prefix of a longer body
        (:attr:`newsflow.crawler.fetch.FetchResult.truncated`), so its last line may be cut.
      limit: the parsing limit in bytes.

    Example:
      >>> parse_prefix(b"Allow: /\\nDisallow: /news-archive\\n", limit=14)
      b'Allow: /\\n'
    """
    if not truncated and len(body) <= limit:
        return body
    head = body[:limit]
    last_eol = max(head.rfind(b"\n"), head.rfind(b"\r"))
    return head[: last_eol + 1]


def _read_records(body: bytes) -> list[tuple[str, str]]:
    """Splits a robots.txt into ``(field, value)`` records in protego's vocabulary (module doc, steps 1-4).

    ``user-agent`` values become a lower-case product token, ``"*"`` or ``""``;
    allow/disallow values become protected normalized patterns.
    """
    if body[:3] == b"\xef\xbb\xbf":
        body = body[3:]
    elif body[:2] == b"\xef\xbb" or (body[:1] == b"\xef" and body[1:2].isascii()):
        body = body[2:] if body[:2] == b"\xef\xbb" else body[1:]
    body = parse_prefix(body)
    records = []
    for line in _EOL.split(body):
        rec = _parse_line(line[:MAX_LINE_BYTES])
        if rec is None:
            continue
        field, value = rec
        if field == "user-agent":
            first = value.split()[0].decode("latin-1") if value.split() else ""
            text = "*" if first == "*" else product_token(first).lower()
        elif field in ("allow", "disallow"):
            text = _protect_escapes(normalize_pattern(value))
        else:
            text = _LINE_BREAKERS.sub("", value.decode("utf-8", "replace"))
        records.append((field, text))
    return records


def _parse_line(line: bytes) -> tuple[str, bytes] | None:
    """``(field, value)`` of one line, or ``None`` for blank, comment-only or unknown lines."""
    line = line.split(b"#", 1)[0].strip()
    if not line:
        return None
    name, colon, value = line.partition(b":")
    field = _FIELDS.get(name.strip().lower().decode("latin-1"))
    if colon and field:
        return field, value.strip()
    words = line.split(None, 1)
    if len(words) == 2 and len(words[1].split()) == 1:
        field = _FIELDS.get(words[0].lower().decode("latin-1"))
        if field:
            return field, words[1].strip()
    return None


class RobotsMatcher:
    """A parsed robots.txt answering "may this crawler fetch this URL", via protego.

    The body is normalized once (module doc); one protego parser per crawler
    name is built on first use and kept.

    Args:
      body: robots.txt bytes (``str`` is encoded as UTF-8).

    Example:
      >>> RobotsMatcher(b"User-agent: *\\nDisallow: /private").allowed("http://a.b/private/x", "newsflow")
      False
    """

    def __init__(self, body: bytes | str):
        if isinstance(body, str):
            body = body.encode("utf-8", "surrogateescape")
        self._records = _read_records(body)
        self._parsers: dict[str, tuple[Protego, str]] = {}

    def _parser(self, user_agent: str) -> tuple[Protego, str]:
        """protego parser with groups renamed for ``user_agent``, and the name to query it with."""
        hit = self._parsers.get(user_agent)
        if hit is not None:
            return hit
        me = user_agent.lower() if is_product_token(user_agent) else None
        lines = []
        for field, text in self._records:
            if field == "user-agent" and text != "*":
                text = me if (me is not None and text == me) else _UNMATCHED_GROUP
            lines.append(f"{field}: {text}")
        hit = (Protego.parse("\n".join(lines)), me or _UNMATCHED_QUERY)
        self._parsers[user_agent] = hit
        return hit

    def allowed(self, url: str, user_agent: str) -> bool:
        """True when ``user_agent`` may fetch ``url``.

        Args:
          url: absolute URL (or a path); only path, params and query are matched,
            as given (percent-encode non-ASCII first, see :func:`to_request_uri`).
          user_agent: the crawler's product token, e.g. ``"newsflow-crawler"``;
            matched case-insensitively against the file's groups.
        """
        parser, name = self._parser(user_agent)
        path = path_and_query(url).encode("utf-8", "surrogateescape")
        path = _PATH_OCTET.sub(_escape_octet, path).decode("utf-8", "surrogateescape")
        return parser.can_fetch("http://robots.invalid" + _protect_escapes(path), name)

    def crawl_delay(self, user_agent: str) -> float | None:
        """``Crawl-delay`` (or seconds per request from ``Request-rate``) of the group for ``user_agent``.

        Returns:
          Seconds (float), or ``None`` when the group sets neither.
        """
        parser, name = self._parser(user_agent)
        delay = parser.crawl_delay(name)
        if delay is None:
            rate = parser.request_rate(name)
            if rate is not None and rate.requests:
                delay = rate.seconds / rate.requests
        return None if delay is None else float(delay)

    @property
    def sitemaps(self) -> list[str]:
        """``Sitemap`` URLs listed in the file, in order."""
        return [text for field, text in self._records if field == "sitemap"]


def is_user_agent_allowed(robots_txt: str | bytes, user_agent: str, url: str) -> bool:
    """One-shot form of :meth:`RobotsMatcher.allowed` (the conformance-vector signature)."""
    return RobotsMatcher(robots_txt).allowed(url, user_agent)


@functools.lru_cache(maxsize=64)
def _matcher_for(body: bytes) -> RobotsMatcher:
    return RobotsMatcher(body)


# --------------------------------------------------------------------------- policy


ROBOTS_TTL_S = 24 * 3600.0
"""Seconds a robots.txt verdict from a 2xx or an "unavailable" 4xx is kept (RFC 9309 section 2.4)."""

ROBOTS_ERROR_RETRY_S = 30 * 60.0
"""Seconds a host stays disallowed after a 5xx, a 429 or an unreachable robots.txt before it is asked again."""


def robots_unavailable(status: int) -> bool:
    """True for an "unavailable" robots.txt status: 4xx other than 429 (RFC 9309 2.3.1.3: allow all).

    429 Too Many Requests is the server asking the crawler to slow down, not a missing
    file, so it counts as "unreachable" with the 5xx (RFC 9309 2.3.1.4).
    """
    return 400 <= status < 500 and status != 429


@dataclass(frozen=True)
class RobotsPolicy:
    """What the crawler may do on one host, from one robots.txt fetch.

    Attributes:
      host_key: ``scheme://host[:port]`` the file applies to.
      status: HTTP status of the robots.txt fetch; 0 when unreachable.
      body: the robots.txt bytes (empty unless 2xx).
      fetched_at: UTC epoch seconds of the fetch.
      expires_at: UTC epoch seconds after which it must be fetched again (24 h after
        a 2xx or a 4xx other than 429; after a 5xx, a 429 or an unreachable host
        :data:`ROBOTS_ERROR_RETRY_S`, or the response's ``Retry-After`` when that is
        longer, at most 24 h).
      error: why the fetch failed when ``status`` is 0 (``"<kind>: <message>"``, at most 300
        characters; empty otherwise), shown where the host's tasks are refused.
    """

    host_key: str
    status: int
    body: bytes
    fetched_at: float
    expires_at: float
    error: str = ""

    @classmethod
    def from_fetch(
        cls,
        host_key: str,
        status: int,
        body: bytes,
        now: float,
        ttl_s: float = ROBOTS_TTL_S,
        error_retry_s: float = ROBOTS_ERROR_RETRY_S,
        retry_after_s: float | None = None,
        error: str = "",
    ) -> RobotsPolicy:
        """Builds a policy from a fetch result.

        Args:
          host_key: ``scheme://host[:port]``.
          status: HTTP status; 0 = network error, timeout or redirect trouble.
          body: response body (kept only for a 2xx).
          now: UTC epoch seconds of the fetch.
          ttl_s: seconds a 2xx / "unavailable" 4xx verdict is kept.
          error_retry_s: seconds a 5xx / 429 / unreachable verdict (disallow all) is kept.
          retry_after_s: the response's ``Retry-After`` in seconds (429/503); it extends
            an error verdict when longer than ``error_retry_s``, up to ``ttl_s``.
          error: why the fetch failed (status 0), kept as :attr:`error`.
        """
        if 200 <= status < 300 or robots_unavailable(status):
            keep = ttl_s
        else:
            keep = max(error_retry_s, min(retry_after_s or 0.0, ttl_s))
        return cls(host_key, status, body if 200 <= status < 300 else b"", now, now + keep, error[:300])

    @property
    def refusal(self) -> str:
        """Why :meth:`allowed` refuses a URL under this policy (for a feed's ``last_error`` or a dead letter)."""
        if self.status == 0:
            return f"robots.txt unreachable ({self.error or 'no answer'})"
        if self.disallow_all:
            return f"robots.txt answered HTTP {self.status}: the host is treated as disallowed"
        return "robots.txt disallows it"

    @property
    def disallow_all(self) -> bool:
        """True after a 5xx, a 429 or an unreachable host (RFC 9309 2.3.1.4: assume complete disallow)."""
        return not (200 <= self.status < 300 or robots_unavailable(self.status))

    def allowed(self, url: str, user_agent: str) -> bool:
        """True when ``user_agent`` (a product token) may fetch ``url`` under this policy.

        ``url`` is matched in the form the HTTP client sends it (:func:`to_request_uri`).
        """
        if self.disallow_all:
            return False
        if not (200 <= self.status < 300):
            return True  # 4xx other than 429: "unavailable" means no restrictions
        return _matcher_for(self.body).allowed(to_request_uri(url), user_agent)

    def crawl_delay(self, user_agent: str) -> float | None:
        """``Crawl-delay`` (or 1/``Request-rate``) for ``user_agent`` in seconds, ``None`` if absent."""
        if not self.body:
            return None
        return _matcher_for(self.body).crawl_delay(user_agent)

    def to_json(self) -> str:
        """Serialises for the Redis cache."""
        return json.dumps(
            {
                "host_key": self.host_key,
                "status": self.status,
                "body": self.body.decode("latin-1"),
                "fetched_at": self.fetched_at,
                "expires_at": self.expires_at,
                "error": self.error,
            }
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> RobotsPolicy:
        """Inverse of :meth:`to_json`."""
        d = json.loads(text)
        return cls(
            d["host_key"],
            int(d["status"]),
            d["body"].encode("latin-1"),
            float(d["fetched_at"]),
            float(d["expires_at"]),
            str(d.get("error") or ""),  # absent in policies cached before it was kept
        )
