"""The personal feed's request path over a real embedded Redis: one long-lived app answers every request
with the page worked out independently from what Redis holds at that moment (the stored feed document
through ``rerank``), as Redis changes under it: blocks, a rewritten feed, breaking stories coming and going,
other limits and editions. Both request paths (the round trip on the app's ``redis.asyncio`` client from the
event loop, and the thread pool for a client without a URL) are checked; a silent server degrades the feed
after the client's retries without blocking other requests; tokens expire on the injected clock."""

import json
import math
import socket
import threading
import time

import httpx
import pytest
import redis
from starlette.testclient import TestClient

from newsflow.cli.build_feeds import build_feeds
from newsflow.core.ranking.decay import LAMBDA_BREAKING, decay_score
from newsflow.core.ranking.feeds import GLOBAL_EDITION, FeedConfig
from newsflow.core.ranking.rerank import rerank
from newsflow.runtime.redis_conn import connect_async
from newsflow.serving.app import ServingConfig, create_app
from newsflow.serving.http_cache import COMPRESS_MIN_BYTES, strong_etag
from newsflow.serving.tokens import sign_token
from newsflow.storage.events import mark_active
from newsflow.storage.feed_page import write_user_feeds
from newsflow.storage.feeds import build_user_feed
from newsflow.storage.keys import Keys
from newsflow.storage.ranking import RankingStore, encode_embedding
from tests.helpers import personal_page_bytes, set_breaking
from tests.integration.asgi_server import serve_in_thread
from tests.integration.ranking_data import NOW, NOW_MINUTE, add_trending, axis, populate

SECRET = b"h" * 32
USERS = ["u-block", "u-interest", "u-follow", "u-plain"]


@pytest.fixture()
def r(server):
    server.flushall()
    populate(server)
    add_trending(server, {"s5": 12, "s3": 4})
    server.hset("nf:user:u-block", mapping={"block_sources": '["a.com"]', "block_topics": '["sports"]'})
    server.hset("nf:user:u-interest", mapping={"clicks": "25", "interest": encode_embedding(axis(1) * 3)})
    server.hset("nf:user:u-follow", mapping={"follow_topics": '["obituary"]', "edition": "en"})
    pipe = server.pipeline(transaction=False)
    mark_active(pipe, {u: NOW - 60 for u in USERS}, Keys())
    pipe.execute()
    build_feeds(server, NOW)
    return server


class _UncopiedConnection(redis.connection.UnixDomainSocketConnection):
    """A connection class with no URL (:func:`newsflow.serving.resilience.async_url`): the thread-pool path."""


def _thread_path_client(r):
    return redis.Redis(connection_pool=redis.ConnectionPool(connection_class=_UncopiedConnection, path=r.socket_file))


def _expected(r, user, limit, edition_param=""):
    """The page worked out from Redis as it is now: the stored feed document (or, when it is of another edition
    than the one asked for, with no ``edition_param`` the reader's own, the feed built now) re-ranked by
    ``rerank`` with the reader's whole profile and the live breaking stories (scored at the start of NOW's
    minute)."""
    store = RankingStore(r)
    doc = json.loads(r.get(Keys().feed("user", user)))
    profile = store.user_profile(user)
    edition = edition_param or profile.edition or GLOBAL_EDITION
    if doc["edition"] != edition:  # stored for another edition: the API builds (and stores) the one asked for
        doc = json.loads(json.dumps(build_user_feed(store, profile, NOW, edition, FeedConfig()), sort_keys=True))
    gen = float(doc["generated_at"])
    inject = []
    velocity = dict(store.latest_trending("story", 1000, NOW)[1])
    for sid, since in store.breaking(NOW).items():
        rec = store.get_story(sid)
        # the banner rule: more than 20 new articles in the latest window, not an evergreen (obituary) story
        if since > gen and velocity.get(sid, 0) > 20 and "obituary" not in rec.topics:
            score = decay_score(rec.authority, rec.earliest_time, NOW_MINUTE, LAMBDA_BREAKING)
            inject.append((since, dict(rec.summary(), breaking=True, relevance=None, score=score)))
    more = rerank(doc["stories"], gen, inject, profile, k=limit + 1, source_cap=FeedConfig().source_cap)
    return personal_page_bytes(user, edition, gen, more, limit)


def _get(c, user, gzip: bool = False, **params):
    """``/v1/feed`` for ``user``: the identity representation (its ETag is the body's), or with ``gzip`` the
    compressed one (``-gzip`` ETag; httpx decodes the body)."""
    token = sign_token(user, SECRET, NOW, 3600)
    encoding = "gzip" if gzip else "identity"
    return c.get("/v1/feed", params=params, headers={"Authorization": "Bearer " + token, "Accept-Encoding": encoding})


@pytest.mark.parametrize("path", ["event_loop", "thread_pool"])
def test_a_long_lived_app_follows_every_change_in_redis(r, tmp_path, path):
    client = r if path == "event_loop" else _thread_path_client(r)
    cfg = ServingConfig(
        token_secret=SECRET,
        snapshot_dir=str(tmp_path / "s"),
        local_cache_seconds=0,
        personal_cache_seconds=0,
        clock=lambda: NOW,
    )
    app = create_app(client, cfg)
    keys = Keys()
    served = 0

    def check():
        nonlocal served
        for u in USERS:
            # ends with the query it starts with: after a change in Redis the first request finds the memo of
            # the same query, made before the change
            for limit, edition in ((20, ""), (3, ""), (2, "en"), (20, "")):
                if edition and RankingStore(r).user_profile(u).edition not in ("", edition):
                    continue
                params = {"limit": str(limit)} | ({"edition": edition} if edition else {})
                want = _expected(r, u, limit, edition)
                for gzip in (False, True):
                    resp = _get(c, u, gzip, **params)
                    assert resp.status_code == 200, resp.text
                    assert resp.content == want, (u, limit, edition)
                    tag = strong_etag(want)
                    big = len(want) >= COMPRESS_MIN_BYTES  # smaller answers are sent as they are
                    assert resp.headers["etag"] == (tag[:-1] + '-gzip"' if gzip and big else tag)
                    assert resp.headers.get("content-encoding") == ("gzip" if gzip and big else None)
                    served += 1

    with TestClient(app) as c:
        assert (app.state.api.aredis is not None) == (path == "event_loop")
        check()
        r.hset("nf:user:u-plain", "block_topics", '["obituary"]')  # blocks changed without dropping the feed
        check()
        doc = json.loads(r.get(keys.feed("user", "u-interest")))
        doc["stories"] = doc["stories"][1:]  # the feed rewritten (a new nightly model, say)
        write_user_feeds(r, {"u-interest": doc}, 300)
        check()
        # breaking after the feeds were built
        set_breaking(r, {"s2": (NOW + 5, NOW + 3000), "s7": (NOW + 6, NOW + 3000)}, keys)
        r.zadd(keys.trending("story", NOW), {"s2": 21, "s7": 25})  # over the breaking threshold
        check()
        # u-follow's stored feed predates them (u-plain's was rebuilt by its ?edition=en query and holds them)
        assert any(s.get("injected") for s in _get(c, "u-follow").json()["stories"])
        set_breaking(r, {"s2": (NOW - 10, NOW + 3000)}, keys)  # the same set, s2 now older than the feeds
        check()
        r.zrem(keys.breaking, "s2", "s7")  # and no longer breaking
        check()
        r.hdel("nf:user:u-plain", "block_topics")
        check()
    assert served == 7 * len(USERS) * 4 * 2
    assert app.state.api.aredis is None  # closed at shutdown


def test_breaking_scores_move_once_a_minute_so_pages_and_etags_stay_the_same(r, tmp_path):
    clock = [NOW]
    cfg = ServingConfig(
        token_secret=SECRET,
        snapshot_dir=str(tmp_path / "s"),
        local_cache_seconds=0,
        personal_cache_seconds=0,
        clock=lambda: clock[0],
    )
    app = create_app(r, cfg)
    keys = Keys()
    set_breaking(r, {"s2": (NOW + 5, NOW + 3000)}, keys)  # breaking after the feeds were built: injected
    r.zadd(keys.trending("story", NOW), {"s2": 21})  # over the breaking threshold
    rec = RankingStore(r).get_story("s2")
    with TestClient(app) as c:
        first = _get(c, "u-plain")
        # the breaking set is read again on every request (local_cache_seconds=0), the clock moves 39 s
        # within NOW's minute: the same body and ETag, score as at the minute's start
        for t in (NOW + 1, NOW + 20, NOW + 39):
            clock[0] = t
            again = _get(c, "u-plain")
            assert again.content == first.content and again.headers["etag"] == first.headers["etag"]
        injected = [s for s in first.json()["stories"] if s.get("injected")]
        assert [s["story_id"] for s in injected] == ["s2"]
        want = rec.authority * math.exp(-0.5 * (NOW_MINUTE - rec.earliest_time) / 3600)  # λ 0.5/h, by hand
        assert injected[0]["score"] == pytest.approx(want, rel=1e-12)
        clock[0] = NOW + 40  # the next minute: rescored once, a new page
        later = _get(c, "u-plain")
        assert later.headers["etag"] != first.headers["etag"]
        score = next(s["score"] for s in later.json()["stories"] if s.get("injected"))
        assert score == pytest.approx(want * math.exp(-0.5 / 60), rel=1e-12)


def test_tokens_expire_on_the_injected_clock(r, tmp_path):
    clock = [NOW]
    cfg = ServingConfig(token_secret=SECRET, snapshot_dir=str(tmp_path / "s"), clock=lambda: clock[0])
    c = TestClient(create_app(r, cfg))
    token = {"Authorization": "Bearer " + sign_token("u-plain", SECRET, NOW, 3600)}
    assert c.get("/v1/feed", headers=token).status_code == 200
    clock[0] = NOW + 3599
    assert c.get("/v1/feed", headers=token).status_code == 200
    clock[0] = NOW + 3600
    refused = c.get("/v1/feed", headers=token)
    assert refused.status_code == 401 and 'error_description="expired"' in refused.headers["www-authenticate"]
    future = {"Authorization": "Bearer " + sign_token("u-plain", SECRET, NOW + 120, 3600)}
    clock[0] = NOW
    assert 'error_description="not_yet_valid"' in c.get("/v1/feed", headers=future).headers["www-authenticate"]
    clock[0] = NOW + 61
    assert c.get("/v1/feed", headers=future).status_code == 200
    clock[0] = NOW  # a clock set back: the token accepted a moment ago is not valid yet again
    assert c.get("/v1/feed", headers=future).status_code == 401


def test_a_silent_redis_times_out_after_the_clients_retries_without_blocking_the_loop(tmp_path):
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)
    accepted = []

    def accept_forever():
        while True:
            try:
                conn, _ = hole.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=accept_forever, daemon=True).start()
    client = redis.Redis(
        host="127.0.0.1",
        port=hole.getsockname()[1],
        socket_timeout=0.5,
        socket_connect_timeout=0.5,
        retry=redis.retry.Retry(redis.backoff.NoBackoff(), 1),
    )
    cfg = ServingConfig(
        token_secret=SECRET, snapshot_dir=str(tmp_path / "snap"), local_cache_seconds=0, redis_backoff_seconds=0.0
    )
    app = create_app(client, cfg)
    done = []
    try:
        with serve_in_thread(app) as port:
            assert app.state.api.aredis is not None  # the feed's round trip on the event loop
            token = {"Authorization": "Bearer " + sign_token("someone", SECRET, time.time(), 3600)}

            def get(path, headers=None):
                t0 = time.monotonic()
                resp = httpx.get(f"http://127.0.0.1:{port}{path}", headers=headers or {}, timeout=30)
                done.append((path, time.monotonic(), resp, time.monotonic() - t0))

            slow = [threading.Thread(target=get, args=("/v1/feed", token)) for _ in range(3)]
            for th in slow:
                th.start()
            time.sleep(0.2)  # the feed requests now wait on the silent Redis
            get("/openapi.json")
            for th in slow:
                th.join(30)
    finally:
        hole.close()
        for conn in accepted:
            conn.close()
    order = [path for path, _, _, _ in sorted(done, key=lambda d: d[1])]
    assert order[0] == "/openapi.json", order
    feeds = [(resp, took) for path, _, resp, took in done if path == "/v1/feed"]
    assert len(feeds) == 3
    for resp, took in feeds:  # degraded, not an error, after the try and 3 retries (0.5 s each, backoff between)
        assert resp.status_code == 200 and resp.headers["x-newsflow-stale-reason"] == "redis-unavailable"
        assert 1.9 < took < 10.0


def test_requests_that_find_the_breaking_set_expired_share_one_refresh(r, tmp_path):
    import asyncio

    cfg = ServingConfig(
        token_secret=SECRET, snapshot_dir=str(tmp_path / "s"), local_cache_seconds=30, clock=lambda: NOW
    )
    personal = create_app(r, cfg).state.api.personal
    reads = []
    breaking = personal.store.breaking

    def slow_breaking(now):  # a slow read: the other requests find the set expired while it runs
        reads.append(now)
        time.sleep(0.2)
        return breaking(now)

    personal.store.breaking = slow_breaking

    async def burst():
        aredis = connect_async(f"unix://{r.socket_file}")
        try:
            return await asyncio.gather(*[personal.parts_async(aredis, u, "", 20) for u in USERS * 3])
        finally:
            await aredis.aclose()

    pages = asyncio.run(burst())
    assert len(reads) == 1  # twelve requests found it expired, one refresh
    for u, (head, items, stale) in zip(USERS * 3, pages, strict=True):
        assert stale == "" and head["user"] == u
        assert dict(head, stories=[json.loads(i) for i in items]) == json.loads(_expected(r, u, 20))
    asyncio.run(burst())  # within local_cache_seconds: the kept set
    assert len(reads) == 1
