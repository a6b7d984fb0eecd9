"""Re-slugged permalinks (issue 10 item 14) in the near-duplicate store, against a real embedded Redis.

A headline edit re-slugs ``/city/mayor-opens-library-b2210/`` to
``/city/mayor-opens-new-central-library-b2210/``: same outlet, same publish time, near-identical text.
Expected: one article (id of the first-fetched URL) with the new title and URL, the other URL an alias,
the same Redis state in either arrival order.
"""

from __future__ import annotations

import itertools
import random

from newsflow.core.articles import fingerprint_text
from newsflow.core.minhash_check import near_duplicate, text_minhash
from newsflow.core.revisions import Version, current_version, revision_components, stored_id
from newsflow.core.simhash import simhash, to_hex
from newsflow.core.urls import article_id
from newsflow.schemas import Article
from newsflow.storage.aliases import record_aliases, resolve_article_id
from newsflow.storage.groups import RedisGroupStore, StoreConfig, resolve_revisions
from newsflow.storage.keys import Keys
from tests.helpers import dump, nd_articles, nd_revisions

BODY = (
    "The mayor opened the new central library on Saturday after three years of building work. The library "
    "holds 200,000 books, a children's floor and a rooftop reading garden. Residents queued from early "
    "morning, and the first 500 visitors received a free library card. The city council approved the "
    "project in 2021 with a budget of 40 million euros."
)
PUBLISHED = 1_730_000_000.0
OLD_URL = "https://www.gazette.example.org/city/mayor-opens-library-b2210/"
NEW_URL = "https://www.gazette.example.org/city/mayor-opens-new-central-library-b2210/"
COPY_URL = "https://www.wire-reprints.example.com/2024/mayor-opens-library"


def page(url: str, title: str, fetched: float, published: float | None = PUBLISHED, text: str = BODY) -> Article:
    a = Article(
        article_id=article_id(url),
        url=url,
        canonical_url=url,
        source_domain=url.split("/")[2],
        source_name="",
        title=title,
        text=text,
        authors=[],
        site_name="",
        publish_time=published,
        fetch_time=fetched,
        event_time=published if published is not None and published <= fetched else fetched,
        language="en",
        language_confidence=0.9,
        simhash="",
        word_count=len(text.split()),
        feed_only=False,
        source_authority=0.5,
    )
    return a._replace(simhash=to_hex(simhash(fingerprint_text(a))))


OLD = page(OLD_URL, "Mayor opens library", PUBLISHED + 600)
NEW = page(NEW_URL, "Mayor opens new central library", PUBLISHED + 7200)


def test_the_example_is_a_near_duplicate_pair_at_three_bits():
    assert (int(OLD.simhash, 16) ^ int(NEW.simhash, 16)).bit_count() == 3


def _run(client, prefix: str, articles) -> RedisGroupStore:
    store = RedisGroupStore(client, StoreConfig(prefix=prefix))
    for a in articles:
        store.assign_batch([a])
    return store


def _strip(state: dict, prefix: str) -> dict:
    return {k[len(prefix) :]: v for k, v in state.items() if k.startswith(prefix.encode())}


def test_reslugged_permalink_is_one_article_in_either_order(redis_server):
    client, _ = redis_server
    s1 = _run(client, "one", [OLD, NEW])
    s2 = _run(client, "two", [NEW, OLD])
    # identical keys and values under either prefix
    assert _strip(dump(client), "one") == _strip(dump(client), "two")

    keys = Keys("one")
    assert OLD.article_id < NEW.article_id or OLD.article_id > NEW.article_id  # two different ids
    # one article: the first-fetched URL's id, with the new title and URL
    assert nd_articles(client, keys) == {OLD.article_id: "c" + OLD.article_id}
    h = client.hgetall(keys.article(OLD.article_id))
    assert h[b"title"] == b"Mayor opens new central library"
    assert h[b"url"] == NEW_URL.encode()
    assert not client.exists(keys.article(NEW.article_id))
    assert nd_revisions(client, keys) == {NEW.article_id: OLD.article_id}
    assert s1.stored_id(NEW.article_id) == OLD.article_id == s2.stored_id(OLD.article_id)
    # a group of one article, counted once
    assert s1.cluster_count() == 1
    (c,) = s1.get_clusters(["c" + OLD.article_id])
    assert (c.article_count, c.representative_url, c.representative_title) == (
        1,
        NEW_URL,
        "Mayor opens new central library",
    )
    # both URLs (every spelling) resolve to the issued id
    for url in (OLD_URL, NEW_URL, NEW_URL.replace("https://www.", "http://").rstrip("/")):
        assert resolve_article_id(client, keys, url) == OLD.article_id
    # the crawler, fetching the old URL after the edit, lands the redirect target and stores the old URL as
    # its alias (record_aliases, NX): the old URL still resolves to the issued id through the revision
    assert record_aliases(client, keys, NEW.article_id, [OLD_URL], ttl_s=3600) == 1
    assert client.get(keys.url_alias(OLD.article_id)) == NEW.article_id.encode()
    assert resolve_article_id(client, keys, OLD_URL) == OLD.article_id
    # sinks keep exactly one element: the newest version, under the stored id
    stored = NEW._replace(article_id=OLD.article_id, aliases=[NEW.article_id])
    assert s1.resolve_revisions([OLD, NEW]) == [None, stored]
    assert resolve_revisions(client, Keys("two"), [NEW, OLD]) == [stored, None]


def test_replaying_a_version_changes_nothing(redis_server):
    client, _ = redis_server
    store = _run(client, "nf", [OLD, NEW])
    before = dump(client)
    results = store.assign_batch([NEW, OLD])
    assert [(r.new_article, r.stored_id, r.cluster_id) for r in results] == [
        (False, OLD.article_id, "c" + OLD.article_id)
    ] * 2
    assert dump(client) == before


def test_a_syndicated_copy_stays_a_second_article_of_the_group(redis_server):
    client, _ = redis_server
    copy = page(COPY_URL, "Mayor opens library", PUBLISHED + 900)
    assert (int(OLD.simhash, 16) ^ int(copy.simhash, 16)).bit_count() <= 3
    states = []
    for n, order in enumerate(itertools.permutations([OLD, NEW, copy])):
        prefix = f"p{n}"
        store = _run(client, prefix, order)
        states.append(_strip(dump(client), prefix))
        (c,) = store.top_clusters(5)
        # another outlet republishing the text is a copy; the re-slugged URL is not a third article
        assert c.article_count == 2
        assert c.source_domains == ["www.gazette.example.org", "www.wire-reprints.example.com"]
        assert store.stored_id(NEW.article_id) == OLD.article_id
    assert all(s == states[0] for s in states)


def test_same_outlet_at_another_publish_time_is_not_a_revision(redis_server):
    client, _ = redis_server
    later = page(NEW_URL, "Mayor opens new central library", PUBLISHED + 7200, published=PUBLISHED + 3600)
    store = _run(client, "nf", [OLD, later])
    assert store.stored_id(later.article_id) == later.article_id
    assert len(nd_articles(client, Keys("nf"))) == 2
    unknown = page(NEW_URL, "Mayor opens new central library", PUBLISHED + 7200, published=None)
    old_unknown = page(OLD_URL, "Mayor opens library", PUBLISHED + 600, published=None)
    store = _run(client, "x", [old_unknown, unknown])
    assert store.stored_id(unknown.article_id) == unknown.article_id


def _version(a: Article) -> Version:
    from newsflow.core.outlets import outlet

    return Version(a.article_id, outlet(a.url), a.publish_time, a.event_time, a.fetch_time)


def test_random_versions_and_orders_match_the_reference_rule(redis_server):
    """Versions of two outlets' articles in random arrival orders: the store's articles are the
    reference components (newsflow.core.revisions), and every order leaves the same state."""
    client, _ = redis_server
    rng = random.Random(7)
    words = BODY.split()
    arts = []
    for k in range(9):
        host = ("www.gazette.example.org", "news.other-paper.example.net")[k % 2]
        body = " ".join(words[: len(words) - (k % 3)])  # drops up to two trailing words: near-duplicates
        arts.append(
            page(
                f"https://{host}/city/story-{k}-b2210", f"Mayor opens library {k % 4}", PUBLISHED + 100.0 * k, text=body
            )
        )
    fps = {a.article_id: int(a.simhash, 16) for a in arts}
    sigs = {a.article_id: text_minhash(fingerprint_text(a)) for a in arts}

    def near(x: Version, y: Version) -> bool:
        i, j = x.article_id, y.article_id
        return near_duplicate(fps[i], fps[j], sigs[i], sigs[j])

    comps = revision_components([_version(a) for a in arts], near)
    expected_ids = {stored_id(c) for c in comps}
    expected_urls = {
        stored_id(c): next(a.url for a in arts if a.article_id == current_version(c).article_id) for c in comps
    }
    assert len(comps) < len(arts)  # the data has revisions
    states = []
    for n in range(6):
        order = arts[:]
        rng.shuffle(order)
        prefix = f"r{n}"
        size = rng.choice([1, 2, 9])
        store = RedisGroupStore(client, StoreConfig(prefix=prefix))
        for i in range(0, len(order), size):
            store.assign_batch(order[i : i + size])
        keys = Keys(prefix)
        stored = set(nd_articles(client, keys))
        assert stored == expected_ids
        for aid, url in expected_urls.items():
            assert client.hget(keys.article(aid), "url").decode() == url
        states.append(_strip(dump(client), prefix))
    assert all(s == states[0] for s in states)


def test_retention_removes_every_version(redis_server):
    client, _ = redis_server
    copy = page(COPY_URL, "Mayor opens library", PUBLISHED + 900)
    store = _run(client, "nf", [NEW, copy, OLD])
    keys = Keys("nf")
    records = [client.hgetall(k) for k in client.scan_iter(match=keys.article_record("*"))]
    assert len(records) == 3 and all(len(r[b"mh"]) == 512 and len(r[b"fp"]) == 16 for r in records)
    assert len(store) == 3
    assert client.exists(keys.article_versions(OLD.article_id))
    assert store.expire_before(PUBLISHED) == (0, 0)  # nothing older than the publish time
    assert store.expire_before(PUBLISHED + 1) == (1, 2)  # one group of two articles (three versions)
    assert client.keys("nf:*") == []
