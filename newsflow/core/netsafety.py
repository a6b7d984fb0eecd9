"""Address safety shared by every tier: which hosts and IP addresses are never legitimate news sources.

* :func:`is_forbidden_ip` — private, loopback, link-local (incl. the 169.254.169.254 metadata
  service), multicast, reserved, unspecified, carrier-grade NAT and NAT64 addresses. An IPv6
  address that carries an IPv4 address (:func:`embedded_ipv4`: IPv4-mapped ``::ffff:0:0/96``,
  IPv4-compatible ``::/96``, 6to4 ``2002::/16`` (RFC 3056), Teredo ``2001::/32`` (RFC 4380, the
  client address), NAT64 ``64:ff9b::/96`` (RFC 6052) and ``64:ff9b:1::/48`` (RFC 8215)) is also
  judged by that IPv4 address: a packet to it reaches the IPv4 host through a relay or translator.
* :func:`literal_host_problem` — what is wrong with a URL host *without* resolving it: an IP
  literal in any form the C resolver accepts (dotted, decimal ``2852039166``, octal
  ``0251.0376.0251.0376``, hex, short ``127.1``) that is forbidden, ``localhost`` and names under
  ``.localhost``/``.local``/``.internal``/``.localdomain``, cloud metadata names, and single-label hosts.
  The host is first mapped as the WHATWG URL standard's host parser does before its IPv4 parser
  (:func:`whatwg_host`: NFKC, so ``１２７.０.０.１`` is ``127.0.0.1``, and the ideographic and
  half-width full stops read as ``.``), so a browser and this check see the same address.

The crawl tier additionally checks every address DNS returns; the pipeline and
the push endpoint, which never connect to article URLs, use the literal check only.
"""

from __future__ import annotations

import ipaddress
import socket
import unicodedata

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


_NAT64_WKP = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
# URL host label separators UTS #46 maps to "." (ideographic, fullwidth and halfwidth ideographic full stops)
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


def whatwg_host(host: str) -> str:
    """``host`` as the WHATWG URL host parser sees it before its IPv4 check: NFKC-normalised, the
    UTS #46 full stops mapped to ``.``, lower case (https://url.spec.whatwg.org/#host-parsing,
    "domain to ASCII" with UTS #46 mapping)."""
    return unicodedata.normalize("NFKC", host or "").translate(_DOTS).lower()


def embedded_ipv4(addr: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (module docstring lists the forms), else ``None``.

    ``::`` and ``::1`` are not IPv4-compatible addresses (RFC 4291 §2.5.5.1). For the RFC 6052 /48
    prefix the IPv4 address is split around the reserved octet (bits 64-71): octets at bytes 6-7 and 9-10.
    """
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if addr.sixtofour is not None:
        return addr.sixtofour
    if addr.teredo is not None:
        return addr.teredo[1]
    packed = addr.packed
    if addr in _NAT64_WKP or (addr in _IPV4_COMPATIBLE and int(addr) > 1):
        return ipaddress.IPv4Address(packed[12:16])
    if addr in _NAT64_LOCAL:
        return ipaddress.IPv4Address(packed[6:8] + packed[9:11])
    return None


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
    if isinstance(addr, ipaddress.IPv6Address):
        inner = embedded_ipv4(addr)
        if inner is not None and is_forbidden_ip(inner):
            return True
        if addr.ipv4_mapped is not None:
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
    h = whatwg_host(host).strip("[]").split("%")[0]
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
    h = whatwg_host(host).strip().rstrip(".")
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
