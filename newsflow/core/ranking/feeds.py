"""Feed assembly: score stories, maintain candidate pools, pick diverse top-k feeds.

Used by the feed-building job (precomputed feeds, every few minutes) and by the serving tier
(a personal feed for a reader whose precomputed feed is missing). All times are UTC
epoch seconds and are passed in (``now``), never read from the clock here.

Feed documents (JSON, stored at :meth:`newsflow.storage.keys.Keys.feed`)::

    {"kind": "edition"|"topic"|"user", "name": str, "generated_at": float,
     "alpha": float, "stories": [{story_id, title, url, domain, topics, languages,
     article_count, source_count, independent_count, earliest_time, latest_time,
     authority, score, relevance, breaking}, ...]}

Personal feed items also carry ``why``, the signals that placed them
(:func:`newsflow.core.ranking.personalize.personal_signals`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from newsflow.core.outlets import outlet
from newsflow.core.ranking.article_type import story_article_type
from newsflow.core.ranking.coverage import breadth, independent_outlets
from newsflow.core.ranking.decay import decay_scores, lambda_for
from newsflow.core.ranking.mmr import (
    DEFAULT_ALPHA,
    DEFAULT_SOURCE_CAP,
    mmr_select,
    normalize_rows,
)
from newsflow.schemas import EMBEDDING_DIM, StoryRecord

POOL_SIZE = 500
"""Stories kept per candidate pool (edition or topic)."""
GLOBAL_EDITION = "global"
"""The edition every story belongs to."""


@dataclass(frozen=True)
class FeedConfig:
    """Feed-building knobs.

    Attributes:
      k: stories per page of a public feed (MMR picks a page at a time, each page with its own
        per-outlet cap, so page 1 is the top-k).
      depth: stories kept in a public feed, pages of ``k`` (a reader pages through them with a cursor,
        the serving tier's paging); the pool's size, so a feed holds every story of its pool.
      user_k: stories kept in a precomputed personal feed (more than served, so the
        on-request re-rank can drop blocked/capped ones and still fill a page).
      alpha: MMR relevance weight, 0.5–0.9.
      source_cap: max stories per outlet (registrable domain of the representative source,
        :func:`newsflow.core.outlets.outlet`).
      pool_size: candidates kept per pool.
      global_extra: global-pool stories added to a reader's candidates.
      trending_extra: trending stories added to a reader's candidates.
      follow_extra: stories taken from each followed topic's pool.
    """

    k: int = 20
    depth: int = POOL_SIZE
    user_k: int = 60
    alpha: float = DEFAULT_ALPHA
    source_cap: int = DEFAULT_SOURCE_CAP
    pool_size: int = POOL_SIZE
    global_extra: int = 100
    trending_extra: int = 100
    follow_extra: int = 100


CAP_EXEMPT_OUTLETS = 10
"""A story with at least this many independent outlets (:func:`newsflow.core.ranking.coverage.independent_outlets`)
is exempt from the per-outlet cap. The cap (``DESIGN.md``: 2 per source domain) keeps one outlet's own stories
from filling a page; a story ten outlets report on their own is not its lead outlet's story (its lead is only
the highest-authority report, so wire services lead most wide stories). On the demo at its replay clock, with
coverage breadth, capping by lead outlet kept 4 of the 10 widest stories of the last 6 hours off the first
page (Reuters, the LA Times and the Washington Post led two wider ones each); the exemption brings 2 back, all
4 once the evergreen article-type labels leave the topics (``python -m benchmarks.front_page``)."""


def cap_key(story_id: str, domain: str, outlets: int) -> str:
    """The per-outlet cap's key of a story: its lead outlet, or ``"story:<id>"`` (a key of its own) when it has
    at least :data:`CAP_EXEMPT_OUTLETS` independent outlets."""
    return f"story:{story_id}" if outlets >= CAP_EXEMPT_OUTLETS else outlet(domain)


class Candidates:
    """Column view of candidate stories for vectorized ranking.

    Attributes:
      stories: list of :class:`StoryRecord` (length n).
      scores: float64 (n,) scores at ``now``: authority × e^(−λ·age_hours) × coverage breadth
        (:mod:`newsflow.core.ranking.coverage`).
      breadth: float64 (n,) the coverage-breadth factors in ``scores``.
      lambdas: float64 (n,) decay rates used (1/hours): per topic and article type
        (:func:`newsflow.core.ranking.decay.lambda_for`).
      velocity: float64 (n,) new articles in the latest trending window.
      embeddings: float32 (n, 128) unit rows (zero rows for a missing embedding).
      breaking: bool (n,).
      sources: the outlet (:func:`newsflow.core.outlets.outlet`) of each representative domain, the key of
        follows and blocks.
      cap_keys: the key of the per-source cap (:func:`cap_key`): the outlet, or the story itself for a
        widely covered one.
      topics: each story's topic labels.
    """

    def __init__(
        self,
        stories: Sequence[StoryRecord],
        now: float,
        overrides: Mapping[str, float],
        breaking_ids: Iterable[str],
        velocity: Mapping[str, int] | None = None,
    ):
        self.stories = list(stories)
        brk = set(breaking_ids)
        velocity = velocity or {}
        n = len(self.stories)
        self.breaking = np.fromiter((s.story_id in brk for s in self.stories), dtype=bool, count=n)
        self.lambdas = np.array(
            [
                # article types (obituary, explainer, historical) are evergreen classes beside the topics
                lambda_for((*s.topics, *s.types), bool(b), overrides, article_type=story_article_type(s))
                for s, b in zip(self.stories, self.breaking, strict=False)
            ],
            dtype=np.float64,
        )
        self.velocity = np.array([float(velocity.get(s.story_id, 0)) for s in self.stories])
        self.breadth = breadth(
            np.array([independent_outlets(s.source_count, s.independent_count) for s in self.stories]),
            self.velocity,
        )
        self.scores = self.breadth * decay_scores(
            np.array([s.authority for s in self.stories], dtype=np.float64),
            np.array([s.earliest_time for s in self.stories], dtype=np.float64),
            now,
            self.lambdas,
        )
        emb = np.zeros((n, EMBEDDING_DIM), dtype=np.float32)
        for i, s in enumerate(self.stories):
            if s.embedding is not None:
                emb[i] = s.embedding
        self.embeddings = normalize_rows(emb) if n else emb
        # the outlet (registrable domain), not the host: uk.reuters.com and in.reuters.com share one cap;
        # a widely covered story is nobody's own and counts against no outlet's cap (cap_key)
        self.sources = [outlet(s.domain) for s in self.stories]
        self.cap_keys = [
            cap_key(s.story_id, s.domain, independent_outlets(s.source_count, s.independent_count))
            for s in self.stories
        ]
        self.topics = [s.topics for s in self.stories]

    def __len__(self) -> int:
        return len(self.stories)

    def item(self, i: int, relevance: float) -> dict:
        """Feed item for candidate ``i``."""
        d = self.stories[i].summary()
        d["score"] = float(self.scores[i])
        d["relevance"] = float(relevance)
        d["breaking"] = bool(self.breaking[i])
        return d


def editions_of(story: StoryRecord) -> list[str]:
    """Editions a story belongs to: each of its languages (lower case) plus ``global``."""
    eds = sorted({str(x).lower() for x in story.languages if str(x).strip() and str(x).lower() != "und"})
    return eds + [GLOBAL_EDITION]


# A story whose earliest report is later than ``now`` by more than this does not exist yet at
# ``now`` (it only happens when ranking a replayed corpus at its replay clock).
FUTURE_TOLERANCE_S = 3600.0


def live_stories(stories: Iterable[StoryRecord | None], now: float | None = None) -> list[StoryRecord]:
    """Drops missing records, stories merged into another one and, when ``now`` (UTC epoch s) is
    given, stories first reported more than :data:`FUTURE_TOLERANCE_S` after ``now``."""
    horizon = None if now is None else now + FUTURE_TOLERANCE_S
    return [
        s for s in stories if s is not None and not s.merged_into and (horizon is None or s.earliest_time <= horizon)
    ]


def public_relevance(scores: np.ndarray) -> np.ndarray:
    """Relevance for non-personal feeds: score divided by the best score (0 when all are 0)."""
    m = float(scores.max()) if scores.size else 0.0
    return scores / m if m > 0 else np.zeros_like(scores)


def rank(
    cands: Candidates, relevance: np.ndarray, k: int, alpha: float, source_cap: int, exclude: np.ndarray | None = None
) -> list[dict]:
    """MMR-picks ``k`` items from ``cands`` (excluding the ``exclude`` mask) as feed items."""
    idx = np.arange(len(cands)) if exclude is None else np.flatnonzero(~exclude)
    if idx.size == 0:
        return []
    # Stable candidate order (best relevance first) so MMR ties are deterministic.
    idx = idx[np.lexsort((np.array([cands.stories[i].story_id for i in idx]), -relevance[idx]))]
    picks = mmr_select(
        relevance[idx],
        cands.embeddings[idx],
        [cands.cap_keys[i] for i in idx],
        k=k,
        alpha=alpha,
        source_cap=source_cap,
        normalized=True,
    )
    return [cands.item(int(idx[p]), float(relevance[idx[p]])) for p in picks]


def rank_pages(
    cands: Candidates,
    relevance: np.ndarray,
    k: int,
    depth: int,
    alpha: float,
    source_cap: int,
    exclude: np.ndarray | None = None,
) -> list[dict]:
    """Pages of :func:`rank`: MMR picks ``k`` items, then ``k`` more among the rest (each page capped at
    ``source_cap`` per outlet on its own, and diverse within itself), until ``depth`` items or no candidate
    is left. The first page is :func:`rank`'s top-``k``."""
    out: list[dict] = []
    mask = np.zeros(len(cands), dtype=bool) if exclude is None else exclude.copy()
    pos = {s.story_id: i for i, s in enumerate(cands.stories)}
    while len(out) < depth:
        items = rank(cands, relevance, min(k, depth - len(out)), alpha, source_cap, exclude=mask)
        if not items:
            break
        out += items
        mask[[pos[it["story_id"]] for it in items]] = True
    return out


def feed_doc(kind: str, name: str, now: float, alpha: float, items: list[dict]) -> dict:
    """The stored feed document."""
    return {"kind": kind, "name": name, "generated_at": float(now), "alpha": float(alpha), "stories": items}


def compute_pools(cands: Candidates, pool_size: int = POOL_SIZE) -> dict[tuple[str, str], dict[str, float]]:
    """Top-``pool_size`` ``story_id -> score`` per edition and per topic.

    Returns:
      ``{("edition", ed) | ("topic", label): {story_id: score}}``.
    """
    pools: dict[tuple[str, str], dict[str, float]] = {}
    for s, score in zip(cands.stories, cands.scores, strict=False):
        for ed in editions_of(s):
            pools.setdefault(("edition", ed), {})[s.story_id] = float(score)
        for t in {str(t).lower() for t in s.topics if str(t).strip()}:
            pools.setdefault(("topic", t), {})[s.story_id] = float(score)
    out = {}
    for key, members in pools.items():
        top = sorted(members.items(), key=lambda kv: (-kv[1], kv[0]))[:pool_size]
        out[key] = dict(top)
    return out


def build_public_feeds(
    cands: Candidates,
    pools: Mapping[tuple[str, str], Mapping[str, float]],
    now: float,
    config: FeedConfig = FeedConfig(),
) -> dict[tuple[str, str], dict]:
    """One MMR feed per pool, :func:`rank_pages` deep: ``{(kind, name): feed document}``."""
    pos = {s.story_id: i for i, s in enumerate(cands.stories)}
    out = {}
    for (kind, name), members in pools.items():
        idx = np.array([pos[sid] for sid in members if sid in pos], dtype=np.int64)
        exclude = np.ones(len(cands), dtype=bool)
        exclude[idx] = False
        rel = np.zeros(len(cands))
        rel[idx] = public_relevance(cands.scores[idx])
        items = rank_pages(cands, rel, config.k, config.depth, config.alpha, config.source_cap, exclude=exclude)
        out[(kind, name)] = feed_doc(kind, name, now, config.alpha, items)
    return out
