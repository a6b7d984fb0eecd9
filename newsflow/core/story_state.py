"""Story state and the store interface of story clustering: :class:`StoryState`, :class:`StoryStore`, and
:class:`InMemoryStoryStore`, the in-memory twin of the Redis store (:mod:`newsflow.storage.stories`).

:class:`newsflow.core.stories.StoryAssigner` keeps all of its state behind :class:`StoryStore`, so the same logic
runs in a unit test (:class:`InMemoryStoryStore`) and in the pipeline against Redis, where it survives restarts.

**State grows by deltas.** A :class:`StoryState` never holds its member list: a story's members live in the
store (``Keys.story_articles``, or :attr:`InMemoryStoryStore.members`). The state holds what scoring and the
serving record need, in fields whose size does not grow with the members (centroid, entities, topic sums,
embedding mean, counts, times, the representative, the distinct languages; ``merged_from`` grows with the
stories merged in, not with their members), plus two sets the serving counts need: the near-duplicate groups'
originals (:attr:`StoryState.groups`, one entry per independent report) and the distinct outlets
(:attr:`StoryState.outlets`); the stores keep those two in keys of their own. What changed since the store last
committed the state is kept apart (:attr:`StoryState.delta`), so a store writes only the members added, the
groups and outlets that changed, and the fixed-size JSON (:meth:`StoryState.to_json`).
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
from newsflow.core.story_titles import clean_headline
from newsflow.schemas.story import ARTICLE_TYPES

#: A story is of an article type when at least this share of its members' headlines are (a single explainer
#: among fifty reports does not make the story an explainer).
STORY_TYPE_SHARE = 0.5

# Fields of the clusterer JSON (:meth:`StoryState.to_json`); the others are kept by the stores apart.
_JSON_FIELDS = (
    "story_id",
    "centroid",
    "entities",
    "topic_sums",
    "topic_n",
    "embedding_mean",
    "embedding_n",
    "earliest_time",
    "latest_time",
    "merged_from",
    "article_count",
    "languages",
    "representative",
    "headline",
)


def _rank(original: list) -> tuple:
    """Representative order of a group original ``[t, article id, authority, ...]``: highest authority,
    then earliest event time, then smallest article id."""
    return (-original[2], original[0], original[1])


@dataclass
class StoryDelta:
    """What changed in a :class:`StoryState` since its store last committed it.

    Attributes:
      added: article id -> event time (UTC epoch s) of the members added (including an absorbed story's
        uncommitted ones).
      groups: near-duplicate group ids whose original is new or changed.
      outlets: outlets new to the story.
      absorbed: ids of the stories merged into this one since the commit, in merge order (each with the
        stories it had absorbed uncommitted before): their committed members must be copied by the store.
    """

    added: dict[str, float] = field(default_factory=dict)
    groups: set[str] = field(default_factory=set)
    outlets: set[str] = field(default_factory=set)
    absorbed: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.groups or self.outlets or self.absorbed)


@dataclass
class StoryState:
    """Mutable state of one story (members are not in it: see the module docstring).

    Attributes:
      story_id: ``"s"`` + article id of the founding article (stable).
      centroid: sparse sum of member TF-IDF vectors (term -> weight), pruned to the strongest terms.
      entities: entity key -> ``[display text, label, count]``.
      topic_sums: topic label or article type -> sum of member probabilities (the serving record splits them).
      topic_n: members (the denominator of the means).
      embedding_mean: running mean of member embeddings (list of floats) or ``None``.
      embedding_n: members averaged into ``embedding_mean``.
      earliest_time / latest_time: member event-time range, UTC epoch seconds.
      merged_from: ids of stories merged into this one.
      article_count: members.
      languages: distinct member languages, sorted.
      representative: the original of the highest-authority independent report
        (``[t, article id, authority, domain, title, url]``, then ``image, icon`` thumbnail names when it has
        pictures; see :meth:`add_member`), or ``None``.
      headline: the independent report whose headline is the story's title
        (:func:`newsflow.core.story_titles.choose_title`, set by the clusterer), same shape, or ``None``
        (the representative's headline is the title).
      groups: near-duplicate group id -> its original (earliest ``(t, article id)`` member) as
        ``[t, article id, authority, domain, title, url]``; one entry per independent report (not in the JSON).
      outlets: distinct member outlets (registrable domains, :func:`newsflow.core.outlets.outlet`; not in the JSON).
      delta: changes since the store last committed this state (:class:`StoryDelta`; not in the JSON).
    """

    story_id: str
    centroid: dict[str, float] = field(default_factory=dict)
    entities: dict[str, list] = field(default_factory=dict)
    topic_sums: dict[str, float] = field(default_factory=dict)
    topic_n: int = 0
    embedding_mean: list[float] | None = None
    embedding_n: int = 0
    earliest_time: float = float("inf")
    latest_time: float = float("-inf")
    merged_from: list[str] = field(default_factory=list)
    article_count: int = 0
    languages: list[str] = field(default_factory=list)
    representative: list | None = None
    headline: list | None = None
    groups: dict[str, list] = field(default_factory=dict, repr=False)
    outlets: set[str] = field(default_factory=set, repr=False)
    delta: StoryDelta = field(default_factory=StoryDelta, repr=False, compare=False)

    def to_json(self) -> str:
        """Serializes the fixed-size fields (round-trips through :meth:`from_json`, which leaves
        :attr:`groups` and :attr:`outlets` empty: the stores keep them apart)."""
        return json.dumps({k: getattr(self, k) for k in _JSON_FIELDS}, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_json(
        cls, text: str | bytes, groups: dict[str, list] | None = None, outlets: Iterable[str] = ()
    ) -> StoryState:
        """Parses :meth:`to_json` output, with the story's ``groups`` and ``outlets`` as stored apart.

        A state written before members moved out of it (a ``members`` field: article id ->
        ``{t, domain, cluster, authority, title, url, lang}``) is read by adding those members again,
        so its groups, outlets and members are all in :attr:`delta` and the next write stores them.
        """
        data = json.loads(text)
        legacy = data.pop("members", None)
        state = cls(**data, groups=dict(groups or {}), outlets=set(outlets))
        if legacy is not None:
            for aid, m in sorted(legacy.items(), key=lambda kv: (kv[1]["t"], kv[0])):
                state.add_member(
                    aid, m["t"], m["domain"], m["cluster"], m["authority"], m["title"], m["url"], m["lang"]
                )
        return state

    # ---- members (the clusterer's only way to change them) -------------------------------------
    def add_member(
        self,
        article_id: str,
        t: float,
        domain: str,
        cluster: str,
        authority: float,
        title: str = "",
        url: str = "",
        lang: str = "und",
        image: str = "",
        icon: str = "",
    ) -> None:
        """Adds one member (an article not in any story yet) to the counts, the groups, the outlets,
        the languages and the representative, in O(1) except when it displaces the representative's
        group original (a late, earlier copy): then O(independent reports).

        Args:
          article_id: the member.
          t: its event time, UTC epoch seconds.
          domain: its source domain (``""`` if unknown: not counted as an outlet).
          cluster: its near-duplicate group id.
          authority: its authority in [0, 1].
          title / url: shown when it is the representative; the title is kept cleaned of wire slugs and
            source tags (:func:`newsflow.core.story_titles.clean_headline`).
          lang: its language code.
          image / icon: its thumbnail names, shown when it is the representative (kept only when set, so an
            original without pictures has the shape of states written before pictures).
        """
        self.article_count += 1
        self.delta.added[article_id] = t
        original = [t, article_id, authority, domain, clean_headline(title, domain), url]
        if image or icon:
            original += [image, icon]
        self._offer(cluster, original)
        o = outlet(domain) if domain else ""
        if o and o not in self.outlets:
            self.outlets.add(o)
            self.delta.outlets.add(o)
        if lang not in self.languages:
            self.languages = sorted([*self.languages, lang])

    def absorb_members(self, loser: StoryState) -> None:
        """Takes ``loser``'s members (a merge): counts, groups, outlets, languages, representative,
        and the delta the store needs to move them, in O(loser's independent reports + outlets +
        uncommitted members)."""
        self.article_count += loser.article_count
        self.delta.added.update(loser.delta.added)
        self.delta.absorbed += [loser.story_id, *loser.delta.absorbed]
        shared = loser.groups.keys() & self.groups.keys()
        only = {c: o for c, o in loser.groups.items() if c not in shared} if shared else loser.groups
        # the groups only the loser has keep its originals; the best of those is the loser's representative
        # unless that one's group is shared (then a pass over them finds it)
        self.groups.update(only)
        self.delta.groups.update(only)
        lrep = loser.representative
        if lrep is not None and any(loser.groups[c][1] == lrep[1] for c in shared):
            lrep = min(only.values(), key=_rank, default=None)
        self.representative = min((r for r in (self.representative, lrep) if r is not None), key=_rank, default=None)
        for cluster in shared:
            self._offer(cluster, loser.groups[cluster])
        new = loser.outlets - self.outlets
        self.outlets |= new
        self.delta.outlets |= new
        self.languages = sorted(set(self.languages) | set(loser.languages))

    def _offer(self, cluster: str, original: list) -> None:
        """Makes ``original`` its group's original if it is earlier, and keeps :attr:`representative`."""
        cur = self.groups.get(cluster)
        if cur is not None and (cur[0], cur[1]) <= (original[0], original[1]):
            return
        self.groups[cluster] = original
        self.delta.groups.add(cluster)
        rep = self.representative
        if cur is not None and rep is not None and rep[1] == cur[1]:
            self.representative = min(self.groups.values(), key=_rank)  # the representative lost its group
        elif rep is None or _rank(original) < _rank(rep):
            self.representative = original

    def committed(self) -> StoryDelta:
        """Returns the pending :attr:`delta` and starts a new one (a store calls it once the delta is written)."""
        out, self.delta = self.delta, StoryDelta()
        return out

    # ---- derived serving fields -------------------------------------------------------------
    def representative_id(self) -> str | None:
        """Article id of the highest-authority independent report.

        Each near-duplicate group contributes one independent report, its earliest member (the
        original; later members are syndicated copies). Among those, the highest authority wins;
        ties go to the earlier event time, then the smaller article id.
        """
        return self.representative[1] if self.representative else None

    def independent_count(self) -> int:
        """Distinct near-duplicate groups among the members (independent reports)."""
        return len(self.groups)

    def source_count(self) -> int:
        """Distinct outlets among the members: registrable domains (:func:`newsflow.core.outlets.outlet`), so
        ``uk.reuters.com`` and ``in.reuters.com`` count as one source, as on every other surface."""
        return len(self.outlets)

    def serving_record(self, merged_into: str = "", top_entities: int = 10, top_topics: int = 3) -> dict[str, Any]:
        """The story serving hash fields (:meth:`newsflow.storage.keys.Keys.story`) (values as str/bytes/int/float);
        its size does not grow with the members."""
        rep = self.representative or [0.0, "", 0.0, "", "", ""]
        title = self.headline[4] if self.headline else rep[4]
        topics, types = {}, {}
        if self.topic_n:
            means = sorted(((s / self.topic_n, lab) for lab, s in self.topic_sums.items()), reverse=True)
            topics = {lab: round(p, 4) for p, lab in [m for m in means if m[1] not in ARTICLE_TYPES][:top_topics]}
            types = {lab: round(p, 4) for p, lab in means if lab in ARTICLE_TYPES and p >= STORY_TYPE_SHARE}
        ents = sorted(self.entities.items(), key=lambda kv: (-kv[1][2], kv[0]))[:top_entities]
        if self.embedding_mean is not None:
            e = np.asarray(self.embedding_mean, dtype=np.float32)
            n = float(np.linalg.norm(e))
            emb = (e / n if n > 0 else e).astype("<f4").tobytes()
        else:
            emb = b""
        return {
            "title": title,
            "url": rep[5],
            "domain": rep[3],
            "representative_id": rep[1],
            "article_count": self.article_count,
            "source_count": self.source_count(),
            "independent_count": self.independent_count(),
            "earliest_time": self.earliest_time,
            "latest_time": self.latest_time,
            "topics": json.dumps(topics, sort_keys=True),
            "types": json.dumps(types, sort_keys=True),
            "languages": json.dumps(self.languages),
            "authority": round(float(rep[2]), 6),
            "image": rep[6] if len(rep) > 7 else "",
            "icon": rep[7] if len(rep) > 7 else "",
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
        """Writes a story's state, serving record and :attr:`StoryState.delta` (the members added, taken
        with :meth:`StoryState.committed` once written); records ``article_id``'s assignment."""

    def merge(self, loser: StoryState, winner: StoryState, time: float, article_id: str) -> None:
        """Saves ``winner`` (which already absorbed ``loser``, :meth:`StoryState.absorb_members`), retires
        ``loser`` with its members at retirement and records the merge; ``winner`` gets ``loser``'s members."""


class InMemoryStoryStore:
    """Dict-backed :class:`StoryStore` for tests and the offline evaluation.

    Candidates come from a :class:`StoryIndex` of the stories whose latest time is within
    ``index_horizon_s`` of the newest look-back asked for; an older look-back (a very late article)
    is answered by testing every story in :attr:`stories`.

    Attributes:
      stories: live story id -> state.
      members: story id -> {article id -> event time} (a retired story keeps its members at retirement).
      assign: article id -> story id it was first assigned to.
      merged_into: retired story id -> the story it was merged into.
      merges: merge records ``{from, into, time, article_id}`` in order.

    Args:
      index_horizon_s: how far behind the newest look-back the index keeps stories, seconds.
    """

    def __init__(self, index_horizon_s: float = 86400.0) -> None:
        self.stories: dict[str, StoryState] = {}
        self.members: dict[str, dict[str, float]] = {}
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
        self.members.setdefault(state.story_id, {}).update(state.committed().added)
        self.index.put(state)
        if article_id is not None:
            self.assign.setdefault(article_id, state.story_id)

    def merge(self, loser: StoryState, winner: StoryState, time: float, article_id: str) -> None:
        self.stories.pop(loser.story_id, None)
        self.index.drop(loser.story_id)
        gone = self.members.setdefault(loser.story_id, {})
        gone.update(loser.committed().added)
        self.members.setdefault(winner.story_id, {}).update(gone)  # winner's delta.added also holds them
        self.merged_into[loser.story_id] = winner.story_id
        self.merges.append({"from": loser.story_id, "into": winner.story_id, "time": time, "article_id": article_id})
        self.stories[winner.story_id] = winner
        self.index.put(winner)
