"""Accounts over real HTTP (uvicorn on 127.0.0.1) and a real embedded Redis: passwords, the sign-in limit,
session rotation, sign out (everywhere), password change, personal API tokens, deletion with its tombstone and
the purge of the deleted reader's events from real Parquet, editors and the admin API, trusted-proxy cookies,
relative redirects, and every reader route tried with another reader's session and token.
"""

from __future__ import annotations

import io
import json
import sys

import httpx
import lxml.html
import pyarrow.parquet as pq
import pytest

from newsflow.serving.app import ServingConfig, create_app
from newsflow.serving.tokens import sign_token
from newsflow.storage.accounts import FAILURE_WINDOW_SECONDS, AccountStore
from newsflow.storage.events import flush_events
from newsflow.storage.keys import Keys, event_shard
from newsflow.storage.models import ModelStore
from newsflow.storage.tombstones import deleted_readers, purge_deleted_events
from tests.helpers import (
    PASSWORD,
    Clock,
    cheap_hasher,
    personal_token,
    populate_ranking,
    register_reader,
    signin_reader,
    web_form_csrf,
)
from tests.integration.asgi_server import serve_in_thread
from tests.integration.ranking_data import NOW

SECRET = b"k" * 32
KEYS = Keys()


def _app(server, tmp_path, clock, **config):
    populate_ranking(server)
    cfg = ServingConfig(
        token_secret=SECRET,
        snapshot_dir=str(tmp_path / "snap"),
        local_cache_seconds=0,
        clock=clock,
        password_hasher=cheap_hasher(),
        admin_token="",
        **config,
    )
    return create_app(server, cfg)


@pytest.fixture()
def clock():
    return Clock(NOW)


@pytest.fixture()
def served(server, tmp_path, clock):
    """``(base URL, app)`` of the serving app on 127.0.0.1."""
    app = _app(server, tmp_path, clock)
    with serve_in_thread(app) as port:
        yield f"http://127.0.0.1:{port}", app


@pytest.fixture()
def base(served):
    return served[0]


def _client(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, follow_redirects=False, timeout=20)


def _bearer(token: str) -> dict:
    return {"Authorization": "Bearer " + token}


def _signin(c: httpx.Client, name: str, password: str = PASSWORD) -> httpx.Response:
    return signin_reader(c, name, password)


def test_five_failures_for_a_name_or_an_address_answer_429_with_retry_after(base, clock):
    with _client(base) as c:
        assert register_reader(c, "alice").status_code == 303
        c.cookies.clear()
        for _ in range(5):
            assert _signin(c, "alice", "wrong password").status_code == 400
        limited = _signin(c, "alice", PASSWORD)  # even the right password: the limit holds first
        assert limited.status_code == 429 and limited.headers["retry-after"] == str(FAILURE_WINDOW_SECONDS)
        assert "Too many failed sign-ins" in limited.text and "nf_session" not in c.cookies
        clock.t += 600  # the failures are 10 minutes old: 5 minutes to wait
        assert _signin(c, "alice", PASSWORD).headers["retry-after"] == str(FAILURE_WINDOW_SECONDS - 600)
        clock.t += FAILURE_WINDOW_SECONDS - 600  # out of the window: the right password works again
        assert _signin(c, "alice", PASSWORD).status_code == 303
        # one address trying five other names is limited too, whatever name it tries next
        c.cookies.clear()
        for i in range(5):
            assert _signin(c, f"nobody{i}", "whatever1").status_code == 400
        assert _signin(c, "alice", PASSWORD).status_code == 429


def test_session_rotates_on_sign_in_and_sign_out_everywhere_and_password_change_end_sessions(base):
    with _client(base) as one, _client(base) as two:
        register_reader(one, "bob")
        first = one.cookies["nf_session"]
        assert _signin(one, "bob").status_code == 303
        second = one.cookies["nf_session"]
        assert second != first  # a new session id on sign-in; the old one ended
        with _client(base) as stale:
            stale.cookies.set("nf_session", first)
            assert stale.get("/account").headers["location"] == "/signin?next=/account"
        _signin(two, "bob")
        assert two.get("/account").status_code == 200
        # password change: the current password is needed; every other session ends, this one gets a new id
        csrf = web_form_csrf(one, "/account")
        wrong = one.post(
            "/account/password", data={"csrf": csrf, "current": "nope", "new": "n3w pass", "new2": "n3w pass"}
        )
        assert wrong.status_code == 400
        changed = one.post(
            "/account/password", data={"csrf": csrf, "current": PASSWORD, "new": "n3w password", "new2": "n3w password"}
        )
        assert changed.status_code == 303 and changed.headers["location"] == "/account?done=password"
        assert one.cookies["nf_session"] != second and one.get("/account").status_code == 200
        assert two.get("/account").status_code == 303  # signed out by the change
        assert _signin(two, "bob").status_code == 400  # the old password no longer works
        assert _signin(two, "bob", "n3w password").status_code == 303
        # sign out everywhere from one browser ends the other's session too
        out = one.post("/account/signout-everywhere", data={"csrf": web_form_csrf(one, "/account")})
        assert out.status_code == 303 and out.headers["location"] == "/signin"
        assert two.get("/account").status_code == 303 and one.get("/account").status_code == 303


def test_cookies_are_secure_only_when_a_trusted_proxy_says_https(server, tmp_path, clock):
    app = _app(server, tmp_path, clock, trusted_proxies=("127.0.0.1",))
    with serve_in_thread(app) as port, _client(f"http://127.0.0.1:{port}") as c:
        plain = c.get("/signin")
        assert "Secure" not in plain.headers["set-cookie"]
        https = c.get("/signin", headers={"X-Forwarded-Proto": "https"})
        cookie = https.headers["set-cookie"]
        assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=lax" in cookie
        # the limit counts the forwarded client address: another client is not limited by this one's failures
        register_reader(c, "carl")
        c.cookies.delete("nf_session")
        for i in range(5):
            failed = c.post(
                "/signin",
                data={"csrf": web_form_csrf(c, "/signin"), "name": f"x{i}", "password": "whatever1"},
                headers={"X-Forwarded-For": "203.0.113.7"},
            )
            assert failed.status_code == 400
        csrf = web_form_csrf(c, "/signin")
        data = {"csrf": csrf, "name": "carl", "password": PASSWORD}
        assert c.post("/signin", data=data, headers={"X-Forwarded-For": "203.0.113.7"}).status_code == 429
        ok = c.post("/signin", data=data, headers={"X-Forwarded-For": "198.51.100.9", "X-Forwarded-Proto": "https"})
        assert ok.status_code == 303 and "Secure" in ok.headers["set-cookie"]
    app = _app(server, tmp_path, clock)  # no trusted proxy: forwarded headers are not believed
    with serve_in_thread(app) as port, _client(f"http://127.0.0.1:{port}") as c:
        assert "Secure" not in c.get("/signin", headers={"X-Forwarded-Proto": "https"}).headers["set-cookie"]


def test_redirects_are_relative_whatever_the_host_header(base):
    with _client(base) as c:
        r = c.get("/topics/", headers={"Host": "evil.example"})
        assert r.status_code == 308 and r.headers["location"] == "/topics"
        q = c.get("/trending/?x=1", headers={"Host": "evil.example"})
        assert q.headers["location"] == "/trending?x=1"
        assert c.get("/no-such-page/", headers={"Host": "evil.example"}).status_code == 404
        assert c.get("/sources/www.a.com", headers={"Host": "evil.example"}).headers["location"] == "/sources/a.com"


def test_personal_tokens_are_listed_revocable_and_not_sessions(base):
    with _client(base) as c:
        register_reader(c, "dora")
        token = personal_token(c, "laptop script")
        page = lxml.html.fromstring(c.get("/account").text)
        assert page.xpath("//section[@aria-labelledby='h-tokens']//li/text()")[0].strip().startswith("laptop script")
        assert c.get("/v1/me/preferences", headers=_bearer(token)).json()["user"] == "dora"
        assert c.get("/v1/feed", headers=_bearer(token)).json()["user"] == "dora"
        session = c.cookies["nf_session"]
        # a session cookie is not a bearer token, and a bearer token is not a session
        assert c.get("/v1/me/preferences", headers=_bearer(session)).status_code == 401
        with _client(base) as other:
            other.cookies.set("nf_session", token)
            assert other.get("/account").status_code == 303
            assert other.get("/v1/me/preferences").status_code == 401
        token_id = page.xpath("//form[@action='/account/tokens/revoke']/input[@name='id']/@value")[0]
        revoked = c.post("/account/tokens/revoke", data={"csrf": web_form_csrf(c, "/account"), "id": token_id})
        assert revoked.status_code == 303
        refused = c.get("/v1/me/preferences", headers=_bearer(token))
        assert refused.status_code == 401 and refused.json()["error"]["message"] == "token refused: revoked"
        # the routes on the event loop look it up through the asyncio client: refused the same way
        assert c.get("/v1/feed", headers=_bearer(token)).json()["error"]["message"] == "token refused: revoked"


def test_every_reader_route_refuses_another_readers_session_and_token(served, server):
    base, app = served
    with _client(base) as alice, _client(base) as bob:
        register_reader(alice, "alice")
        register_reader(bob, "bob")
        a_token, b_token = personal_token(alice), personal_token(bob)
        alice.put("/v1/me/preferences", headers=_bearer(a_token), json={"block_sources": ["a.com"]})
        alice_prefs = server.hgetall(KEYS.user("alice"))
        a_token_id = lxml.html.fromstring(alice.get("/account").text).xpath("//input[@name='id']/@value")[0]
        app_routes = {(r.path, m) for r in app.routes for m in getattr(r, "methods", None) or () if m != "HEAD"}
        # JSON routes about "me": no credentials, bob's session cookie (not an API token) or a token for alice
        # signed with another key: 401 on every one of them, whatever its method
        me = sorted((p, m) for p, m in app_routes if p.startswith("/v1/me/") or p in ("/v1/feed", "/v1/events"))
        assert ("/v1/me/preferences", "PUT") in me and ("/v1/events", "POST") in me
        forged = sign_token("alice", b"x" * 32, NOW, 600)
        for path, method in me:
            for headers in ({}, {"Cookie": "nf_session=" + bob.cookies["nf_session"]}, _bearer(forged)):
                r = httpx.request(method, base + path, headers=headers, json={}, timeout=20)
                assert r.status_code == 401, (path, method, headers, r.status_code)
        # bob's own token acts for bob only: alice's preferences are neither shown nor changed
        assert bob.get("/v1/me/preferences", headers=_bearer(b_token)).json()["block_sources"] == []
        bob.put("/v1/me/preferences", headers=_bearer(b_token), json={"follow_topics": ["tech"], "user": "alice"})
        assert server.hgetall(KEYS.user("alice")) == alice_prefs
        events = bob.post(
            "/v1/events", headers=_bearer(b_token), json={"events": [{"type": "click", "story_id": "s1"}], "user": "a"}
        )
        assert events.status_code == 202
        stream = server.xrange(KEYS.events(event_shard("bob")))
        assert [f[b"user_id"] for _, f in stream][-1] == b"bob"
        # bob's session cannot revoke alice's token (404) and his pages are his own
        not_his = bob.post("/account/tokens/revoke", data={"csrf": web_form_csrf(bob, "/account"), "id": a_token_id})
        assert not_his.status_code == 404
        assert alice.get("/v1/me/preferences", headers=_bearer(a_token)).status_code == 200
        for path in ("/settings", "/for-you", "/account"):
            page = bob.get(path)
            assert page.status_code == 200 and "alice" not in page.text, path
        # web forms that change reader data need the session's own CSRF token: alice's token with bob's session
        alice_csrf = web_form_csrf(alice, "/settings")
        for path, data in (
            ("/prefs", {"action": "block", "kind": "source", "value": "b.com"}),
            ("/account/tokens", {"name": "x"}),
            ("/account/password", {"current": PASSWORD, "new": "n3w password", "new2": "n3w password"}),
            ("/account/signout-everywhere", {}),
            ("/account/delete", {"password": PASSWORD}),
            ("/signout", {}),
        ):
            assert bob.post(path, data=dict(data, csrf=alice_csrf)).status_code == 403, path
        # a reader is not an editor: the admin page and the admin API refuse him
        assert bob.get("/admin").status_code == 403
        assert bob.get("/v1/admin/sources", headers=_bearer(b_token)).status_code == 401


def test_deleting_an_account_removes_its_data_and_its_events_from_later_nights(base, server, tmp_path, clock, capsys):
    from newsflow.cli.main import main
    from newsflow.jobs.nightly import run_night
    from newsflow.runtime.settings import Settings

    store = AccountStore(server, KEYS, cheap_hasher())
    with _client(base) as eve, _client(base) as finn:
        register_reader(eve, "eve")
        register_reader(finn, "finn")
        e_token, f_token = personal_token(eve), personal_token(finn)
        eve.put("/v1/me/preferences", headers=_bearer(e_token), json={"follow_topics": ["tech"]})
        operator = sign_token("eve", SECRET, NOW, 3600)  # an operator token (no token id) for eve
        click = {"events": [{"type": "click", "story_id": "s1"}]}
        for c, token in ((eve, e_token), (finn, f_token)):
            assert c.post("/v1/events", headers=_bearer(token), json=click).status_code == 202
        output = str(tmp_path / "output")
        events_dir = output + "/events"
        assert flush_events(server, events_dir)[0] == 2  # in the dataset before the deletion
        assert eve.post("/v1/events", headers=_bearer(operator), json=click).status_code == 202  # still streamed
        # a stored night of the interest model with eve's vector (as the nightly job writes it)
        ModelStore(server, KEYS).write("interest", "2026-01-01", {"eve": b"v", "finn": b"w"})
        assert any(server.exists(k) for k in KEYS.reader_owned("eve"))
        # wrong password: nothing is deleted
        bad = eve.post("/account/delete", data={"csrf": web_form_csrf(eve, "/account"), "password": "nope nope"})
        assert bad.status_code == 400 and store.role("eve") == "reader"
        clock.t = NOW + 60
        done = eve.post("/account/delete", data={"csrf": web_form_csrf(eve, "/account"), "password": PASSWORD})
        assert done.status_code == 200 and "Account deleted" in done.text
        assert 'nf_session=""' in done.headers["set-cookie"] or "Max-Age=0" in done.headers["set-cookie"]
        assert not [k for k in KEYS.reader_owned("eve") if server.exists(k)]
        assert store.role("eve") is None
        assert ModelStore(server, KEYS).read_fields("interest", ["eve", "finn"], "2026-01-01") == [None, b"w"]
        (stone,) = deleted_readers(server, event_shard("eve"), KEYS).values()
        assert stone.time == NOW + 60 and stone.last_event > (0, 0)  # the operator token's event is before it
        assert eve.get("/v1/me/preferences", headers=_bearer(e_token)).status_code == 401
        assert _signin(eve, "eve").status_code == 400
        # eve's events leave the dataset: `newsflow retention` purges what was flushed before, the nightly run's
        # flush step what was still in the stream; finn's stay
        url = f"unix://{server.socket_file}"
        retention = ["retention", "--redis-url", url, "--output", output, "--now", str(NOW + 120)]
        assert main(retention) == 0
        assert json.loads(capsys.readouterr().out)["deleted_reader_events"] == 1
        assert pq.read_table(events_dir).column("user_id").to_pylist() == ["finn"]
        night = run_night(server, Settings.resolve(redis_url=url), "2023-11-14", output, step="flush")
        assert night["status"] == "ok" and night["events_flushed"] == 1 and night["deleted_reader_events"] == 1
        assert pq.read_table(events_dir).column("user_id").to_pylist() == ["finn"]
        assert purge_deleted_events(server, events_dir, KEYS) == 0  # nothing left to drop
        # the name can be registered again, and starts clean
        assert register_reader(eve, "eve").status_code == 303
        assert eve.get("/account").status_code == 200
        assert server.hget(KEYS.user("eve"), "follow_topics") is None
        # the new eve's events are kept though the clock has not moved since the deletion (a replay clock
        # stands still): the tombstone covers the stream up to its id, not up to a time
        assert eve.post("/v1/events", headers=_bearer(personal_token(eve)), json=click).status_code == 202
        assert flush_events(server, events_dir)[0] == 1
        assert purge_deleted_events(server, events_dir, KEYS) == 0
        assert sorted(pq.read_table(events_dir).column("user_id").to_pylist()) == ["eve", "finn"]


def test_editors_come_from_the_cli_and_manage_sources_in_the_browser_and_the_api(base, server, monkeypatch):
    from newsflow.cli.main import main

    url = f"unix://{server.socket_file}"
    monkeypatch.setattr(sys, "stdin", io.StringIO(PASSWORD + "\n"))
    assert main(["accounts", "add", "--editor", "ed", "--redis-url", url]) == 0
    monkeypatch.setattr(sys, "stdin", io.StringIO("short\n"))
    assert main(["accounts", "add", "--editor", "ed2", "--redis-url", url]) == 1  # password too short
    assert AccountStore(server, KEYS, cheap_hasher()).role("ed") == "editor"
    with _client(base) as c:
        assert c.get("/admin").headers["location"] == "/signin?next=/admin"
        _signin(c, "ed")
        assert c.get("/admin").status_code == 200
        token = personal_token(c, "automation")
        added = c.post("/v1/admin/sources", headers=_bearer(token), json={"url": "https://a.com/feed.xml"})
        assert added.status_code == 201, added.text
        listed = c.get("/v1/admin/sources", params={"limit": 1}, headers=_bearer(token))
        assert listed.status_code == 200 and listed.json()["feeds"]
        feed_id = listed.json()["feeds"][0]["id"]
        assert c.get("/v1/admin/sources", headers=_bearer(c.cookies["nf_session"])).status_code == 401
        assert c.get("/v1/admin/sources", headers=_bearer(sign_token("ed", SECRET, NOW, 600))).status_code == 401
        csrf = web_form_csrf(c, "/account")
        paused = c.post("/admin/sources", data={"csrf": csrf, "ref": feed_id, "action": "pause"})
        assert paused.status_code == 303
        assert c.get(f"/v1/admin/sources/{feed_id}", headers=_bearer(token)).json()["feeds"][0]["status"] == "paused"
        assert "Resume" in c.get("/admin").text
    assert main(["accounts", "delete", "ed", "--redis-url", url]) == 0
    assert main(["accounts", "delete", "ed", "--redis-url", url]) == 1
