"""The stable URL id rule (newsflow.core.revisions.stable_url_id, same_stable_id; issue 37 item 1) without Redis:
same host, the same numeric id of >= 4 digits in the path or query, publish times within a minute."""

from __future__ import annotations

import hashlib
import itertools

import pytest

from newsflow.core.outlets import outlet
from newsflow.core.revisions import (
    PUBLISH_TOLERANCE_S,
    Version,
    current_version,
    is_revision,
    revision_components,
    same_stable_id,
    stable_url_id,
    stored_id,
)
from newsflow.core.urls import article_id

OLD_URL = "https://harbour-gazette.example/news/ferry-fares-rise-in-spring/a/57312"
NEW_URL = "https://harbour-gazette.example/news/ferry-operator-confirms-fare-rise/a/57312"
RELATED_URL = "https://harbour-gazette.example/news/island-residents-react-to-fare-rise/a/57329"
PUBLISHED = 1_773_301_200.0  # 2026-03-12 07:40 UTC


def test_the_issue_urls_one_id_for_the_edit_another_for_the_related_article():
    assert article_id(OLD_URL) != article_id(NEW_URL)
    expected = hashlib.sha256(b"harbour-gazette.example/57312").hexdigest()[:32]
    assert stable_url_id(OLD_URL) == stable_url_id(NEW_URL) == expected
    assert stable_url_id(RELATED_URL) == hashlib.sha256(b"harbour-gazette.example/57329").hexdigest()[:32]


H = "harbour-gazette.example"


@pytest.mark.parametrize(
    ("url", "key"),
    [
        (f"https://{H}/a/7649", f"{H}/7649"),  # exactly 4 digits
        (f"https://{H}/article/154063/ferry", f"{H}/154063"),  # 6 digits that are no date (month 40)
        (f"https://{H}/view?id=57312", f"{H}/57312"),  # in the query
        (f"https://{H}/view?id=57312&utm_source=rss", f"{H}/57312"),  # tracking parameters removed
        (f"http://{H}/a/57312/", f"{H}/57312"),  # http and a trailing slash: one identity
        (f"https://{H}/story-57312.html", f"{H}/57312"),  # a token inside a segment
        (f"https://{H}/news/12345/gallery-67890", f"{H}/67890"),  # the last run of the path
        (f"https://{H}/2024/05/12/ferry-57312", f"{H}/57312"),  # the date parts are skipped
        (f"https://{H}/a/57312?page=99999", f"{H}/57312"),  # the path before the query
        (f"https://{H}:8080/a/57312", f"{H}:8080/57312"),  # a port is part of the host
    ],
)
def test_the_numeric_id_of_a_url(url, key):
    assert stable_url_id(url) == hashlib.sha256(key.encode()).hexdigest()[:32]


@pytest.mark.parametrize(
    "url",
    [
        "https://harbour-gazette.example/a/123",  # 3 digits
        "https://harbour-gazette.example/city/mayor-opens-library-b2210",  # touches a letter
        "https://harbour-gazette.example/asset/5f3a91234c",  # inside a hex hash
        "https://harbour-gazette.example/2024/05/12/ferry-fares",  # a year
        "https://harbour-gazette.example/20240512/ferry-fares",  # yyyymmdd
        "https://harbour-gazette.example/news/202405121740-ferry",  # yyyymmddhhmm
        "https://harbour-gazette.example/dispatch/afp/140311/ferry-fares",  # yymmdd
        "https://harbour-gazette.example/2014/ferry-fares-0307/",  # mmdd
        "https://harbour-gazette.example/ferry-fares-12032014",  # ddmmyyyy
        "https://harbour-gazette.example/news/ferry-fares",  # no digits
        "ftp://harbour-gazette.example/a/57312",  # not http(s)
    ],
)
def test_urls_without_a_stable_id(url):
    assert stable_url_id(url) is None


def test_another_host_gives_another_id():
    same_digits = [
        OLD_URL,
        "https://news.harbour-gazette.example/news/ferry-fares-rise-in-spring/a/57312",
        "https://harbour-herald.example/news/ferry-fares-rise-in-spring/a/57312",
    ]
    assert len({stable_url_id(u) for u in same_digits}) == 3


def v(url: str, published: float | None, fetched: float) -> Version:
    t = fetched if published is None else min(published, fetched)
    return Version(article_id(url), outlet(url), published, t, fetched, stable_url_id(url) or "")


def test_publish_times_within_one_minute_either_way_the_boundary_included():
    old = v(OLD_URL, PUBLISHED, PUBLISHED + 300)
    assert PUBLISH_TOLERANCE_S == 60.0
    for delta in (0.0, 59.5, 60.0, -60.0):
        assert same_stable_id(old, v(NEW_URL, PUBLISHED + delta, PUBLISHED + 5400))
    for delta in (60.5, -61.0, 3600.0):
        assert not same_stable_id(old, v(NEW_URL, PUBLISHED + delta, PUBLISHED + 5400))
    assert not same_stable_id(old, v(NEW_URL, None, PUBLISHED + 5400))
    assert not same_stable_id(v(OLD_URL, None, PUBLISHED + 300), v(NEW_URL, None, PUBLISHED + 5400))


def test_a_stable_id_makes_a_revision_whatever_the_texts_and_event_times():
    old, new = v(OLD_URL, PUBLISHED, PUBLISHED + 300), v(NEW_URL, PUBLISHED + 30, PUBLISHED + 5400)
    assert old.event_time != new.event_time
    assert is_revision(old, new, near=False) and is_revision(new, old, near=False)
    assert not is_revision(old, v(RELATED_URL, PUBLISHED, PUBLISHED + 5400), near=False)
    assert not is_revision(old, old, near=False)
    # no stable id (another host): only the near-duplicate relation can join them
    other = v("https://news.harbour-gazette.example/x/a/57312", PUBLISHED, PUBLISHED + 5400)
    assert not is_revision(old, other, near=False)


def test_the_issue_polls_in_any_order_are_one_article_with_the_newest_url_and_a_separate_related_one():
    old = v(OLD_URL, PUBLISHED, PUBLISHED + 300)
    new = v(NEW_URL, PUBLISHED, PUBLISHED + 5400)
    related = v(RELATED_URL, PUBLISHED + 4800, PUBLISHED + 5400)
    for order in itertools.permutations([old, new, related]):
        comps = revision_components(list(order), lambda a, b: False)
        assert sorted(sorted(x.article_id for x in c) for c in comps) == sorted(
            [sorted([old.article_id, new.article_id]), [related.article_id]]
        )
        (pair,) = [c for c in comps if len(c) == 2]
        assert stored_id(pair) == old.article_id and current_version(pair) == new


def test_a_chain_of_publish_times_is_one_component_in_any_order():
    """Publish times 0, 50 and 100 s: the ends are 100 s apart, but each is within a minute of the middle."""
    a = v(OLD_URL, PUBLISHED, PUBLISHED + 300)
    b = v(NEW_URL, PUBLISHED + 50, PUBLISHED + 600)
    c = v(OLD_URL + "-update", PUBLISHED + 100, PUBLISHED + 900)  # "/a/57312-update": the same id
    assert not same_stable_id(a, c)
    for order in itertools.permutations([a, b, c]):
        (comp,) = revision_components(list(order), lambda x, y: False)
        assert stored_id(comp) == a.article_id and current_version(comp) == c
