"""Tests for newsflow.core.simhash: fingerprints computed by hand from the documented
hash, a plain bit-loop reference, the PyPI ``simhash`` package (a test dependency) as a
reference tool, and cross-process determinism."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from newsflow.core.scripts import is_dense
from newsflow.core.simhash import (
    bands,
    feature_hash,
    from_hex,
    hamming,
    shingles,
    simhash,
    simhash_features,
    to_hex,
    tokenize,
)

REPO = Path(__file__).resolve().parents[2]
M64 = (1 << 64) - 1


# --- an independent, deliberately plain reference implementation of the spec ---


def ref_mix64(z: int) -> int:
    # splitmix64 finalizer, Vigna's splitmix64.c
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % (1 << 64)
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % (1 << 64)
    return z ^ (z >> 31)


def ref_word_hash(word: str) -> int:
    # polynomial over code points, base = 64-bit FNV prime, then mix64
    return ref_mix64(sum(ord(c) * 0x100000001B3**i for i, c in enumerate(word)) % (1 << 64))


def ref_feature_hash(feature: str) -> int:
    h = 0
    for word in feature.split(" "):
        h = ref_mix64(h ^ ref_word_hash(word))
    return h


def ref_tokens(text: str) -> list[str]:
    # Character loop (no regex): dense-script characters alone, other word characters in runs.
    tokens: list[str] = []
    run = ""
    for ch in unicodedata.normalize("NFKC", text).casefold():
        if is_dense(ch):
            if run:
                tokens.append(run)
                run = ""
            tokens.append(ch)
        elif ch.isalnum() or ch == "_":
            run += ch
        elif run:
            tokens.append(run)
            run = ""
    if run:
        tokens.append(run)
    return tokens


def ref_features(text: str) -> list[str]:
    tokens = ref_tokens(text)
    if len(tokens) < 3:
        return tokens
    return [tokens[i] + " " + tokens[i + 1] + " " + tokens[i + 2] for i in range(len(tokens) - 2)]


def ref_simhash(text: str) -> int:
    v = [0] * 64
    for feature in ref_features(text):
        h = ref_feature_hash(feature)
        for j in range(64):
            v[j] += 1 if (h >> j) & 1 else -1
    return sum(1 << j for j in range(64) if v[j] > 0)


def ref_popcount(x: int) -> int:
    return bin(x).count("1")


PARAGRAPH = (
    "The storm made landfall early on Tuesday near the mouth of the river, "
    "cutting power to more than two hundred thousand homes across the region. "
    "Emergency crews worked through the night to clear fallen trees from the main "
    "roads, and officials urged residents to stay indoors until the winds eased. "
    "Schools in four counties will remain closed for the rest of the week."
)


# --- the mixing function, against published splitmix64 outputs ---


def test_feature_mixing_matches_published_splitmix64_outputs():
    # splitmix64 seeded with 0 outputs mix64(k * 0x9E3779B97F4A7C15) for k = 1, 2, 3:
    # e220a8397b1dcdaf, 6e789e6aa1b965f4, 06c45d188009454f (Vigna, splitmix64.c).
    gamma = 0x9E3779B97F4A7C15
    expected = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    assert [ref_mix64((k * gamma) & M64) for k in (1, 2, 3)] == expected
    # A one-character word c has polynomial ord(c), so its word hash is mix64(ord(c))
    # and its unigram feature hash mix64(mix64(ord(c))).
    assert feature_hash("a") == ref_mix64(ref_mix64(97))
    for word in ["hello", "", "naïve", "東京", "x_y"]:
        assert feature_hash(word) == ref_mix64(ref_word_hash(word))


# --- fingerprints computed by hand from the documented formulas ---


def test_one_token_text_is_its_feature_hash():
    b = 0x100000001B3
    poly = (104 + 101 * b + 108 * b**2 + 108 * b**3 + 111 * b**4) % (1 << 64)  # "hello"
    assert simhash("Hello!") == ref_mix64(ref_mix64(poly))
    assert feature_hash("hello") == ref_mix64(ref_mix64(poly))


def test_two_token_text_is_and_of_the_two_unigram_hashes():
    # Two features of weight 1: bit j is set iff more than half (i.e. both) have it.
    h1 = ref_mix64(ref_word_hash("hello"))
    h2 = ref_mix64(ref_word_hash("world"))
    assert simhash("Hello, WORLD.") == h1 & h2


def test_three_distinct_shingles_give_bitwise_majority():
    a = ref_feature_hash("a b c")
    b = ref_feature_hash("b c d")
    c = ref_feature_hash("c d e")
    assert simhash("a b c d e") == (a & b) | (a & c) | (b & c)


def test_shingle_hash_chains_word_hashes():
    h = 0
    for word in ["storm", "hits", "coast"]:
        h = ref_mix64(h ^ ref_word_hash(word))
    assert feature_hash("storm hits coast") == h
    assert feature_hash("coast hits storm") != h


def test_repeated_shingles_are_weighted_by_count():
    # tokens a b c a b c -> shingles: "a b c" x2, "b c a", "c a b"; total weight 4,
    # a bit is set iff its weight of ones is > 2, i.e. "a b c" plus at least one other.
    abc, bca, cab = (ref_feature_hash(f) for f in ("a b c", "b c a", "c a b"))
    assert simhash("a b c a b c") == abc & (bca | cab)
    assert simhash_features(["a b c", "b c a", "c a b"], [2, 1, 1]) == abc & (bca | cab)


def test_empty_and_tokenless_texts_have_fingerprint_zero():
    assert simhash("") == 0
    assert simhash("!!! ... ---") == 0
    assert simhash_features([]) == 0
    assert [simhash(""), simhash("?")] == [0, 0]


# --- against the bit-loop reference and the PyPI package ---


def test_one_word_edit_distance_matches_reference():
    edited = PARAGRAPH.replace("four counties", "five counties")
    assert edited != PARAGRAPH
    ours = hamming(simhash(PARAGRAPH), simhash(edited))
    assert simhash(PARAGRAPH) == ref_simhash(PARAGRAPH)
    assert simhash(edited) == ref_simhash(edited)
    assert ours == ref_popcount(ref_simhash(PARAGRAPH) ^ ref_simhash(edited))
    # 3 of the 61 shingles differ. Expected distance is about 64 * angle / pi
    # (Charikar 2002) = 64 * arccos(58/61) / pi ~= 6.4 bits: a short text is not
    # within distance 3 after a one-word edit, only long ones are.
    assert 0 < ours < 20


def _pypi(text: str) -> int:
    """The PyPI package's fingerprint of ``text``'s weighted shingles, given the reference feature hash."""
    import simhash as pypi_simhash

    weighted = Counter(ref_features(text))
    if not weighted:
        return 0

    def hashfunc(b: bytes) -> bytes:
        return ref_feature_hash(b.decode("utf-8")).to_bytes(8, "big")

    return pypi_simhash.Simhash(list(weighted.items()), hashfunc=hashfunc).value


def test_matches_pypi_simhash_package_on_same_features_and_weights():
    texts = [PARAGRAPH, PARAGRAPH.upper(), "a b c a b c", "Breaking: quake hits city, 3 dead", "x y"]
    for text in texts:
        weighted = Counter(shingles(tokenize(text)))
        expected = _pypi(text)
        assert simhash(text) == expected
        assert simhash_features(list(weighted), list(weighted.values())) == expected


def test_every_feature_count_from_0_to_57_matches_pypi():
    # few distinct words, so bit counts tie often (ties give 0) and shingles repeat
    rng = random.Random(17)
    words = ["a", "b", "ab", "storm", "東", "x_y", "é", "9"]
    texts = [" ".join(rng.choice(words) for _ in range(n)) for n in range(0, 60) for _ in range(6)]
    assert len({len(shingles(tokenize(t))) for t in texts}) > 40  # many feature counts, odd and even
    assert [simhash(t) for t in texts] == [_pypi(t) for t in texts]


def test_every_ascii_character_matches_pypi():
    # every ASCII code point (controls, punctuation, "_", digits) in random mixes
    rng = random.Random(5)
    alphabet = [chr(c) for c in range(128)] + ["ab", "_", "x9"] * 20
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 160))) for _ in range(400)]
    texts += ["a " * 80, "a_" * 80, "\x00".join("abc") * 5, "é a b c", "a b c\u00a0d"]
    assert [simhash(t) for t in texts] == [_pypi(t) for t in texts]


def test_dense_text_matches_pypi():
    text = "".join(chr(0x4E00 + (i * 7919) % 2000) for i in range(160))
    assert len(shingles(tokenize(text))) == 158
    assert simhash(text) == _pypi(text)


WORDS = ["storm", "Storm", "power", "the", "a", "café", "CAFÉ", "ﬁne", "東京", "ß", "SS", "2024", "x_y"]
text_strategy = st.lists(
    st.tuples(st.sampled_from(WORDS), st.sampled_from([" ", ", ", ". ", "\n", " — ", "'"])),
    max_size=40,
).map(lambda parts: "".join(w + sep for w, sep in parts))


@settings(max_examples=60, deadline=None)
@given(st.lists(text_strategy, max_size=6))
def test_simhash_equals_bit_loop_reference(texts):
    assert [simhash(t) for t in texts] == [ref_simhash(t) for t in texts]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.text(max_size=60), max_size=5))
def test_any_unicode_text_matches_reference(texts):
    # Arbitrary code points (all scripts, combining marks, digits, controls):
    # the token regex must find exactly the reference's character-loop tokens.
    assert [simhash(t) for t in texts] == [ref_simhash(t) for t in texts]


def test_lone_surrogates():
    texts = ["ab\ud800cd", "end", "start of next", "\ud83d", "x"]
    assert [simhash(t) for t in texts] == [ref_simhash(t) for t in texts]


def test_counts_above_16_bits():
    # 70,000 copies of one shingle: every set bit is counted 70,000 > 65,535 times
    long_text = "a " * 70_002
    assert simhash(long_text) == ref_feature_hash("a a a")
    # Two shingles with 39,999 copies each (79,998 features in one text).
    alternating = " ".join(["p", "q"] * 40_000)  # shingles "p q p" and "q p q", 39,999 + 39,999
    hp, hq = ref_feature_hash("p q p"), ref_feature_hash("q p q")
    # equal weights: a bit is set iff both hashes have it
    assert simhash(alternating) == hp & hq


# --- normalization, tokens, shingles ---


def test_tokenize_normalizes_nfkc_and_casefold():
    assert tokenize("Hello, World! It's 2024 — naïve café") == [
        "hello",
        "world",
        "it",
        "s",
        "2024",
        "naïve",
        "café",
    ]
    assert tokenize("ＡＢＣ ﬁne") == ["abc", "fine"]  # fullwidth and ligature via NFKC
    assert tokenize("STRASSE Straße") == ["strasse", "strasse"]  # casefold ß -> ss
    assert tokenize("cafe\u0301") == ["café"]  # NFKC composes e + combining acute
    with pytest.raises(TypeError):
        tokenize(b"bytes")


def test_shingles():
    assert shingles(["a", "b", "c", "d"]) == ["a b c", "b c d"]
    assert shingles(["a", "b"]) == ["a", "b"]
    assert shingles([]) == []
    assert shingles(["a", "b", "c"], k=2) == ["a b", "b c"]
    assert shingles(["a", "b", "c", "d", "e"], k=4) == ["a b c d", "b c d e"]
    with pytest.raises(ValueError):
        shingles(["a"], k=0)


# --- simhash_features argument handling ---


def test_simhash_features_weights():
    assert simhash_features(["x", "x", "y"]) == simhash_features(["x", "y"], [2, 1])
    assert simhash_features(["x", "y"], [0.5, 0.25]) == simhash_features(["x", "y"], [2, 1])
    hx, hy = ref_feature_hash("x"), ref_feature_hash("y")
    assert simhash_features(["x", "y"], [3, 1]) == hx  # 3 > 4/2 for x's bits, 1 < 2 alone
    assert simhash_features(["x", "y"], [0, 0]) == 0
    assert simhash_features(["x", "y"], (w for w in [1, 1])) == hx & hy
    with pytest.raises(ValueError, match="2 features but 3 weights"):
        simhash_features(["x", "y"], [1, 2, 3])
    with pytest.raises(ValueError):
        simhash_features(["x"], [-1])
    with pytest.raises(ValueError):
        simhash_features(["x"], [float("nan")])
    with pytest.raises(TypeError):
        simhash_features(["x", 3])
    with pytest.raises(TypeError):
        simhash_features("a string, not a list")
    with pytest.raises(TypeError):
        simhash(None)


# --- hex, hamming, bands ---


def test_hex_round_trip_and_errors():
    assert to_hex(0) == "0000000000000000"
    assert to_hex(255) == "00000000000000ff"
    assert to_hex(M64) == "ffffffffffffffff"
    assert to_hex(np.uint64(M64)) == "ffffffffffffffff"
    assert from_hex("00000000000000FF") == 255
    for fp in [0, 1, 0x0123456789ABCDEF, M64, simhash(PARAGRAPH)]:
        assert from_hex(to_hex(fp)) == fp
    for bad in [
        "",
        "ff",
        "0x0123456789abcd",
        "0123456789abcdeg",
        " 0123456789abcde",
        "0123456789abcdef0",
        "+123456789abcdef",
        "0123_56789abcdef",
        None,
        12,
    ]:
        with pytest.raises(ValueError):
            from_hex(bad)
    with pytest.raises(ValueError):
        to_hex(-1)
    with pytest.raises(ValueError):
        to_hex(1 << 64)
    with pytest.raises(TypeError):
        to_hex(1.0)


def test_hamming():
    assert hamming(0, M64) == 64
    assert hamming(0b1011, 0b0110) == 3
    assert hamming(12345, 12345) == 0
    assert hamming(1 << 63, 1) == 2
    with pytest.raises(ValueError):
        hamming(-1, 0)
    with pytest.raises(ValueError):
        hamming(0, 1 << 64)


def test_bands_count_from_least_significant_bit():
    assert bands(0x0123456789ABCDEF) == (0xCDEF, 0x89AB, 0x4567, 0x0123)
    assert bands(0x0123456789ABCDEF, n_bands=8, band_bits=8) == (
        0xEF,
        0xCD,
        0xAB,
        0x89,
        0x67,
        0x45,
        0x23,
        0x01,
    )
    assert bands(0x0123456789ABCDEF, n_bands=2, band_bits=32) == (0x89ABCDEF, 0x01234567)
    assert bands(0) == (0, 0, 0, 0)
    with pytest.raises(ValueError):
        bands(1, n_bands=4, band_bits=8)
    with pytest.raises(ValueError):
        bands(1 << 64)


# --- determinism across processes ---


def test_fingerprints_are_identical_in_other_processes():
    texts = [PARAGRAPH, "Hello, WORLD.", "a b c a b c", "東京で地震 Tokyo quake", ""]
    expected = [to_hex(simhash(t)) for t in texts]
    code = (
        "import sys, json\n"
        "from newsflow.core.simhash import simhash, to_hex\n"
        "texts = json.loads(sys.stdin.read())\n"
        "print(json.dumps([to_hex(simhash(t)) for t in texts]))\n"
    )
    import json

    for seed in ["0", "12345"]:  # different str-hash salts must not matter
        env = dict(os.environ, PYTHONHASHSEED=seed, PYTHONPATH=str(REPO))
        out = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(texts),
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            check=True,
            timeout=60,
        ).stdout
        assert json.loads(out) == expected


# --- hash quality (deterministic inputs, so these are exact regression checks) ---


def test_feature_hash_bits_are_balanced_and_distinct_on_structured_words():
    # Sequential, highly structured words are the hard case for a polynomial hash.
    words = [f"item{i}" for i in range(20_000)] + [f"{i:05d}" for i in range(20_000)]
    hashes = np.array([feature_hash(w) for w in words], dtype=np.uint64)
    assert len(set(hashes.tolist())) == len(words)
    freq = ((hashes[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).mean(axis=0)
    # binomial std at n = 40,000 is 0.0025; allow 8 std
    assert freq.min() > 0.48 and freq.max() < 0.52
    assert [ref_feature_hash(w) for w in words[:50]] == hashes[:50].tolist()


def test_unrelated_texts_are_about_32_bits_apart():
    rng = np.random.default_rng(1)
    vocab = [f"w{i}" for i in range(5000)]
    texts = [" ".join(rng.choice(vocab, size=80)) for _ in range(200)]
    fps = np.array([simhash(t) for t in texts], dtype=np.uint64)
    dist = np.bitwise_count(fps[:, None] ^ fps[None, :])[np.triu_indices(len(fps), 1)]
    assert 31.0 < dist.mean() < 33.0
    assert dist.min() > 3  # no false near-duplicates among 19,900 unrelated pairs


# --- scripts written without spaces (issue 11, item 7) ---

BUS_JA = (
    "北浜市、市営バス路線を再編へ\n北浜市は、来年4月から市営バスの路線を大幅に再編すると発表した。"
    "利用者の少ない路線を統合し、駅と病院を結ぶ便を増やす。"
    "市の担当者は「高齢者が通院しやすい交通網にしたい」と話した。"
)


def test_japanese_copies_differing_in_one_verb_are_near_duplicates():
    other = BUS_JA.replace("と話した", "と述べた")
    # With \w+ words this text is 9 clause-long tokens and the copies are far apart.
    words = [re.findall(r"\w+", t) for t in (BUS_JA, other)]
    assert len(words[0]) == 9
    assert hamming(simhash_features(shingles(words[0])), simhash_features(shingles(words[1]))) > 3
    assert hamming(simhash(BUS_JA), simhash(other)) <= 3


def test_dense_scripts_tokenize_into_characters():
    assert tokenize("東京 2024") == ["東", "京", "2024"]
    assert tokenize("NHKニュース") == ["nhk", "ニ", "ュ", "ー", "ス"]
    thai = "ภาษาไทย"
    assert tokenize(thai) == list(thai)  # letters and vowel marks, one token each
    assert tokenize("Hello, World!") == ["hello", "world"]  # spaced scripts unchanged


def test_unrelated_japanese_texts_are_not_near_duplicates():
    other = "東京都で大雪、交通機関に乱れ\n関東地方では朝から雪が降り続き、都内の鉄道各線で運休や遅れが出た。"
    assert hamming(simhash(BUS_JA), simhash(other)) > 10
