"""Online story clustering: many outlets' own write-ups of one event become one story.

Articles must be fed in event-time order (the streaming job's story step buffers and
releases them that way). Each article is compared with every live story whose latest article is
within the time window and scored

    score(a, S) = (cos(v_a, c_S) + w_ent * overlap(E_a, E_S)) * exp(-|t_a - latest_S| / tau)

where ``v_a`` is the article's unit TF-IDF vector over headline + URL slug words (IDF from shipped
HuffPost text, :mod:`newsflow.core.embedding`), ``c_S`` the story's (unit) centroid of member
vectors, ``overlap`` the fraction of the article's entity keys already in the story, and the last
factor decays the score with the time since the story's latest report. The article joins the best
story with ``score >= join_threshold``; otherwise it founds a new story ``"s" + article_id``.

After a join, the grown story is compared with the other live stories in the same way (centroid
cosine + ``w_ent`` * entity Jaccard, decayed by the gap between their latest times); any story
scoring ``>= merge_threshold`` is merged: an article that bridges two stories pulls their
centroids together. The story founded earlier survives (smaller id on ties); the merge is
recorded and the old id resolves to the survivor (:meth:`StoryStore.resolve`).

Near-duplicate clusters (``cluster_id`` from the SimHash step) nest inside stories: a story
counts its independent reports as distinct near-duplicate groups and picks its representative
among them (:meth:`StoryState.representative`).

Thresholds (``StoryConfig`` defaults) were chosen on the shared part of
``news-aggregator-stories`` only (62 stories, 4,588 headlines, 36 h): a prototype grid over
``tau`` in {6, 12, 24} h, join in {0.10, 0.15, 0.20}, merge in {0.20, 0.25, 0.30} showed a flat
region at ``tau = 6 h`` (F1 0.92-0.93); the defaults sit in its middle, not on the best cell.
Sensitivity of the final code around the defaults (tau 6 h, join 0.15, merge 0.25, w_ent 0.2,
F1 0.935 / P 0.957): tau 4 h 0.942, tau 8 h 0.927, w_ent 0.1 0.935, w_ent 0.3 0.930,
join/merge 0.10/0.20 0.930, 0.20/0.30 0.930 (precision 0.935-0.973 throughout). Caveat: in that
data every gold story was crawled in one burst of under two minutes, and bursts are minutes to
hours apart, so time proximity separates same-topic stories of different days (the two Titanfall
stories, 27 h apart) more easily than live traffic would; ``newsflow eval clustering --no-time``
gives the text-and-entity-only figure (F1 0.810, precision 0.732) for comparison.

Changes to the scoring are selected under the story-split protocol of
``newsflow eval clustering --split folds`` (the clustering evaluation command:
5 folds of gold stories, mean and spread; the held-out 20 % of stories scored once per kept change
with ``--split holdout``), and kept only for a gain larger than the fold spread.
``python -m benchmarks.story_candidates --json`` compares the gates tried against this scoring
(multilingual-e5-small join and merge gates, an entity/term agreement gate); none cleared the
spread, so none is part of it.

Replays are idempotent: an article id already assigned returns its (resolved) story and changes
nothing.

Cost. Candidates come from the store's inverted index (centroid term / entity key -> live story
ids, :class:`newsflow.core.story_state.StoryIndex`), never from a pass over all live stories, and
only through the keys that can lift a score to its threshold. The score's time factor is <= 1 and,
by Cauchy-Schwarz, the cosine a story gets from a set ``N`` of the article's terms is at most
``||v_N||`` (the story's normalized centroid has norm 1), while entity overlap (or Jaccard) adds at
most ``w_ent``. So the lightest terms whose joint norm stays below ``join_threshold`` (minus
``w_ent`` when entities are not looked up, which they are whenever ``w_ent`` alone could reach the
threshold) cannot make a join, and stories reached only through them are not looked up
(:func:`lookup_keys`); the merge check does the same with the grown story's normalized centroid
and ``merge_threshold``, after each merge again with the survivor's centroid. Every story left
out this way scores below the threshold, so it could neither be joined or merged nor beat a story
that is: the partition is exactly that of scoring every live story (tests/unit/test_story_index.py
checks it on real headlines). There is no cap on candidates. Candidates are scored with the same
Python arithmetic as before (a story sharing no key scores exactly ``0.0`` and is skipped), and
ties go to the smaller story id whatever the candidate order, so scores, ties and outputs do not
depend on how the index orders them. Story centroid norms are memoized per story (recomputed
after the clusterer changes that story, or when the store hands back a different centroid object).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from newsflow.core.embedding import (
    TextModel,
    centroid_update,
    merge_means,
    sparse_dot,
    sparse_normalize,
)
from newsflow.core.quality import article_quality, authority, is_original
from newsflow.core.story_state import StoryState, StoryStore
from newsflow.core.story_titles import choose_title
from newsflow.schemas.story import EntityRef, StoryArticle, StoryAssignment, TopicScore  # re-exported


@dataclass(frozen=True)
class StoryConfig:
    """Story clustering parameters.

    Attributes:
      join_threshold: minimum decayed score for an article to join a story.
      merge_threshold: minimum decayed story-story score to merge two stories.
      time_scale_s: ``tau`` of the time decay, seconds (6 h).
      entity_weight: weight of entity overlap added to the text cosine.
      slug_weight: term-frequency weight of a URL slug word relative to a headline word.
      max_centroid_terms: centroid terms kept (strongest first) to bound state size.
      max_entities: entity keys kept per story (most frequent first).
    """

    join_threshold: float = 0.15
    merge_threshold: float = 0.25
    time_scale_s: float = 6 * 3600.0
    entity_weight: float = 0.2
    slug_weight: float = 1.0
    max_centroid_terms: int = 200
    max_entities: int = 50

    @property
    def window_s(self) -> float:
        """Look-back window, seconds: beyond it even a perfect match decays below the join threshold."""
        if math.isinf(self.time_scale_s):
            return math.inf
        return self.time_scale_s * math.log((1.0 + self.entity_weight) / self.join_threshold)

    def validate(self) -> StoryConfig:
        """Returns self; raises ``ValueError`` naming the bad value."""
        if not 0 < self.join_threshold <= 1 + self.entity_weight:
            raise ValueError(f"join_threshold must be in (0, 1 + entity_weight], got {self.join_threshold}")
        if not 0 < self.merge_threshold <= 1 + self.entity_weight:
            raise ValueError(f"merge_threshold must be in (0, 1 + entity_weight], got {self.merge_threshold}")
        if not self.time_scale_s > 0:
            raise ValueError(f"time_scale_s must be > 0, got {self.time_scale_s}")
        if self.entity_weight < 0:
            raise ValueError(f"entity_weight must be >= 0, got {self.entity_weight}")
        return self


def story_article(article, topics, entities, embedding, types=()) -> StoryArticle:
    """The :class:`StoryArticle` of an enriched ``schemas.Article``: authority = 0.7 x source
    authority + 0.3 x article quality (:func:`newsflow.core.quality.authority`), original vs syndicated
    from its near-duplicate group.

    Args:
      article: the clustered Article.
      topics: ``(section, probability)`` pairs.
      entities: objects with ``key``, ``text``, ``label`` (``newsflow.core.entities``).
      embedding: 128 floats.
      types: ``(article type, probability)`` pairs.

    Raises:
      ValueError: the article's quality signals are invalid (see ``newsflow.core.quality``).
    """
    by_origin = {}
    for original in (True, False):
        q = article_quality(
            article.text or "",
            authors=article.authors or (),
            original=original,
            word_count=article.word_count or None,
        )
        by_origin[original] = round(authority(float(article.source_authority), q), 6)
    return StoryArticle(
        article_id=article.article_id,
        event_time=float(article.event_time),
        title=article.title,
        url=article.url,
        source_domain=article.source_domain,
        cluster_id=article.cluster_id,
        authority=by_origin[is_original(article.article_id, article.cluster_id)],
        language=article.language,
        topics=tuple(TopicScore(str(label), float(p)) for label, p in topics),
        entities=tuple(EntityRef(e.key, e.text, e.label) for e in entities),
        embedding=tuple(float(x) for x in embedding),
        authority_if_original=by_origin[True],
        authority_if_copy=by_origin[False],
        types=tuple(TopicScore(str(label), float(p)) for label, p in types),
        image=getattr(article, "image_thumb", "") or "",
        icon=getattr(article, "icon_thumb", "") or "",
    )


def story_vector(model: TextModel, article: StoryArticle, config: StoryConfig) -> dict[str, float]:
    """The article's unit TF-IDF vector as story clustering compares it: headline + URL slug words
    (``config.slug_weight`` per slug word), for es/de/fr/pt/it in the cross-language form of
    :meth:`newsflow.core.embedding.TextModel.article_vector`. A pure function of the article's
    ``title``, ``url`` and ``language``, so it may be computed ahead of the ordered step (in parallel)."""
    return model.article_vector(article.title, article.url, config.slug_weight, article.language)


def _time_factor(dt_s: float, tau_s: float) -> float:
    return math.exp(-abs(dt_s) / tau_s) if not math.isinf(tau_s) else 1.0


# Bound on |estimate - exact| of a story-story score: both sum the same <= 2 * max_centroid_terms
# positive products of unit-scale weights in a different order (relative error < 400 * 2**-53,
# about 5e-14), then apply the same division, entity Jaccard and time factor.
_SCORE_TOL = 1e-9

# Margin by which a score bound must fall below a threshold before :func:`lookup_keys` leaves keys out:
# covers the rounding of the bound (a few ulps) and of the score it bounds.
_BOUND_TOL = 1e-9

# The centroid-norm memo is cleared when it holds more entries than this (a memo: clearing changes no result).
_NORM_MEMO_MAX = 1 << 18


def lookup_keys(weights: dict[str, float], norm: float, threshold: float, entity_weight: float) -> tuple[list, bool]:
    """Which keys can lift a score to ``threshold``: ``(terms to look up, whether entity keys must be too)``.

    The score of a story reached only through the terms left out (and, when the second value is
    false, any entity keys) is at most ``||weights_N|| / norm + (entity_weight if entities are left
    out else 0)``, times a time factor <= 1; the lightest terms are left out while that bound stays
    below ``threshold - _BOUND_TOL``.

    Args:
      weights: term -> weight of the article vector or story centroid (finite).
      norm: L2 norm of ``weights`` (``> 0``; ``1.0`` for an article's unit vector).
      threshold: the join or merge threshold.
      entity_weight: ``StoryConfig.entity_weight``.
    """
    with_entities = entity_weight >= threshold - _BOUND_TOL
    budget = threshold - _BOUND_TOL - (0.0 if with_entities else entity_weight)
    if budget <= 0 or not norm > 0:
        return list(weights), with_entities
    limit = (budget * norm) ** 2
    ordered = sorted(weights.items(), key=lambda kv: (abs(kv[1]), kv[0]))
    acc = 0.0
    cut = 0
    for _, w in ordered:
        acc += w * w
        if acc >= limit:
            break
        cut += 1
    return [t for t, _ in ordered[cut:]], with_entities


def _norm(v: dict[str, float]) -> float:
    return math.sqrt(sum(w * w for w in v.values()))


class StoryAssigner:
    """Assigns articles to stories online; all state lives in a :class:`StoryStore`.

    Args:
      store: state (in memory or Redis).
      text_model: IDF table (:class:`newsflow.core.embedding.TextModel`).
      config: thresholds (:class:`StoryConfig`).
    """

    def __init__(self, store: StoryStore, text_model: TextModel, config: StoryConfig = StoryConfig()):
        self.store = store
        self.model = text_model
        self.config = config.validate()
        # story_id -> (centroid dict object, its length, its L2 norm); see _centroid_norm
        self._norms: dict[str, tuple[dict, int, float]] = {}

    def _centroid_norm(self, story: StoryState) -> float:
        """``_norm(story.centroid)``, memoized while the centroid object and its size are unchanged
        (the clusterer drops the entry whenever it changes a centroid in place)."""
        c = story.centroid
        hit = self._norms.get(story.story_id)
        if hit is not None and hit[0] is c and hit[1] == len(c):
            return hit[2]
        n = _norm(c)
        self._norms[story.story_id] = (c, len(c), n)
        return n

    def _bound_norms(self) -> None:
        """Bounds the memo: clears it once it holds more than ``_NORM_MEMO_MAX`` entries."""
        if len(self._norms) > _NORM_MEMO_MAX:
            self._norms.clear()

    def vector(self, article: StoryArticle) -> dict[str, float]:
        """:func:`story_vector` of ``article`` with this assigner's model and config."""
        return story_vector(self.model, article, self.config)

    def _article_score(self, vec, ent_keys: set, story: StoryState, t: float) -> float:
        n = self._centroid_norm(story)
        cos = sparse_dot(vec, story.centroid) / n if n > 0 else 0.0
        overlap = (sum(1 for k in ent_keys if k in story.entities) / len(ent_keys)) if ent_keys else 0.0
        return (cos + self.config.entity_weight * overlap) * _time_factor(
            t - story.latest_time, self.config.time_scale_s
        )

    def _join_score(self, vec, ent_keys: set, story: StoryState, t: float) -> float | None:
        """:meth:`_article_score`, or ``None`` when the article shares no term and no entity with ``story``
        (its score is exactly 0.0 then: it can neither join, join_threshold > 0, nor beat a positive
        score). ``vec.keys().isdisjoint`` is a set operation in C, so most stories cost no scoring."""
        if vec.keys().isdisjoint(story.centroid) and ent_keys.isdisjoint(story.entities):
            return None
        return self._article_score(vec, ent_keys, story, t)

    def _best_merge(self, story: StoryState, others: list[StoryState]) -> tuple[float, StoryState] | None:
        """The best of :meth:`_merge_candidates` by (merge score, story id), or ``None``."""
        return max(self._merge_candidates(story, others), key=lambda x: (x[0], x[1].story_id), default=None)

    def _story_score(self, a: StoryState, b: StoryState) -> float:
        na, nb = self._centroid_norm(a), self._centroid_norm(b)
        cos = sparse_dot(a.centroid, b.centroid) / (na * nb) if na > 0 and nb > 0 else 0.0
        ka, kb = set(a.entities), set(b.entities)
        jac = len(ka & kb) / len(ka | kb) if ka and kb else 0.0
        return (cos + self.config.entity_weight * jac) * _time_factor(
            a.latest_time - b.latest_time, self.config.time_scale_s
        )

    def _story_score_estimate(self, a: StoryState, b: StoryState) -> float:
        """:meth:`_story_score` with the dot product summed over the shared terms only (a C-level key
        intersection) in set order: the same terms as the exact sum, whose other products are
        ``+0.0``, so it differs from the exact score only by summation rounding (< ``_SCORE_TOL``)."""
        ca, cb = a.centroid, b.centroid
        na, nb = self._centroid_norm(a), self._centroid_norm(b)
        cos = sum(ca[t] * cb[t] for t in ca.keys() & cb.keys()) / (na * nb) if na > 0 and nb > 0 else 0.0
        ka, kb = a.entities.keys(), b.entities.keys()
        jac = len(ka & kb) / len(ka | kb) if ka and kb else 0.0
        return (cos + self.config.entity_weight * jac) * _time_factor(
            a.latest_time - b.latest_time, self.config.time_scale_s
        )

    def _merge_partners(self, story: StoryState, since: float) -> list[StoryState]:
        """Live stories other than ``story`` (latest time >= ``since``) that may reach ``merge_threshold``
        with it, from the store's index through :func:`lookup_keys` of its normalized centroid."""
        cfg = self.config
        n = self._centroid_norm(story)
        terms, with_entities = lookup_keys(story.centroid, n, cfg.merge_threshold, cfg.entity_weight)
        found = self.store.candidates(terms, story.entities if with_entities else (), since)
        return [o for o in found if o.story_id != story.story_id]

    def _merge_converging(self, story, since: float, t: float, article_id: str) -> tuple:
        """Merges into ``story`` (which just grew) every live story (latest time >= ``since``) that now
        converges with it.

        Repeatedly takes the best candidate by (merge score, story id) from :meth:`_merge_candidates`
        over :meth:`_merge_partners`; while its score is at least ``merge_threshold``, the
        earlier-founded story (by (earliest time, id)) absorbs the other and the store records the
        merge at ``t`` (UTC epoch s) caused by ``article_id``.

        Returns:
          ``(surviving story, ids of the stories merged away in merge order, ids of every story
          touched: the grown one first, then each merged partner)``.
        """
        merged: list[str] = []
        touched = [story.story_id]
        while True:
            hit = self._best_merge(story, self._merge_partners(story, since))
            if hit is None or hit[0] < self.config.merge_threshold:
                break
            other = hit[1]
            winner, loser = (
                (story, other)
                if (story.earliest_time, story.story_id) <= (other.earliest_time, other.story_id)
                else (other, story)
            )
            self._merge_into(winner, loser)
            self._norms.pop(winner.story_id, None)
            self._norms.pop(loser.story_id, None)
            self.store.merge(loser, winner, t, article_id)
            merged.append(loser.story_id)
            touched.append(other.story_id)
            story = winner
        return story, merged, touched

    def _merge_candidates(self, story: StoryState, others: list[StoryState]) -> list[tuple[float, StoryState]]:
        """``(exact score, other)`` for every other story whose score may reach ``merge_threshold``.

        Left out, with exactly the same outcome as scoring them: stories sharing no term and no entity
        (score exactly 0.0) and stories whose estimate is below ``merge_threshold - _SCORE_TOL``
        (their exact score is below the threshold, so they neither merge nor outrank one that does).
        """
        terms, ents = story.centroid.keys(), story.entities.keys()
        floor = self.config.merge_threshold - _SCORE_TOL
        out = []
        for o in others:
            if terms.isdisjoint(o.centroid) and ents.isdisjoint(o.entities):
                continue
            if self._story_score_estimate(story, o) < floor:
                continue
            out.append((self._story_score(story, o), o))
        return out

    def add(self, article: StoryArticle, vector: dict[str, float] | None = None) -> StoryAssignment:
        """Assigns one article (call in event-time order).

        Args:
          article: the article.
          vector: its :func:`story_vector` computed beforehand (e.g. by a parallel step), or ``None`` to
            compute it here; the result is the same either way.

        Raises:
          ValueError: the article has no id or a non-finite event time.
        """
        if not article.article_id:
            raise ValueError("article has no article_id")
        if not math.isfinite(article.event_time):
            raise ValueError(f"article {article.article_id} has a non-finite event_time {article.event_time!r}")
        prior = self.store.assigned_story(article.article_id)
        if prior is not None:
            return StoryAssignment(article.article_id, self.store.resolve(prior), False, True, (), 0.0)
        cfg = self.config
        t = float(article.event_time)
        vec = self.vector(article) if vector is None else vector
        ent_keys = {e[0] for e in article.entities}
        since = t - cfg.window_s
        terms, with_entities = lookup_keys(vec, 1.0, cfg.join_threshold, cfg.entity_weight)
        candidates = self.store.candidates(terms, ent_keys if with_entities else (), since)
        self._bound_norms()
        best, best_score = None, -1.0
        for story in candidates:
            s = self._join_score(vec, ent_keys, story, t)
            if s is None:
                continue
            if s > best_score or (s == best_score and best is not None and story.story_id < best.story_id):
                best, best_score = story, s
        if best is not None and best_score >= cfg.join_threshold:
            story, created = best, False
        else:
            story, created, best_score = StoryState(story_id="s" + article.article_id), True, 0.0
        self._absorb(story, article, vec)
        self._norms.pop(story.story_id, None)
        merged: list[str] = []
        if not created:
            story, merged, _ = self._merge_converging(story, since, t, article.article_id)
        story.headline = choose_title(story.groups.values(), story.centroid, self._title_vector)
        self.store.save(story, article.article_id)
        return StoryAssignment(article.article_id, story.story_id, created, False, tuple(merged), round(best_score, 6))

    def _title_vector(self, headline: str) -> dict[str, float]:
        """TF-IDF vector of a headline alone (no slug), in the centroid's terms (story titles)."""
        return self.model.article_vector(headline, "", self.config.slug_weight)

    def _absorb(self, story: StoryState, a: StoryArticle, vec: dict[str, float]) -> None:
        cfg = self.config
        for term, w in vec.items():
            story.centroid[term] = story.centroid.get(term, 0.0) + w
        if len(story.centroid) > cfg.max_centroid_terms:
            keep = sorted(story.centroid.items(), key=lambda kv: (-kv[1], kv[0]))[: cfg.max_centroid_terms]
            story.centroid = dict(keep)
        for key, text, label in a.entities:
            cur = story.entities.get(key)
            if cur is None:
                story.entities[key] = [text, label, 1]
            else:
                cur[2] += 1
        if len(story.entities) > cfg.max_entities:
            keep = sorted(story.entities.items(), key=lambda kv: (-kv[1][2], kv[0]))[: cfg.max_entities]
            story.entities = dict(keep)
        # topics and article types share the sums (their labels never collide; StoryState.serving_record splits
        # them); the means are over members that carried labels (with the shipped threshold 0 every member has a
        # topic, so a type's mean is the share of members of that type)
        if a.topics or a.types:
            for label, p in (*a.topics, *a.types):
                story.topic_sums[label] = story.topic_sums.get(label, 0.0) + float(p)
            story.topic_n += 1
        if a.embedding is not None:
            mean, _ = centroid_update(
                np.asarray(story.embedding_mean, np.float32) if story.embedding_mean is not None else None,
                story.embedding_n,
                np.asarray(a.embedding, np.float32),
            )
            story.embedding_mean = [float(x) for x in mean]
            story.embedding_n += 1
        story.add_member(
            a.article_id,
            float(a.event_time),
            a.source_domain,
            a.cluster_id or ("a" + a.article_id),
            float(a.authority),
            a.title,
            a.url,
            a.language or "und",
            image=a.image or "",
            icon=a.icon or "",
        )
        story.earliest_time = min(story.earliest_time, float(a.event_time))
        story.latest_time = max(story.latest_time, float(a.event_time))

    def _merge_into(self, winner: StoryState, loser: StoryState) -> None:
        cfg = self.config
        for term, w in loser.centroid.items():
            winner.centroid[term] = winner.centroid.get(term, 0.0) + w
        if len(winner.centroid) > cfg.max_centroid_terms:
            winner.centroid = dict(
                sorted(winner.centroid.items(), key=lambda kv: (-kv[1], kv[0]))[: cfg.max_centroid_terms]
            )
        for key, (text, label, count) in loser.entities.items():
            cur = winner.entities.get(key)
            if cur is None:
                winner.entities[key] = [text, label, count]
            else:
                cur[2] += count
        if len(winner.entities) > cfg.max_entities:
            winner.entities = dict(
                sorted(winner.entities.items(), key=lambda kv: (-kv[1][2], kv[0]))[: cfg.max_entities]
            )
        for label, s in loser.topic_sums.items():
            winner.topic_sums[label] = winner.topic_sums.get(label, 0.0) + s
        winner.topic_n += loser.topic_n
        if loser.embedding_mean is not None:
            if winner.embedding_mean is None:
                winner.embedding_mean, winner.embedding_n = list(loser.embedding_mean), loser.embedding_n
            else:
                mean, _ = merge_means(
                    np.asarray(winner.embedding_mean),
                    winner.embedding_n,
                    np.asarray(loser.embedding_mean),
                    loser.embedding_n,
                )
                winner.embedding_mean = [float(x) for x in mean]
                winner.embedding_n += loser.embedding_n
        winner.absorb_members(loser)
        winner.earliest_time = min(winner.earliest_time, loser.earliest_time)
        winner.latest_time = max(winner.latest_time, loser.latest_time)
        winner.merged_from = sorted(set(winner.merged_from) | {loser.story_id} | set(loser.merged_from))


__all__ = ["StoryArticle", "StoryAssignment", "StoryAssigner", "StoryConfig", "sparse_normalize", "story_vector"]
