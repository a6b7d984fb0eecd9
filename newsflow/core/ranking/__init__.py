"""Ranking: freshness decay, candidate pools, personalization, greedy MMR, feed assembly.

Pure Python/numpy; Redis access goes through :class:`newsflow.storage.ranking.RankingStore`
(the key layout is documented there). Modules:

* :mod:`~newsflow.core.ranking.decay` — ``authority × e^(−λ·age_hours)`` and the λ classes;
* :mod:`~newsflow.core.ranking.mmr` — vectorized greedy MMR with a per-source cap;
* :mod:`~newsflow.core.ranking.personalize` — the relevance blend, cold start, follows/blocks;
* :mod:`~newsflow.core.ranking.feeds` — pools and feed documents (used by the feed-building job);
* :mod:`~newsflow.core.ranking.rerank` — the light on-request re-rank (used by ``serving``);
* :mod:`~newsflow.storage.events` — reader events: validation, stream, Parquet flush;
* :mod:`~newsflow.storage.priority` — the crawler's priority re-crawl hook writer.
"""

from newsflow.core.ranking.decay import (
    LAMBDA_BREAKING,
    LAMBDA_DEFAULT,
    LAMBDA_EVERGREEN,
    decay_score,
    decay_scores,
    is_breaking,
    lambda_for,
)
from newsflow.core.ranking.mmr import mmr_select, mmr_select_reference

__all__ = [
    "LAMBDA_BREAKING",
    "LAMBDA_DEFAULT",
    "LAMBDA_EVERGREEN",
    "decay_score",
    "decay_scores",
    "is_breaking",
    "lambda_for",
    "mmr_select",
    "mmr_select_reference",
]
