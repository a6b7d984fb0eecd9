"""Fetch safety: refuse private, loopback, link-local and metadata addresses (SSRF guard).

Every hop of a fetch (the first URL and each redirect target) is resolved
with DNS and *all* resolved addresses must be public; the crawler then also
checks the peer address of the connection it actually used. Hosts or
networks listed in an explicit allow-list (``--allow-host 127.0.0.1``) are
exempt, which is how local replay and tests run.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Iterable, Optional

_EXTRA_BLOCKED = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT
        "192.0.0.0/24",
        "198.18.0.0/15",
        "fd00:ec2::254/128",  # AWS IMDS over IPv6
        "64:ff9b::/96",  # NAT64 can reach private IPv4
    )
)
METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata", "instance-data", "instance-data.ec2.internal"})


class UnsafeAddressError(Exception):
    """The URL's host is, or resolves to, an address the crawler must not contact."""


def is_forbidden_ip(ip: str | ipaddress._BaseAddress) -> bool:
    """True for private, loopback, link-local (incl. 169.254.169.254), multicast, reserved and unspecified IPs.

    IPv4-mapped IPv6 addresses are judged by their IPv4 part.
    """
    addr = ipaddress.ip_address(str(ip).split("%")[0]) if not isinstance(ip, ipaddress._BaseAddress) else ip
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if (addr.is_private or addr.is_loopback or addr.is_link_local or addr.is_multicast or addr.is_reserved
            or addr.is_unspecified or getattr(addr, "is_site_local", False)):
        return True
    return any(addr in net for net in _EXTRA_BLOCKED if net.version == addr.version)


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

    async def check_host(self, host: str, port: int, resolve_as: Optional[str] = None) -> list[str]:
        """Resolves ``host`` and checks every address.

        Args:
          host: host name or IP literal from the URL.
          port: TCP port.
          resolve_as: connect address to use instead of DNS (replay override).

        Returns:
          The resolved IP strings.

        Raises:
          UnsafeAddressError: an address is forbidden, the host is a metadata name, or DNS fails.
        """
        name = host.lower().rstrip(".").strip("[]")
        if name in self._names:
            return []
        if name in METADATA_HOSTS:
            raise UnsafeAddressError(f"metadata host refused: {host}")
        target = resolve_as or name
        try:
            ips = [str(ipaddress.ip_address(target))]
        except ValueError:
            try:
                infos = await asyncio.get_running_loop().getaddrinfo(target, port, type=socket.SOCK_STREAM)
            except (socket.gaierror, UnicodeError) as e:
                raise UnsafeAddressError(f"cannot resolve {host}: {e}") from None
            ips = sorted({info[4][0] for info in infos})
        bad = [ip for ip in ips if not self.ip_allowed(ip)]
        if bad or not ips:
            raise UnsafeAddressError(f"{host} resolves to a forbidden address {bad[0] if bad else '(none)'}")
        return ips
