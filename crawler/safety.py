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
from collections.abc import Iterable

from newsflow.core.netsafety import (
    METADATA_HOSTS,
    is_forbidden_ip,
    literal_host_problem,
    parse_ip_literal,
)

__all__ = [
    "METADATA_HOSTS",
    "AddressPolicy",
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
        if name in self._names:
            return []
        literal = parse_ip_literal(name)
        if literal is not None and not self.ip_allowed(str(literal)):
            raise UnsafeAddressError(f"{host} is the forbidden address {literal}")
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
