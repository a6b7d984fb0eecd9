"""Stable URL ids (issue 37 item 1) in the near-duplicate store against a real embedded Redis: versions found by
``Keys.stable_url_versions``, the same state in every arrival order and batching, replays that change nothing,
and retention that leaves no stable-id key behind."""

from __future__ import annotations

import itertools

from newsflow.core.revisions import stable_url_id
from newsflow.core.urls import article_id
from newsflow.storage.groups import RedisGroupStore, StoreConfig
from newsflow.storage.keys import Keys
from tests.helpers import art, dump, nd_articles, nd_revisions, utc

OLD_URL = "https://harbour-gazette.example/news/ferry-fares-rise-in-spring/a/57312"
NEW_URL = "https://harbour-gazette.example/news/ferry-operator-confirms-fare-rise/a/57312"
RELATED_URL = "https://harbour-gazette.example/news/island-residents-react-to-fare-rise/a/57329"
COPY_URL = "https://wire-reprints.example.com/ferry-operator-confirms-fare-rise"
PUBLISHED = utc("2026-03-12 07:40:00")
OLD_FP, NEW_FP, RELATED_FP = 0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210, 0x0F0F_0F0F_F0F0_F0F0


def page(url: str, fp: int, published: float, fetched: float, domain: str = "harbour-gazette.example"):
    return art(article_id(url), fp, domain=domain, t=published)._replace(
        url=url, canonical_url=url, fetch_time=fetched, event_time=min(published, fetched)
    )


OLD = page(OLD_URL, OLD_FP, PUBLISHED, PUBLISHED + 300)
NEW = page(NEW_URL, NEW_FP, PUBLISHED + 40, PUBLISHED + 5400)  # published 40 s later: within the minute
RELATED = page(RELATED_URL, RELATED_FP, PUBLISHED + 5100, PUBLISHED + 5400)
COPY = page(COPY_URL, NEW_FP ^ 0b101, PUBLISHED + 600, PUBLISHED + 5500, domain="wire-reprints.example.com")


def _strip(state: dict, prefix: str) -> dict:
    return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix.encode())}


def test_the_texts_are_not_near_duplicates_and_the_copy_is_one_of_the_new_text():
    assert (OLD_FP ^ NEW_FP).bit_count() > 5 and (OLD_FP ^ RELATED_FP).bit_count() > 5
    assert (NEW_FP ^ int(COPY.simhash, 16)).bit_count() == 2
    assert stable_url_id(OLD_URL) == stable_url_id(NEW_URL) != stable_url_id(RELATED_URL)
    assert stable_url_id(COPY_URL) is None


def test_every_arrival_order_and_batching_stores_one_article_and_the_same_state(redis_server):
    client, _ = redis_server
    states = []
    for n, order in enumerate(itertools.permutations([OLD, NEW, RELATED, COPY])):
        store = RedisGroupStore(client, StoreConfig(prefix=f"p{n}"))
        if n % 2:
            store.assign_batch(list(order))  # one write cycle
        else:
            for a in order:
                store.assign_batch([a])
        states.append(_strip(dump(client), f"p{n}"))
    assert all(s == states[0] for s in states[1:])

    keys = Keys("p0")
    old, new, related, copy = (a.article_id for a in (OLD, NEW, RELATED, COPY))
    # one article under the first-fetched id with the newest URL; the copy of the new text joins its group
    assert nd_articles(client, keys) == {old: "c" + old, copy: "c" + old, related: "c" + related}
    assert nd_revisions(client, keys) == {new: old}
    assert client.hget(keys.article(old), "url") == NEW_URL.encode()
    pair = b"".join(f"{i}\n".encode() for i in sorted([old, new]))
    assert client.get(keys.stable_url_versions(stable_url_id(OLD_URL))) == pair
    assert client.get(keys.stable_url_versions(stable_url_id(RELATED_URL))) == f"{related}\n".encode()
    assert client.hget(keys.article_record(new), "sid") == stable_url_id(NEW_URL).encode()


def test_replays_change_nothing_and_retention_removes_the_stable_id_sets(redis_server):
    client, _ = redis_server
    store = RedisGroupStore(client, StoreConfig(prefix="r"))
    store.assign_batch([OLD, RELATED])
    store.assign_batch([NEW, COPY])
    before = dump(client)
    results = store.assign_batch([COPY, NEW, RELATED, OLD])
    assert [r.new_article for r in results] == [False] * 4
    assert [r.stored_id for r in results] == [COPY.article_id, OLD.article_id, RELATED.article_id, OLD.article_id]
    assert dump(client) == before

    assert store.expire_before(PUBLISHED + 86_400) == (2, 3)
    assert [k for k in client.keys("r:*") if b"{uid:" in k] == []
    assert client.keys("r:*") == []


def test_an_hour_apart_or_another_host_is_another_article(redis_server):
    client, _ = redis_server
    store = RedisGroupStore(client, StoreConfig(prefix="h"))
    later = page(NEW_URL, NEW_FP, PUBLISHED + 3600, PUBLISHED + 5400)
    other_host = page(
        NEW_URL.replace("harbour-gazette", "news.harbour-gazette"), NEW_FP ^ 0xFF00, PUBLISHED, PUBLISHED + 600
    )
    for a in (OLD, later, other_host):
        store.assign_batch([a])
    keys = Keys("h")
    assert nd_revisions(client, keys) == {}
    assert set(nd_articles(client, keys)) == {OLD.article_id, later.article_id, other_host.article_id}


def test_a_chain_of_publish_times_is_one_article_in_every_order(redis_server):
    """Publish times 0, 50 and 100 s: the ends are not within a minute of each other, the middle joins them."""
    client, _ = redis_server
    a = page(OLD_URL, OLD_FP, PUBLISHED, PUBLISHED + 300)
    b = page(NEW_URL, NEW_FP, PUBLISHED + 50, PUBLISHED + 600)
    c = page(NEW_URL + "-update", RELATED_FP, PUBLISHED + 100, PUBLISHED + 900)
    states = []
    for n, order in enumerate(itertools.permutations([a, b, c])):
        store = RedisGroupStore(client, StoreConfig(prefix=f"c{n}"))
        for x in order:
            store.assign_batch([x])
        states.append(_strip(dump(client), f"c{n}"))
    assert all(s == states[0] for s in states[1:])
    keys = Keys("c0")
    assert nd_revisions(client, keys) == {b.article_id: a.article_id, c.article_id: a.article_id}
    assert client.hget(keys.article(a.article_id), "url") == c.url.encode()
