"""Address safety shared by every tier: which hosts and IP addresses are never legitimate news sources.

* :func:`is_forbidden_ip` — private, loopback, link-local (incl. the 169.254.169.254 metadata
  service), multicast, reserved, unspecified, carrier-grade NAT and NAT64 addresses; IPv4-mapped
  IPv6 addresses are judged by their IPv4 part.
* :func:`literal_host_problem` — what is wrong with a URL host *without* resolving it: an IP
  literal in any form the C resolver accepts (dotted, decimal ``2852039166``, octal
  ``0251.0376.0251.0376``, hex, short ``127.1``) that is forbidden, ``localhost`` and names under
  ``.localhost``/``.local``/``.internal``/``.localdomain``, cloud metadata names, and single-label hosts.

The crawl tier additionally checks every address DNS returns; the pipeline and
the push endpoint, which never connect to article URLs, use the literal check only.
"""

from __future__ import annotations

import ipaddress
import socket

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
LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".localdomain", ".home.arpa")


def is_forbidden_ip(ip) -> bool:
    """True for an address no public news source has (see the module docstring).

    Args:
      ip: ``str`` or ``ipaddress`` address (an IPv6 zone suffix ``%eth0`` is ignored).

    Raises:
      ValueError: ``ip`` is not an IP address.
    """
    addr = (
        ip
        if isinstance(ip, (ipaddress.IPv4Address, ipaddress.IPv6Address))
        else ipaddress.ip_address(str(ip).split("%")[0])
    )
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if (
        addr.is_private
        or addr.is_loopback
        or addr.is_link_local
        or addr.is_multicast
        or addr.is_reserved
        or addr.is_unspecified
        or getattr(addr, "is_site_local", False)
    ):
        return True
    return any(addr in net for net in _EXTRA_BLOCKED if net.version == addr.version)


def parse_ip_literal(host: str) -> ipaddress._BaseAddress | None:
    """The IP address a host string denotes literally (any inet_aton IPv4 form, or IPv6), else ``None``."""
    h = host.strip("[]").split("%")[0]
    try:
        return ipaddress.ip_address(h)
    except ValueError:
        pass
    if h and all(c in "0123456789abcdefxABCDEFX." for c in h) and any(c.isdigit() for c in h):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(h))
        except OSError:
            return None
    return None


def literal_host_problem(host: str) -> str | None:
    """Why ``host`` (lower case, no port) is not an acceptable public news host, or ``None`` if it is.

    No DNS lookup is made.
    """
    h = (host or "").strip().rstrip(".").lower()
    if not h:
        return "no host"
    ip = parse_ip_literal(h)
    if ip is not None:
        return f"address {ip} is private, loopback, link-local or reserved" if is_forbidden_ip(ip) else None
    if h == "localhost" or h.endswith(LOCAL_SUFFIXES):
        return f"host {h} is local"
    if h in METADATA_HOSTS:
        return f"host {h} is a cloud metadata service"
    if "." not in h:
        return f"host {h} has a single label (not a public domain name)"
    return None
