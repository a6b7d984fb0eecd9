"""Search and feeds out, end to end: the streaming job on 120 bundled headlines (the Titanfall launch among
them) fills Redis, Parquet and the search index; ``newsflow search-index --rebuild``'s code rebuilds it from
Parquet; the serving app answers ``/v1/search``, ``/search`` and the RSS/Atom feeds (parsed by feedparser).
Expected values are computed from the job's Parquet rows and Redis, not from the index."""

import json
import os

import feedparser
import lxml.html
import pyarrow.compute as pc
import pytest
from starlette.testclient import TestClient

from newsflow.serving.app import ServingConfig, create_app
from newsflow.storage.feeds import build_feeds
from newsflow.storage.keys import Keys
from newsflow.storage.parquet import read_dataset
from newsflow.storage.ranking import RankingStore
from newsflow.storage.search_history import rebuild
from newsflow.storage.search_index import SearchIndex, default_index_path
from newsflow.storage.story_index import assigned_stories
from tests.helpers import cheap_hasher, corpus_lines, personal_token, register_reader, run_job, write_landing

SECRET = b"s" * 32


@pytest.fixture(scope="module")
def site(server, tmp_path_factory):
    """``(app client, data dir, replay time)`` after the job ran on 120 headlines (30 about Titanfall) and the
    feeds were built."""
    tmp = tmp_path_factory.mktemp("search")
    server.flushall()
    lines = corpus_lines(640)
    landing = write_landing(tmp / "landing.jsonl.gz", lines[:80] + lines[600:640])
    url = f"unix://{server.socket_file}"
    old = os.environ.get("NEWSFLOW_DATA_DIR")
    os.environ["NEWSFLOW_DATA_DIR"] = str(tmp)  # the job's default index path: <data dir>/search/index.sqlite3
    try:
        run_job(tmp, url, landing, str(tmp / "output"))
    finally:
        if old is None:
            os.environ.pop("NEWSFLOW_DATA_DIR")
        else:
            os.environ["NEWSFLOW_DATA_DIR"] = old
    articles = read_dataset(str(tmp / "output"), "articles")
    now = pc.max(articles.column("event_time")).as_py().timestamp() + 60
    build_feeds(server, now)
    cfg = ServingConfig(
        token_secret=SECRET,
        snapshot_dir=str(tmp / "snapshots"),
        local_cache_seconds=0,
        clock=lambda: now,
        password_hasher=cheap_hasher(),
        search_index=default_index_path(str(tmp)),
    )
    return TestClient(create_app(server, cfg)), str(tmp), now


def live_story(server, article_id: str) -> str | None:
    """The article's story now, read from Redis: its assignment followed through ``merged_into``."""
    return resolved(server, assigned_stories(server, Keys(), [article_id])[article_id])


def resolved(server, sid) -> str | None:
    """Story ``sid`` followed through ``merged_into`` in Redis."""
    keys = Keys()
    while sid:
        sid = sid.decode() if isinstance(sid, bytes) else sid
        nxt = server.hget(keys.story(sid), "merged_into")
        if not nxt:
            return sid
        sid = nxt
    return None


def titanfall_articles(data_dir: str) -> set[str]:
    """Ids of the job's articles whose headline or indexed lead says "titanfall", from Parquet."""
    t = read_dataset(os.path.join(data_dir, "output"), "articles").to_pylist()
    return {a["article_id"] for a in t if "titanfall" in (a["title"] + " " + (a["text"] or "")[:600]).lower()}


def test_the_job_indexes_every_article_with_its_story_and_a_rebuild_from_parquet_agrees(site, server, tmp_path):
    _, data_dir, _ = site
    expected = titanfall_articles(data_dir)
    assert len(expected) >= 20
    streamed = SearchIndex(default_index_path(data_dir), readonly=True)
    hits = streamed.search("Titanfall")
    assert {h.article_id for h in hits} == expected
    assert all(live_story(server, h.article_id) == live_story(server, h.article_id) is not None for h in hits)

    rebuilt = SearchIndex(str(tmp_path / "rebuilt.sqlite3"))
    counts = rebuild(rebuilt, os.path.join(data_dir, "output"), server)
    assert counts["articles"] == counts["with_story"] == streamed.count()
    cols = "article_id, title, lead, url, domain, outlet, language, event_time"
    rows = [
        ix._thread_conn().execute(f"SELECT {cols} FROM docs ORDER BY article_id").fetchall()
        for ix in (streamed, rebuilt)
    ]
    assert rows[0] == rows[1]
    # the streamed row keeps the story the article joined, the rebuilt one the story after merges: the same now
    stories = [dict(ix._thread_conn().execute("SELECT article_id, story_id FROM docs")) for ix in (streamed, rebuilt)]
    assert {a: resolved(server, s) for a, s in stories[0].items()} == {
        a: resolved(server, s) for a, s in stories[1].items()
    }
    # a rebuilt row takes its story's entities (Parquet keeps none per article): it matches at least as much
    for q in ("titanfall", "xbox one", "microsoft", "ukraine"):
        a = {(h.article_id, h.story_id) for h in streamed.search(q)}
        assert a <= {(h.article_id, h.story_id) for h in rebuilt.search(q)}, q


def test_api_search_returns_the_titanfall_stories_grouped_and_paged(site, server):
    client, data_dir, _ = site
    expected_articles = titanfall_articles(data_dir)
    expected_stories = {live_story(server, a) for a in expected_articles}
    r = client.get("/v1/search", params={"q": "Titanfall"})
    assert r.status_code == 200
    assert r.headers["cache-control"].startswith("public")
    body = r.json()
    assert {s["story_id"] for s in body["stories"]} == expected_stories
    assert sum(s["matches"] for s in body["stories"]) == len(expected_articles)
    for s in body["stories"]:
        assert s["title"] and s["article_count"] >= s["matches"] >= len(s["articles"]) >= 1
        for a in s["articles"]:
            assert a["article_id"] in expected_articles and live_story(server, a["article_id"]) == s["story_id"]
    # a wider query pages through every story once, one per page
    everything = client.get("/v1/search", params={"q": "the", "limit": 100}).json()["stories"]
    assert len(everything) >= 2
    seen, cursor = [], None
    while True:
        params = {"q": "the", "limit": 1} | ({"cursor": cursor} if cursor else {})
        page = client.get("/v1/search", params=params).json()
        seen += [s["story_id"] for s in page["stories"]]
        assert page["next"] == page["next_cursor"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [s["story_id"] for s in everything]
    for bad in ("not-a-cursor", "djE6MTI6", "x" * 300):  # garbage, "v1:12:" (no id), too long
        wrong = client.get("/v1/search", params={"q": "titanfall", "limit": 1, "cursor": bad})
        assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "bad_cursor"


def test_filters_narrow_the_results(site, server):
    client, _, _ = site
    stories = client.get("/v1/search", params={"q": "titanfall", "limit": 100}).json()["stories"]
    first = stories[0]["articles"][0]
    by_outlet = client.get("/v1/search", params={"q": "titanfall", "outlet": first["outlet"]}).json()["stories"]
    assert by_outlet and all(a["outlet"] == first["outlet"] for s in by_outlet for a in s["articles"])
    day = first["event_time"]
    import datetime as dt

    d = dt.datetime.fromtimestamp(day, dt.UTC).strftime("%Y-%m-%d")
    same_day = client.get("/v1/search", params={"q": "titanfall", "since": d, "until": d}).json()["stories"]
    assert first["article_id"] in {a["article_id"] for s in same_day for a in s["articles"]}
    later = (dt.datetime.fromtimestamp(day, dt.UTC) + dt.timedelta(days=400)).strftime("%Y-%m-%d")
    assert client.get("/v1/search", params={"q": "titanfall", "since": later}).json()["stories"] == []
    assert client.get("/v1/search", params={"q": "titanfall", "language": "de"}).json()["stories"] == []
    topic = stories[0]["topics"][0].lower()
    on_topic = client.get("/v1/search", params={"q": "titanfall", "topic": topic}).json()["stories"]
    assert stories[0]["story_id"] in {s["story_id"] for s in on_topic}
    for params, needle in (
        ({}, "q is required"),
        ({"q": "x", "language": "german"}, "language"),
        ({"q": "x", "since": "2014-13-01"}, "since"),
        ({"q": "x", "limit": "0"}, "limit"),
        ({"q": "x", "cursor": "!!"}, "cursor"),
        ({"q": "x" * 201}, "at most 200"),
    ):
        r = client.get("/v1/search", params=params)
        assert r.status_code == 400 and needle in r.json()["error"]["message"], (params, r.text)


def test_a_readers_muted_words_and_blocks_hold_in_search(site):
    client, _, _ = site
    reader = TestClient(client.app)
    assert register_reader(reader, "searcher").status_code in (200, 303)
    token = personal_token(reader)
    auth = {"Authorization": f"Bearer {token}"}
    public = client.get("/v1/search", params={"q": "titanfall", "limit": 100}).json()["stories"]
    lead = public[0]
    muted = {"mute_words": ["titanfall"]}
    put = reader.put(
        "/v1/me/preferences", content=json.dumps(muted), headers=auth | {"Content-Type": "application/json"}
    )
    assert put.status_code == 200, put.text
    r = reader.get("/v1/search", params={"q": "titanfall", "limit": 100}, headers=auth)
    assert r.headers["cache-control"].startswith("private")
    assert r.json()["stories"] == []  # every match names the muted word
    page = reader.get("/search", params={"q": "titanfall"})
    assert lead["title"] not in page.text
    reader.put(
        "/v1/me/preferences",
        content=json.dumps({"mute_words": []}),
        headers=auth | {"Content-Type": "application/json"},
    )
    reader.put(f"/v1/me/read/{lead['story_id']}", headers=auth)
    marked = reader.get("/v1/search", params={"q": "titanfall", "limit": 100}, headers=auth).json()["stories"]
    assert [s["story_id"] for s in marked if s.get("read")] == [lead["story_id"]]
    hidden = reader.get("/v1/search", params={"q": "titanfall", "limit": 100, "hide_read": "1"}, headers=auth).json()
    assert lead["story_id"] not in {s["story_id"] for s in hidden["stories"]}
    assert len(hidden["stories"]) == len(public) - 1


def test_the_search_page_lists_the_stories_and_links_its_feeds(site):
    client, _, _ = site
    api = client.get("/v1/search", params={"q": "Titanfall"}).json()["stories"]
    page = client.get("/search", params={"q": "Titanfall"})
    assert page.status_code == 200
    doc = lxml.html.fromstring(page.text)
    titles = doc.xpath("//ol[@class='cards']//h3/a/text()")
    assert titles == [s["title"] for s in api]
    alternates = doc.xpath("//head/link[@rel='alternate']/@href")
    assert alternates == ["/feeds/search.rss?q=Titanfall", "/feeds/search.atom?q=Titanfall"]
    home = lxml.html.fromstring(client.get("/").text)
    assert home.xpath("//header//form[@action='/search']//input[@name='q']")
    assert home.xpath("//head/link[@rel='alternate']/@href") == ["/feeds/top.rss", "/feeds/top.atom"]


def test_feeds_out_parse_without_errors_and_carry_the_lists_stories(site, server):
    client, _, _ = site
    top = client.get("/v1/top", params={"limit": 30}).json()["stories"]
    topic = top[0]["topics"][0].lower()
    topic_stories = client.get(f"/v1/topics/{topic}", params={"limit": 30}).json()["stories"]
    searched = client.get("/v1/search", params={"q": "titanfall", "limit": 30}).json()["stories"]
    outlet_page = lxml.html.fromstring(client.get(f"/sources/{top[0]['domain']}", follow_redirects=True).text)
    outlet_titles = outlet_page.xpath("//ol[@class='cards']//h3/a/text()")
    assert outlet_titles
    outlet_path = outlet_page.xpath("//head/link[@type='application/rss+xml']/@href")[0][: -len(".rss")]
    cases = [("/feeds/top", top), (f"/feeds/topics/{topic}", topic_stories), ("/feeds/search", searched)]
    for fmt in ("rss", "atom"):
        for path, stories in cases:
            url = f"{path}.{fmt}" + ("?q=titanfall" if path == "/feeds/search" else "")
            r = client.get(url)
            assert r.status_code == 200 and r.headers["content-type"].startswith(f"application/{fmt}+xml")
            feed = feedparser.parse(r.content)
            assert feed.bozo == 0, (url, feed.get("bozo_exception"))
            assert feed.version == ("rss20" if fmt == "rss" else "atom10")
            assert [e.title for e in feed.entries] == [s["title"] for s in stories], url
            assert feed.entries[0].link == f"http://testserver/stories/{stories[0]['story_id']}"
        feed = feedparser.parse(client.get(f"{outlet_path}.{fmt}").content)
        assert feed.bozo == 0 and [e.title for e in feed.entries] == outlet_titles
    assert client.get("/feeds/top.xml").status_code == 404
    assert client.get("/feeds/topics/no-such-topic.rss").status_code == 404


def test_without_an_index_search_says_it_is_not_ready(server, tmp_path):
    cfg = ServingConfig(token_secret=SECRET, snapshot_dir=str(tmp_path), search_index=str(tmp_path / "none.sqlite3"))
    client = TestClient(create_app(server, cfg))
    r = client.get("/v1/search", params={"q": "titanfall"})
    assert r.status_code == 503 and r.json()["error"]["code"] == "search_unavailable"
    assert "not ready" in client.get("/search", params={"q": "titanfall"}).text


def test_coverage_reads_each_reports_authority_as_the_job_stored_it(site, server):
    """The article records serving reads (coverage order, lead copies) carry the authority the job wrote: the
    Parquet rows' ``source_authority``, not 0 (the serving hash names it ``source_authority``)."""
    _, data_dir, _ = site
    rows = read_dataset(os.path.join(data_dir, "output"), "articles").to_pylist()
    parquet = {a["article_id"]: a["source_authority"] for a in rows}
    store = RankingStore(server)
    sid = max(
        (live_story(server, a) for a in titanfall_articles(data_dir)), key=lambda s: store.get_story(s).article_count
    )
    served = {a.article_id: a.authority for a in store.story_articles(sid)}
    assert len(served) >= 5 and len({round(v, 3) for v in served.values()}) >= 2  # outlets differ in authority
    assert all(served[a] == pytest.approx(parquet[a], abs=1e-6) for a in served)
