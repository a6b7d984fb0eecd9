"""Precomputed personal feeds served in one Redis round trip (newsflow.storage.feed_page) give the same
bytes as the personal feed built on request and re-ranked (today's path without a precomputed feed):
real embedded Redis, the real app, breaking stories injected after the build, blocks and follows."""

import json

import pytest
from starlette.testclient import TestClient

from newsflow.cli.build_feeds import build_feeds
from newsflow.core.ranking.decay import LAMBDA_BREAKING, decay_score
from newsflow.core.ranking.feeds import GLOBAL_EDITION, FeedConfig
from newsflow.core.ranking.rerank import rerank
from newsflow.serving.app import ServingConfig, create_app
from newsflow.serving.personal import RecentPages
from newsflow.serving.tokens import sign_token
from newsflow.storage.feeds import build_user_feed
from newsflow.storage.keys import Keys
from newsflow.storage.ranking import RankingStore
from tests.helpers import READERS, personal_page_bytes, populate_ranking, set_breaking
from tests.integration.ranking_data import NOW, NOW_MINUTE

SECRET = b"p" * 32


@pytest.fixture()
def r(server):
    return populate_ranking(server, trending={"s5": 12, "s3": 4}, readers=True, feeds=False)


def _get(client, user, **params):
    token = sign_token(user, SECRET, NOW, 3600)
    return client.get("/v1/feed", params=params, headers={"Authorization": "Bearer " + token})


def _client(r, tmp_path, cache_s=0.0, **kw):
    """The app on a TestClient; every request reads Redis unless ``personal_cache_seconds`` is given."""
    cfg = ServingConfig(
        token_secret=SECRET,
        snapshot_dir=str(tmp_path / "s"),
        local_cache_seconds=cache_s,
        clock=lambda: NOW,
        **({"personal_cache_seconds": 0} | kw),
    )
    return TestClient(create_app(r, cfg))


def _breaking_items(store):
    """The live breaking stories as feed items, worked out from the story records: those with more than 20 new
    articles in the latest window that are not evergreen (ranking_data's only evergreen story is the obituary)."""
    out = []
    velocity = dict(store.latest_trending("story", 1000, NOW)[1])
    for sid, since in store.breaking(NOW).items():
        rec = store.get_story(sid)
        if velocity.get(sid, 0) <= 20 or "obituary" in rec.topics:
            continue
        score = decay_score(rec.authority, rec.earliest_time, NOW_MINUTE, LAMBDA_BREAKING)
        out.append((since, dict(rec.summary(), breaking=True, relevance=None, score=score)))
    return out


def _expected(store, user, doc, edition, limit, stored=True) -> bytes:
    """The page rerank gives for ``doc``: read back from Redis (``stored``, sorted keys) as a precomputed
    feed was, or (``stored=False``) the freshly built dict as the API used a feed it built on request."""
    profile = store.user_profile(user)
    parsed = json.loads(json.dumps(doc, sort_keys=True)) if stored else doc
    gen = float(parsed["generated_at"])
    inject = [(s, it) for s, it in _breaking_items(store) if s > gen]
    more = rerank(parsed["stories"], gen, inject, profile, k=limit + 1, source_cap=FeedConfig().source_cap)
    return personal_page_bytes(user, edition, gen, more, limit)


def test_served_precomputed_feed_equals_the_feed_built_on_request(r, tmp_path):
    store = RankingStore(r)
    stats = build_feeds(r, NOW)
    assert stats.user_feeds == len(READERS)
    for u in READERS:
        assert r.exists(Keys().feed_page(u)) and 0 < r.ttl(Keys().feed_page(u)) <= 300
    # what the API would build for each reader on request (no precomputed feed), at the same state
    built = {}
    for u in READERS:
        profile = store.user_profile(u)
        built[u] = build_user_feed(store, profile, NOW, profile.edition or GLOBAL_EDITION, FeedConfig())
    # s7 and s6 become breaking after the build (injected on request), s4 before it (not injected)
    set_breaking(r, {"s7": (NOW + 1, NOW + 3000), "s6": (NOW + 2, NOW + 3000), "s4": (NOW - 10, NOW + 3000)})
    r.zadd(Keys().trending("story", NOW), {"s7": 21, "s6": 22, "s4": 23})  # over the breaking threshold
    c = _client(r, tmp_path)
    for u in READERS:
        edition = store.user_profile(u).edition or GLOBAL_EDITION
        for limit in (1, 3, 20):
            resp = _get(c, u, limit=str(limit))
            assert resp.status_code == 200 and resp.headers["cache-control"] == "private, no-store"
            assert resp.content == _expected(store, u, built[u], edition, limit), (u, limit)
    ids = [s["story_id"] for s in _get(c, "u-block").json()["stories"]]
    assert "s6" not in ids and not any(s in ids for s in ("s1", "s2", "s5", "s7"))  # blocks hold
    # s7 was not in u-interest's feed (s3, s5, s1, s6, s4: test_serving's interest case): injected on top, so
    # a.com's cap of 2 now leaves out s1; s6 was in it (not injected again); s4 is older than the feed
    got = [(s["story_id"], s.get("injected", False)) for s in _get(c, "u-interest").json()["stories"]]
    assert got == [("s7", True), ("s3", False), ("s5", False), ("s6", False), ("s4", False)]
    # a reader with no precomputed feed, and an edition other than the precomputed one: built now
    for u, edition in (("newcomer", "global"), ("u-plain", "de")):
        resp = _get(c, u, edition=edition) if edition != "global" else _get(c, u)
        doc = build_user_feed(store, store.user_profile(u), NOW, edition, FeedConfig())
        assert resp.content == _expected(store, u, doc, edition, 20), u
        assert resp.json() == json.loads(_expected(store, u, doc, edition, 20, stored=False)), u
    assert r.exists(Keys().feed_page("newcomer"))
    # u-plain's stored feed is now the "de" one it asked for; without ?edition= it gets its own edition again,
    # not the "de" feed under its own edition's name
    assert json.loads(r.get(Keys().feed("user", "u-plain")))["edition"] == "de"
    own = store.user_profile("u-plain").edition or GLOBAL_EDITION
    doc = build_user_feed(store, store.user_profile("u-plain"), NOW, own, FeedConfig())
    assert _get(c, "u-plain").content == _expected(store, "u-plain", doc, own, 20)
    assert json.loads(r.get(Keys().feed("user", "u-plain")))["edition"] == own


def _stats(r) -> dict:
    """Commands run since the last CONFIG RESETSTAT, without this test's own and the connections' health-check
    PINGs (not part of any request)."""
    ignored = ("cmdstat_info", "cmdstat_config", "cmdstat_ping")
    return {k: v["calls"] for k, v in r.info("commandstats").items() if k not in ignored}


def test_a_precomputed_feed_is_one_hmget_one_get_and_the_read_marks(r, tmp_path):
    build_feeds(r, NOW)
    with _client(r, tmp_path, cache_s=60) as c:  # one event loop, as under uvicorn
        first = _get(c, "u-interest")  # warms the shared breaking-set cache and opens the connection
        r.config_resetstat()
        again = _get(c, "u-interest")
        assert _stats(r) == {"cmdstat_hmget": 1, "cmdstat_get": 1, "cmdstat_hgetall": 1}
        assert again.content == first.content and again.headers["etag"] == first.headers["etag"]
        assert _get(c, "u-interest").status_code == 200
        etag = first.headers["etag"]
        not_modified = c.get(
            "/v1/feed",
            headers={"Authorization": "Bearer " + sign_token("u-interest", SECRET, NOW, 3600), "If-None-Match": etag},
        )
        assert not_modified.status_code == 304


def test_a_reader_asking_again_within_the_read_window_costs_no_round_trip(r, tmp_path):
    build_feeds(r, NOW)
    t = [0.0]
    with _client(r, tmp_path, cache_s=60, personal_cache_seconds=1.0) as c:
        c.app.state.api.personal.pages = RecentPages(1.0, clock=lambda: t[0])
        first = _get(c, "u-plain")
        assert "s6" in [s["story_id"] for s in first.json()["stories"]]
        r.hset(Keys().user("u-plain"), "block_topics", '["sports"]')  # another process blocks s6's topic
        r.config_resetstat()
        t[0] = 0.99
        assert _get(c, "u-plain").content == first.content  # the kept answer
        assert _stats(r) == {}
        t[0] = 1.0  # the answer is a second old: read again
        later = _get(c, "u-plain")
        assert _stats(r) == {"cmdstat_hmget": 1, "cmdstat_get": 1, "cmdstat_hgetall": 1}
        assert "s6" not in [s["story_id"] for s in later.json()["stories"]]
        # a preference change through the app is seen by the next request, within the window
        token = sign_token("u-plain", SECRET, NOW, 3600)
        put = c.put("/v1/me/preferences", json={"block_topics": []}, headers={"Authorization": "Bearer " + token})
        assert put.status_code == 200
        assert "s6" in [s["story_id"] for s in _get(c, "u-plain").json()["stories"]]


def test_new_preferences_drop_the_precomputed_feed(r, tmp_path):
    build_feeds(r, NOW)
    c = _client(r, tmp_path)
    token = sign_token("u-plain", SECRET, NOW, 3600)
    assert "s6" in [s["story_id"] for s in _get(c, "u-plain").json()["stories"]]
    resp = c.put("/v1/me/preferences", json={"block_topics": ["sports"]}, headers={"Authorization": "Bearer " + token})
    assert resp.status_code == 200
    assert not r.exists(Keys().feed_page("u-plain")) and not r.exists(Keys().feed("user", "u-plain"))
    assert "s6" not in [s["story_id"] for s in _get(c, "u-plain").json()["stories"]]


def test_a_corrupt_serving_form_is_rebuilt_not_a_500(r, tmp_path):
    build_feeds(r, NOW)
    r.set(Keys().feed_page("u-plain"), b"\x00garbage", ex=300)
    c = _client(r, tmp_path)
    resp = _get(c, "u-plain")
    assert resp.status_code == 200 and resp.json()["count"] > 0
