"""Per-user interest vectors in the story-embedding space.

For user ``u`` at time ``now`` (UTC epoch seconds) with events on stories that have unit
embeddings ``e_s`` (128-dim float32, the streaming job's cluster embeddings)::

    v_u = Σ_clicks  d(t) · (1 + log1p(dwell_s / DWELL_SCALE_SECONDS)) · e_s
        − Σ_skips   d(t) · SKIP_WEIGHT · e_s
    d(t) = 2^(−(now − t) / HALF_LIFE_SECONDS)

and the result is L2-normalised (``None`` when it has no positive part or norm 0).

* a *click* is a ``click`` event; its dwell is the largest ``dwell_seconds`` of the user's ``dwell``
  events on that story (0 without one; capped at :data:`MAX_DWELL_SECONDS`), so a long read counts
  up to ``1 + log1p(600/30) ≈ 4`` times a bounce;
* a *skip* is an ``impression`` of a story the user never clicked (in the events given): a weak
  negative, weight :data:`SKIP_WEIGHT` = 0.1 per impression;
* half-life :data:`HALF_LIFE_DAYS` = 14 days: interests drift over weeks, while a single day's
  reading should not wipe them.

Events in the future of ``now`` count with weight 1 (no growth). Stories without an embedding are
ignored.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping

import numpy as np

from newsflow.schemas import Event

DIM = 128
HALF_LIFE_DAYS = 14.0
HALF_LIFE_SECONDS = HALF_LIFE_DAYS * 86400.0
SKIP_WEIGHT = 0.1
DWELL_SCALE_SECONDS = 30.0
MAX_DWELL_SECONDS = 600.0


def time_decay(event_time: float, now: float, half_life_seconds: float = HALF_LIFE_SECONDS) -> float:
    """``2^(−max(0, now − t)/half_life)``."""
    return 2.0 ** (-max(0.0, float(now) - float(event_time)) / half_life_seconds)


def interest_vector(
    events: Iterable[Event],
    embeddings: Mapping[str, np.ndarray],
    now: float,
    half_life_seconds: float = HALF_LIFE_SECONDS,
    skip_weight: float = SKIP_WEIGHT,
) -> np.ndarray | None:
    """One user's interest vector (formula in the module docstring).

    Args:
      events: the user's events (:class:`schemas.Event`; other users' events must be filtered out).
      embeddings: story id → embedding, shape (DIM,) (any float dtype; unit rows expected).
      now: UTC epoch seconds.
      half_life_seconds: decay half-life.
      skip_weight: weight of one skipped impression (≥ 0).

    Returns:
      float32 array of shape (DIM,) with L2 norm 1, or ``None`` without usable clicks.
    """
    clicks: list[tuple[str, float]] = []
    impressions: list[tuple[str, float]] = []
    dwell: dict[str, float] = defaultdict(float)
    for e in events:
        if e.type == "click":
            clicks.append((e.story_id, e.event_time))
        elif e.type == "impression":
            impressions.append((e.story_id, e.event_time))
        elif e.type == "dwell" and e.dwell_seconds is not None:
            dwell[e.story_id] = max(dwell[e.story_id], min(float(e.dwell_seconds), MAX_DWELL_SECONDS))
    clicked = {s for s, _ in clicks}
    dim = next((len(v) for v in embeddings.values()), DIM)
    pos = np.zeros(dim, dtype=np.float64)
    for story, t in clicks:
        emb = embeddings.get(story)
        if emb is not None:
            w = time_decay(t, now, half_life_seconds) * (1.0 + math.log1p(dwell.get(story, 0.0) / DWELL_SCALE_SECONDS))
            pos += w * np.asarray(emb, dtype=np.float64)
    if not np.any(pos):
        return None
    neg = np.zeros(dim, dtype=np.float64)
    for story, t in impressions:
        emb = embeddings.get(story)
        if story not in clicked and emb is not None:
            neg += skip_weight * time_decay(t, now, half_life_seconds) * np.asarray(emb, dtype=np.float64)
    v = pos - neg
    norm = float(np.linalg.norm(v))
    return (v / norm).astype(np.float32) if norm > 0 else None


def interest_vectors(
    events: Iterable[Event], embeddings: Mapping[str, np.ndarray], now: float, **kwargs
) -> dict[str, np.ndarray]:
    """``{user_id: vector}`` for every user with usable clicks (see :func:`interest_vector`)."""
    by_user: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        by_user[e.user_id].append(e)
    out = {}
    for user in sorted(by_user):
        v = interest_vector(by_user[user], embeddings, now, **kwargs)
        if v is not None:
            out[user] = v
    return out
