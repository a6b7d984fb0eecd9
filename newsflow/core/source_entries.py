"""Feed entries and the rules they must pass: the vocabulary shared by the sources registry, the
source-list file formats and the admin API.

* :func:`crawl_task_id` — a feed's id, equal to its crawl task id (24 hex characters of SHA-1 of
  ``kind|canonical URL``), so the registry and the crawl frontier name a feed the same way.
* :func:`check_feed_url` — the URL rules, no DNS: absolute http(s), at most 2,048 characters, no
  whitespace, control characters, backslashes or user info, and a host that is not private,
  loopback, link-local, local or a metadata service (:func:`newsflow.core.netsafety.literal_host_problem`).
  Reserved example domains (``example.com``) pass: the DNS check happens at fetch time in the crawler.
* :class:`FeedEntry` (one feed to register), :class:`FeedError` (why one cannot be),
  :class:`Outcome` / :class:`Report` (what happened to each), :func:`clean_categories`,
  :func:`validate_outlet_fields`.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple
from urllib.parse import urlsplit

from newsflow.core.authority import TIERS, validate_authority
from newsflow.core.netsafety import literal_host_problem
from newsflow.core.urls import MAX_URL_LENGTH, canonicalize_url

KINDS = ("feed", "sitemap")
STATUSES = ("active", "paused", "removed")
MAX_TITLE = 500
MAX_CATEGORY = 200
MAX_CATEGORIES = 32
_LANGUAGE_RE = re.compile(r"[a-z]{2,3}(-[a-z0-9]{2,8})*\Z")
_CONTROL_RE = re.compile(r"[\x00-\x20\x7f]")


def crawl_task_id(kind: str, url: str) -> str:
    """Stable crawl task id: 24 hex chars of SHA-1 of ``kind|canonical URL`` (the URL itself when it
    cannot be canonicalized). The crawl frontier's ``task_id`` and the registry's feed id.

    Args:
      kind: ``"feed"``, ``"sitemap"`` or ``"page"``.
      url: the URL (``str``).
    """
    try:
        canonical = canonicalize_url(url)
    except ValueError:
        canonical = url
    return crawl_task_id_of_canonical(kind, canonical)


def crawl_task_id_of_canonical(kind: str, canonical: str) -> str:
    """:func:`crawl_task_id` of a URL whose canonical form (:func:`newsflow.core.urls.canonicalize_url`) the caller
    has already computed (the frontier's add validates the URL that way; the URL is not canonicalized twice)."""
    return hashlib.sha1(f"{kind}|{canonical}".encode()).hexdigest()[:24]


class FeedError(ValueError):
    """An entry that cannot be registered.

    Attributes:
      code: short reason: ``bad_url``, ``unsafe_url``, ``bad_entry``, ``bad_file``, ``too_many``.
      message: human-readable detail.
    """

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


_INVISIBLE = frozenset({"Cc", "Cf", "Zl", "Zp", "Zs"})  # incl. bidi overrides (U+202E) and zero-width marks


def check_feed_url(url: str) -> str:
    """Returns ``url`` stripped if it may be registered as a feed (rules in the module docstring).

    Raises:
      FeedError: code ``bad_url`` (syntax) or ``unsafe_url`` (a host no public source has).
    """
    u = (url or "").strip() if isinstance(url, str) else ""
    if not u:
        raise FeedError("bad_url", "empty URL")
    if len(u) > MAX_URL_LENGTH:
        raise FeedError("bad_url", f"URL of {len(u)} characters exceeds {MAX_URL_LENGTH}")
    if _CONTROL_RE.search(u) or any(unicodedata.category(c) in _INVISIBLE for c in u):
        raise FeedError("bad_url", f"URL contains whitespace, control or format characters: {u[:200]!r}")
    if "\\" in u:
        raise FeedError("bad_url", f"URL contains a backslash: {u[:200]!r}")
    try:
        canonicalize_url(u)
        parts = urlsplit(u)
    except ValueError as e:
        raise FeedError("bad_url", str(e)) from None
    if "@" in parts.netloc:
        raise FeedError("bad_url", f"URL carries user info (user@host): {u[:200]!r}")
    problem = literal_host_problem((parts.hostname or "").rstrip(".").lower())
    if problem:
        raise FeedError("unsafe_url", f"refusing {u[:200]!r}: {problem}")
    return u


def clean_categories(values: Iterable[str]) -> tuple[str, ...]:
    """Categories as stored: stripped, no leading/trailing or repeated ``/`` (nor spaces around one),
    inner whitespace collapsed, cut to
    :data:`MAX_CATEGORY` characters, first occurrence kept, at most :data:`MAX_CATEGORIES`."""
    out: list[str] = []
    for v in values:
        c = re.sub(r"\s*/[\s/]*", "/", " ".join(str(v).split())).strip("/ ")[:MAX_CATEGORY]
        if c and c not in out:
            out.append(c)
    return tuple(out[:MAX_CATEGORIES])


def validate_outlet_fields(tier: str | None = None, authority=None, language: str | None = None) -> float | None:
    """Checks outlet fields (``None`` = not given); returns the authority as a float (or ``None``).

    Raises:
      ValueError: a tier not in :data:`newsflow.core.authority.TIERS`, an authority outside [0, 1], or a
        language that is not a lower-case code such as ``en`` or ``pt-br``.
    """
    if tier is not None and tier not in TIERS:
        raise ValueError(f"tier must be one of {', '.join(TIERS)}, got {tier!r}")
    if language is not None and not (isinstance(language, str) and _LANGUAGE_RE.match(language)):
        raise ValueError(f"language must be a lower-case code such as 'en' or 'pt-br', got {language!r}")
    return None if authority is None else validate_authority(authority)


@dataclass(frozen=True)
class FeedEntry:
    """One feed to register.

    Attributes:
      url: feed or news-sitemap URL.
      kind: ``"feed"`` or ``"sitemap"``.
      title: display title (OPML ``title``/``text``).
      categories: topics/tags, e.g. ``("News/World", "tech")`` (OPML folders and ``category``).
      html_url: the site's home page (OPML ``htmlUrl``), may be empty.
      status: ``"active"`` or ``"paused"`` for a new registration.
    """

    url: str
    kind: str = "feed"
    title: str = ""
    categories: tuple[str, ...] = ()
    html_url: str = ""
    status: str = "active"


class Outcome(NamedTuple):
    """What happened to one entry: ``ref`` (where it came from, e.g. ``"line 3"``), ``url``,
    ``feed_id`` (``""`` on error), ``result`` (``added``, ``unchanged``, ``restored``, ``paused``,
    ``resumed``, ``removed``, ``error``) and ``detail`` (error text or note)."""

    ref: str
    url: str
    feed_id: str
    result: str
    detail: str = ""


class FileNote(NamedTuple):
    """A repair made while reading a source file (``message`` says what was read differently from the
    bytes and how often); reported with result ``repaired``, never an error."""

    message: str


@dataclass
class Report:
    """Outcomes of one import or status change, with counts per result."""

    outcomes: list[Outcome] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """``{result: number of entries}``."""
        out: dict[str, int] = {}
        for o in self.outcomes:
            out[o.result] = out.get(o.result, 0) + 1
        return out

    @property
    def errors(self) -> list[Outcome]:
        """The ``error`` outcomes."""
        return [o for o in self.outcomes if o.result == "error"]
