"""The replay web's control endpoint publishes a new article into its host's feed at once."""

from __future__ import annotations

import time

import httpx

from newsflow.crawler.replay import ReplayWeb, serve
from newsflow.schemas import RawDocument


def test_publish_endpoint_adds_a_fresh_item_to_the_feed():
    old = RawDocument(
        url="http://a.test/old",
        source_domain="a.test",
        fetch_time=1.0,
        http_status=200,
        body=b"<html>old</html>",
        title="Old",
        published_time=time.time() - 3600,
    )
    web = ReplayWeb([old], speed=1.0, start_at=time.time())
    server = serve(web)
    try:
        base = f"http://127.0.0.1:{server.port}"
        with httpx.Client(headers={"Host": "a.test"}) as http:
            assert "http://a.test/new" not in http.get(base + "/feed.xml").text
            r = http.post(
                base + "/_replay/publish",
                json={"url": "http://a.test/new", "title": "New", "body": "<html>new é</html>"},
            )
            assert r.status_code == 200 and abs(r.json()["published"] - time.time()) < 5
            feed = http.get(base + "/feed.xml").text
            assert feed.index("http://a.test/new") < feed.index("http://a.test/old")  # newest first
            page = http.get(base + "/new")
            assert page.status_code == 200 and page.content == "<html>new é</html>".encode()
            assert http.post(base + "/_replay/publish", json={"url": "a.test/x"}).status_code == 400
    finally:
        server.stop()
