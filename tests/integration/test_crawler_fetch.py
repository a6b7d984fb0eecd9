"""Fetcher limits and safety against real HTTP servers on 127.0.0.1."""

import asyncio
import gzip
import ipaddress
import time

import pytest

from newsflow.crawler.config import CrawlerConfig
from newsflow.crawler.fetch import PAGE_TYPES, Fetcher, SafeResolver, parse_retry_after
from newsflow.crawler.httpserver import HttpServer, Response
from newsflow.crawler.safety import AddressPolicy, UnsafeAddressError, is_forbidden_ip

PAGE = ("<html><body>" + "caf\u00e9 " * 500 + "</body></html>").encode("utf-8")


def handler(req):
    p = req.path
    if p == "/gzip":
        return Response(
            200, {"Content-Type": "text/html; charset=utf-8", "Content-Encoding": "gzip"}, gzip.compress(PAGE)
        )
    if p == "/etag":
        if req.headers.get("if-none-match") == '"v1"':
            return Response(304, {"ETag": '"v1"'}, b"")
        return Response(
            200, {"Content-Type": "text/html", "ETag": '"v1"', "Last-Modified": "Mon, 10 Mar 2014 10:00:00 GMT"}, PAGE
        )
    if p == "/loop-a":
        return Response(302, {"Location": "/loop-b"}, b"")
    if p == "/loop-b":
        return Response(301, {"Location": "/loop-a"}, b"")
    if p.startswith("/chain/"):
        n = int(p.rsplit("/", 1)[1])
        return Response(302, {"Location": f"/chain/{n + 1}"}, b"")
    if p == "/big":
        return Response(200, {"Content-Type": "text/html"}, b"x" * 300_000)
    if p == "/big-chunked":
        return Response(200, {"Content-Type": "text/html"}, ((0, b"y" * 10_000) for _ in range(100)))
    if p == "/gzip-bomb":
        return Response(
            200, {"Content-Type": "text/html", "Content-Encoding": "gzip"}, gzip.compress(b"\0" * 5_000_000)
        )
    if p == "/slow":
        return Response(200, {"Content-Type": "text/html"}, ((0.2, b"<p>drip</p>") for _ in range(50)))
    if p == "/to-private":
        return Response(302, {"Location": "http://10.1.2.3/internal"}, b"")
    if p == "/to-metadata":
        return Response(307, {"Location": "http://169.254.169.254/latest/meta-data/"}, b"")
    if p == "/busy":
        return Response(503, {"Retry-After": "7", "Content-Type": "text/plain"}, b"busy")
    if p == "/to-bad-port":
        return Response(302, {"Location": "http://pub.test:99999/feed.xml"}, b"")
    if p == "/pdf":
        return Response(200, {"Content-Type": "application/pdf"}, b"%PDF-1.4")
    return Response(404, {"Content-Type": "text/plain"}, b"nope")


@pytest.fixture(scope="module")
def server():
    with HttpServer(handler) as s:
        yield s


def fetch(url, **kw):
    cfg = CrawlerConfig(
        allow_hosts=("127.0.0.1",),
        total_timeout_s=kw.pop("total", 5.0),
        max_body_bytes=kw.pop("max_body", 200_000),
        max_redirects=kw.pop("max_redirects", 5),
    )

    async def go():
        f = Fetcher(cfg)
        try:
            return await f.fetch(url, **kw)
        finally:
            await f.aclose()

    return asyncio.run(go())


def test_gzip_body_is_decoded(server):
    r = fetch(server.base_url + "/gzip")
    assert r.ok and r.body == PAGE and r.headers["content-encoding"] == "gzip"


def test_conditional_get_304(server):
    first = fetch(server.base_url + "/etag")
    assert first.status == 200 and first.headers["etag"] == '"v1"'
    second = fetch(server.base_url + "/etag", etag='"v1"', last_modified=first.headers["last-modified"])
    assert second.status == 304 and second.body is None and not second.error_kind
    deadline = time.monotonic() + 2.0  # the server logs a request after answering it
    while time.monotonic() < deadline and "if-none-match" not in server.log[-1].headers:
        time.sleep(0.02)
    assert server.log[-1].headers["if-none-match"] == '"v1"'
    assert server.log[-1].headers["if-modified-since"] == "Mon, 10 Mar 2014 10:00:00 GMT"


def test_redirect_loop_and_limit(server):
    r = fetch(server.base_url + "/loop-a")
    assert r.error_kind == "redirect_loop"
    r = fetch(server.base_url + "/chain/0", max_redirects=3)
    assert r.error_kind == "too_many_redirects"
    time.sleep(0.2)  # the server logs a request after answering it
    assert sum(1 for e in server.log if e.path.startswith("/chain/")) == 4  # first request + 3 redirects


def test_oversized_bodies_cut_off(server):
    assert fetch(server.base_url + "/big").error_kind == "too_large"
    assert fetch(server.base_url + "/big-chunked").error_kind == "too_large"
    bomb = fetch(server.base_url + "/gzip-bomb")
    assert bomb.error_kind == "too_large" and bomb.body is None


def test_endlessly_slow_response_cut_off(server):
    t0 = time.monotonic()
    r = fetch(server.base_url + "/slow", total=1.0)
    assert r.error_kind == "timeout" and r.body is None
    assert time.monotonic() - t0 < 2.0


def test_redirects_to_private_addresses_refused(server):
    r = fetch(server.base_url + "/to-private")
    assert r.error_kind == "unsafe_address" and "10.1.2.3" in r.error
    r = fetch(server.base_url + "/to-metadata")
    assert r.error_kind == "unsafe_address" and "169.254.169.254" in r.error
    assert not any(e.path == "/internal" for e in server.log)


def test_loopback_refused_without_allow_list(server):
    async def go(url):
        f = Fetcher(CrawlerConfig())
        try:
            return await f.fetch(url)
        finally:
            await f.aclose()

    time.sleep(0.2)  # let earlier requests finish logging
    before = sum(1 for e in server.log if e.path == "/gzip")
    r = asyncio.run(go(server.base_url + "/gzip"))
    assert r.error_kind == "unsafe_address"
    r = asyncio.run(go(f"http://localhost:{server.port}/gzip"))  # after DNS resolution
    assert r.error_kind == "unsafe_address"
    time.sleep(0.2)
    assert sum(1 for e in server.log if e.path == "/gzip") == before  # no request was sent


def test_retry_after_and_content_type(server):
    r = fetch(server.base_url + "/busy")
    assert r.status == 503 and r.retry_after_s == 7.0
    r = fetch(server.base_url + "/pdf", accept_types=PAGE_TYPES)
    assert r.error_kind == "bad_content_type" and r.body is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412480.0 - 60) == 60.0
    assert parse_retry_after("soon", now=0) is None


def test_address_classification():
    for ip in (
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "::1",
        "fe80::1",
        "100.64.0.1",
        "0.0.0.0",
        "::ffff:127.0.0.1",
        "fd00:ec2::254",
        "224.0.0.1",
    ):
        assert is_forbidden_ip(ip), ip
    for ip in ("8.8.8.8", "151.101.1.69", "2a04:4e42::81"):
        assert not is_forbidden_ip(ip), ip
    pol = AddressPolicy(["127.0.0.1"])
    assert pol.ip_allowed("127.0.0.1") and not pol.ip_allowed("127.0.0.2")
    with pytest.raises(UnsafeAddressError):
        asyncio.run(AddressPolicy().check_host("metadata.google.internal", 80))


def test_address_policy_uses_the_shared_literal_checks():
    from newsflow.core import netsafety
    from newsflow.crawler import safety

    assert safety.is_forbidden_ip is netsafety.is_forbidden_ip  # one implementation, re-exported
    assert safety.METADATA_HOSTS is netsafety.METADATA_HOSTS

    def refused(host, policy=None, resolve_as=None):
        with pytest.raises(UnsafeAddressError) as e:
            asyncio.run((policy or AddressPolicy()).check_host(host, 80, resolve_as))
        return str(e.value)

    # IP literals in the forms inet_aton accepts, judged without DNS
    assert "169.254.169.254" in refused("0251.0376.0251.0376")
    assert "169.254.169.254" in refused("2852039166")
    assert "127.0.0.1" in refused("0x7f.1")
    # local, metadata and single-label names are refused before any lookup
    assert "is local" in refused("printer.local")
    assert "single label" in refused("intranet")
    assert "metadata" in refused("metadata.google.internal", AddressPolicy(["127.0.0.1"]), "127.0.0.1")
    # an allow-listed replay override may use any non-metadata name; a public one may not
    assert asyncio.run(AddressPolicy(["127.0.0.1"]).check_host("intranet", 80, "127.0.0.1")) == ["127.0.0.1"]
    assert "single label" in refused("intranet", AddressPolicy(), "93.184.216.34")
    assert asyncio.run(AddressPolicy(["127.0.0.1"]).check_host("0x7f.1", 80)) == ["127.0.0.1"]


class CountingPolicy(AddressPolicy):
    """The real address policy, counting its host checks."""

    def __init__(self, allow=()):
        super().__init__(allow)
        self.checks = 0

    async def check_host(self, host, port, resolve_as=None):
        self.checks += 1
        return await super().check_host(host, port, resolve_as=resolve_as)


def test_host_checks_are_cached_for_dns_cache_s_and_refusals_are_not(server):
    async def go(cfg, policy, urls):
        f = Fetcher(cfg, policy=policy)
        try:
            return [await f.fetch(u) for u in urls]
        finally:
            await f.aclose()

    urls = [server.base_url + "/gzip", server.base_url + "/etag", server.base_url + "/gzip"]
    cached = CountingPolicy(("127.0.0.1",))
    res = asyncio.run(go(CrawlerConfig(allow_hosts=("127.0.0.1",)), cached, urls))
    assert [r.status for r in res] == [200, 200, 200] and all(r.server_ip == "127.0.0.1" for r in res)
    assert cached.checks == 1  # one host: checked once within dns_cache_s
    uncached = CountingPolicy(("127.0.0.1",))
    asyncio.run(go(CrawlerConfig(allow_hosts=("127.0.0.1",), dns_cache_s=0.0), uncached, urls))
    assert uncached.checks == 3
    refusing = CountingPolicy()  # loopback not allowed: every fetch is refused, and checked again
    res = asyncio.run(go(CrawlerConfig(), refusing, urls[:2]))
    assert [r.error_kind for r in res] == ["unsafe_address", "unsafe_address"] and refusing.checks == 2


def test_repeated_response_headers_are_joined():
    from multidict import CIMultiDict

    from newsflow.crawler.fetch import _lower_headers

    h = CIMultiDict([("Content-Type", "text/html"), ("Vary", "Accept"), ("vary", "Cookie")])
    assert _lower_headers(h) == {"content-type": "text/html", "vary": "Accept, Cookie"}


def test_connected_peer_is_checked_even_when_the_host_name_is_exempt(server):
    # "localhost" is exempt by name, so the pre-connect check passes; the peer 127.0.0.1 is not allowed
    async def go():
        f = Fetcher(CrawlerConfig(allow_hosts=("localhost",)))
        try:
            return await f.fetch(f"http://localhost:{server.port}/gzip")
        finally:
            await f.aclose()

    r = asyncio.run(go())
    # refused by the connector's resolver (SafeResolver) before connecting, or by the peer check after
    assert r.error_kind == "unsafe_address" and "127.0.0.1" in r.error and r.body is None
    assert "forbidden addresses (127.0.0.1" in r.error or "connected peer 127.0.0.1" in r.error


def test_unparseable_ports_are_bad_urls_not_crashes(server):
    """A redirect to port 99999 and a URL with two ports used to raise out of the fetcher (and the
    crawl worker, which re-leased the task and crashed again)."""
    r = fetch(server.base_url + "/to-bad-port")
    assert r.error_kind == "bad_url" and "99999" in r.error and r.status == 302
    r = fetch("http://127.0.0.1:46001:80/")
    assert r.error_kind == "bad_url" and "46001:80" in r.error
    r = fetch("http://[::1/")  # unclosed IPv6 literal: urlsplit itself raises
    assert r.error_kind == "bad_url"


def test_safe_resolver_drops_forbidden_addresses():
    """The connector's own lookup keeps only allowed addresses (a rebinding DNS answer cannot open a
    connection to a private address between the host check and the connect)."""

    async def go(policy):
        resolver = SafeResolver(policy)
        try:
            return await resolver.resolve("localhost", 80)
        finally:
            await resolver.close()

    with pytest.raises(OSError, match="resolves only to forbidden addresses"):
        asyncio.run(go(AddressPolicy(())))
    allowed = asyncio.run(go(AddressPolicy(["127.0.0.1"])))
    assert allowed and {i["host"] for i in allowed} == {"127.0.0.1"} and all(i["port"] == 80 for i in allowed)


def test_ipv6_forms_that_carry_an_ipv4_address_are_judged_by_it():
    """Each address below carries 127.0.0.1, 10.0.0.1 or 192.168.0.1 (worked out from its RFC): the guard
    refuses them, and a public one of the same form stays allowed where the IPv6 rules allow it."""
    from newsflow.core.netsafety import embedded_ipv4

    carried = {
        "2002:7f00:1::": "127.0.0.1",  # 6to4 (RFC 3056): bits 16-47
        "2002:a00:1:1::": "10.0.0.1",
        "::7f00:1": "127.0.0.1",  # IPv4-compatible (RFC 4291 §2.5.5.1)
        "64:ff9b::c0a8:1": "192.168.0.1",  # NAT64 well-known prefix (RFC 6052 /96)
        # RFC 8215 local-use /48, RFC 6052 layout: bytes 6-7 = 7f 00, byte 8 = u (0), bytes 9-10 = 00 01
        "64:ff9b:1:7f00:0:100::": "127.0.0.1",
        # Teredo (RFC 4380): client address = ~(last 32 bits): ~80ff:fffe = 7f00:0001
        "2001:0:4136:e378:8000:63bf:80ff:fffe": "127.0.0.1",
    }
    for v6, v4 in carried.items():
        assert str(embedded_ipv4(ipaddress.ip_address(v6))) == v4, v6
        assert is_forbidden_ip(v6), v6
    assert str(embedded_ipv4(ipaddress.ip_address("2002:808:808::"))) == "8.8.8.8"
    assert not is_forbidden_ip("2002:808:808::")  # 6to4 of a public address
    assert embedded_ipv4(ipaddress.ip_address("::1")) is None and embedded_ipv4(ipaddress.ip_address("::")) is None
    with pytest.raises(UnsafeAddressError, match="127.0.0.1"):
        asyncio.run(AddressPolicy().check_host("[2002:7f00:1::]", 80))


def test_hosts_are_read_as_a_browser_reads_them():
    """WHATWG host parsing maps full-width digits and dots (NFKC, UTS #46) before its IPv4 parser."""
    from newsflow.core.netsafety import literal_host_problem, whatwg_host

    assert whatwg_host("１２７.０.０.１") == "127.0.0.1"
    assert whatwg_host("127。0。0。1") == "127.0.0.1"
    assert "127.0.0.1" in literal_host_problem("１２７.０.０.１")
    assert "is local" in literal_host_problem("ｌｏｃａｌｈｏｓｔ")
    assert literal_host_problem("ｅｘａｍｐｌｅ.com") is None
    with pytest.raises(UnsafeAddressError, match="127.0.0.1"):
        asyncio.run(AddressPolicy().check_host("１２７.０.０.１", 80))
