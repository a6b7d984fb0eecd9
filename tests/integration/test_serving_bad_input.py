"""Malformed parameters, tokens and events are 4xx answers with a reason, never a 500 or a dropped
connection; a token has exactly one accepted spelling."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from newsflow.serving.tokens import TokenError, sign_token, verify_token
from tests.helpers import populated_app
from tests.integration.ranking_data import NOW

SECRET = b"k" * 32


@pytest.fixture()
def client(server, tmp_path):
    return TestClient(populated_app(server, str(tmp_path / "snap"), SECRET), raise_server_exceptions=False)


def _auth(user="u1"):
    return {"Authorization": "Bearer " + sign_token(user, SECRET, NOW, 3600)}


@pytest.mark.parametrize(
    "url",
    [
        "/v1/top?limit=%C2%B2",  # "²" passes str.isdigit()
        "/v1/top?limit=" + "9" * 5000,  # past Python's int digit limit
        "/v1/top?limit=%EF%BC%95",  # fullwidth digit five
        "/v1/top?limit=5%0A",
        "/v1/top?edition=en%0A",  # "$" matches before a final newline
        "/v1/top?edition=%E2%84%AAo",  # U+212A KELVIN SIGN + "o" lower-cases to "ko"
        # (a topic name's surrounding space, tab or line end is stripped, as on the web: test_serving.py)
        "/v1/topics/business%1F",
        "/v1/trending?limit=%D9%A3",  # Arabic-Indic digit three
    ],
)
def test_malformed_query_parameters_are_400(client, url):
    resp = client.get(url)
    assert resp.status_code == 400, (url, resp.status_code, resp.text[:200])
    assert resp.json()["error"]["code"] == "bad_parameter"


def test_story_id_with_a_trailing_newline_is_not_a_story(client):
    assert client.get("/v1/stories/s1%0A").status_code == 400


def test_good_parameters_still_work(client):
    assert client.get("/v1/top?limit=3&edition=en").status_code == 200


@pytest.mark.parametrize(
    "header",
    [
        b"Bearer nf1.\xff\xfe.abc",
        b"Bearer \xc3\xa9" + b"x" * 60,
    ],
)
def test_non_ascii_bytes_in_a_bearer_token_are_401(client, header):
    resp = client.get("/v1/feed", headers=[(b"authorization", header)])
    assert resp.status_code == 401 and resp.json()["error"]["code"] == "invalid_token"


def test_two_authorization_headers_are_401_not_the_first_one(client):
    one, other = _auth("u1")["Authorization"], _auth("u2")["Authorization"]
    assert client.get("/v1/feed", headers=[(b"authorization", one.encode())]).status_code == 200
    for path in ("/v1/feed", "/v1/top", "/v1/me/preferences"):
        resp = client.get(path, headers=[(b"authorization", one.encode()), (b"authorization", other.encode())])
        assert resp.status_code == 401 and resp.json()["error"]["code"] == "invalid_token", path
        assert "more than one Authorization header" in resp.json()["error"]["message"]


def _variants(token: str) -> list[str]:
    """Other spellings of the same bytes: padding appended, and the last character of each part
    changed only in its unused low bits (base64url carries 4 or 2 spare bits at the end)."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    v, payload, sig = token.split(".")
    out = [token + "=", f"{v}.{payload}.{sig}=", f"{v}.{payload}=.{sig}"]
    last = sig[-1]
    i = alphabet.index(last)
    out.append(f"{v}.{payload}.{sig[:-1]}{alphabet[i | 1]}")  # 43 chars of a 32-byte value: 2 spare bits
    spare = {2: 4, 3: 2}.get(len(payload) % 4)
    if spare:
        j = alphabet.index(payload[-1])
        out.append(f"{v}.{payload[:-1]}{alphabet[j | 1]}.{sig}")
    return [t for t in out if t != token]


def test_a_token_has_exactly_one_accepted_spelling(client):
    token = sign_token("u1", SECRET, NOW, 3600)
    assert verify_token(token, SECRET, NOW) == "u1"
    variants = _variants(token)
    assert len(variants) >= 4
    for bad in variants:
        with pytest.raises(TokenError) as e:
            verify_token(bad, SECRET, NOW)
        assert e.value.reason == "malformed", bad
        resp = client.get("/v1/feed", headers={"Authorization": "Bearer " + bad})
        assert resp.status_code == 401


@pytest.mark.parametrize(
    "event,fragment",
    [
        ({"type": "click", "story_id": "s1", "time": int("1" + "0" * 400)}, "time must be a number"),
        ({"type": "dwell", "story_id": "s1", "dwell_seconds": int("9" * 400)}, "dwell_seconds must be a number"),
        ({"type": "click", "story_id": "s1\n"}, "story_id must be"),
    ],
)
def test_events_with_huge_numbers_are_400(client, event, fragment):
    resp = client.post(
        "/v1/events",
        content=json.dumps({"events": [event]}),
        headers=dict(_auth(), **{"content-type": "application/json"}),
    )
    assert resp.status_code == 400
    details = resp.json()["error"]["details"]
    assert [d["index"] for d in details] == [0] and fragment in details[0]["error"]


@pytest.mark.parametrize(
    "body",
    [b'{"events": [{"type": "click", "story_id": "s1", "time": ' + b"7" * 5000 + b"}]}", b"[" * 50_000 + b"]" * 50_000],
)
def test_event_bodies_that_break_the_json_parser_are_400(client, body):
    resp = client.post("/v1/events", content=body, headers=dict(_auth(), **{"content-type": "application/json"}))
    assert resp.status_code in (400, 413)
    assert resp.json()["error"]["code"] in ("invalid_json", "too_large")


def test_an_unknown_edition_is_400_listing_the_editions(client):
    # ranking_data's stories are English and German: the ranker builds "en" and "de" editions
    for path in ("/v1/top?edition=fr", "/v1/top?edition=us", "/v1/feed?edition=hu"):
        resp = client.get(path, headers=_auth())
        assert resp.status_code == 400, (path, resp.text[:200])
        error = resp.json()["error"]
        assert error["code"] == "unknown_edition"
        assert error["message"].endswith("editions: de, en, global")
    assert client.get("/v1/top?edition=de").json()["edition"] == "de"
    assert client.get("/?edition=us").status_code == 400


def test_editions_are_named_in_words_on_the_home_page(client):
    html = client.get("/?edition=de").text
    assert '<option value="de" selected>German</option>' in html
    assert '<option value="en">English</option>' in html
    assert "Top stories, German edition" in html
