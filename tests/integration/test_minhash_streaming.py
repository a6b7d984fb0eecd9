"""The MinHash re-check of borderline pairs inside the streaming near-duplicate step (issue 11 item 4),
against a real embedded Redis: the Lua script's Jaccard is datasketch's, pairs join in either arrival
order, and the re-check can be turned off."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from newsflow.core.articles import fingerprint_text
from newsflow.core.minhash_check import confirm, hamming_to_all, minhash_many, shares_band
from newsflow.core.simhash import simhash, to_hex
from newsflow.storage.groups import RedisGroupStore, StoreConfig
from tests.helpers import HEADLINES, art, dump

NEIL = (
    "Neil Young to Start Kickstarter-Funded Music Service, Player",
    "Neil Young to Start Kickstarter-Funded Music Service, Player (1)",
)


def _headline(aid: str, title: str, domain: str, t: float):
    a = art(aid, 0, domain=domain, t=t, title=title)
    return a._replace(simhash=to_hex(simhash(fingerprint_text(a))))


def _borderline_pairs(n: int = 3000) -> list[tuple[str, str]]:
    """Bundled headlines 4-5 bits apart that share an LSH band (what the step's band lookup finds)."""
    with gzip.open(HEADLINES, "rb") as f:
        titles = [json.loads(ln)["title"] for _, ln in zip(range(n), f, strict=False)]
    fps = np.array([simhash(t) for t in titles], dtype=np.uint64)
    pairs = []
    for i in range(1, len(titles)):
        d = hamming_to_all(int(fps[i]), fps[:i])
        for j in np.flatnonzero((d >= 4) & (d <= 5)).tolist():
            if shares_band(int(fps[i]), int(fps[j])) and titles[i] != titles[j]:
                pairs.append((titles[j], titles[i]))
    return pairs


def test_borderline_wire_copies_join_in_either_order_and_not_without_the_recheck(redis_server):
    client, _ = redis_server
    a = _headline("a1", NEIL[0], "news-one.example.com", 1000.0)
    b = _headline("b2", NEIL[1], "news-two.example.net", 1060.0)
    assert (int(a.simhash, 16) ^ int(b.simhash, 16)).bit_count() == 5
    states = []
    for prefix, order in (("ab", [a, b]), ("ba", [b, a])):
        store = RedisGroupStore(client, StoreConfig(prefix=prefix))
        for x in order:
            store.assign_batch([x])
        assert store.cluster_of("a1") == store.cluster_of("b2") == "ca1"
        states.append({k[len(prefix) :]: v for k, v in dump(client).items() if k.startswith(prefix.encode())})
    assert states[0] == states[1]
    off = RedisGroupStore(client, StoreConfig(prefix="off", borderline_jaccard=None))
    off.assign_batch([a, b])
    assert off.cluster_of("a1") == "ca1" and off.cluster_of("b2") == "cb2"
    records = [client.hgetall(key) for key in client.scan_iter(match=off.keys.article_record("*"))]
    assert len(records) == 2 and all(set(r) == {b"fp"} for r in records)  # no signature when the re-check is off


def test_the_scripts_jaccard_is_datasketchs_on_real_borderline_pairs(redis_server):
    """At a threshold equal to datasketch's estimate the pair joins; one slot (1/128) above it, it does not."""
    client, _ = redis_server
    pairs = _borderline_pairs()
    assert len(pairs) >= 5
    for n, (x, y) in enumerate(pairs):
        sx, sy = minhash_many([x, y])
        j = confirm(sx, sy)[1]
        for k, (threshold, joined) in enumerate(((j, True), (j + 1 / 128, False))):
            if threshold > 1:
                continue
            store = RedisGroupStore(client, StoreConfig(prefix=f"p{n}-{k}", borderline_jaccard=threshold))
            store.assign_batch([_headline("x", x, "one.example.com", 1.0), _headline("y", y, "two.example.com", 2.0)])
            assert (store.cluster_of("y") == "cx") is joined, (x, y, j)


def test_invalid_threshold_is_refused():
    with pytest.raises(ValueError, match="borderline_jaccard"):
        StoreConfig(borderline_jaccard=1.5)
    with pytest.raises(ValueError, match="borderline_max_distance"):
        StoreConfig(borderline_max_distance=2)
