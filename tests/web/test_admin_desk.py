"""The editor's desk over real HTTP (uvicorn on 127.0.0.1) and a real embedded Redis: readers never reach an admin
page or admin API route; an editor adds a publisher by home page against a local site (the crawl tier's discovery
injected as ``newsflow serve`` does), imports an OPML file, pauses a feed and sees its crawl schedule, finds,
disables and enables a reader (who then cannot sign in and whose tokens are refused), and every action is in the
audit log with the editor's name and time."""

from __future__ import annotations

import argparse

import httpx
import lxml.html
import pytest

from newsflow.cli.sources_add import discovery_as_dict, home_page_discovery
from newsflow.cli.sources_common import registration_host_check
from newsflow.crawler.frontier import Frontier
from newsflow.crawler.httpserver import HttpServer, Response
from newsflow.serving.app import ServingConfig, create_app
from newsflow.storage.accounts import AccountStore
from newsflow.storage.keys import Keys
from newsflow.storage.source_registry import crawl_task_id
from tests.helpers import PASSWORD, Clock, cheap_hasher, personal_token, signin_reader, web_form_csrf
from tests.integration.asgi_server import serve_in_thread
from tests.integration.ranking_data import NOW

SECRET = b"d" * 32
KEYS = Keys()
RSS = b"""<?xml version="1.0"?><rss version="2.0"><channel><title>%s</title><link>http://%s/</link>
<item><title>one</title><link>http://%s/a1</link></item></channel></rss>"""
SITE = {
    "/": (
        "text/html",
        b'<!doctype html><html><head><title>Local News</title><link rel="alternate" '
        b'type="application/rss+xml" title="Local News" href="/rss.xml"></head><body>hi</body></html>',
    ),
    "/rss.xml": ("application/rss+xml", RSS % (b"Local News", b"local.example.com", b"local.example.com")),
}
OPML = b"""<?xml version="1.0"?><opml version="2.0"><head><title>mine</title></head><body>
<outline text="World" title="World"><outline type="rss" text="One" xmlUrl="https://one.example.org/feed.xml"/>
<outline type="rss" text="Two" xmlUrl="https://two.example.net/rss"/></outline></body></opml>"""


def _site(req):
    hit = SITE.get(req.path) if req.host.split(":")[0] == "local.example.com" else None
    if hit is None:
        return Response(404, {"Content-Type": "text/plain"}, b"not found")
    return Response(200, {"Content-Type": hit[0]}, hit[1])


@pytest.fixture(scope="module")
def site():
    with HttpServer(_site) as srv:
        yield srv


@pytest.fixture()
def desk(server, tmp_path, site):
    """``(base URL, Redis client)`` of the serving app with the crawl tier's discovery and address check wired
    as ``newsflow serve`` wires them (every host resolves to the local site; 127.0.0.1 allowed), an editor
    ``ed`` and readers ``bob`` and ``bea``."""
    server.flushall()
    hosts = ("local.example.com", "one.example.org", "two.example.net")
    resolve = [f"{h}=127.0.0.1:{site.port}" for h in hosts] + ["intranet.example.com=10.1.2.3:80"]
    args = argparse.Namespace(allow_host=["127.0.0.1"], resolve=resolve)
    discover = home_page_discovery(["127.0.0.1"], {"*": f"127.0.0.1:{site.port}"}, host_delay=0.05)
    cfg = ServingConfig(
        token_secret=SECRET,
        snapshot_dir=str(tmp_path / "snap"),
        local_cache_seconds=0,
        clock=Clock(NOW),
        password_hasher=cheap_hasher(),
        admin_token="",
        discover_feeds=discovery_as_dict(discover),
        host_check=registration_host_check(args),
    )
    accounts = AccountStore(server, KEYS, cheap_hasher())
    accounts.create("ed", PASSWORD, NOW, role="editor")
    accounts.create("bob", PASSWORD, NOW)
    accounts.create("bea", PASSWORD, NOW)
    app = create_app(server, cfg)
    with serve_in_thread(app) as port:
        yield f"http://127.0.0.1:{port}", server, app


def _client(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, follow_redirects=False, timeout=30)


def _bearer(token: str) -> dict:
    return {"Authorization": "Bearer " + token}


def _admin_routes(c: httpx.Client, fill: bool = True) -> list[tuple[str, str]]:
    """Every ``(method, path)`` of the admin API, from the served OpenAPI document, path parameters filled."""
    values = {"{ref}": "local.example.com", "{action}": "pause", "{name}": "bea"} if fill else {}
    out = []
    for path, item in c.get("/openapi.json").json()["paths"].items():
        if path.startswith("/v1/admin/"):
            for k, v in values.items():
                path = path.replace(k, v)
            out += [(method.upper(), path) for method in item]
    return out


def test_readers_never_reach_the_admin_pages_or_api(desk):
    base, _, app = desk
    (mount,) = [r for r in app.routes if getattr(r, "path", "") == "/v1/admin"]
    served = {(m, "/v1/admin" + r.path) for r in mount.routes for m in r.methods - {"HEAD"}}
    with _client(base) as bob, _client(base) as anon:
        signin_reader(bob, "bob")
        token = personal_token(bob)
        csrf = web_form_csrf(bob, "/account")
        for path in ("/admin", "/admin/readers", "/admin/sources/export?format=csv"):
            assert bob.get(path).status_code == 403, path
            assert anon.get(path).headers["location"].startswith("/signin?next=/admin"), path
        forms = {
            "/admin/sources": {"ref": "x", "action": "pause"},
            "/admin/sources/add": {"url": "http://local.example.com/"},
            "/admin/readers": {"name": "bea", "action": "disable"},
        }
        for path, fields in forms.items():
            assert bob.post(path, data={"csrf": csrf, **fields}).status_code == 403, path
            assert anon.post(path, data={"csrf": csrf, **fields}).status_code == 401, path
        upload = {"file": ("f.opml", OPML, "text/x-opml")}
        assert bob.post("/admin/sources/import", data={"csrf": csrf}, files=upload).status_code == 403
        assert {(m, p) for m, p in _admin_routes(bob, fill=False)} == served  # every admin route is documented
        routes = _admin_routes(bob)
        for method, path in routes:
            for headers in (_bearer(token), _bearer(bob.cookies["nf_session"]), {}):
                r = bob.request(method, path, headers=headers, json={"url": "http://local.example.com/"})
                assert r.status_code == 401, (method, path, r.text)
    assert AccountStore(desk[1], KEYS).search("bea")[0]["disabled"] is None  # nothing happened: bea is not disabled
    with _client(base) as bea:
        assert signin_reader(bea, "bea").status_code == 303


def test_an_editor_runs_the_desk_through_the_api_and_the_pages(desk):
    base, client, _ = desk
    with _client(base) as ed, _client(base) as bob:
        signin_reader(ed, "ed")
        token = personal_token(ed, "desk")
        signin_reader(bob, "bob")
        bob_token = personal_token(bob)
        assert bob.get("/v1/me/preferences", headers=_bearer(bob_token)).status_code == 200

        # add by home page (API): the local site's <link rel=alternate> feed is found and registered
        r = ed.post("/v1/admin/sources/discover", headers=_bearer(token), json={"url": "http://local.example.com/"})
        assert r.status_code == 201, r.text
        assert [o["url"] for o in r.json()["outcomes"]] == ["http://local.example.com/rss.xml"]
        assert r.json()["discovery"]["found"][0]["how"] == "link"
        fid = crawl_task_id("feed", "http://local.example.com/rss.xml")
        # the crawl frontier takes it and fails twice: the admin shows its schedule, errors and backoff
        frontier = Frontier(client, KEYS)
        frontier.apply_registrations(NOW)
        frontier.apply_priorities(NOW)
        (task,) = frontier.claim("w", NOW, 60)
        state = {"interval_s": 900.0, "last_fetch": NOW, "last_status": "503", "failures": 2, "errors": 3}
        state.update(backoff_until=NOW + 600, last_error="HTTP 503 Service Unavailable")
        frontier.complete(task, "w", NOW, 1.0, next_due=NOW + 600, fields=state)
        (row,) = ed.get("/v1/admin/sources", headers=_bearer(token)).json()["feeds"]
        assert row["id"] == fid and row["crawl"]["due"] == NOW + 600
        assert {k: row["crawl"][k] for k in state} == state
        page = lxml.html.fromstring(ed.get("/admin").text)
        cells = [" ".join(td.text_content().split()) for td in page.xpath("//table[@class='admin']//tr[1]/td")]
        assert cells[4].startswith("every 15.0 min") and "2 in a row, 3 in all; backoff until" in cells[6]

        # a registration the address check refuses (a host on a private address, not allowed)
        r = ed.post("/v1/admin/sources", headers=_bearer(token), json={"url": "http://intranet.example.com/f.xml"})
        assert r.status_code == 422 and "unsafe_address" in r.json()["outcomes"][0]["detail"]

        # the pages: import an OPML file, pause a feed, disable a reader
        csrf = web_form_csrf(ed, "/admin")
        r = ed.post("/admin/sources/import", data={"csrf": csrf}, files={"file": ("mine.opml", OPML, "text/x-opml")})
        assert r.status_code == 200 and "2 added" in r.text
        feeds = ed.get("/v1/admin/sources", headers=_bearer(token), params={"search": "ample.NET"}).json()
        assert [(f["url"], f["categories"]) for f in feeds["feeds"]] == [("https://two.example.net/rss", ["World"])]
        r = ed.post("/admin/sources", data={"csrf": csrf, "ref": fid, "action": "pause", "next": "/admin?q=local"})
        assert (r.status_code, r.headers["location"]) == (303, "/admin?q=local")
        assert ed.get(f"/v1/admin/sources/{fid}", headers=_bearer(token)).json()["feeds"][0]["status"] == "paused"
        listed = ed.get("/v1/admin/sources", headers=_bearer(token)).json()
        assert listed["counts"] == {"active": 2, "paused": 1, "removed": 0} and listed["registered"] == 3

        readers = ed.get("/v1/admin/readers", headers=_bearer(token), params={"q": "b"}).json()
        assert readers["count"] == 3 and [x["name"] for x in readers["readers"]] == ["bea", "bob"]
        assert "3 accounts" in ed.get("/admin/readers").text
        r = ed.post("/admin/readers", data={"csrf": csrf, "name": "bob", "action": "disable", "next": "/admin/readers"})
        assert r.status_code == 303
        assert bob.get("/account").status_code == 303  # his session ended
        for method, path in (("GET", "/v1/me/preferences"), ("GET", "/v1/feed"), ("PUT", "/v1/me/preferences")):
            r = bob.request(method, path, headers=_bearer(bob_token), json={"follow_topics": ["world"]})
            assert r.status_code == 401, (method, path)
        event = {"type": "click", "story_id": "s1", "position": 0, "surface": "top"}
        assert bob.post("/v1/events", headers=_bearer(bob_token), json={"events": [event]}).status_code == 401
        with _client(base) as again:
            assert signin_reader(again, "bob").status_code == 400  # the right password, a disabled account
        assert "Enable bob" in ed.get("/admin/readers?q=bo").text
        r = ed.post("/v1/admin/readers/ed/disable", headers=_bearer(token))
        assert r.status_code == 409  # never one's own account
        r = ed.post("/v1/admin/readers/bob/enable", headers=_bearer(token))
        assert r.json() == {"name": "bob", "disabled": False, "changed": True}
        assert bob.get("/v1/me/preferences", headers=_bearer(bob_token)).status_code == 200
        assert signin_reader(bob, "bob").status_code == 303

        audit = ed.get("/v1/admin/audit", headers=_bearer(token)).json()
        got = [(a["editor"], a["action"], a["target"]) for a in reversed(audit["records"])]
        assert got == [
            ("ed", "sources.add", "http://local.example.com/"),
            ("ed", "sources.add", "1 feeds (API)"),
            ("ed", "sources.import", "mine.opml"),
            ("ed", "sources.pause", fid),
            ("ed", "readers.disable", "bob"),
            ("ed", "readers.enable", "bob"),
        ]
        assert {a["time"] for a in audit["records"]} == {NOW} and audit["count"] == 6
        recent = lxml.html.fromstring(ed.get("/admin").text).xpath("//section[@aria-labelledby='h-audit']//li")
        assert "ed · readers.enable bob" in " ".join(recent[0].text_content().split())


def test_a_home_page_registered_as_is_offers_to_find_its_feeds(desk):
    """A home page registered as is (the demo registers each outlet's so, paused) offers discovery on its row,
    which registers the feed the page links to; a page that cannot be reached is reported, nothing registered."""
    from newsflow.cli.demo import register_corpus_outlets
    from newsflow.storage.source_registry import FeedEntry, SourceRegistry

    base, client, _ = desk
    registry = SourceRegistry(client, KEYS)
    register_corpus_outlets(registry, {"down.example.com": "Down"})  # https://down.example.com/: no TLS there
    home = "http://local.example.com/"
    registry.register([("home", FeedEntry(home, "feed", "Local News", (), home, "paused"))])
    with _client(base) as ed:
        signin_reader(ed, "ed")
        page = lxml.html.fromstring(ed.get("/admin").text)
        offered = page.xpath("//form[@action='/admin/sources/add']//input[@name='url']/@value")
        assert sorted(offered) == [home, "https://down.example.com/"]
        csrf = web_form_csrf(ed, "/admin")
        found = ed.post("/admin/sources/add", data={"csrf": csrf, "url": home})
        assert found.status_code == 200 and "1 added" in found.text
        assert registry.get(crawl_task_id("feed", "http://local.example.com/rss.xml"))["status"] == "active"
        failed = ed.post("/admin/sources/add", data={"csrf": csrf, "url": "https://down.example.com/"})
        assert failed.status_code == 400 and "no feed or news sitemap found" in failed.text


def test_accounts_made_before_the_name_index_are_counted_and_found(server):
    """The readers admin's count and search cover accounts that predate the name index: it is built once from
    the account keys (sessions, tokens and sign-in failures are not accounts)."""
    server.flushall()
    accounts = AccountStore(server, KEYS, cheap_hasher())
    for name in ("amy", "ann", "bo", "a.b"):
        accounts.create(name, PASSWORD, NOW)
    accounts.new_session("amy", NOW)
    accounts.add_token("ann", "cli", NOW)
    accounts.check_password("bo", "wrong password", "10.0.0.1", NOW)  # a failures key
    server.delete(KEYS.accounts_index)  # as before the index existed
    fresh = AccountStore(server, KEYS, cheap_hasher())
    assert fresh.count() == 4
    assert [a["name"] for a in fresh.search("a")] == ["a.b", "amy", "ann"]
    assert server.get(KEYS.accounts_indexed) == b"1"
