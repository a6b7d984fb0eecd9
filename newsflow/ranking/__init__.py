"""Ranking: freshness decay, candidate pools, personalization, greedy MMR, feed assembly.

Pure Python/numpy; Redis access goes through :class:`newsflow.ranking.store.RankingStore`
(the key layout is documented there). Modules:

* :mod:`~newsflow.ranking.decay` — ``authority × e^(−λ·age_hours)`` and the λ classes;
* :mod:`~newsflow.ranking.mmr` — vectorized greedy MMR with a per-source cap;
* :mod:`~newsflow.ranking.personalize` — the relevance blend, cold start, follows/blocks;
* :mod:`~newsflow.ranking.feeds` — pools and feed documents (used by the feed-building job);
* :mod:`~newsflow.ranking.rerank` — the light on-request re-rank (used by ``serving``);
* :mod:`~newsflow.ranking.events` — reader events: validation, stream, Parquet flush;
* :mod:`~newsflow.ranking.priority` — the crawler's priority re-crawl hook writer.
"""

from newsflow.ranking.decay import (
    LAMBDA_BREAKING,
    LAMBDA_DEFAULT,
    LAMBDA_EVERGREEN,
    decay_score,
    decay_scores,
    is_breaking,
    lambda_for,
)
from newsflow.ranking.mmr import mmr_select, mmr_select_reference

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
