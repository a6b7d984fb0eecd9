"""The serving form of a personal feed (newsflow.storage.feed_page) against the parse-and-rerank path it
replaces: for random feeds, blocks, breaking sets, page sizes and caps the page body is the same bytes as
the compact JSON of ``rerank`` over the parsed stored document."""

import json
import random

import pytest

from newsflow.core.ranking.rerank import injected_item, rerank
from newsflow.schemas import UserProfile
from newsflow.serving.http_cache import json_bytes
from newsflow.storage.feed_page import (
    compact_json,
    decode_feed_page,
    encode_feed_page,
    page_body,
    page_items,
    select,
    stored_doc_json,
)

HOSTS = ["a.com", "uk.reuters.com", "in.reuters.com", "reuters.com", "b.co.uk", "news.b.co.uk", "c.de", "", "d.org"]
TOPICS = ["World", "business", "Tech", "sports", "obituary", "Politik", "santé"]


def _item(rng: random.Random, i: int) -> dict:
    return {
        "story_id": f"s{i}",
        "title": rng.choice(["Storm\nhits", "Zürich «vote»", 'quote " and \\ slash', "\u2028line sep", "plain"]),
        "url": f"https://x.example/{i}",
        "domain": rng.choice(HOSTS),
        "topics": rng.sample(TOPICS, rng.randint(0, 2)),
        "languages": ["en"],
        "article_count": rng.randint(1, 50),
        "earliest_time": 1.7e9 - rng.random() * 1e5,
        "authority": rng.random(),
        "score": rng.random(),
        "relevance": rng.random() * 1.2,
        "breaking": rng.random() < 0.1,
        "why": {"interest": round(rng.random(), 4), "model": "default", "versions": {}, "top": "freshness"},
    }


def _case(seed: int):
    rng = random.Random(seed)
    n = rng.randint(0, 60)
    gen = 1.7e9 + rng.choice([0.0, 0.5, 1e-3])
    doc = {
        "kind": "user",
        "name": "u",
        "generated_at": gen,
        "alpha": 0.7,
        "stories": [_item(rng, i) for i in range(n)],
    }
    if rng.random() < 0.8:
        doc["edition"] = rng.choice(["en", "global", "de"])
    breaking = []
    for j in range(rng.randint(0, 6)):
        sid = f"s{rng.randint(0, 70)}" if rng.random() < 0.5 else f"b{j}"
        breaking.append((gen + rng.choice([-60.0, 0.0, 30.0, 120.0 + j]), dict(_item(rng, 0), story_id=sid)))
    profile = UserProfile(
        "u",
        block_topics=frozenset(t.lower() for t in rng.sample(TOPICS, rng.randint(0, 2))),
        block_sources=frozenset(rng.sample(["a.com", "reuters.com", "b.co.uk"], rng.randint(0, 2))),
    )
    return doc, breaking, profile, rng.randint(1, 100), rng.randint(1, 3)


def _reference(doc, breaking, profile, k, cap) -> bytes:
    """Today's request path: parse the stored document, rerank, serialize the page."""
    parsed = json.loads(stored_doc_json(doc))
    gen = float(parsed.get("generated_at") or 0.0)
    items = rerank(parsed.get("stories", []), gen, breaking, profile, k=k, source_cap=cap)
    payload = {"user": "u", "edition": "en", "generated_at": gen, "stale": False, "count": len(items), "stories": items}
    payload["next_cursor"] = None  # one page: page_body without a cursor
    return json_bytes(payload)


@pytest.mark.parametrize("seed", range(300))
def test_the_page_equals_rerank_of_the_parsed_document(seed):
    doc, breaking, profile, k, cap = _case(seed)
    page = decode_feed_page(encode_feed_page(doc))
    assert page.edition == doc.get("edition")
    picks = select(page, breaking, profile, k=k, source_cap=cap)
    body = page_body("u", "en", page.generated_at, page_items(page, picks))
    assert body == _reference(doc, breaking, profile, k, cap)


@pytest.mark.parametrize("seed", range(0, 300, 7))
def test_injected_items_serialized_once_are_the_same_bytes(seed):
    doc, breaking, profile, k, cap = _case(seed)
    page = decode_feed_page(encode_feed_page(doc))
    picks = select(page, breaking, profile, k=k, source_cap=cap)
    # one encoding per story, as the API keeps per breaking set (a story listed twice: its newest entry,
    # the one select injects)
    newest = {}
    for _, it in sorted(breaking, key=lambda p: (-p[0], p[1]["story_id"])):
        newest.setdefault(it["story_id"], it)
    encoded = {sid: compact_json(injected_item(it)) for sid, it in newest.items()}
    assert page_items(page, picks, encoded) == page_items(page, picks)


def test_blocks_cap_and_injection_by_hand():
    items = [
        {"story_id": "s1", "domain": "uk.reuters.com", "topics": ["World"]},
        {"story_id": "s2", "domain": "in.reuters.com", "topics": ["Tech"]},
        {"story_id": "s3", "domain": "reuters.com", "topics": []},
        {"story_id": "s4", "domain": "a.com", "topics": ["Sports"]},
    ]
    doc = {"generated_at": 100.0, "stories": items}
    page = decode_feed_page(encode_feed_page(doc))
    assert page.outlets == ["reuters.com"] * 3 + ["a.com"] and page.topics[3] == ["sports"]
    brk = [(150.0, {"story_id": "b1", "domain": "b.com", "topics": []}), (50.0, {"story_id": "b2", "domain": "c.com"})]
    picks = select(page, brk, UserProfile("u", block_topics=frozenset({"sports"})), k=10, source_cap=2)
    # b1 is newer than the feed (injected), b2 older; reuters.com capped at 2; s4's topic blocked
    assert picks[0] == {"story_id": "b1", "domain": "b.com", "topics": [], "breaking": True, "injected": True}
    assert picks[1:] == [0, 1]
    assert select(page, [], UserProfile("u"), k=1) == [0]


@pytest.mark.parametrize(
    "raw",
    [b"not json", b'{"v": 99}', b'{"v":1,"generated_at":1,"edition":null,"ids":["a"],"outlets":["a"],"topics":[[]]}'],
)
def test_a_corrupt_serving_form_is_a_value_error(raw):
    with pytest.raises(ValueError):
        decode_feed_page(raw)
