"""Full coverage at scale and the site files over real HTTP (uvicorn on 127.0.0.1, embedded Redis): a story of
300 independent reports from 60 outlets (``tests.helpers.wide_app``) shows its top 30 first, then "show more"
pages that together list every report once; the timeline names the busiest hours; pages are gzip-encoded with an
ETag per encoding; a card's follow/block form brings focus back by fragment; robots.txt, manifest and favicon.
"""

from __future__ import annotations

import json

import httpx
import lxml.html
import pytest

from tests.helpers import WIDE_OUTLETS, WIDE_REPORTS, WIDE_STORY, register_reader, web_form_csrf, wide_app
from tests.integration.asgi_server import serve_in_thread


@pytest.fixture(scope="module")
def wide(server, tmp_path_factory):
    app = wide_app(server, str(tmp_path_factory.mktemp("snap")), b"c" * 32)
    with serve_in_thread(app) as port:
        yield f"http://127.0.0.1:{port}"


def _reports(doc) -> list[tuple[str, str]]:
    """``(article url, outlet)`` of each listed report."""
    return [(li.xpath("a[1]/@href")[0], li.xpath("span/a/text()")[0]) for li in doc.xpath("//ol[@class='reports']/li")]


def _authority(url: str) -> float:
    k = int(url.rsplit("-", 1)[1])
    return 0.2 + (k * 37 % 100) / 200


def test_top_coverage_first_then_every_report_once_by_show_more(wide):
    with httpx.Client(base_url=wide, timeout=20) as c:
        first = c.get(f"/stories/{WIDE_STORY}")
        doc = lxml.html.fromstring(first.text)
        meta = doc.xpath("//article[@class='coverage']/p[@class='meta']")[0].text_content()
        assert f"{WIDE_OUTLETS} sources" in meta and f"{WIDE_REPORTS} independent reports" in meta
        assert doc.xpath("//section[@aria-labelledby='lead-h']//a/@href")[0] == "https://o0.com/big-0"
        top = _reports(doc)
        # 30 reports, one per outlet (60 outlets have a best report each), highest authority first, and none of
        # the outlets left out has a better report than the weakest one shown
        assert len(top) == 30 and len({o for _, o in top}) == 30
        shown = [_authority(u) for u, _ in top]
        assert shown == sorted(shown, reverse=True)
        best_left_out = max(
            _authority(f"https://o{k % 60}.com/big-{k}")
            for k in range(1, WIDE_REPORTS)
            if f"o{k % 60}.com" not in {o for _, o in top}
        )
        assert min(shown) >= best_left_out
        assert "(30 of 299 other reports)" in doc.xpath("//h2[@id='reports-h']")[0].text_content()
        # timeline in brief: 17:13:20 + k min for k < 300: hours 17 (47), 18-21 (60 each), 22 (13)
        assert doc.xpath("//dl[@class='timeline']/dd/a/@href") == [
            "https://o0.com/big-0",
            "https://o59.com/big-299",
        ]
        busiest = [li.text_content() for li in doc.xpath("//ul[@class='busiest']/li")]
        assert busiest == [f"2023-11-14 {h}:00 UTC: 60 articles" for h in (18, 19, 20)]
        assert (
            "300 articles in 6 clock hours (UTC)"
            in doc.xpath("//section[@aria-labelledby='timeline-h']")[0].text_content()
        )
        # show more: 30 a page, earliest first, until every other report was listed once
        seen, pages, nxt = [u for u, _ in top], 1, doc.xpath("//a[@rel='next']/@href")
        while nxt:
            page = lxml.html.fromstring(c.get(f"/stories/{WIDE_STORY}" + nxt[0]).text)
            urls = [u for u, _ in _reports(page)]
            ks = [int(u.rsplit("-", 1)[1]) for u in urls]
            assert ks == sorted(ks) and 0 < len(urls) <= 30
            start = len(seen) + 1
            assert (
                f"reports {start}–{start + len(urls) - 1} of 299"
                in page.xpath("//h2[@id='reports-h']")[0].text_content()
            )
            seen += urls
            pages += 1
            nxt = page.xpath("//a[@rel='next']/@href")
        assert pages == 10 and len(seen) == len(set(seen)) == WIDE_REPORTS - 1
        assert set(seen) | {"https://o0.com/big-0"} == {f"https://o{k % 60}.com/big-{k}" for k in range(300)}
        assert c.get(f"/stories/{WIDE_STORY}?cursor=bogus").status_code == 400


def test_pages_are_gzip_encoded_once_with_an_etag_per_encoding(wide):
    with httpx.Client(base_url=wide, timeout=20) as c:
        for path in (f"/stories/{WIDE_STORY}", "/", "/v1/top"):
            plain = c.get(path, headers={"Accept-Encoding": "identity"})
            gz = c.get(path, headers={"Accept-Encoding": "gzip, br"})
            assert "content-encoding" not in plain.headers and gz.headers["content-encoding"] == "gzip", path
            assert "Accept-Encoding" in gz.headers["vary"] and "Accept-Encoding" in plain.headers["vary"]
            assert gz.content == plain.content  # httpx decoded it
            assert int(gz.headers["content-length"]) < len(plain.content) / 3, path
            assert gz.headers["etag"] == plain.headers["etag"][:-1] + '-gzip"'
            again = c.get(path, headers={"Accept-Encoding": "gzip", "If-None-Match": gz.headers["etag"]})
            assert again.status_code == 304 and again.headers["etag"] == gz.headers["etag"]
            other = c.get(path, headers={"Accept-Encoding": "identity", "If-None-Match": gz.headers["etag"]})
            assert other.status_code == 200
        raw = httpx.get(wide + f"/stories/{WIDE_STORY}", headers={"Accept-Encoding": "gzip"}, timeout=20)
        assert len(raw.content) < 60_000  # the top-30 page, uncompressed


def test_card_forms_come_back_to_the_card_by_fragment(wide):
    with httpx.Client(base_url=wide, timeout=20, follow_redirects=False) as c:
        assert register_reader(c, "kim").status_code == 303
        home = lxml.html.fromstring(c.get("/").text)
        ids = [a.get("href").rsplit("/", 1)[1] for a in home.xpath("//ol[@class='cards']//article/h3/a")]
        assert len(ids) >= 16
        card = home.xpath(f"//article[@aria-labelledby='t-{ids[14]}']")[0]
        first = card.xpath(".//form[@action='/prefs']//button")[0]
        assert first.get("id") == f"follow-{ids[14]}"
        assert card.xpath(".//input[@name='after']/@value") == [ids[15]]
        csrf = web_form_csrf(c, "/settings")
        form = {"csrf": csrf, "next": "/", "card": ids[14], "after": ids[15]}
        follow = c.post("/prefs", data=dict(form, op=first.get("value")))
        assert follow.status_code == 303 and follow.headers["location"] == f"/#follow-{ids[14]}"
        block = c.post("/prefs", data=dict(form, op="block:topic:nothing-here"))
        assert block.headers["location"] == f"/#follow-{ids[15]}"  # the card is gone: the next one
        plain = c.post(
            "/prefs",
            data={"csrf": csrf, "next": "/settings#x", "action": "unblock", "kind": "topic", "value": "nothing-here"},
        )
        assert plain.headers["location"] == "/settings"  # not from a card: no fragment


def test_robots_manifest_and_favicon(wide):
    with httpx.Client(base_url=wide, timeout=20) as c:
        robots = c.get("/robots.txt")
        assert robots.status_code == 200 and robots.headers["content-type"].startswith("text/plain")
        assert "Disallow: /account" in robots.text and "Disallow: /stories" not in robots.text
        manifest = c.get("/manifest.webmanifest")
        assert manifest.headers["content-type"] == "application/manifest+json"
        icon = json.loads(manifest.content)["icons"][0]["src"]
        svg = c.get(icon)
        assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
        assert c.get("/favicon.ico").headers["location"] == icon
        home = lxml.html.fromstring(c.get("/").text)
        assert home.xpath("//link[@rel='icon']/@href") == [icon]
        assert home.xpath("//link[@rel='manifest']/@href") == ["/manifest.webmanifest"]
        assert "manifest-src 'self'" in c.get("/").headers["content-security-policy"]
