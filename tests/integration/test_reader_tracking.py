"""Client-side caching of the personal-feed reads (serving/tracking.py) against a real embedded Redis: a reader
whose keys did not change is answered without a Redis round trip (counted by the server's own command
statistics), and every change is still seen by the next request, whoever writes it and however the tracking
connection ends (killed, FLUSHALL). The answers are compared with an app that has tracking off and with the
page worked out independently from Redis (``_expected`` of the hot-path tests)."""

import asyncio
import json
import socket
import time

import pytest
import redis
from starlette.testclient import TestClient

from newsflow.serving.app import ServingConfig, create_app
from newsflow.serving.http_cache import strong_etag
from newsflow.serving.tracking import ReaderTracking
from newsflow.storage.feed_page import write_user_feeds
from newsflow.storage.keys import Keys
from tests.integration.ranking_data import NOW
from tests.integration.test_feed_hot_path import USERS, _expected, _get
from tests.integration.test_feed_hot_path import r as r  # noqa: F401 (the populated-Redis fixture)

SECRET = b"h" * 32


def _hmget_calls(r) -> int:
    """HMGET commands the server has run (INFO commandstats): the personal feed's round trip sends one."""
    return int(r.info("commandstats").get("cmdstat_hmget", {}).get("calls", 0))


def _app(r, tmp_path, name, **kw):
    cfg = ServingConfig(
        token_secret=SECRET, snapshot_dir=str(tmp_path / name), local_cache_seconds=0, clock=lambda: NOW, **kw
    )
    return create_app(r, cfg)


def _wait_tracking(c, app, user="u-plain"):
    """Requests until the tracking connection (set up in the background by the first request) is up."""
    tracking = app.state.api.personal.tracking
    for _ in range(200):
        _get(c, user)
        if tracking._sock is not None:
            return tracking
        time.sleep(0.01)
    raise AssertionError("tracking connection never came up")


def test_unchanged_readers_make_no_round_trip_and_get_the_same_answers(r, tmp_path):
    plain = _app(r, tmp_path, "off", track_readers=False)
    tracked = _app(r, tmp_path, "on")
    with TestClient(plain) as p, TestClient(tracked) as c:
        _wait_tracking(c, tracked)
        for u in USERS:
            _get(c, u)  # each reader read once
        before = _hmget_calls(r)
        answers = {u: [_get(c, u, limit=str(n)) for n in (20, 5, 20)] for u in USERS}
        assert _hmget_calls(r) == before  # 12 requests, no round trip
        for u, resps in answers.items():
            for resp, n in zip(resps, (20, 5, 20), strict=True):
                want = _get(p, u, limit=str(n))
                assert resp.status_code == want.status_code == 200
                assert resp.content == want.content == _expected(r, u, n)
                assert resp.headers["etag"] == want.headers["etag"]
        assert _hmget_calls(r) == before + 12  # the untracked app made its 12 round trips
    assert tracked.state.api.personal.tracking._sock is None  # closed at shutdown


def test_every_write_is_seen_by_the_next_request(r, tmp_path):
    app = _app(r, tmp_path, "on")
    keys = Keys()
    with TestClient(app) as c:
        tracking = _wait_tracking(c, app)
        blocks = ['["obituary"]', '["sports"]', "[]"]
        last, changed = _get(c, "u-plain").content, 0
        for i in range(60):  # another client writes, the very next request must show it
            r.hset(keys.user("u-plain"), "block_topics", blocks[i % 3])
            for _ in range(2):
                resp = _get(c, "u-plain")
                assert resp.content == _expected(r, "u-plain", 20), i
            changed += resp.content != last
            last = resp.content
        assert changed >= 40  # each write changed the page (a block that removes none of its stories would not)
        doc = json.loads(r.get(keys.feed("user", "u-follow")))
        last = _get(c, "u-follow").content
        for i in range(20):  # the serving form rewritten
            doc["stories"] = doc["stories"][1:] + doc["stories"][:1]
            write_user_feeds(r, {"u-follow": doc}, 300)
            resp = _get(c, "u-follow")
            assert resp.content == _expected(r, "u-follow", 20) != last, i
            last = resp.content
            assert resp.headers["etag"] == strong_etag(resp.content)
        assert tracking.hits >= 60  # the second request after each write came from the kept read
        assert tracking.connections == 1


def test_a_killed_tracking_connection_or_a_flush_loses_nothing(r, tmp_path):
    app = _app(r, tmp_path, "on")
    tracking = app.state.api.personal.tracking
    tracking.retry_seconds = 0.05
    keys = Keys()
    with TestClient(app) as c:
        _wait_tracking(c, app)
        old = _get(c, "u-plain").content
        # the tracking connection killed, then the reader changed: Redis sends no invalidation any more
        r.client_kill_filter(_type="pubsub")
        r.hset(keys.user("u-plain"), "block_topics", '["obituary"]')
        resp = _get(c, "u-plain")
        assert resp.content == _expected(r, "u-plain", 20) != old
        _wait_tracking(c, app)
        assert tracking.connections == 2
        _get(c, "u-plain")
        hits = tracking.hits
        assert _get(c, "u-plain").content == _expected(r, "u-plain", 20)
        assert tracking.hits == hits + 1
        # FLUSHALL (a null invalidation): the same data written back with other blocks
        dump = {k: r.dump(k) for k in r.keys("*")}
        r.flushall()
        for k, v in dump.items():
            r.restore(k, 0, v)
        r.hset(keys.user("u-plain"), "block_topics", '["sports"]')
        assert _get(c, "u-plain").content == _expected(r, "u-plain", 20) != old
        assert tracking.hits == hits + 1  # answered after a round trip, not from the forgotten read


async def _synced(t: ReaderTracking) -> None:
    """Waits (at most 5 s) until the tracking connection is up, everything Redis sent is read and its last PING
    is answered, twice 20 ms apart (a bulk write's invalidations may still be coming after a PONG)."""
    quiet = 0
    for _ in range(250):
        t.lookup("-")  # sets the connection up
        ReaderTracking.drain(t)  # all there is (the slow test class below reads 4 KB per drain otherwise)
        quiet = quiet + 1 if t._sock is not None and t._synced else 0
        if quiet == 2:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("tracking connection never synced")


def test_a_read_overtaken_by_a_write_is_not_kept(r):
    """The tracking object on its own: a read whose key is written while it is in flight is dropped, and
    an acknowledged write's invalidation is already on the socket when the writer goes on (checked 300 times
    with no wait between the write and the lookup)."""
    keys = Keys()

    async def scenario():
        t = ReaderTracking(r, keys, max_readers=8)
        await _synced(t)
        read = ({b"edition": b"en"}, b"form")
        ticket = t.begin("u")
        r.hset(keys.user("u"), "edition", "fr")  # written while the read is in flight
        t.end("u", ticket, read)
        await _synced(t)
        assert t.lookup("u") is None
        ticket = t.begin("u")
        t.end("u", ticket, read)
        assert t.lookup("u") == read
        stale = 0
        for i in range(300):
            await _synced(t)
            t.end("u", t.begin("u"), read)
            assert t.lookup("u") == read
            key = keys.feed_page("u") if i % 2 else keys.user("u")
            r.set(key, b"x") if i % 2 else r.hset(key, "edition", str(i))
            stale += t.lookup("u") is not None
        assert stale == 0
        await _synced(t)
        assert t.lookup("u") is None  # the invalidation took the read out, not only the sync state
        ticket = t.begin("u")
        t.end("u", ticket, (read[0], None))  # no serving form: never kept
        assert t.lookup("u") is None
        # kept no longer than the shorter TTL of the two keys (-1: no expiry, -2: no key)
        t.end("u", t.begin("u"), read, (-1, 80), time.monotonic())
        assert t.lookup("u") == read
        await asyncio.sleep(0.1)
        assert t.lookup("u") is None
        t.end("u", t.begin("u"), read, (80, -2), time.monotonic())
        await asyncio.sleep(0.1)
        assert t.lookup("u") is None
        r.set("nf:other", b"1")  # outside the two prefixes: no invalidation
        t.end("u", t.begin("u"), read)
        await asyncio.sleep(0.01)
        assert t.lookup("u") == read
        t.close()
        assert t.lookup("u") is None

    asyncio.run(scenario())


class _SlowDrain(ReaderTracking):
    """Reads at most 4 KB per drain: a process busy elsewhere while Redis still holds a backlog for it."""

    def drain(self, max_bytes=None):
        super().drain(4096)


def test_no_read_is_used_while_invalidations_are_queued_behind_a_bulk_write(r):
    """A bulk write of many readers' keys leaves megabytes of invalidations queued in Redis for the tracking
    connection (written at most 64 KB per turn); a write acknowledged meanwhile can get its answer before its
    own invalidation leaves Redis. No kept read may be used until the PING sent behind them is answered."""
    keys = Keys()

    async def scenario():
        t = _SlowDrain(r, keys, max_readers=8, fresh_seconds=60)  # only the sync rule at work
        await _synced(t)
        read = ({b"edition": b"en"}, b"form")
        stale = 0
        for round_ in range(4):
            t.end("u", t.begin("u"), read)
            assert t.lookup("u") == read
            # the loop does not drain while this runs: the invalidations pile up in Redis
            pipe = r.pipeline(transaction=False)
            for i in range(60_000):
                pipe.set(keys.feed_page(f"bulk{round_}-{i}"), b"x")
            pipe.execute()
            r.hset(keys.user("u"), "edition", f"fr{round_}")  # acknowledged now
            stale += t.lookup("u") is not None
            await _synced(t)
            assert t.lookup("u") is None
        assert stale == 0
        assert t.invalidations > 4  # BCAST messages carry many keys each
        t.close()

    asyncio.run(scenario())


def test_a_silent_tracking_connection_stops_the_kept_reads(r):
    """A server that stops answering (hung, or a half-open connection) sends no invalidations: kept reads stop
    being used once the heartbeat PING has gone unanswered for ``fresh_seconds``."""
    keys = Keys()

    async def scenario():
        t = ReaderTracking(r, keys, max_readers=8, fresh_seconds=0.2)
        await _synced(t)
        read = ({b"edition": b"en"}, b"form")
        t.end("u", t.begin("u"), read)
        for _ in range(5):  # heartbeats keep it usable
            await asyncio.sleep(0.08)
            assert t.lookup("u") == read
        r.client_pause(1500)  # the server holds its replies to every client
        try:
            await asyncio.sleep(0.25)
            assert t.lookup("u") is None
        finally:
            r.execute_command("CLIENT", "UNPAUSE")
        await _synced(t)
        assert t.lookup("u") == read  # nothing was invalidated meanwhile
        t.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("kw", [{"track_readers": False}, {"page_memo_readers": 0}])
def test_tracking_is_off_when_configured_off(r, tmp_path, kw):
    app = _app(r, tmp_path, "x", **kw)
    with TestClient(app) as c:
        before = _hmget_calls(r)
        for _ in range(5):
            assert _get(c, "u-plain").content == _expected(r, "u-plain", 20)
        assert _hmget_calls(r) == before + 5
    assert not app.state.api.personal.tracking.available


def test_a_kept_read_ends_with_its_serving_form_ttl(r, tmp_path):
    """Redis invalidates an expired key only when it deletes it; with its expiry cycle off (``DEBUG
    SET-ACTIVE-EXPIRE 0``) it never would here, and the reader must still get a feed built after the TTL."""
    app = _app(r, tmp_path, "on")
    keys = Keys()
    doc = json.loads(r.get(keys.feed("user", "u-plain")))
    with TestClient(app) as c:
        tracking = _wait_tracking(c, app)
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        try:
            doc["stories"] = doc["stories"][2:]
            write_user_feeds(r, {"u-plain": doc}, 1)  # one second to live
            first = _get(c, "u-plain").content
            assert _get(c, "u-plain").content == first  # kept read
            hits, calls, told = tracking.hits, _hmget_calls(r), tracking.invalidations
            time.sleep(1.2)
            c.portal.call(tracking.drain)
            assert tracking.invalidations == told  # Redis has not deleted the expired key, so said nothing
            resp = _get(c, "u-plain")  # the round trip finds it expired: the feed is built again
            assert tracking.hits == hits and _hmget_calls(r) == calls + 1
            assert resp.content == _expected(r, "u-plain", 20) != first
        finally:
            r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_a_server_that_refuses_tracking_leaves_the_round_trip(r, tmp_path):
    r.execute_command("ACL", "SETUSER", "reader", "on", ">pw", "~*", "+@all", "-client")
    try:
        client = redis.Redis(unix_socket_path=r.socket_file, username="reader", password="pw")
        app = _app(client, tmp_path, "acl")
        tracking = app.state.api.personal.tracking
        with TestClient(app) as c:
            for _ in range(50):
                assert _get(c, "u-plain").content == _expected(r, "u-plain", 20)
                if tracking.refused:
                    break
                time.sleep(0.01)
            assert "NOPERM" in tracking.refused and not tracking.available
            before = _hmget_calls(r)
            assert _get(c, "u-plain").content == _expected(r, "u-plain", 20)
            assert _hmget_calls(r) == before + 1 and tracking.connections == 0
    finally:
        r.execute_command("ACL", "DELUSER", "reader")


def test_a_kept_read_ends_with_its_profile_ttl(r, tmp_path):
    """The same for a TTL someone put on the reader's profile: after it, the profile is gone (no blocks)."""
    app = _app(r, tmp_path, "on")
    keys = Keys()
    with TestClient(app) as c:
        tracking = _wait_tracking(c, app)
        r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "0")
        try:
            r.hset(keys.user("u-plain"), "block_topics", '["world"]')
            r.pexpire(keys.user("u-plain"), 400)
            blocked = _get(c, "u-plain").content
            assert _get(c, "u-plain").content == blocked
            hits = tracking.hits
            time.sleep(0.5)
            resp = _get(c, "u-plain")
            assert tracking.hits == hits
            assert resp.content == _expected(r, "u-plain", 20) != blocked
        finally:
            r.execute_command("DEBUG", "SET-ACTIVE-EXPIRE", "1")


def test_only_the_awaited_pong_read_at_the_end_of_the_stream_syncs(r):
    """Over a socket pair standing in for Redis: a key name can carry the bytes of a PONG, and a large
    invalidation message cut at a socket-buffer boundary right after such a key looked like "stream ends with
    the PONG" when PONGs were predictable (found by a tester). Each PING carries 128 random bits now."""
    import hiredis

    t = ReaderTracking(r, Keys(), max_readers=8)
    ours, redis_end = socket.socketpair()
    ours.setblocking(False)
    t._sock, t._reader = ours, hiredis.Reader()
    reader = hiredis.Reader()

    def next_ping() -> bytes:
        t._ping(time.monotonic())
        reader.feed(redis_end.recv(1000))
        name, arg = reader.gets()
        assert name == b"PING"
        return arg

    first = next_ping()
    redis_end.sendall(hiredis.pack_command((b"pong", first)))
    t.drain()
    assert t._synced and t._awaited is None
    # an invalidation message with two keys, cut after the first, whose bytes end like a sequence-only PONG
    forged = hiredis.pack_command((b"pong", b"1"))  # what the first PONG was when the argument was the sequence number
    key = b"nf:user:" + forged[: -len(b"\r\n")]
    head = b"*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*2\r\n"
    cut = head + b"$%d\r\n%s\r\n" % (len(key), key)
    assert cut.endswith(forged)
    redis_end.sendall(cut)
    t.drain()
    assert not t._synced  # bytes after the last PONG, however they end
    second = t._awaited  # the drain sent a PING behind them
    assert second is not None and second != first and len(second) > 32
    redis_end.sendall(b"$3\r\nabc\r\n")  # the message's end
    t.drain()
    assert not t._synced and t.invalidations == 1
    reader.feed(redis_end.recv(1000))
    assert reader.gets() == [b"PING", second]
    redis_end.sendall(hiredis.pack_command((b"pong", second)))
    t.drain()
    assert t._synced
    t.close()
    redis_end.close()
