"""robots.txt matching on protego (google/robotstxt vectors, RFC 9309 normalization) and the status-code policy."""

import json
import os

import pytest
from protego import Protego

from newsflow.cli.evaluation import robots as eval_robots
from newsflow.crawler.robots import (
    MAX_LINE_BYTES,
    ROBOTS_MAX_BYTES,
    RobotsMatcher,
    RobotsPolicy,
    is_product_token,
    is_user_agent_allowed,
    normalize_pattern,
    path_and_query,
    product_token,
    to_request_uri,
)
from tests.conftest import SHARED_DATA

CASES = os.path.join(SHARED_DATA, "robotstxt-conformance", "robots_cases.json")
needs_cases = pytest.mark.skipif(not os.path.exists(CASES), reason="shared robotstxt-conformance data absent")


@needs_cases
def test_every_conformance_case_passes():
    with open(CASES, encoding="utf-8") as f:
        data = json.load(f)
    result = eval_robots.evaluate(data["is_user_agent_allowed"])
    assert result["cases"] == 126
    assert result["failed"] == []
    for c in data["is_valid_user_agent_to_obey"]:
        assert is_product_token(c["user_agent"]) == c["expected_valid"], c
    for c in data["get_path_params_query"]:
        assert path_and_query(c["url"]) == c["expected_path_params_query"], c
    for c in data["maybe_escape_pattern"]:
        assert normalize_pattern(c["pattern"]) == c["expected_escaped"], c


@needs_cases
def test_bare_protego_fails_the_vectors_the_layer_fixes():
    """Guards the reason the normalization layer exists: without it protego disagrees on 11 vectors."""
    with open(CASES, encoding="utf-8") as f:
        cases = json.load(f)["is_user_agent_allowed"]
    failing = sorted(
        {
            c["test"]
            for c in cases
            if Protego.parse(c["robots_txt"].lstrip("\ufeff")).can_fetch(c["url"], c["user_agent"])
            != c["expected_allowed"]
        }
    )
    assert failing == ["GoogleOnly_LineTooLong", "ID_Encoding", "ID_UserAgentValueCaseInsensitive"]


def test_byte_order_mark_and_product_token():
    body = b"\xef\xbb\xbfUser-agent: NewsFlow-Crawler/1.0 (+http://x)\nDisallow: /private\n"
    m = RobotsMatcher(body)
    assert not m.allowed("http://a.example/private/1", "newsflow-crawler")
    assert not m.allowed("http://a.example/private/1", "NEWSFLOW-CRAWLER")
    assert m.allowed("http://a.example/public", "newsflow-crawler")
    # the caller passes its product token; a full User-Agent header is not one, so only "*" could apply
    assert m.allowed("http://a.example/private/1", "newsflow-crawler/0.1 (+https://contact)")
    # a different agent falls through to "no group" = allowed
    assert m.allowed("http://a.example/private/1", "otherbot")


def test_longest_match_and_allow_wins_ties():
    body = "User-agent: *\nDisallow: /a\nAllow: /a/b\nDisallow: /a/b/c\nAllow: /x$\nDisallow: /x\n"
    assert not is_user_agent_allowed(body, "bot", "http://h/a/z")
    assert is_user_agent_allowed(body, "bot", "http://h/a/b/q")
    assert not is_user_agent_allowed(body, "bot", "http://h/a/b/c")
    assert is_user_agent_allowed(body, "bot", "http://h/x")
    assert not is_user_agent_allowed(body, "bot", "http://h/xy")
    tie = "User-agent: *\nDisallow: /p\nAllow: /p\n"
    assert is_user_agent_allowed(tie, "bot", "http://h/p")


def test_policy_status_rules():
    ok = RobotsPolicy.from_fetch("http://h", 200, b"User-agent: *\nDisallow: /no\nCrawl-delay: 3\n", now=1000.0)
    assert ok.expires_at == 1000.0 + 86400
    assert not ok.allowed("http://h/no/1", "newsflow")
    assert ok.allowed("http://h/yes", "newsflow")
    assert ok.crawl_delay("newsflow") == 3.0
    gone = RobotsPolicy.from_fetch("http://h", 404, b"<html>not found</html>", now=1000.0)
    assert gone.allowed("http://h/no/1", "newsflow") and not gone.disallow_all
    assert gone.crawl_delay("newsflow") is None
    down = RobotsPolicy.from_fetch("http://h", 503, b"", now=1000.0)
    assert down.disallow_all and not down.allowed("http://h/anything", "newsflow")
    assert down.expires_at == 1000.0 + 1800
    unreachable = RobotsPolicy.from_fetch("http://h", 0, b"", now=5.0)
    assert not unreachable.allowed("http://h/", "newsflow")
    assert RobotsPolicy.from_json(ok.to_json()) == ok


def test_robots_429_is_unreachable_not_unavailable():
    now = 1728374400.0  # 2024-10-08 08:00:00 UTC
    busy = RobotsPolicy.from_fetch("https://shop.example.org", 429, b"", now)
    assert busy.disallow_all and not busy.allowed("/anything", "newsflow-crawler")
    assert not busy.allowed("https://shop.example.org/anything", "newsflow-crawler")
    assert busy.expires_at == now + 1800  # the short error wait, not 24 h
    assert RobotsPolicy.from_json(busy.to_json()).disallow_all
    # every other 4xx still means "no robots.txt": allow all, kept 24 h
    for status in (400, 401, 403, 404, 410, 418, 451):
        p = RobotsPolicy.from_fetch("https://h", status, b"", now)
        assert p.allowed("https://h/anything", "newsflow-crawler") and p.expires_at == now + 86400, status
    # 5xx and unreachable: disallow, short wait
    for status in (0, 500, 502, 503, 504):
        p = RobotsPolicy.from_fetch("https://h", status, b"", now)
        assert p.disallow_all and p.expires_at == now + 1800, status


def test_robots_retry_after_extends_the_error_wait_up_to_a_day():
    now = 1000.0
    assert RobotsPolicy.from_fetch("h", 429, b"", now, retry_after_s=7200.0).expires_at == now + 7200
    assert RobotsPolicy.from_fetch("h", 503, b"", now, retry_after_s=3 * 86400.0).expires_at == now + 86400
    assert RobotsPolicy.from_fetch("h", 503, b"", now, retry_after_s=60.0).expires_at == now + 1800  # shorter: ignored
    assert RobotsPolicy.from_fetch("h", 404, b"", now, retry_after_s=7200.0).expires_at == now + 86400


def test_request_rate_becomes_delay():
    p = RobotsPolicy.from_fetch("http://h", 200, b"User-agent: *\nRequest-rate: 1/5\n", now=0.0)
    assert p.crawl_delay("newsflow") == 5.0


@needs_cases
def test_eval_robots_command_prints_summary(capsys):
    import argparse

    assert eval_robots.run(argparse.Namespace(cases=CASES)) == 0
    out = json.loads(capsys.readouterr().out.strip())
    assert out["cases"] == out["passed"] == 126


def test_eval_robots_command_bad_file(tmp_path, capsys):
    import argparse

    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    assert eval_robots.run(argparse.Namespace(cases=str(bad))) == 2
    assert (
        capsys.readouterr().err == f"error: {bad}: not JSON (Expecting property name enclosed in double quotes "
        "at line 1 column 2)\n"
    )


@pytest.mark.parametrize(
    "content, problem",
    [
        ({"other": []}, "no 'is_user_agent_allowed' list"),
        ({"is_user_agent_allowed": [3]}, "case 0 is not an object"),
        (
            {"is_user_agent_allowed": [{"test": "t1", "robots_txt": "", "user_agent": "a", "url": "http://h/"}]},
            "case 0 ('t1') has no 'expected_allowed'",
        ),
        (
            {
                "is_user_agent_allowed": [
                    {"test": "t2", "robots_txt": 5, "user_agent": "a", "url": "http://h/", "expected_allowed": True}
                ]
            },
            "case 0 ('t2'): 'robots_txt' must be str, got int",
        ),
        (
            {
                "is_user_agent_allowed": [
                    {"test": "t3", "robots_txt": "", "user_agent": "a", "url": "http://h/", "expected_allowed": "yes"}
                ]
            },
            "case 0 ('t3'): 'expected_allowed' must be bool, got str",
        ),
    ],
)
def test_eval_robots_command_bad_cases_exit_2(tmp_path, capsys, content, problem):
    import argparse

    path = tmp_path / "cases.json"
    path.write_text(json.dumps(content))
    assert eval_robots.run(argparse.Namespace(cases=str(path))) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith(f"error: {path}: {problem}")
    assert eval_robots.run(argparse.Namespace(cases=str(tmp_path / "none.json"))) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'none.json'}: file not found\n"


def test_partial_byte_order_mark_and_bom_only_at_start():
    for prefix in (b"\xef\xbb", b"\xef"):
        assert not RobotsMatcher(prefix + b"User-Agent: foo\nDisallow: /x\n").allowed("http://h/x", "foo")
    # a BOM in the middle of the file is garbage: that line is unknown and ignored
    m = RobotsMatcher(b"User-Agent: foo\n\xef\xbb\xbfDisallow: /x\nDisallow: /y\n")
    assert m.allowed("http://h/x", "foo") and not m.allowed("http://h/y", "foo")


def test_only_cr_lf_end_lines():
    # CR, LF and CRLF all end a line ...
    for eol in (b"\r", b"\n", b"\r\n"):
        assert not RobotsMatcher(eol.join([b"User-agent: a", b"Disallow: /p", b""])).allowed("http://h/p", "a")
    # ... but a form feed inside a value does not start a new line (str.splitlines would split here)
    m = RobotsMatcher(b"User-agent: a\nDisallow: /p\x0cq\nDisallow: /r\n")
    assert not m.allowed("http://h/p%0Cq", "a")
    assert m.allowed("http://h/q", "a") and not m.allowed("http://h/r", "a")


def test_product_token_matching_is_exact_and_case_insensitive():
    body = "User-agent: foo\nDisallow: /\n\nUser-agent: *\nAllow: /\n"
    assert not is_user_agent_allowed(body, "FOO", "http://h/x")
    # protego alone applies group "foo" to crawler "foobar"; RFC 9309 wants the token itself
    assert not Protego.parse(body).can_fetch("http://h/x", "foobar")
    assert is_user_agent_allowed(body, "foobar", "http://h/x")
    # group values are reduced to their token: "FooBot/2.1" and "FooBot*" name FooBot
    for value in ("FooBot/2.1", "FooBot*", "foobot extra words"):
        assert not is_user_agent_allowed(f"User-agent: {value}\nDisallow: /\n", "FooBot", "http://h/x")
    # "*bot" is neither "*" nor a token: it matches nobody
    assert is_user_agent_allowed("User-agent: *bot\nDisallow: /\n", "FooBot", "http://h/x")
    assert product_token("FooBot/1.0 (+http://x)") == "FooBot" and product_token("*") == ""


def test_missing_colon_unknown_lines_and_sitemaps_do_not_break_groups():
    assert not is_user_agent_allowed("user-agent FooBot\ndisallow /\n", "FooBot", "http://h/x/y")
    assert is_user_agent_allowed("foo: FooBot\nbar: /\n", "FooBot", "http://h/x/y")
    for middle in ("Sitemap: https://h/sitemap.xml", "Invalid-Unknown-Line: unknown"):
        body = f"User-agent: BarBot\n{middle}\nUser-agent: *\nDisallow: /\n"
        assert not is_user_agent_allowed(body, "BarBot", "http://h/")
        assert not is_user_agent_allowed(body, "FooBot", "http://h/")
    m = RobotsMatcher("Sitemap: https://h/a.xml\nUser-agent: *\nDisallow:\nsitemap: https://h/b.xml # two\n")
    assert m.sitemaps == ["https://h/a.xml", "https://h/b.xml"]


def test_percent_encoding_normal_form():
    body = "User-agent: a\nDisallow: /\nAllow: /caf\u00e9/\nAllow: /%7eme/\nAllow: /sp ace\n"
    assert is_user_agent_allowed(body, "a", "http://h/caf%C3%A9/x")
    assert is_user_agent_allowed(body, "a", "http://h/caf%c3%a9/x")  # hex case does not matter (RFC 3986 2.1)
    assert not is_user_agent_allowed(body, "a", "http://h/caf\u00e9/x")  # raw non-ASCII is not a URI
    assert is_user_agent_allowed(body, "a", "http://h/%7Eme/")
    assert not is_user_agent_allowed(body, "a", "http://h/~me/")  # escapes are compared as written
    assert is_user_agent_allowed(body, "a", "http://h/sp%20ace")
    assert is_user_agent_allowed(body, "a", "http://h/sp ace")
    assert normalize_pattern("/a b/\u00e9%2f*$") == "/a%20b/%C3%A9%2F*$"
    # a Latin-1 file's octets are escaped as they are
    assert normalize_pattern(b"/caf\xe9") == "/caf%E9"
    assert to_request_uri("http://h/caf\u00e9?q=\u30c4") == "http://h/caf%C3%A9?q=%E3%83%84"


def test_policy_matches_the_uri_the_client_sends():
    p = RobotsPolicy.from_fetch("http://h", 200, "User-agent: *\nDisallow: /caf\u00e9\n".encode(), now=0.0)
    assert not p.allowed("http://h/caf\u00e9/menu", "newsflow-crawler")
    assert not p.allowed("http://h/caf%C3%A9/menu", "newsflow-crawler")
    assert p.allowed("http://h/cafe/menu", "newsflow-crawler")


def test_long_lines_are_cut_and_big_files_limited():
    rule = "/x/" + "a" * (MAX_LINE_BYTES + 100)
    body = f"User-agent: a\nDisallow: {rule}/qux\n"
    kept = MAX_LINE_BYTES - len("Disallow: ")
    assert not is_user_agent_allowed(body, "a", "http://h" + rule[:kept] + "zzz")
    assert is_user_agent_allowed(body, "a", "http://h" + rule[: kept - 1] + "zzz")
    filler = "# " + "f" * 1000 + "\n"
    big = "User-agent: a\nDisallow: /early\n" + filler * (ROBOTS_MAX_BYTES // len(filler) + 1) + "Disallow: /late\n"
    assert len(big) > ROBOTS_MAX_BYTES
    assert not is_user_agent_allowed(big, "a", "http://h/early")
    assert is_user_agent_allowed(big, "a", "http://h/late")  # past the parsing limit


def test_robots_txt_itself_is_always_allowed():
    assert is_user_agent_allowed("User-agent: *\nDisallow: /\n", "a", "http://h/robots.txt")
    assert not is_user_agent_allowed("User-agent: *\nDisallow: /\n", "a", "http://h/robots.txt.bak")


def test_crawl_delay_follows_the_matched_group():
    body = b"User-agent: *\nCrawl-delay: 9\n\nUser-agent: newsflow-crawler\nCrawl-delay: 2.5\nDisallow: /x\n"
    p = RobotsPolicy.from_fetch("http://h", 200, body, now=0.0)
    assert p.crawl_delay("newsflow-crawler") == 2.5
    assert p.crawl_delay("otherbot") == 9.0
    assert p.crawl_delay("newsflow-crawler-two") == 9.0
