"""Story state and the store interface of story clustering: :class:`StoryState`, :class:`StoryStore`, and
:class:`InMemoryStoryStore`, the in-memory twin of the Redis store (:mod:`newsflow.storage.stories`).

:class:`newsflow.core.stories.StoryAssigner` keeps all of its state behind :class:`StoryStore`, so the same logic
runs in a unit test (:class:`InMemoryStoryStore`) and in the pipeline against Redis, where it survives restarts.
"""

from __future__ import annotations

import heapq
import json
import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from newsflow.core.outlets import outlet


@dataclass
class StoryState:
    """Mutable state of one story.

    Attributes:
      story_id: ``"s"`` + article id of the founding article (stable).
      centroid: sparse sum of member TF-IDF vectors (term -> weight), pruned to the strongest terms.
      entities: entity key -> ``[display text, label, count]``.
      members: article id -> member record ``{t, domain, cluster, authority, title, url, lang}``.
      topic_sums: topic label -> sum of member probabilities.
      topic_n: members that carried topic predictions.
      embedding_mean: running mean of member embeddings (list of floats) or ``None``.
      embedding_n: members averaged into ``embedding_mean``.
      earliest_time / latest_time: member event-time range, UTC epoch seconds.
      merged_from: ids of stories merged into this one.
    """

    story_id: str
    centroid: dict[str, float] = field(default_factory=dict)
    entities: dict[str, list] = field(default_factory=dict)
    members: dict[str, dict[str, Any]] = field(default_factory=dict)
    topic_sums: dict[str, float] = field(default_factory=dict)
    topic_n: int = 0
    embedding_mean: list[float] | None = None
    embedding_n: int = 0
    earliest_time: float = float("inf")
    latest_time: float = float("-inf")
    merged_from: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        """Serializes the state (round-trips through :meth:`from_json`)."""
        return json.dumps(self.__dict__, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> StoryState:
        """Parses :meth:`to_json` output."""
        return cls(**json.loads(text))

    # ---- derived serving fields -------------------------------------------------------------
    def representative(self) -> str | None:
        """Article id of the highest-authority independent report.

        Each near-duplicate group contributes one independent report, its earliest member (the
        original; later members are syndicated copies). Among those, the highest authority wins;
        ties go to the earlier event time, then the smaller article id.
        """
        originals: dict[str, tuple[float, str]] = {}
        for aid, m in self.members.items():
            key = (m["t"], aid)
            cur = originals.get(m["cluster"])
            if cur is None or key < cur:
                originals[m["cluster"]] = key
        best = None
        for _, aid in originals.values():
            m = self.members[aid]
            rank = (-m["authority"], m["t"], aid)
            if best is None or rank < best[0]:
                best = (rank, aid)
        return best[1] if best else None

    def independent_count(self) -> int:
        """Distinct near-duplicate groups among the members (independent reports)."""
        return len({m["cluster"] for m in self.members.values()})

    def source_count(self) -> int:
        """Distinct outlets among the members: registrable domains (:func:`newsflow.core.outlets.outlet`), so
        ``uk.reuters.com`` and ``in.reuters.com`` count as one source, as on every other surface."""
        return len({outlet(m["domain"]) for m in self.members.values() if m["domain"]})

    def serving_record(self, merged_into: str = "", top_entities: int = 10, top_topics: int = 3) -> dict[str, Any]:
        """The story serving hash fields (:meth:`newsflow.storage.keys.Keys.story`) (values as str/bytes/int/float)."""
        rep = self.representative()
        m = self.members.get(rep, {}) if rep else {}
        topics = {}
        if self.topic_n:
            means = sorted(((s / self.topic_n, lab) for lab, s in self.topic_sums.items()), reverse=True)
            topics = {lab: round(p, 4) for p, lab in means[:top_topics]}
        ents = sorted(self.entities.items(), key=lambda kv: (-kv[1][2], kv[0]))[:top_entities]
        if self.embedding_mean is not None:
            e = np.asarray(self.embedding_mean, dtype=np.float32)
            n = float(np.linalg.norm(e))
            emb = (e / n if n > 0 else e).astype("<f4").tobytes()
        else:
            emb = b""
        return {
            "title": m.get("title", ""),
            "url": m.get("url", ""),
            "domain": m.get("domain", ""),
            "representative_id": rep or "",
            "article_count": len(self.members),
            "source_count": self.source_count(),
            "independent_count": self.independent_count(),
            "earliest_time": self.earliest_time,
            "latest_time": self.latest_time,
            "topics": json.dumps(topics, sort_keys=True),
            "languages": json.dumps(sorted({x["lang"] for x in self.members.values()})),
            "authority": round(float(m.get("authority", 0.0)), 6),
            "embedding": emb,
            "entities": json.dumps([{"key": k, "text": v[0], "label": v[1], "count": v[2]} for k, v in ents]),
            "merged_into": merged_into,
        }


class StoryIndex:
    """Inverted index of live stories: centroid term -> story ids and entity key -> story ids.

    Kept by the stores on every save (:meth:`put`: only the keys a story gained or lost change), merge
    (:meth:`drop` of the retired story, :meth:`put` of the survivor) and expiry (:meth:`expire`: stories
    whose latest event time fell below a floor leave, found through a heap of ``(latest time, id)``, so
    expiring costs O(log n) per expired story, not a pass over the live ones). :meth:`lookup` answers
    "which live stories share one of these terms or entity keys" in O(size of those posting lists).

    Attributes:
      states: story id -> the indexed state (the object the stores hand out).
      floor: stories with a latest time below it (UTC epoch seconds) have been expired (``-inf`` at first).
    """

    def __init__(self) -> None:
        self.states: dict[str, StoryState] = {}
        self.floor = -math.inf
        self._terms: dict[str, set[str]] = {}
        self._ents: dict[str, set[str]] = {}
        self._keys: dict[str, tuple[frozenset, frozenset, float]] = {}  # id -> indexed (terms, entities, latest)
        self._by_time: list[tuple[float, str]] = []  # heap; entries whose time is no longer the story's are skipped

    def __len__(self) -> int:
        return len(self.states)

    @staticmethod
    def _move(postings: dict[str, set[str]], sid: str, old: Collection[str], new: Collection[str]) -> None:
        for k in old:
            if k not in new:
                p = postings[k]
                p.discard(sid)
                if not p:
                    del postings[k]
        for k in new:
            if k not in old:
                postings.setdefault(k, set()).add(sid)

    def put(self, state: StoryState) -> None:
        """Indexes ``state`` (new or changed) under its current centroid terms and entity keys."""
        sid = state.story_id
        terms, ents = frozenset(state.centroid), frozenset(state.entities)
        old_terms, old_ents, old_t = self._keys.get(sid, (frozenset(), frozenset(), None))
        self._move(self._terms, sid, old_terms, terms)
        self._move(self._ents, sid, old_ents, ents)
        self._keys[sid] = (terms, ents, state.latest_time)
        if old_t != state.latest_time:
            heapq.heappush(self._by_time, (state.latest_time, sid))
        self.states[sid] = state

    def drop(self, story_id: str) -> None:
        """Removes a story (merged away or expired); no-op if it is not indexed."""
        keys = self._keys.pop(story_id, None)
        if keys is None:
            return
        self._move(self._terms, story_id, keys[0], ())
        self._move(self._ents, story_id, keys[1], ())
        del self.states[story_id]

    def expire(self, floor: float) -> None:
        """Drops every story whose latest time is below ``floor`` (UTC epoch seconds); raises :attr:`floor`."""
        if floor <= self.floor:
            return
        self.floor = floor
        heap = self._by_time
        while heap and heap[0][0] < floor:
            _, sid = heapq.heappop(heap)
            keys = self._keys.get(sid)
            if keys is not None and keys[2] < floor:
                self.drop(sid)

    def lookup(self, terms: Iterable[str], entity_keys: Iterable[str], since: float) -> list[StoryState]:
        """Indexed stories with a latest time >= ``since`` that share a centroid term in ``terms`` or an
        entity key in ``entity_keys`` (in no particular order)."""
        ids: set[str] = set()
        for t in terms:
            p = self._terms.get(t)
            if p:
                ids.update(p)
        for k in entity_keys:
            p = self._ents.get(k)
            if p:
                ids.update(p)
        states = self.states
        return [st for st in map(states.__getitem__, ids) if st.latest_time >= since]


def sharing(
    states: Iterable[StoryState], terms: Iterable[str], entity_keys: Iterable[str], since: float
) -> list[StoryState]:
    """The :meth:`StoryIndex.lookup` answer computed by testing each of ``states`` (a store's fallback
    for a look-back older than its index covers)."""
    terms, entity_keys = set(terms), set(entity_keys)
    return [
        st
        for st in states
        if st.latest_time >= since and not (terms.isdisjoint(st.centroid) and entity_keys.isdisjoint(st.entities))
    ]


class StoryStore(Protocol):
    """What :class:`newsflow.core.stories.StoryAssigner` needs from its state."""

    def assigned_story(self, article_id: str) -> str | None:
        """Story id the article was assigned to before (``None`` if never seen)."""

    def resolve(self, story_id: str) -> str:
        """Follows ``merged_into`` links to the live story id."""

    def get(self, story_id: str) -> StoryState | None:
        """State of a live story (``None`` if unknown or merged away)."""

    def candidates(self, terms: Iterable[str], entity_keys: Iterable[str], since: float) -> list[StoryState]:
        """Live stories whose latest event time is >= ``since`` (UTC epoch seconds) and whose centroid
        holds one of ``terms`` or whose entities hold one of ``entity_keys``, in no particular order;
        it reflects every :meth:`save` and :meth:`merge` made before, including earlier in the same
        article's step. A store may return more live stories (of latest time >= ``since``), never fewer."""

    def save(self, state: StoryState, article_id: str | None = None) -> None:
        """Writes a story's state and serving record; records ``article_id``'s assignment."""

    def merge(self, loser: StoryState, winner: StoryState, time: float, article_id: str) -> None:
        """Saves ``winner`` (which already absorbed ``loser``), retires ``loser`` and records the merge."""


class InMemoryStoryStore:
    """Dict-backed :class:`StoryStore` for tests and the offline evaluation.

    Candidates come from a :class:`StoryIndex` of the stories whose latest time is within
    ``index_horizon_s`` of the newest look-back asked for; an older look-back (a very late article)
    is answered by testing every story in :attr:`stories`.

    Args:
      index_horizon_s: how far behind the newest look-back the index keeps stories, seconds.
    """

    def __init__(self, index_horizon_s: float = 86400.0) -> None:
        self.stories: dict[str, StoryState] = {}
        self.assign: dict[str, str] = {}
        self.merged_into: dict[str, str] = {}
        self.merges: list[dict[str, Any]] = []
        self.index = StoryIndex()
        self._horizon_s = index_horizon_s

    def assigned_story(self, article_id: str) -> str | None:
        return self.assign.get(article_id)

    def resolve(self, story_id: str) -> str:
        seen = set()
        while story_id in self.merged_into and story_id not in seen:
            seen.add(story_id)
            story_id = self.merged_into[story_id]
        return story_id

    def get(self, story_id: str) -> StoryState | None:
        return self.stories.get(story_id)

    def candidates(self, terms: Iterable[str], entity_keys: Iterable[str], since: float) -> list[StoryState]:
        if since < self.index.floor:
            return sharing(self.stories.values(), terms, entity_keys, since)
        self.index.expire(since - self._horizon_s)
        return self.index.lookup(terms, entity_keys, since)

    def save(self, state: StoryState, article_id: str | None = None) -> None:
        self.stories[state.story_id] = state
        self.index.put(state)
        if article_id is not None:
            self.assign.setdefault(article_id, state.story_id)

    def merge(self, loser: StoryState, winner: StoryState, time: float, article_id: str) -> None:
        self.stories.pop(loser.story_id, None)
        self.index.drop(loser.story_id)
        self.merged_into[loser.story_id] = winner.story_id
        self.merges.append({"from": loser.story_id, "into": winner.story_id, "time": time, "article_id": article_id})
        self.stories[winner.story_id] = winner
        self.index.put(winner)
