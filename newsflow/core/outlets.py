"""Outlets: the one definition of "the same publisher" used by every tier.

An outlet is the registrable domain of a URL or host (the public suffix plus one label, as the Public
Suffix List defines it): ``uk.reuters.com`` and ``in.reuters.com`` are the outlet ``reuters.com``,
``www.bbc.co.uk`` is ``bbc.co.uk``. Blocks, follows, the per-source cap in feeds and the sources
registry all key on it.

The suffix list is the snapshot bundled with the ``tldextract`` package; nothing is fetched at run time
(``suffix_list_urls=()``, no cache directory). Private-domain suffixes (``github.io``, ``blogspot.com``)
are included, so two blogs on one hosting service are two outlets.

Hosts with no registrable domain (IP literals, ``localhost``, single-label intranet names) are their
own outlet: the lower-case host itself.
"""

from __future__ import annotations

import functools
from urllib.parse import urlsplit

import tldextract

_EXTRACT = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True)


def _host_of(url_or_host: str) -> str:
    text = (url_or_host or "").strip()
    if "/" in text or ":" in text.split("]")[-1]:
        # a URL, or a host:port; urlsplit wants a scheme to find the host
        parts = urlsplit(text if "//" in text else "//" + text)
        text = parts.hostname or ""
    return text.strip().strip("[]").rstrip(".").lower()


@functools.lru_cache(maxsize=65536)
def outlet_of_host(host: str) -> str:
    """Registrable domain of a lower-case ``host`` (``str``), or the host itself when it has none."""
    if not host:
        return ""
    ext = _EXTRACT(host)
    registrable = ext.top_domain_under_public_suffix
    return registrable or host


def outlet(url_or_host: str) -> str:
    """The outlet of a URL (``https://uk.reuters.com/x``) or a bare host (``uk.reuters.com``).

    Returns:
      ``str``: the lower-case registrable domain (``reuters.com``); the host itself for IP literals and
      names without a public suffix; ``""`` when no host can be read. Never raises.
    """
    try:
        return outlet_of_host(_host_of(url_or_host))
    except ValueError:  # urlsplit on a malformed netloc (e.g. an unclosed IPv6 bracket)
        return ""


def registrable_domain(host: str) -> str:
    """The registrable domain of a lower-case ``host`` (``str``), or ``""`` when it has none (``com``,
    ``co.uk``, IP literals, ``localhost``): unlike :func:`outlet`, never the host itself."""
    try:
        return _EXTRACT(host).top_domain_under_public_suffix if host else ""
    except ValueError:
        return ""
