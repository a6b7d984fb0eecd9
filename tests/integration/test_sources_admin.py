"""The admin API of the sources registry (/v1/admin/sources) mounted in the serving app, over real HTTP
on 127.0.0.1 with a real Redis: separate authentication, register, import, export, pause/resume/remove."""

from __future__ import annotations

import json

import httpx
import pytest

from newsflow.crawler.frontier import Frontier
from newsflow.serving.app import ServingConfig, create_app
from newsflow.serving.tokens import sign_token
from newsflow.storage.keys import CRAWL_BUCKETS, Keys
from newsflow.storage.source_registry import SourceRegistry
from tests.integration.asgi_server import serve_in_thread

ADMIN = "admin-token-0123456789abcdef"
SECRET = b"s" * 32
NOW = 1_700_000_000.0


@pytest.fixture
def redis_flushed(server):
    """The module's embedded Redis (conftest ``server``), emptied: ``(client, unix URL)``."""
    server.flushall()
    return server, f"unix://{server.socket_file}"


@pytest.fixture
def api(redis_flushed, tmp_path, monkeypatch):
    client, _ = redis_flushed
    monkeypatch.setenv("NEWSFLOW_ADMIN_TOKEN", ADMIN)
    cfg = ServingConfig(token_secret=SECRET, snapshot_dir=str(tmp_path / "snap"), clock=lambda: NOW, keys=Keys("adm"))
    app = create_app(client, cfg)
    with serve_in_thread(app) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
        yield http, client


def admin(**kw):
    return {"Authorization": f"Bearer {ADMIN}", **kw}


def test_admin_routes_need_the_admin_token_not_a_reader_token(api):
    http, _ = api
    assert http.get("/v1/admin/sources").status_code == 401
    reader = {"Authorization": "Bearer " + sign_token("alice", SECRET, NOW, 3600)}
    r = http.get("/v1/admin/sources", headers=reader)
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    assert r.headers["www-authenticate"].startswith("Bearer")
    r = http.post("/v1/admin/sources", headers={"Authorization": "Bearer " + ADMIN[:-1] + "x"}, json={"url": "x"})
    assert r.status_code == 401
    r = http.get("/v1/admin/sources", headers=admin())
    assert r.status_code == 200 and r.json()["feeds"] == [] and r.headers["cache-control"] == "no-store"


def test_without_a_shared_token_only_editors_tokens_open_the_admin_api(redis_flushed, tmp_path, monkeypatch):
    client, _ = redis_flushed
    monkeypatch.delenv("NEWSFLOW_ADMIN_TOKEN", raising=False)
    app = create_app(client, ServingConfig(token_secret=SECRET, snapshot_dir=str(tmp_path / "s")))
    with serve_in_thread(app) as port:
        r = httpx.get(f"http://127.0.0.1:{port}/v1/admin/sources", headers=admin())
    # not disabled (editors' tokens work: tests/web/test_accounts.py); a token nobody configured is refused
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"


def test_register_list_pause_resume_remove_over_http(api):
    http, client = api
    r = http.post(
        "/v1/admin/sources",
        headers=admin(),
        json={
            "url": "https://www.example.com/rss",
            "title": "Example",
            "categories": ["World"],
            "tier": "national",
            "language": "en",
        },
    )
    assert r.status_code == 201, r.text
    [outcome] = r.json()["outcomes"]
    assert outcome["result"] == "added"
    fid = outcome["feed_id"]
    r = http.post("/v1/admin/sources", headers=admin(), json={"url": "https://www.example.com/rss"})
    assert r.status_code == 200 and r.json()["outcomes"][0]["result"] == "unchanged"
    r = http.post(
        "/v1/admin/sources",
        headers=admin(),
        json={"feeds": [{"url": "http://169.254.169.254/latest"}, {"url": "https://news.example.org/feed"}, 7]},
    )
    assert r.status_code == 201
    assert [o["result"] for o in r.json()["outcomes"]] == ["error", "added", "error"]
    r = http.post("/v1/admin/sources", headers=admin(), json={"url": "http://localhost/rss"})
    assert r.status_code == 422 and "unsafe_url" in r.json()["outcomes"][0]["detail"]
    assert http.post("/v1/admin/sources", headers=admin(), content=b"{not json").status_code == 400

    feeds = http.get("/v1/admin/sources", headers=admin()).json()["feeds"]
    ex = next(f for f in feeds if f["id"] == fid)
    assert (ex["outlet"], ex["tier"], ex["authority"], ex["language"]) == ("example.com", "national", 0.75, "en")
    assert ex["authority_source"] == "rubric"

    r = http.post(f"/v1/admin/sources/{fid}/pause", headers=admin())
    assert r.status_code == 200 and r.json()["outcomes"][0]["result"] == "paused"
    assert http.get(f"/v1/admin/sources/{fid}", headers=admin()).json()["feeds"][0]["status"] == "paused"
    paused = http.get("/v1/admin/sources", params={"status": "paused"}, headers=admin()).json()["feeds"]
    assert [f["id"] for f in paused] == [fid]
    # the frontier sees the pause
    frontier = Frontier(client, Keys("adm"))
    frontier.apply_priorities(NOW)
    assert [t.url for t in frontier.claim("w", NOW, 60, n=10)] == ["https://news.example.org/feed"]
    r = http.post(f"/v1/admin/sources/{fid}/resume", headers=admin())
    assert r.json()["outcomes"][0]["result"] == "resumed"
    frontier.apply_priorities(NOW + 1)
    assert [t.url for t in frontier.claim("w", NOW + 1, 60, n=10)] == ["https://www.example.com/rss"]
    r = http.delete("/v1/admin/sources/example.org", headers=admin())
    assert r.status_code == 200 and r.json()["outcomes"][0]["result"] == "removed"
    assert [f["url"] for f in http.get("/v1/admin/sources", headers=admin()).json()["feeds"]] == [
        "https://www.example.com/rss"
    ]
    assert http.post("/v1/admin/sources/nothing.example.net/pause", headers=admin()).status_code == 404
    assert http.post(f"/v1/admin/sources/{fid}/explode", headers=admin()).status_code == 404
    assert http.get("/v1/admin/sources", params={"limit": 0}, headers=admin()).status_code == 400


def test_import_and_export_over_http(api):
    http, client = api
    opml = (
        '<opml version="2.0"><body><outline text="Tech">'
        '<outline text="A" xmlUrl="https://a.example.com/rss"/>'
        '<outline text="B" xmlUrl="https://b.example.net/rss" category="/gadgets"/></outline>'
        '<outline text="bad" xmlUrl="http://10.1.1.1/rss"/></body></opml>'
    )
    r = http.post("/v1/admin/sources/import", headers=admin(**{"Content-Type": "text/x-opml"}), content=opml)
    assert r.status_code == 200 and r.json()["summary"] == {"added": 2, "error": 1}
    r = http.post("/v1/admin/sources/import", headers=admin(**{"Content-Type": "text/x-opml"}), content=opml)
    assert r.json()["summary"] == {"unchanged": 2, "error": 1}
    r = http.get("/v1/admin/sources/export", params={"format": "opml"}, headers=admin())
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/x-opml")
    assert 'xmlUrl="https://b.example.net/rss"' in r.text and 'category="/gadgets"' in r.text
    r = http.get("/v1/admin/sources/export", params={"format": "csv"}, headers=admin())
    lines = r.text.splitlines()
    assert lines[0].startswith("url,kind,title,categories") and len(lines) == 3
    import gzip

    for blob, kind in (
        (gzip.compress(lines[0].encode()), "gzip data"),
        ("url\nhttps://c.example.org/rss\n".encode("utf-16"), "binary data (NUL bytes"),
        (b"%PDF-1.7\n", "a PDF document"),
    ):
        r = http.post("/v1/admin/sources/import", headers=admin(**{"Content-Type": "text/csv"}), content=blob)
        assert r.status_code == 415 and kind in r.json()["error"]["message"], r.text
    huge = b"x" * (33 * 1024 * 1024)
    r = http.post("/v1/admin/sources/import", headers=admin(**{"Content-Type": "text/csv"}), content=huge)
    assert r.status_code == 413
    assert SourceRegistry(client, Keys("adm")).count() == 2


def test_openapi_documents_the_admin_routes(api):
    http, _ = api
    doc = http.get("/openapi.json").json()
    assert doc["components"]["securitySchemes"]["adminToken"]["scheme"] == "bearer"
    for path in ("/v1/admin/sources", "/v1/admin/sources/{ref}/{action}", "/v1/admin/sources/import"):
        assert path in doc["paths"]
        for op in doc["paths"][path].values():
            assert op["security"] == [{"adminToken": []}]
    assert json.dumps(doc)  # serializable


def test_bad_outlet_fields_refuse_the_entry_before_registering(api):
    http, client = api
    r = http.post(
        "/v1/admin/sources",
        headers=admin(),
        json={
            "feeds": [
                {"url": "https://a.example.com/rss", "authority": 2},
                {"url": "https://b.example.net/rss", "tier": "x"},
            ]
        },
    )
    assert r.status_code == 422
    details = [o["detail"] for o in r.json()["outcomes"]]
    assert "authority" in details[0] and "tier" in details[1]
    assert SourceRegistry(client, Keys("adm")).count() == 0


def test_an_offset_past_any_registry_and_deeply_nested_json_are_4xx_not_500(api):
    http, _ = api
    for offset in ("99999999999999999999", "9223372036854775808", "10000001", "-1"):
        r = http.get("/v1/admin/sources", params={"offset": offset}, headers=admin())
        assert r.status_code == 400 and r.json()["error"]["code"] == "invalid_parameter", offset
    body = b"[" * 50_000 + b"]" * 50_000
    r = http.post("/v1/admin/sources", content=body, headers=admin(**{"Content-Type": "application/json"}))
    assert r.status_code in (400, 413) and r.json()["error"]["code"] in ("invalid_json", "too_large")


def test_a_non_string_title_is_a_bad_entry(api):
    http, _ = api
    doc = {"url": "https://example.com/feed.xml", "title": {"a": [1]}}
    r = http.post("/v1/admin/sources", json=doc, headers=admin())
    assert r.status_code in (200, 207, 400, 422)
    assert "must be strings" in r.text and "{'a': [1]}" not in http.get("/v1/admin/sources", headers=admin()).text


@pytest.mark.slow  # registering 50,000 feeds (the size the issue names) takes 20-60 s on a shared machine
def test_paging_and_search_over_fifty_thousand_sources(redis_flushed):
    """A generated registry of 50,000 feeds (every 7th paused, every 101st removed): each page the admin asks for
    is the slice of the list computed here from the registration order, the last page says there is no more,
    and the outlet search finds exactly the feeds of the outlets whose name contains the term."""
    from newsflow.storage.source_registry import FeedEntry, crawl_task_id

    client, _ = redis_flushed
    n = 50_000
    clock = iter(range(10**6))
    registry = SourceRegistry(client, Keys("big"), clock=lambda: 1e9 + next(clock) / 1e3, batch=5000)
    urls = [f"https://www.outlet{i // 2:05d}.com/feed{i % 2}.xml" for i in range(n)]  # 25,000 outlets
    status = ["removed" if i % 101 == 0 else "paused" if i % 7 == 0 else "active" for i in range(n)]
    entries = ((str(i), FeedEntry(u, status="paused" if i % 7 == 0 else "active")) for i, u in enumerate(urls))
    assert registry.register(entries).counts() == {"added": n}
    for i in range(0, n, 101):
        assert registry.set_status(crawl_task_id("feed", urls[i]), "remove").counts() == {"removed": 1}
    assert registry.status_counts() == {s: status.count(s) for s in ("active", "paused", "removed")}
    # registration order: one clock reading per batch of 5,000, then feed id (the ZSET's order of equal scores)
    order = sorted(range(n), key=lambda i: (i // 5000, crawl_task_id("feed", urls[i])))
    urls, status = [urls[i] for i in order], [status[i] for i in order]
    listed = [u for u, s in zip(urls, status, strict=True) if s != "removed"]
    assert len(listed) == n - len(range(0, n, 101))
    for offset in (0, 50, 21_000, len(listed) - 50, len(listed) - 3):
        rows, more = registry.page(["active", "paused"], offset, 50)
        assert [r["url"] for r in rows] == listed[offset : offset + 50]
        assert more == (offset + 50 < len(listed))
    paused = [u for u, s in zip(urls, status, strict=True) if s == "paused"]
    rows, more = registry.page(["paused"], 1000, 50)
    assert [r["url"] for r in rows] == paused[1000:1050] and more
    rows, more = registry.page(list(("active", "paused", "removed")), n - 10, 50)
    assert [r["url"] for r in rows] == urls[n - 10 :] and not more
    # outlets 12370..12379 contain "outlet1237" (and no other outlet does): 20 feeds, one of them removed
    found = [u for u, s in zip(urls, status, strict=True) if "outlet1237" in u and s != "removed"]
    assert len(found) == 19
    rows, more = registry.page(["active", "paused"], 0, 50, search="OUTLET1237")
    assert [r["url"] for r in rows] == found and not more
    assert registry.page(["active", "paused"], 0, 50, search="*")[0] == []  # a glob character is literal
    both = [u for u, s in zip(urls, status, strict=True) if "outlet1237" in u and s in ("active", "removed")]
    rows, more = registry.page(["active", "removed"], 2, 5, search="outlet1237")  # no index for this pair
    assert [r["url"] for r in rows] == both[2:7] and more == (len(both) > 7)
    # a registry written before the status index existed gets it built once, from the feed records
    for s in ("active", "paused", "removed", "listed"):
        client.delete(registry.keys.source_status(s))
    client.delete(registry.keys.source_status_indexed)
    fresh = SourceRegistry(client, Keys("big"))
    rows, more = fresh.page(["paused"], 1000, 50)
    assert [r["url"] for r in rows] == paused[1000:1050] and more


def test_demo_registers_the_corpus_outlets_paused_and_polls_none(redis_flushed, tmp_path, capsys):
    """``newsflow demo``'s registration: each outlet of the input is a paused entry listed by ``sources list
    --status paused``; nothing is queued for the crawler (every one is held); a second run changes nothing."""
    from newsflow.cli.demo import _scan_inputs, register_corpus_outlets
    from newsflow.cli.main import main
    from newsflow.core.outlets import outlet
    from tests.helpers import corpus_lines, write_landing

    client, url = redis_flushed
    lines = corpus_lines(300)
    landing = write_landing(tmp_path / "landing.jsonl.gz", lines)
    expected = {outlet(json.loads(line)["url"]) for line in lines} - {None}
    outlets: dict[str, str] = {}
    total, _ = _scan_inputs(landing, outlets)
    assert total == len(lines) and set(outlets) == expected and len(expected) > 20
    keys = Keys()
    registry = SourceRegistry(client, keys)
    assert register_corpus_outlets(registry, outlets).counts() == {"added": len(expected)}
    assert register_corpus_outlets(registry, outlets).counts() == {"unchanged": len(expected)}
    capsys.readouterr()
    assert main(["sources", "list", "--status", "paused", "--json", "--redis-url", url]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert {r["outlet"] for r in rows} == expected and {r["status"] for r in rows} == {"paused"}
    assert client.scard(keys.crawl_registrations) == 0
    held = sum(client.scard(keys.crawl_held(b)) for b in range(CRAWL_BUCKETS))  # one held set per host bucket
    assert held == len(expected)
