"""robots.txt matching (google/robotstxt vectors) and RFC 9309 status-code policy."""

import json
import os

import pytest

from crawler.commands import eval_robots
from crawler.robots import (
    RobotsMatcher,
    RobotsPolicy,
    get_path_params_query,
    is_user_agent_allowed,
    is_valid_user_agent_to_obey,
    maybe_escape_pattern,
)

CASES = "/work/shared/data/robotstxt-conformance/robots_cases.json"
needs_cases = pytest.mark.skipif(not os.path.exists(CASES), reason="shared robotstxt-conformance data absent")


@needs_cases
def test_every_conformance_case_passes():
    with open(CASES, encoding="utf-8") as f:
        data = json.load(f)
    result = eval_robots.evaluate(data["is_user_agent_allowed"])
    assert result["cases"] == 126
    assert result["failed"] == []
    for c in data["is_valid_user_agent_to_obey"]:
        assert is_valid_user_agent_to_obey(c["user_agent"]) == c["expected_valid"], c
    for c in data["get_path_params_query"]:
        assert get_path_params_query(c["url"]) == c["expected_path_params_query"], c
    for c in data["maybe_escape_pattern"]:
        assert maybe_escape_pattern(c["pattern"]) == c["expected_escaped"], c


def test_byte_order_mark_and_product_token():
    body = b"\xef\xbb\xbfUser-agent: NewsFlow-Crawler/1.0 (+http://x)\nDisallow: /private\n"
    m = RobotsMatcher(body)
    assert not m.allowed("http://a.example/private/1", "newsflow-crawler/0.1 (+https://contact)")
    assert m.allowed("http://a.example/public", "newsflow-crawler")
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
    assert "cannot read robots cases" in capsys.readouterr().err
