"""MinHash re-check of borderline SimHash pairs (issue 11, item 4)."""

from __future__ import annotations

import numpy as np

from newsflow.cli.evaluation.clustering import evaluate, near_duplicate_labels
from newsflow.core.minhash_check import (
    JACCARD_THRESHOLD,
    confirm,
    features,
    hamming_to_all,
    is_borderline,
    minhash_many,
    text_minhash,
)
from newsflow.core.simhash import hamming, simhash

# Real borderline pairs from the news-aggregator set (same gold story, copies of one wire report).
NEIL = (
    "Neil Young to Start Kickstarter-Funded Music Service, Player",
    "Neil Young to Start Kickstarter-Funded Music Service, Player (1)",
)
ECB = (
    "ECB to reveal bad loan hurdles for euro zone bank test",
    "ECB to reveal bad loan hurdles for euro zone bank test - sources",
)
OTHER = "Search for missing Malaysia Airlines jet widens over the South China Sea"


def _exact_jaccard(a: str, b: str) -> float:
    fa, fb = features(a), features(b)
    return len(fa & fb) / len(fa | fb)


def test_wire_copies_sit_at_borderline_distances():
    assert hamming(simhash(NEIL[0]), simhash(NEIL[1])) == 5
    assert hamming(simhash(ECB[0]), simhash(ECB[1])) == 4
    assert is_borderline(4) and is_borderline(5) and not is_borderline(3) and not is_borderline(6)


def test_confirm_estimates_the_shingle_jaccard():
    for a, b in (NEIL, ECB):
        ok, j = confirm(text_minhash(a), text_minhash(b))
        exact = _exact_jaccard(a, b)  # Neil Young: 8 of 9 shingles shared; ECB: 9 of 10
        assert abs(j - exact) < 0.15 and ok and exact >= JACCARD_THRESHOLD
    ok, j = confirm(text_minhash(NEIL[0]), text_minhash(OTHER))
    assert not ok and j < 0.1 and _exact_jaccard(NEIL[0], OTHER) == 0.0


def test_minhash_many_equals_one_by_one():
    many = minhash_many([NEIL[0], OTHER])
    assert np.array_equal(many[0].hashvalues, text_minhash(NEIL[0]).hashvalues)
    assert np.array_equal(many[1].hashvalues, text_minhash(OTHER).hashvalues)


def test_hamming_to_all_matches_python_popcount():
    fps = np.array([simhash(t) for t in (NEIL[0], NEIL[1], ECB[0], OTHER, "")], dtype=np.uint64)
    fp = simhash(ECB[1])
    assert hamming_to_all(fp, fps).tolist() == [hamming(fp, int(x)) for x in fps]


def test_near_duplicate_labels_with_and_without_recheck():
    titles = [NEIL[0], OTHER, NEIL[1]]
    ids = ["1", "2", "3"]
    stats: dict = {}
    assert near_duplicate_labels(titles, ids, stats=stats) == ["c1", "c2", "c1"]
    assert stats == {"borderline_checked": 1, "borderline_confirmed": 1}
    assert near_duplicate_labels(titles, ids, minhash_recheck=False) == ["c1", "c2", "c3"]


def test_eval_near_duplicate_reports_both(tmp_path):
    p = tmp_path / "s.csv"
    rows = [("1", NEIL[0], "s1", 1394470501000), ("2", OTHER, "s2", 1394470561000), ("3", NEIL[1], "s1", 1394470621000)]
    lines = ["ID,TITLE,URL,PUBLISHER,CATEGORY,STORY,HOSTNAME,TIMESTAMP"]
    lines += [f'{i},"{t}",http://x{i}.com/a,X,b,{s},x{i}.com,{ts}' for i, t, s, ts in rows]
    p.write_text("\n".join(lines) + "\n")
    out = evaluate(str(p), level="near-duplicate", baseline=False)
    # the streaming job's step (RedisGroupStore) joins the borderline wire copies only with the re-check
    assert (out["clusters"], out["precision"], out["recall"]) == (2, 1.0, 1.0)
    assert out["without_minhash"] == {"clusters": 3, "precision": 0.0, "recall": 0.0, "f1": 0.0}
    off = out["offline_all_pairs"]
    assert (off["clusters"], off["precision"], off["borderline_checked"], off["borderline_confirmed"]) == (2, 1.0, 1, 1)


def test_stored_signature_is_the_datasketch_signature():
    from newsflow.core.minhash_check import signature_hex, text_signature_hex

    for text in (NEIL[0], NEIL[1], ECB[0], OTHER):
        sig = text_signature_hex(text)
        assert sig == signature_hex(text_minhash(text)) and len(sig) == 8 * 128
        slots = [int(sig[8 * i : 8 * i + 8], 16) for i in range(128)]
        assert slots == [int(x) for x in text_minhash(text).hashvalues]
    assert text_signature_hex("") == text_signature_hex("!!! ...") == ""  # no shingles: no signature
