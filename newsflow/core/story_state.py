"""Story state and the store interface of story clustering: :class:`StoryState`, :class:`StoryStore`, and
:class:`InMemoryStoryStore`, the in-memory twin of the Redis store (:mod:`newsflow.storage.stories`).

:class:`newsflow.core.stories.StoryAssigner` keeps all of its state behind :class:`StoryStore`, so the same logic
runs in a unit test (:class:`InMemoryStoryStore`) and in the pipeline against Redis, where it survives restarts.
"""

from __future__ import annotations

import json
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


class StoryStore(Protocol):
    """What :class:`newsflow.core.stories.StoryAssigner` needs from its state."""

    def assigned_story(self, article_id: str) -> str | None:
        """Story id the article was assigned to before (``None`` if never seen)."""

    def resolve(self, story_id: str) -> str:
        """Follows ``merged_into`` links to the live story id."""

    def get(self, story_id: str) -> StoryState | None:
        """State of a live story (``None`` if unknown or merged away)."""

    def active(self, since: float) -> list[StoryState]:
        """Live stories whose latest event time is >= ``since`` (UTC epoch seconds), by story id."""

    def save(self, state: StoryState, article_id: str | None = None) -> None:
        """Writes a story's state and serving record; records ``article_id``'s assignment."""

    def merge(self, loser: StoryState, winner: StoryState, time: float, article_id: str) -> None:
        """Saves ``winner`` (which already absorbed ``loser``), retires ``loser`` and records the merge."""


class InMemoryStoryStore:
    """Dict-backed :class:`StoryStore` for tests and the offline evaluation."""

    def __init__(self) -> None:
        self.stories: dict[str, StoryState] = {}
        self.assign: dict[str, str] = {}
        self.merged_into: dict[str, str] = {}
        self.merges: list[dict[str, Any]] = []

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

    def active(self, since: float) -> list[StoryState]:
        return [s for sid, s in sorted(self.stories.items()) if s.latest_time >= since]

    def save(self, state: StoryState, article_id: str | None = None) -> None:
        self.stories[state.story_id] = state
        if article_id is not None:
            self.assign.setdefault(article_id, state.story_id)

    def merge(self, loser: StoryState, winner: StoryState, time: float, article_id: str) -> None:
        self.stories.pop(loser.story_id, None)
        self.merged_into[loser.story_id] = winner.story_id
        self.merges.append({"from": loser.story_id, "into": winner.story_id, "time": time, "article_id": article_id})
        self.stories[winner.story_id] = winner
