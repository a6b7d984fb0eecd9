"""URL canonicalization, article identity and stable article ids.

Two forms of a URL are defined here. The *canonical URL* (:func:`canonicalize_url`) is still a
URL one can fetch; the *identity key* (:func:`identity_key`) is what article ids are hashed from
(:func:`article_id`) and may not be fetchable. Both must map every spelling a reader would call
"the same article" to one string.

Canonical URL rules:

* scheme and host lower-cased, a trailing dot on the host removed, IDNA hosts
  kept in their ASCII (punycode) form;
* default ports (``:80`` for http, ``:443`` for https) removed;
* the fragment removed;
* tracking parameters removed (``utm_*``, ``fbclid``, ``gclid``, ... see
  :data:`TRACKING_PARAMS`), the remaining query parameters sorted by key
  (stable for equal keys);
* an empty path becomes ``/``; dot segments are resolved;
* upstream backslash escapes (``\\?`` in the UCI News Aggregator dump) are undone;
* detectable AMP variants map to the regular article (:func:`strip_amp`): AMP-cache
  URLs (``*.cdn.ampproject.org/c/s/HOST/PATH``, ``www.google.com/amp/s/HOST/PATH``)
  become ``https://HOST/PATH``; a trailing ``/amp`` path segment, a leading
  ``/amp/`` segment, ``.amp.html`` -> ``.html``, a ``.amp`` suffix of the last path segment and
  the ``amp``, ``outputType=amp``, ``view=amp`` and ``_amp`` query parameters are removed.

Article identity (the one place these rules are written; every tier applies them through
:func:`article_id`, :func:`identity_key` and :func:`choose_canonical`, and rule 5 through the
near-duplicate step):

1. **Spellings.** The identity key is the canonical URL with, in addition, the scheme taken as
   ``https`` (``http://`` and ``https://`` are one article), the trailing ``/`` of a non-root path
   removed (``/guides/lisbon/`` is ``/guides/lisbon``), and the leading host labels ``www``,
   ``m``, ``mobile`` and ``amp`` removed while the rest is still at least the registrable domain
   (:func:`newsflow.core.outlets.outlet`; ``m.tribune.example.net`` and ``www.tribune.example.net`` are
   ``tribune.example.net``, but ``m.com`` stays ``m.com``; a host with no registrable domain,
   such as an IP literal or a name under an unknown suffix like ``www.site.test``, keeps all its
   labels). Ports, path case and the (sorted, de-tracked) query are kept.
2. **Declared canonical.** A page's own ``<link rel="canonical">`` (else ``og:url``) replaces the
   fetched URL as the article's URL and identity when it is *same-site* (same outlet as the fetched
   URL), http(s), and not the site root unless the page itself is the root (CMSs that point every
   page at the home page are ignored). A canonical on another outlet (syndication) is ignored:
   the copy stays the copier's article. :func:`choose_canonical` applies this.
3. **Aliases.** Every other URL an article was reached by (the feed's link, the pre-redirect URL,
   the AMP or mobile copy) is an alias: the crawler marks it seen and stores
   ``Keys.url_alias(article_id(alias))`` -> the article id (:mod:`newsflow.storage.aliases`), so it
   resolves to the article and is not fetched again.
4. **Stability.** An id is a pure function of the fetched URL and the page's declared canonical;
   re-fetching, redirects or a different spelling of the same URL never change it. Changing these
   rules changes ids, so they are part of the stored-data format.
5. **Revisions.** A permalink re-slugged after a headline edit
   (``/city/mayor-opens-library-b2210/`` -> ``/city/mayor-opens-new-central-library-b2210/``) gives a
   second id that no URL rule can see. The pipeline's near-duplicate step recognises it: two fetched
   pages are *versions* of one article when their URLs have the same host and the same numeric id of at
   least 4 digits in the path or query (not a date: :func:`newsflow.core.revisions.stable_url_id`;
   ``/news/ferry-fares-rise-in-spring/a/57312`` -> ``/news/ferry-operator-confirms-fare-rise/a/57312``) and
   publish times at most a minute apart, whatever their texts; or when they are of the same outlet
   (:func:`newsflow.core.outlets.outlet`) with the same publish time and event time and their texts are
   near-duplicates (SimHash within the threshold, or borderline and confirmed by MinHash). The versions
   (connected components) are stored as one article under the id of the earliest ``(fetch time, id)``
   version (the id issued first keeps being the article's id) with the title, URL and other fields of
   the latest ``(fetch time, id)`` version; every other version id resolves to it (``rev`` of
   ``Keys.article_record``, :func:`newsflow.storage.aliases.resolve_article_id`) and is listed in the
   article's Parquet ``aliases`` column. Both choices depend on the versions only, not on arrival order
   (:mod:`newsflow.core.revisions` states the rule; :mod:`newsflow.storage.groups` applies it; the Parquet
   sink and the story step keep only the newest version under the stored id, so it is one row and one
   report).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

TRACKING_PARAMS = frozenset(
    {
        "fbclid",
        "gclid",
        "dclid",
        "gbraid",
        "wbraid",
        "msclkid",
        "mc_cid",
        "mc_eid",
        "yclid",
        "igshid",
        "_ga",
        "_gl",
        "ref_src",
        "ocid",
        "cmpid",
        "ncid",
        "sr_share",
        "smid",
        "rss",
        "feedtype",
        "spm",
    }
)
TRACKING_PREFIXES = ("utm_", "at_", "pk_", "mtm_", "hsa_", "__hs", "oly_", "vero_")

_ESCAPE_RE = re.compile(r"\\([?&=#%.()\\/:;,+!*'~$@-])")


def _is_tracking(key: str) -> bool:
    k = key.lower()
    return k in TRACKING_PARAMS or k.startswith(TRACKING_PREFIXES)


_AMP_CACHE_RE = re.compile(r"^https?://[^/]+\.cdn\.ampproject\.org/[cv]/(s/)?(.+)$", re.IGNORECASE)
_GOOGLE_AMP_RE = re.compile(r"^https?://(?:www\.)?google\.[a-z.]+/amp/(s/)?(.+)$", re.IGNORECASE)
_AMP_QUERY_KEYS = frozenset({"amp", "_amp", "usqp"})


def strip_amp(url: str) -> str:
    """Maps a detectable AMP variant of an article URL to the regular URL (else returns it unchanged).

    Rules (documented in the module doc): AMP-cache and Google AMP viewer URLs are
    unwrapped; ``/amp`` as the last or first path segment and ``.amp.html`` are
    removed, as is a ``.amp`` suffix of the last segment; ``amp``/``_amp``/``usqp`` query keys
    and ``outputType=amp`` / ``view=amp`` are dropped.

    Args:
      url: absolute URL, ``str``.

    Returns:
      The URL without its AMP markers (not otherwise canonicalized).
    """
    for rx in (_AMP_CACHE_RE, _GOOGLE_AMP_RE):
        m = rx.match(url)
        if m:
            url = ("https://" if m.group(1) else "http://") + m.group(2)
            break
    parts = urlsplit(url)
    path = parts.path
    if path.lower().endswith(".amp.html"):
        path = path[: -len(".amp.html")] + ".html"
    elif path.lower().endswith(".amp") and len(path.rsplit("/", 1)[-1]) > 4:
        path = path[: -len(".amp")]
    low = path.lower()
    if low.endswith("/amp") or low.endswith("/amp/"):
        path = path[: low.rfind("/amp")] or "/"
        if low.endswith("/amp/") and not path.endswith("/"):
            path += "/"
    elif low.startswith("/amp/") and len(path) > 5:
        path = path[4:]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        kept = [
            (k, v)
            for k, v in pairs
            if k.lower() not in _AMP_QUERY_KEYS and not (k.lower() in ("outputtype", "view") and v.lower() == "amp")
        ]
        if len(kept) != len(pairs):
            query = urlencode(kept, doseq=True)
    return urlunsplit((parts.scheme, parts.netloc, path, query, parts.fragment))


def canonicalize_url(url: str) -> str:
    """Returns the canonical form of an absolute http(s) URL (rules in the module doc).

    Args:
      url: absolute URL, ``str``.

    Returns:
      The canonical URL string.

    Raises:
      ValueError: the URL is empty, not http(s), has no host, or has an invalid port.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError("empty URL")
    url = _ESCAPE_RE.sub(r"\1", url.strip())
    if "amp" in url.lower():
        url = strip_amp(url)
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"not an http(s) URL: {url[:200]!r}")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise ValueError(f"URL has no host: {url[:200]!r}")
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"invalid port in URL: {url[:200]!r}") from None
    netloc = host
    if port is not None and not ((scheme == "http" and port == 80) or (scheme == "https" and port == 443)):
        netloc = f"{host}:{port}"
    path = parts.path or "/"
    if "/." in path:
        trailing = path.endswith("/")
        path = posixpath.normpath(path)
        if trailing and not path.endswith("/"):
            path += "/"
        if path.startswith("//"):
            path = "/" + path.lstrip("/")
    query_pairs = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not _is_tracking(k)]
    query_pairs.sort(key=lambda kv: kv[0])
    query = urlencode(query_pairs, doseq=True)
    return urlunsplit((scheme, netloc, path, query, ""))


_VARIANT_HOST_LABELS = frozenset({"www", "m", "mobile", "amp"})


def identity_key(url: str) -> str:
    """The string an article id is hashed from (rule 1 of "Article identity" in the module doc).

    Examples: ``http://herald.example.org/p/alpha-9`` and ``https://www.herald.example.org/p/alpha-9``
    both give ``https://herald.example.org/p/alpha-9``; ``https://travel.example.io/guides/lisbon/``
    gives ``https://travel.example.io/guides/lisbon``.

    Args:
      url: absolute http(s) URL, ``str``.

    Returns:
      An ``https://`` URL string (not necessarily fetchable).

    Raises:
      ValueError: as :func:`canonicalize_url`.
    """
    from newsflow.core.outlets import outlet_of_host

    parts = urlsplit(canonicalize_url(url))
    host = parts.hostname or ""
    registrable = outlet_of_host(host)
    labels = host.split(".")
    while len(labels) > 1 and labels[0] in _VARIANT_HOST_LABELS and len(".".join(labels[1:])) >= len(registrable):
        labels = labels[1:]
    netloc = ".".join(labels) + (f":{parts.port}" if parts.port is not None else "")
    path = parts.path
    if len(path) > 1 and path.endswith("/"):
        path = path.rstrip("/") or "/"
    return urlunsplit(("https", netloc, path, parts.query, ""))


def article_id(url: str) -> str:
    """Stable article id: first 128 bits of SHA-256 of :func:`identity_key`, as 32 hex chars.

    Every spelling of one article URL (module doc, "Article identity") gives the same id.

    Raises:
      ValueError: as :func:`canonicalize_url`.
    """
    return hashlib.sha256(identity_key(url).encode("utf-8")).hexdigest()[:32]


def choose_canonical(fetched_url: str, declared: str | None) -> str:
    """The URL an article is known by: the page's declared canonical when it qualifies, else the fetched URL.

    Rule 2 of "Article identity" (module doc): ``declared`` (resolved against ``fetched_url``) is
    used when it is http(s), canonicalizable, of the same outlet as ``fetched_url``, passes
    :func:`check_document_url` (no whitespace, control characters, backslashes or user info, at
    most :data:`MAX_URL_LENGTH` characters, no private or loopback host), and is not the site root
    unless ``fetched_url`` is the root too.

    Args:
      fetched_url: the URL the page was fetched from (after redirects).
      declared: the page's ``rel=canonical`` / ``og:url`` value as written, or ``None`` / "".

    Returns:
      ``declared`` made absolute (otherwise unchanged) or ``fetched_url``.
    """
    from newsflow.core.outlets import outlet

    if not declared or not declared.strip() or not fetched_url:
        return fetched_url
    try:
        candidate = urljoin(fetched_url, declared.strip())
        canonical = canonicalize_url(candidate)
        fetched = canonicalize_url(fetched_url)
    except ValueError:
        return fetched_url
    if outlet(canonical) != outlet(fetched) or not outlet(canonical):
        return fetched_url
    from newsflow.schemas import RecordError

    try:  # the same shape and safety rules as any landed URL
        check_document_url(candidate, outlet(canonical))
    except RecordError:
        return fetched_url
    if urlsplit(canonical).path == "/" and not urlsplit(canonical).query and urlsplit(fetched).path != "/":
        return fetched_url
    return candidate


def source_domain(url: str) -> str:
    """Lower-case host of ``url`` without a leading ``www.`` (``""`` when there is no host)."""
    host = (urlsplit(url.strip()).hostname or "").rstrip(".").lower()
    return host[4:] if host.startswith("www.") else host


def host_key(url: str) -> str:
    """Politeness key of a URL: lower-case ``host[:port]``, the port only when not the scheme's default (the
    crawl frontier's unit of "one request in flight", and what places its keys in a bucket)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower().rstrip(".")
    default = 443 if parts.scheme == "https" else 80
    return host if parts.port in (None, default) else f"{host}:{parts.port}"


MAX_URL_LENGTH = 2048
_HOSTNAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*\Z")


def check_document_url(url: str, domain: str) -> None:
    """Refuses a landed document's URL or source domain that no news article can have.

    Rules: at most :data:`MAX_URL_LENGTH` characters, no whitespace, control characters or
    backslashes inside, no user info (``user@host``),
    canonicalizable http(s) (:func:`canonicalize_url`), a host that is not private, loopback,
    link-local, local or a metadata service (``newsflow.core.netsafety.literal_host_problem``, no DNS),
    and a ``source_domain`` that is a valid host name equal to the URL's host or a label-aligned
    suffix of it (a record cannot claim another publisher's authority).

    Raises:
      schemas.RecordError: ``error_type`` ``"bad_url"``, ``"unsafe_url"`` or ``"source_mismatch"``.
    """
    from newsflow.core.netsafety import literal_host_problem
    from newsflow.schemas import RecordError

    u = url.strip()
    if len(u) > MAX_URL_LENGTH:
        raise RecordError("bad_url", f"URL of {len(u)} characters exceeds {MAX_URL_LENGTH}")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in u):
        raise RecordError("bad_url", f"URL contains whitespace or control characters: {u[:200]!r}")
    if "\\" in u:
        # parsers disagree on backslashes (browsers read "http://evil.com\\@site.com/" as evil.com,
        # urlsplit as site.com): refuse them rather than guess which host a reader would reach
        raise RecordError("bad_url", f"URL contains a backslash: {u[:200]!r}")
    try:
        canonicalize_url(u)
    except ValueError as e:
        raise RecordError("bad_url", str(e)) from None
    parts = urlsplit(u)
    if "@" in parts.netloc:
        raise RecordError("bad_url", f"URL carries user info (user@host), which can disguise its host: {u[:200]!r}")
    host = (parts.hostname or "").rstrip(".").lower()
    problem = literal_host_problem(host)
    if problem:
        raise RecordError("unsafe_url", f"refusing {u[:200]!r}: {problem}")
    d = (domain or "").strip().rstrip(".").lower()
    if not _HOSTNAME_RE.match(d) or not (host == d or host.endswith("." + d)):
        raise RecordError(
            "source_mismatch", f"source_domain {domain[:100]!r} is not the host of {u[:200]!r} or a parent domain of it"
        )
