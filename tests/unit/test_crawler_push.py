"""Push endpoint logic without HTTP: credentials, signatures, document validation, URL safety."""

import hashlib
import hmac

import pytest

from newsflow.crawler.push import PushConfig
from newsflow.crawler.push_auth import PushError, authenticate, parse_credentials, sign
from newsflow.crawler.push_validate import check_push_url, text_problem, validate_document

SECRET = "s3cret-0123456789abcdef"
CFG = PushConfig(credentials={"wire": SECRET, "other": "another-secret-9876543210"}, clock=lambda: 1_700_000_000.0)
NOW = 1_700_000_000.0


def test_parse_credentials():
    assert parse_credentials(" wire:" + SECRET + ", b:" + "x" * 16) == {"wire": SECRET, "b": "x" * 16}
    assert parse_credentials("") == {}
    for bad in ("wire" + SECRET, "wire:short", ":" + SECRET, f"a:{SECRET},a:{SECRET}"):
        with pytest.raises(ValueError):
            parse_credentials(bad)
    with pytest.raises(ValueError, match="at least one client credential"):
        PushConfig(credentials={})


def test_signature_is_hmac_sha256_of_timestamp_dot_body():
    body = b'{"url": "https://wire.example/a"}'
    expected = hmac.new(SECRET.encode(), b"1700000000." + body, hashlib.sha256).hexdigest()
    assert sign(SECRET, "1700000000", body) == "sha256=" + expected
    headers = {
        "x-newsflow-client": "wire",
        "x-newsflow-timestamp": "1700000000",
        "x-newsflow-signature": "sha256=" + expected,
    }
    assert authenticate(headers, body, CFG, NOW + 299) == "wire"
    for change, status in (
        ({"x-newsflow-signature": "sha256=" + "0" * 64}, 403),
        ({"x-newsflow-client": "other"}, 403),
        ({"x-newsflow-client": "nobody"}, 403),
        ({"x-newsflow-timestamp": "1699999000"}, 403),
        ({"x-newsflow-timestamp": "nan"}, 403),
    ):
        with pytest.raises(PushError) as e:
            authenticate({**headers, **change}, body, CFG, NOW)
        assert e.value.status == status, change
    with pytest.raises(PushError) as e:  # signed body changed in transit
        authenticate(headers, body + b" ", CFG, NOW)
    assert e.value.status == 403
    with pytest.raises(PushError) as e:  # replay after the tolerance window
        authenticate(headers, body, CFG, NOW + 301)
    assert e.value.status == 403


def test_bearer_tokens():
    assert authenticate({"authorization": "Bearer " + SECRET}, b"", CFG, NOW) == "wire"
    assert authenticate({"authorization": "bearer another-secret-9876543210"}, b"", CFG, NOW) == "other"
    for value in ("Bearer " + SECRET[:-1], "Basic " + SECRET, "Bearer "):
        with pytest.raises(PushError) as e:
            authenticate({"authorization": value}, b"", CFG, NOW)
        assert e.value.status == 403
    with pytest.raises(PushError) as e:
        authenticate({}, b"", CFG, NOW)
    assert e.value.status == 401


def test_validate_document_builds_raw_document():
    d = validate_document(
        {
            "url": " https://Wire.example/2024/quake?utm_source=x ",
            "title": " Quake ",
            "body": "<p>caf\u00e9</p>",
            "published_time": "2023-11-14T22:13:20+01:00",
            "source_name": "Wire",
        },
        "wire",
        NOW,
        CFG,
    )
    assert d.url == "https://Wire.example/2024/quake?utm_source=x"
    assert d.source_domain == "wire.example" and d.title == "Quake" and d.summary is None
    assert d.body == "<p>caf\u00e9</p>".encode() and d.content_type == "text/html; charset=utf-8"
    assert d.published_time == NOW - 3600  # NOW is 22:13:20Z; 22:13:20+01:00 is 21:13:20Z
    assert d.fetch_time == NOW and d.http_status == 0 and d.feed_url == "push:wire" and d.source_name == "Wire"
    s = validate_document(
        {"url": "http://wire.example/b", "title": "T", "summary": "S", "published_time": 5}, "wire", NOW, CFG
    )
    assert s.body is None and s.summary == "S" and s.published_time == 5.0 and s.is_feed_only


def test_validate_document_collects_every_reason():
    with pytest.raises(ValueError) as e:
        validate_document(
            {"url": "ftp://wire.example/a", "title": "", "summary": 3, "extra": 1, "published_time": "yesterday"},
            "wire",
            NOW,
            CFG,
        )
    reasons = e.value.args
    assert reasons[0] == "unknown field(s): extra"
    assert any("not an http(s) URL" in r for r in reasons)
    assert "title must be a non-empty string" in reasons and "summary must be a string" in reasons
    assert "summary or body is required" in reasons
    assert any("not RFC 3339" in r for r in reasons)
    for bad_time, why in (
        ("2023-11-14T20:13:20", "time zone"),
        (NOW + 2 * 86400, "future"),
        (True, "RFC 3339"),
        (-1, "positive"),
    ):
        with pytest.raises(ValueError, match=why):
            validate_document(
                {"url": "http://wire.example/a", "title": "t", "summary": "s", "published_time": bad_time},
                "wire",
                NOW,
                CFG,
            )
    with pytest.raises(ValueError, match="JSON object"):
        validate_document(["url"], "wire", NOW, CFG)


@pytest.mark.parametrize(
    "url, why",
    [
        ("http://169.254.169.254/latest/meta-data", "private"),
        ("http://127.0.0.1:8080/x", "private"),
        ("http://[::1]/x", "private"),
        ("http://10.1.2.3/x", "private"),
        ("http://localhost/x", "not a public host"),
        ("http://metadata.google.internal/x", "not a public host"),
        ("http://printer.local/x", "not a public host"),
        ("http://intranet/x", "not a public host"),
        ("http://0251.0376.0251.0376/x", "address 169.254.169.254 is private"),  # octal, as inet_aton reads it
        ("http://2852039166/x", "address 169.254.169.254 is private"),  # decimal
        ("http://0xa9fea9fe/x", "address 169.254.169.254 is private"),  # hex
        ("http://127.1/x", "address 127.0.0.1 is private"),  # short form
        ("http://[::ffff:10.0.0.1]/x", "private"),
        ("http://wire.example/a\nb", "control character U\\+000A at character 21"),
        ("http://wire.example/a\tb", "control character U\\+0009"),
        ("http://wire.example/a\u00a0b", "whitespace"),
        ("http://wire.example/\udfff", "lone surrogate U\\+DFFF at character 20"),
        ("http://user:pw@wire.example/x", "user info"),
        ("javascript:alert(1)", "http"),
        ("https://wire.example/" + "a" * 3000, "longer than"),
        (42, "non-empty string"),
    ],
)
def test_hostile_urls_refused(url, why):
    with pytest.raises(ValueError, match=why):
        check_push_url(url, CFG)


def test_allow_list_admits_local_hosts():
    cfg = PushConfig(credentials={"wire": SECRET}, allow_hosts=("127.0.0.1", "localhost"))
    assert check_push_url("http://127.0.0.1:9/x", cfg) == "http://127.0.0.1:9/x"
    assert check_push_url("http://localhost/x", cfg) == "http://localhost/x"
    assert check_push_url("https://93.184.216.34/a", CFG) == "https://93.184.216.34/a"


def test_text_problem():
    assert text_problem("title", "Quake hits Ankara – 5.1", controls=True) is None
    assert text_problem("summary", "line one\nline two\ttab") is None  # free text may hold newlines
    assert text_problem("summary", "ab\x00c") == "summary contains control character U+0000 at character 2"
    assert text_problem("title", "a\x85b", controls=True) == "title contains control character U+0085 at character 1"
    assert text_problem("body", "ok \ud83d", controls=False) == (
        "body contains a lone surrogate U+D83D at character 3 (not valid Unicode)"
    )
    assert text_problem("body", "ok \U0001f600") is None  # a real astral character is fine


def test_surrogate_in_field_names_and_times_is_reported_safely():
    with pytest.raises(ValueError) as e:
        validate_document(
            {"url": "https://wire.example/a", "title": "t", "summary": "s", "\ud800x": 1, "published_time": "\udc00"},
            "wire",
            NOW,
            CFG,
        )
    reasons = e.value.args
    assert reasons == ("unknown field(s): \\ud800x", "published_time is not RFC 3339: '\\udc00'")
    for r in reasons:
        r.encode("utf-8")  # the 422 response can be encoded
