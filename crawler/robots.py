"""robots.txt (RFC 9309) for the crawl tier: matching, status-code policy and a Redis cache.

Allow/disallow decisions use :class:`RobotsMatcher`, a line-for-line port of
Google's reference parser and matcher (github.com/google/robotstxt,
``robots.cc``): UTF-8 byte-order mark skipped, lines cut at 16,664 bytes,
``user-agent`` values reduced to their product token (``[A-Za-z_-]+``) and
compared case-insensitively, a missing colon tolerated, rule patterns
percent-escaped (non-ASCII bytes and lower-case ``%xx``), ``*``/``$``
wildcards, the longest match wins and ``Allow`` wins ties,
``.../index.html`` allows the directory. ``protego`` (which fails some of the
reference vectors on its own, e.g. a leading byte-order mark) supplies the
non-standard ``Crawl-delay`` and ``Request-rate`` values and the sitemaps.

:class:`RobotsPolicy` adds the RFC 9309 section 2.3.1 status rules:
2xx parse the body; 4xx (unavailable) allow everything; 5xx or an unreachable
host disallow everything until a retry time; results are cached 24 hours.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Optional

from protego import Protego

MAX_LINE_BYTES = 2083 * 8  # kMaxLineLen in robots.cc
_UTF8_BOM = b"\xef\xbb\xbf"
_HEX = b"0123456789ABCDEF"
_DISALLOW_TYPOS = ("disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw")
_PRODUCT_RE = re.compile(r"[A-Za-z_-]*")


def extract_user_agent(value: str) -> str:
    """Product token of a user-agent string: its leading run of ``[A-Za-z_-]`` characters."""
    return _PRODUCT_RE.match(value).group(0)


def is_valid_user_agent_to_obey(user_agent: str) -> bool:
    """True when ``user_agent`` is a non-empty product token made only of ``[A-Za-z_-]``."""
    return bool(user_agent) and extract_user_agent(user_agent) == user_agent


def get_path_params_query(url: str) -> str:
    """Path, params and query of ``url`` as robots.txt rules see them (``"/"`` when none).

    Port of ``GetPathParamsQuery`` in robots.cc: the fragment is dropped, a
    result that would start with ``?`` or ``;`` gets a leading ``/``, and the
    path is not unescaped or re-escaped.
    """
    search_start = 2 if url.startswith("//") else 0
    early_path = _find_first_of(url, "/?;", search_start)
    protocol_end = url.find("://", search_start)
    if protocol_end == -1 or (early_path != -1 and early_path < protocol_end):
        protocol_end = search_start
    else:
        protocol_end += 3
    path_start = _find_first_of(url, "/?;", protocol_end)
    if path_start == -1:
        return "/"
    hash_pos = url.find("#", search_start)
    if hash_pos != -1 and hash_pos < path_start:
        return "/"
    path_end = len(url) if hash_pos == -1 else hash_pos
    if url[path_start] != "/":
        return "/" + url[path_start:path_end]
    return url[path_start:path_end]


def _find_first_of(s: str, chars: str, start: int) -> int:
    best = -1
    for c in chars:
        i = s.find(c, start)
        if i != -1 and (best == -1 or i < best):
            best = i
    return best


def maybe_escape_pattern(pattern: str | bytes) -> str:
    """Percent-escapes bytes >= 0x80 and upper-cases existing ``%xx`` escapes (robots.cc rule)."""
    raw = pattern.encode("utf-8", "surrogateescape") if isinstance(pattern, str) else pattern
    out = bytearray()
    i = 0
    while i < len(raw):
        b = raw[i]
        if b == 0x25 and i + 2 < len(raw) and _is_hex(raw[i + 1]) and _is_hex(raw[i + 2]):
            out += b"%" + bytes([raw[i + 1]]).upper() + bytes([raw[i + 2]]).upper()
            i += 3
            continue
        if b >= 0x80:
            out += b"%" + bytes([_HEX[b >> 4], _HEX[b & 15]])
        else:
            out.append(b)
        i += 1
    return out.decode("latin-1")


def _is_hex(b: int) -> bool:
    return chr(b) in "0123456789abcdefABCDEF"


def _matches(path: bytes, pattern: bytes) -> bool:
    """Wildcard match of ``pattern`` (``*`` any run, trailing ``$`` end) against a path prefix."""
    pathlen = len(path)
    pos = [0]
    n = len(pattern)
    for k in range(n):
        ch = pattern[k]
        if ch == 0x24 and k + 1 == n:  # '$' at end
            return pos[-1] == pathlen
        if ch == 0x2A:  # '*'
            pos = list(range(pos[0], pathlen + 1))
        else:
            pos = [p + 1 for p in pos if p < pathlen and path[p] == ch]
            if not pos:
                return False
    return True


def _split_lines(body: bytes) -> list[bytes]:
    """Lines of a robots.txt body as robots.cc reads them (BOM skipped, ``\\r``/``\\n``/``\\r\\n``)."""
    i = 0
    while i < len(body) and i < 3 and body[i] == _UTF8_BOM[i]:
        i += 1
    body = body[i:]
    lines = re.split(rb"\r\n|\r|\n", body)
    return [ln[: MAX_LINE_BYTES - 1] for ln in lines]


def _key_value(line: bytes) -> Optional[tuple[bytes, bytes]]:
    hash_pos = line.find(b"#")
    if hash_pos != -1:
        line = line[:hash_pos]
    line = line.strip(b" \t\n\v\f\r")
    sep = line.find(b":")
    if sep == -1:
        m = re.search(rb"[ \t]", line)
        if m is None:
            return None
        sep = m.start()
        value = line[sep:].lstrip(b" \t")
        if re.search(rb"[ \t]", value):
            return None
    key = line[:sep].strip(b" \t\n\v\f\r")
    if not key:
        return None
    return key, line[sep + 1 :].strip(b" \t\n\v\f\r")


@dataclass(frozen=True)
class _Rule:
    kind: str  # "agent", "allow", "disallow"
    value: bytes


class RobotsMatcher:
    """A parsed robots.txt answering "may this agent fetch this URL" like Google's reference matcher.

    Args:
      body: robots.txt bytes (``str`` is encoded as UTF-8).

    Example:
      >>> RobotsMatcher(b"User-agent: *\\nDisallow: /private").allowed("http://a.b/private/x", "newsflow")
      False
    """

    def __init__(self, body: bytes | str):
        if isinstance(body, str):
            body = body.encode("utf-8", "surrogateescape")
        self._rules: list[_Rule] = []
        for line in _split_lines(body):
            kv = _key_value(line)
            if kv is None:
                continue
            key, value = kv[0].lower(), kv[1]
            if key.startswith(b"user-agent") or key.startswith(b"useragent") or key.startswith(b"user agent"):
                self._rules.append(_Rule("agent", value))
            elif key.startswith(b"allow"):
                self._rules.append(_Rule("allow", maybe_escape_pattern(value).encode("latin-1")))
            elif any(key.startswith(t.encode()) for t in _DISALLOW_TYPOS):
                self._rules.append(_Rule("disallow", maybe_escape_pattern(value).encode("latin-1")))

    def allowed(self, url: str, user_agent: str) -> bool:
        """True when ``user_agent`` may fetch ``url``.

        Args:
          url: absolute URL (or a path); only path, params and query are matched.
          user_agent: the crawler's name; its product token is what groups are matched on.
        """
        agent = extract_user_agent(user_agent).lower()
        path = get_path_params_query(url).encode("utf-8", "surrogateescape")
        seen_global = seen_specific = seen_separator = ever_specific = False
        best = {("allow", "g"): -1, ("allow", "s"): -1, ("disallow", "g"): -1, ("disallow", "s"): -1}
        for rule in self._rules:
            if rule.kind == "agent":
                if seen_separator:
                    seen_global = seen_specific = seen_separator = False
                v = rule.value
                if v[:1] == b"*" and (len(v) == 1 or v[1:2].isspace()):
                    seen_global = True
                else:
                    token = extract_user_agent(v.decode("latin-1")).lower()
                    if token == agent:
                        seen_specific = ever_specific = True
                continue
            if not (seen_global or seen_specific):
                continue
            seen_separator = True
            scope = "s" if seen_specific else "g"
            priority = len(rule.value) if _matches(path, rule.value) else -1
            if priority >= 0:
                if best[(rule.kind, scope)] < priority:
                    best[(rule.kind, scope)] = priority
            elif rule.kind == "allow":
                slash = rule.value.rfind(b"/")
                if slash != -1 and rule.value[slash:].startswith(b"/index.htm"):
                    alt = rule.value[: slash + 1] + b"$"
                    if _matches(path, alt) and best[("allow", scope)] < len(alt):
                        best[("allow", scope)] = len(alt)
        a_s, d_s = best[("allow", "s")], best[("disallow", "s")]
        if a_s > 0 or d_s > 0:
            return not d_s > a_s
        if ever_specific:
            return True
        a_g, d_g = best[("allow", "g")], best[("disallow", "g")]
        if a_g > 0 or d_g > 0:
            return not d_g > a_g
        return True


def is_user_agent_allowed(robots_txt: str | bytes, user_agent: str, url: str) -> bool:
    """One-shot form of :meth:`RobotsMatcher.allowed` (the conformance-vector signature)."""
    return RobotsMatcher(robots_txt).allowed(url, user_agent)


# --------------------------------------------------------------------------- policy


ROBOTS_TTL_S = 24 * 3600.0
ROBOTS_ERROR_RETRY_S = 30 * 60.0


@dataclass(frozen=True)
class RobotsPolicy:
    """What the crawler may do on one host, from one robots.txt fetch.

    Attributes:
      host_key: ``scheme://host[:port]`` the file applies to.
      status: HTTP status of the robots.txt fetch; 0 when unreachable.
      body: the robots.txt bytes (empty unless 2xx).
      fetched_at: UTC epoch seconds of the fetch.
      expires_at: UTC epoch seconds after which it must be fetched again (24 h after
        a 2xx/4xx, :data:`ROBOTS_ERROR_RETRY_S` after a 5xx or an unreachable host).
    """

    host_key: str
    status: int
    body: bytes
    fetched_at: float
    expires_at: float

    @classmethod
    def from_fetch(cls, host_key: str, status: int, body: bytes, now: float,
                   ttl_s: float = ROBOTS_TTL_S, error_retry_s: float = ROBOTS_ERROR_RETRY_S) -> "RobotsPolicy":
        """Builds a policy from a fetch result (``status`` 0 = network error or timeout)."""
        ok = 200 <= status < 300 or 400 <= status < 500
        return cls(host_key, status, body if 200 <= status < 300 else b"", now, now + (ttl_s if ok else error_retry_s))

    @property
    def disallow_all(self) -> bool:
        """True after a 5xx or an unreachable host (RFC 9309 2.3.1.4: assume complete disallow)."""
        return not (200 <= self.status < 300 or 400 <= self.status < 500)

    def allowed(self, url: str, user_agent: str) -> bool:
        """True when ``user_agent`` may fetch ``url`` under this policy."""
        if self.disallow_all:
            return False
        if not (200 <= self.status < 300):
            return True  # 4xx: "unavailable" means no restrictions
        return RobotsMatcher(self.body).allowed(url, user_agent)

    def crawl_delay(self, user_agent: str) -> Optional[float]:
        """``Crawl-delay`` (or 1/``Request-rate``) for ``user_agent`` in seconds, ``None`` if absent."""
        if not self.body:
            return None
        text = self.body.decode("utf-8", "replace").lstrip("\ufeff")
        try:
            rp = Protego.parse(text)
        except Exception:  # protego raises on pathological input; no delay then
            return None
        agent = extract_user_agent(user_agent) or user_agent
        delay = rp.crawl_delay(agent)
        if delay is None:
            rate = rp.request_rate(agent)
            if rate is not None and rate.requests:
                delay = rate.seconds / rate.requests
        return None if delay is None else float(delay)

    def to_json(self) -> str:
        """Serialises for the Redis cache."""
        return json.dumps({"host_key": self.host_key, "status": self.status, "body": self.body.decode("latin-1"),
                           "fetched_at": self.fetched_at, "expires_at": self.expires_at})

    @classmethod
    def from_json(cls, text: str | bytes) -> "RobotsPolicy":
        """Inverse of :meth:`to_json`."""
        d = json.loads(text)
        return cls(d["host_key"], int(d["status"]), d["body"].encode("latin-1"), float(d["fetched_at"]),
                   float(d["expires_at"]))
