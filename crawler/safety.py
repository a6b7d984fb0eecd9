"""Fetch safety: refuse private, loopback, link-local and metadata addresses (SSRF guard).

Every hop of a fetch (the first URL and each redirect target) is resolved
with DNS and *all* resolved addresses must be public; the crawler then also
checks the peer address of the connection it actually used. Hosts or
networks listed in an explicit allow-list (``--allow-host 127.0.0.1``) are
exempt, which is how local replay and tests run.

The address rules themselves (:func:`is_forbidden_ip`, :func:`parse_ip_literal`,
:func:`literal_host_problem`, :data:`METADATA_HOSTS`) live in :mod:`newsflow.core.netsafety`,
shared with the pipeline and the push endpoint; they are re-exported here.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from newsflow.core.netsafety import (
    METADATA_HOSTS,
    embedded_ipv4,
    is_forbidden_ip,
    literal_host_problem,
    parse_ip_literal,
)

__all__ = [
    "METADATA_HOSTS",
    "AddressPolicy",
    "RegistrationHostCheck",
    "UnsafeAddressError",
    "is_forbidden_ip",
    "literal_host_problem",
    "parse_ip_literal",
]


class UnsafeAddressError(Exception):
    """The URL's host is, or resolves to, an address the crawler must not contact."""


class HostResolutionError(Exception):
    """DNS could not resolve the URL's host (``socket.gaierror``): a network failure, not a
    safety refusal, so the fetcher reports it as error kind ``dns`` (retried like other network
    errors) and never as ``unsafe_address``."""


class AddressPolicy:
    """Decides whether a host may be contacted.

    Args:
      allow: exempt entries: IP addresses, CIDR networks (``"10.0.0.0/8"``) or exact host names.
    """

    def __init__(self, allow: Iterable[str] = ()):
        self._names: set[str] = set()
        self._nets: list = []
        for item in allow:
            item = item.strip().lower()
            if not item:
                continue
            try:
                self._nets.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                self._names.add(item.rstrip("."))

    def host_exempt(self, name: str) -> bool:
        """True when the host name (lower case, no trailing dot) is listed in the allow-list by name."""
        return name in self._names

    def ip_allowed(self, ip: str) -> bool:
        """True when ``ip`` is public or in the allow-list."""
        addr = ipaddress.ip_address(ip.split("%")[0])
        if any(addr in n for n in self._nets if n.version == addr.version):
            return True
        return not is_forbidden_ip(addr)

    async def check_host(self, host: str, port: int, resolve_as: str | None = None) -> list[str]:
        """Resolves ``host`` and checks every address.

        Args:
          host: host name or IP literal from the URL.
          port: TCP port.
          resolve_as: connect address to use instead of DNS (replay override).

        Returns:
          The resolved IP strings.

        Raises:
          UnsafeAddressError: an address is forbidden (any IP literal form, e.g. octal
            ``0251.0376.0251.0376``), the host is a metadata, local (``localhost``, ``*.local``,
            ``*.internal`` ...) or single-label name (refused before DNS unless listed in the
            allow-list, or sent by ``resolve_as`` to an allow-listed address; metadata names
            never), or DNS fails.
        """
        name = host.lower().rstrip(".").strip("[]")
        if self.host_exempt(name):
            return []
        literal = parse_ip_literal(name)
        if literal is not None and not self.ip_allowed(str(literal)):
            inner = embedded_ipv4(literal) if literal.version == 6 else None
            carried = f" (it carries the IPv4 address {inner})" if inner is not None else ""
            raise UnsafeAddressError(f"{host} is the forbidden address {literal}{carried}")
        if literal is None:
            # local, metadata and single-label names are refused before any DNS lookup, unless a
            # replay override sends the request to an explicitly allowed address
            problem = literal_host_problem(name)
            if problem and (name in METADATA_HOSTS or not self._explicit(resolve_as)):
                raise UnsafeAddressError(f"{host} refused: {problem}")
        target = resolve_as or (str(literal) if literal is not None else name)
        try:
            ips = [str(ipaddress.ip_address(target))]
        except ValueError:
            try:
                infos = await asyncio.get_running_loop().getaddrinfo(target, port, type=socket.SOCK_STREAM)
            except (socket.gaierror, UnicodeError) as e:
                raise HostResolutionError(f"cannot resolve {host}: {e}") from None
            ips = sorted({info[4][0] for info in infos})
        bad = [ip for ip in ips if not self.ip_allowed(ip)]
        if bad or not ips:
            raise UnsafeAddressError(f"{host} resolves to a forbidden address {bad[0] if bad else '(none)'}")
        return ips

    def _explicit(self, ip: str | None) -> bool:
        """True when ``ip`` is an address inside an allow-listed network."""
        try:
            addr = ipaddress.ip_address((ip or "").split("%")[0])
        except ValueError:
            return False
        return any(addr in n for n in self._nets if n.version == addr.version)


def system_resolver(host: str) -> list[str]:
    """Every address the system resolver gives ``host`` (any family), sorted.

    Raises:
      OSError: the name does not resolve (``socket.gaierror``) or is not encodable.
    """
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except UnicodeError as e:
        raise OSError(str(e)) from None
    return sorted({info[4][0] for info in infos})


class RegistrationHostCheck:
    """The address check of ``sources add``, ``sources import`` and the admin API at registration.

    Each host is resolved once (results kept for this check's lifetime) through ``resolve``; an
    entry is refused when every address is forbidden (:meth:`AddressPolicy.ip_allowed`: the same
    rules and allow-list as the fetcher). A host that does not resolve is registered with a
    warning: DNS may be down or the publisher not live yet, and the fetch-time guard
    (:meth:`AddressPolicy.check_host`, every hop, every address) stays the authority either way.

    Args:
      policy: allow-list and rules; default: no exemptions.
      resolve: ``host -> [ip, ...]``, raising ``OSError`` when the name does not resolve; default
        :func:`system_resolver`. Tests pass a map's ``__getitem__``-like function.
    """

    def __init__(self, policy: AddressPolicy | None = None, resolve: Callable[[str], list[str]] | None = None):
        self.policy = policy or AddressPolicy()
        self.resolve = resolve or system_resolver
        self._seen: dict[str, tuple[str | None, str | None]] = {}

    def __call__(self, url: str) -> tuple[str | None, str | None]:
        """``(problem, warning)`` for a URL that passed the literal checks: ``problem`` refuses it."""
        host = (urlsplit(url).hostname or "").rstrip(".")
        if host not in self._seen:
            self._seen[host] = self._check(host)
        return self._seen[host]

    def _check(self, host: str) -> tuple[str | None, str | None]:
        if not host or self.policy.host_exempt(host.lower()) or parse_ip_literal(host) is not None:
            return None, None  # literals were judged by literal_host_problem, which knows the same rules
        try:
            ips = self.resolve(host)
        except (OSError, KeyError) as e:
            return None, f"warning: {host} did not resolve at registration ({e}); it is checked again at every fetch"
        if ips and not any(self.policy.ip_allowed(ip) for ip in ips):
            return f"{host} resolves only to forbidden addresses ({', '.join(ips[:4])})", None
        return None, None
