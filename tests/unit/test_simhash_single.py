"""The single-text path of newsflow.core.simhash (word-hash cache, bit-sliced majority counters)
against the numpy batch path and the PyPI ``simhash`` package given our feature hash."""

from __future__ import annotations

import random
from collections import Counter

import simhash as pypi_simhash

import newsflow.core.simhash as module
from newsflow.core.simhash import feature_hash, shingles, simhash, simhash_many, tokenize


def _pypi(text: str) -> int:
    feats = Counter(shingles(tokenize(text)))
    if not feats:
        return 0
    return pypi_simhash.Simhash(
        list(feats.items()), hashfunc=lambda b: feature_hash(b.decode("utf-8")).to_bytes(8, "big")
    ).value


def _texts() -> list[str]:
    # few distinct words, so bit counts tie often (ties give 0) and shingles repeat
    rng = random.Random(17)
    words = ["a", "b", "ab", "storm", "東", "x_y", "é", "9"]
    return [" ".join(rng.choice(words) for _ in range(n)) for n in range(0, 60) for _ in range(6)]


def test_every_feature_count_from_0_to_57_equals_batch_path_and_pypi():
    texts = [t for t in _texts() if len(module.normalize(t)) <= module._SMALL_TEXT_CHARS]
    assert len({len(shingles(tokenize(t))) for t in texts}) > 40  # many feature counts, odd and even
    batch = [int(x) for x in simhash_many(texts)]
    assert [simhash(t) for t in texts] == batch
    assert [_pypi(t) for t in texts] == batch


def test_word_cache_cold_warm_and_full_give_the_same_fingerprints():
    texts = _texts()
    module._WORD_CACHE.clear()
    cold = [simhash(t) for t in texts]
    warm = [simhash(t) for t in texts]
    saved = module._WORD_CACHE_MAX
    try:
        module._WORD_CACHE_MAX = 3  # cleared again and again while hashing
        module._WORD_CACHE.clear()
        tiny = [simhash(t) for t in texts]
        assert len(module._WORD_CACHE) <= 3
    finally:
        module._WORD_CACHE_MAX = saved
    assert cold == warm == tiny


def test_ascii_fast_path_tokens_equal_the_regex_on_every_ascii_character():
    # every ASCII code point (controls, punctuation, "_", digits) in random mixes: the translate/split
    # tokens of the ASCII path and the token regex give the same fingerprints, also at 158 features
    rng = random.Random(5)
    alphabet = [chr(c) for c in range(128)] + ["ab", "_", "x9"] * 20
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 160))) for _ in range(400)]
    texts += ["a " * 80, "a_" * 80, "\x00".join("abc") * 5, "é a b c", "a b c\u00a0d"]
    texts = [t for t in texts if len(module.normalize(t)) <= module._SMALL_TEXT_CHARS]
    assert sum(t.isascii() for t in texts) > 300
    assert [simhash(t) for t in texts] == [int(x) for x in simhash_many(texts)]


def test_dense_text_at_the_length_limit_has_158_features_and_matches():
    text = "".join(chr(0x4E00 + (i * 7919) % 2000) for i in range(module._SMALL_TEXT_CHARS))
    assert len(shingles(tokenize(text))) == 158
    assert simhash(text) == int(simhash_many([text])[0]) == _pypi(text)
