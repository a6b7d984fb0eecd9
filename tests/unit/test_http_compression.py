"""newsflow.serving.http_cache compression: gzip once per cached version, an ETag per encoding, Accept-Encoding
q-values (RFC 9110 §12.5.3)."""

from __future__ import annotations

import gzip

from starlette.requests import Request
from starlette.responses import Response

from newsflow.serving.http_cache import (
    COMPRESS_MIN_BYTES,
    LocalCache,
    accepts_gzip,
    cached_answer,
    gzip_variant,
    negotiated,
    strong_etag,
)

BODY = b"<p>" + b"full coverage " * 400 + b"</p>"  # 5,607 bytes, very compressible


def _page(body: bytes = BODY) -> Response:
    headers = {"ETag": strong_etag(body), "Vary": "Cookie, Accept-Encoding", "Cache-Control": "public, max-age=30"}
    return Response(body, headers=headers, media_type="text/html; charset=utf-8")


def _request(**headers: str) -> Request:
    raw = [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "GET", "path": "/", "headers": raw, "query_string": b""})


def test_accept_encoding_q_values():
    assert accepts_gzip("gzip") and accepts_gzip("gzip, br") and accepts_gzip("br;q=1.0, gzip;q=0.5")
    assert accepts_gzip("*") and accepts_gzip("x-gzip") and accepts_gzip("GZIP; q=0.001")
    assert not accepts_gzip("") and not accepts_gzip("br") and not accepts_gzip("identity")
    assert not accepts_gzip("gzip;q=0") and not accepts_gzip("*, gzip;q=0") and not accepts_gzip("*;q=0")
    assert accepts_gzip("gzip;q=bogus")  # a malformed q-value counts as 1


def test_gzip_variant_has_its_own_etag_and_decodes_to_the_body():
    page = _page()
    gz = gzip_variant(page)
    assert gzip.decompress(gz.body) == BODY and len(gz.body) < len(BODY) // 10
    assert gz.headers["content-encoding"] == "gzip" and gz.headers["content-length"] == str(len(gz.body))
    assert gz.headers["etag"] == page.headers["etag"][:-1] + '-gzip"' != page.headers["etag"]
    assert gz.headers["content-type"] == "text/html; charset=utf-8"
    assert gz.headers["vary"] == "Cookie, Accept-Encoding" and gz.headers["cache-control"] == "public, max-age=30"
    assert gzip_variant(_page()).body == gz.body  # no timestamp: the same body gives the same bytes
    # not worth it: small, not a 200, already encoded
    assert gzip_variant(_page(b"x" * (COMPRESS_MIN_BYTES - 1))) is None
    assert gzip_variant(Response(BODY, status_code=404)) is None
    assert gzip_variant(gz) is None
    assert negotiated(page, "br") is page and negotiated(page, "gzip").headers["content-encoding"] == "gzip"


def test_cache_compresses_once_per_version_and_answers_304_per_encoding():
    now = [0.0]
    cache = LocalCache(5.0, clock=lambda: now[0])
    builds = []

    def build() -> Response:
        builds.append(1)
        return _page(BODY + str(len(builds)).encode())

    gz1 = cache.get_or_build("home", build, "gzip, br")
    gz2 = cache.get_or_build("home", build, "gzip, deflate")
    plain = cache.get_or_build("home", build, "")
    assert gz1 is gz2 and cache.peek("home", "gzip") is gz1  # compressed once, kept next to the page
    assert len(builds) == 1 and gzip.decompress(gz1.body) == plain.body == BODY + b"1"
    assert cache.peek("home", "identity") is plain and "content-encoding" not in plain.headers
    # a conditional request matches its own encoding's tag only
    gz_tag, plain_tag = gz1.headers["etag"], plain.headers["etag"]
    key, hit = "home", lambda **h: cached_answer(cache, key, build, _request(**h))
    assert hit(accept_encoding="gzip", if_none_match=gz_tag).status_code == 304
    assert hit(accept_encoding="gzip", if_none_match=gz_tag).headers["etag"] == gz_tag
    assert hit(accept_encoding="gzip", if_none_match=plain_tag).status_code == 200
    assert hit(if_none_match=plain_tag).status_code == 304 and hit(if_none_match=gz_tag).status_code == 200
    # a new version (the entry expired): built and compressed again, once
    now[0] = 6.0
    gz3 = cache.get_or_build("home", build, "gzip")
    assert len(builds) == 2 and gzip.decompress(gz3.body) == BODY + b"2" and cache.peek("home", "gzip") is gz3
    assert gz3.headers["etag"] != gz_tag
    # with the cache off every answer is still negotiated
    off = LocalCache(0)
    assert off.get_or_build("x", build, "gzip").headers["content-encoding"] == "gzip"
    assert "content-encoding" not in off.get_or_build("x", build, "").headers


def test_compress_responses_middleware_encodes_other_answers_and_answers_304_per_encoding():
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.responses import StreamingResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    from newsflow.serving.http_cache import CompressResponses, strong_etag

    big = b'{"stories":[' + b",".join(b'{"id":%d,"title":"a headline long enough"}' % i for i in range(200)) + b"]}"

    def page(request):
        r = Response(big, media_type="application/json", headers={"ETag": strong_etag(big), "Vary": "Authorization"})
        r.set_cookie("a", "1")
        r.set_cookie("b", "2")
        return r

    def small(request):
        return Response(b'{"ok":true}', media_type="application/json")

    def stream(request):
        return StreamingResponse(iter([big, big]), media_type="application/json")

    def image(request):
        return Response(big, media_type="image/webp")

    routes = [Route("/page", page), Route("/small", small), Route("/stream", stream), Route("/img", image)]
    client = TestClient(Starlette(routes=routes, middleware=[Middleware(CompressResponses)]))
    gz = {"Accept-Encoding": "gzip"}
    r = client.get("/page", headers=gz)
    assert r.headers["content-encoding"] == "gzip" and r.content == big  # httpx decodes it
    assert int(r.headers["content-length"]) == len(gzip.compress(big, 6, mtime=0)) < len(big) // 3
    assert r.headers["etag"] == strong_etag(big)[:-1] + '-gzip"'
    assert r.headers["vary"] == "Authorization, Accept-Encoding"
    assert sorted(c.split("=")[0] for c in r.headers.get_list("set-cookie")) == ["a", "b"]  # both kept
    again = client.get("/page", headers=dict(gz, **{"If-None-Match": r.headers["etag"]}))
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == r.headers["etag"]
    # the identity tag does not match the gzip representation, and identity requests are not touched
    assert client.get("/page", headers=dict(gz, **{"If-None-Match": strong_etag(big)})).status_code == 200
    plain = client.get("/page", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers and plain.headers["etag"] == strong_etag(big)
    # small, streamed and non-text answers pass as they are
    for path in ("/small", "/stream", "/img"):
        assert "content-encoding" not in client.get(path, headers=gz).headers, path
