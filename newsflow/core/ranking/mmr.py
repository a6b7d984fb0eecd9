"""Greedy Maximal Marginal Relevance (MMR) with a per-source cap.

Source: J. Carbonell and J. Goldstein, "The use of MMR, diversity-based reranking for
reordering documents and producing summaries", SIGIR 1998. Each step picks the
candidate ``i`` that maximizes::

    α · relevance[i] − (1 − α) · max_{j ∈ picked} cos(e_i, e_j)

(the max over an empty set is 0, so the first pick is the most relevant candidate).
After a pick, the source cap applies: once ``cap`` picks share a representative source
domain, every other candidate from that domain is removed. Ties go to the lower index,
so callers should pass candidates in a stable order (e.g. by descending relevance).
Feeds pass outlets (:func:`newsflow.core.outlets.outlet`, the registrable domain) as sources, so
``uk.reuters.com`` and ``in.reuters.com`` share one cap.

:func:`mmr_select` is the vectorized numpy version (one ``(n, d) @ (d,)`` product per
pick, O(k·n·d)); :func:`mmr_select_reference` is the straightforward pure-Python version
kept as the benchmark baseline and as an executable specification (same picks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

DEFAULT_ALPHA = 0.7
MIN_ALPHA = 0.5
MAX_ALPHA = 0.9
DEFAULT_SOURCE_CAP = 2


def _check_alpha(alpha: float) -> float:
    alpha = float(alpha)
    if not (MIN_ALPHA <= alpha <= MAX_ALPHA):
        raise ValueError(f"alpha must be in [{MIN_ALPHA}, {MAX_ALPHA}], got {alpha!r}")
    return alpha


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """L2-normalizes each row; all-zero rows stay zero (cosine 0 to everything).

    Args:
      vectors: shape (n, d), any float dtype.

    Returns:
      float32 array of shape (n, d).
    """
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2:
        raise ValueError(f"vectors must be 2-D (n, d), got shape {v.shape}")
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)


def mmr_select(
    relevance: np.ndarray,
    embeddings: np.ndarray,
    sources: Sequence[str] | np.ndarray,
    k: int = 20,
    alpha: float = DEFAULT_ALPHA,
    source_cap: int | None = DEFAULT_SOURCE_CAP,
    normalized: bool = False,
) -> list[int]:
    """Greedy MMR over ``n`` candidates, vectorized with numpy.

    Args:
      relevance: shape (n,), float; higher is better (scores normalized to [0, 1] are
        on the same scale as cosine similarity).
      embeddings: shape (n, d), float; cosine similarity is used, so rows need not be
        unit length unless ``normalized`` is True.
      sources: length n; the representative source domain of each candidate.
      k: number of picks wanted (fewer are returned when candidates run out).
      alpha: relevance weight α in [0.5, 0.9]; default 0.7.
      source_cap: at most this many picks per source domain; ``None`` disables the cap.
      normalized: True when ``embeddings`` rows are already unit length (or zero).

    Returns:
      Indices of the picked candidates, in pick order (``list[int]``, length ≤ k).

    Raises:
      ValueError: alpha out of range, shapes disagree, or k/source_cap < 0.
    """
    alpha = _check_alpha(alpha)
    rel = np.asarray(relevance, dtype=np.float64)
    n = rel.shape[0]
    emb = np.asarray(embeddings, dtype=np.float32) if normalized else normalize_rows(embeddings)
    if emb.ndim != 2 or emb.shape[0] != n or len(sources) != n:
        raise ValueError(f"relevance ({n},), embeddings {emb.shape} and sources ({len(sources)},) disagree")
    if k < 0 or (source_cap is not None and source_cap < 0):
        raise ValueError("k and source_cap must be >= 0")
    if n == 0 or k == 0:
        return []
    # Encode source domains as small ints so the cap is one vectorized comparison.
    _, src_codes = np.unique(np.asarray(sources, dtype=object).astype(str), return_inverse=True)
    base = alpha * rel
    penalty = 1.0 - alpha
    max_sim = np.zeros(n, dtype=np.float64)
    available = np.ones(n, dtype=bool)
    counts: dict[int, int] = {}
    picks: list[int] = []
    for _ in range(min(k, n)):
        gain = base - penalty * max_sim
        gain[~available] = -np.inf
        i = int(np.argmax(gain))
        if not available[i]:
            break
        picks.append(i)
        available[i] = False
        sims = emb @ emb[i]
        if len(picks) == 1:
            max_sim[:] = sims  # max over one pick (may be negative), not max(0, sims)
        else:
            np.maximum(max_sim, sims, out=max_sim)
        if source_cap is not None:
            code = int(src_codes[i])
            counts[code] = counts.get(code, 0) + 1
            if counts[code] >= source_cap:
                available[src_codes == code] = False
        if not available.any():
            break
    return picks


def mmr_select_reference(
    relevance: Sequence[float],
    embeddings: Sequence[Sequence[float]],
    sources: Sequence[str],
    k: int = 20,
    alpha: float = DEFAULT_ALPHA,
    source_cap: int | None = DEFAULT_SOURCE_CAP,
) -> list[int]:
    """Straightforward pure-Python greedy MMR (lists and loops); same contract as :func:`mmr_select`.

    Keeps each candidate's max cosine to the picks in a list and computes cosines from
    the raw vectors with Python loops. Used as the benchmark baseline and to cross-check
    :func:`mmr_select`.
    """
    alpha = _check_alpha(alpha)
    n = len(relevance)

    def cosine(a: Sequence[float], b: Sequence[float]) -> float:
        dot = sum(x * y for x, y in zip(a, b, strict=False))
        na = math.sqrt(sum(x * x for x in a))
        nb = math.sqrt(sum(y * y for y in b))
        if na == 0.0 or nb == 0.0:
            return 0.0
        return dot / (na * nb)

    picks: list[int] = []
    removed: set[int] = set()
    per_source: dict[str, int] = {}
    max_sim: list[float | None] = [None] * n  # max cosine to the picks so far (None: no picks)
    while len(picks) < k:
        best, best_gain = -1, -math.inf
        for i in range(n):
            if i in removed:
                continue
            sim = 0.0 if max_sim[i] is None else max_sim[i]
            gain = alpha * relevance[i] - (1.0 - alpha) * sim
            if gain > best_gain:
                best, best_gain = i, gain
        if best < 0:
            break
        picks.append(best)
        removed.add(best)
        for i in range(n):
            c = cosine(embeddings[i], embeddings[best])
            if max_sim[i] is None or c > max_sim[i]:
                max_sim[i] = c
        if source_cap is not None:
            src = sources[best]
            per_source[src] = per_source.get(src, 0) + 1
            if per_source[src] >= source_cap:
                removed.update(i for i in range(n) if sources[i] == src)
    return picks
