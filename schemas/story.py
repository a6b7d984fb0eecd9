"""Story records: what story clustering reads (StoryArticle) and returns (StoryAssignment), and a
story as serving reads it and snapshots store it (StoryRecord), each with its Arrow schema.

A story is many outlets' own write-ups of one event; near-duplicate groups (syndicated copies,
:class:`newsflow.schemas.group.NearDuplicateGroup`) nest inside it. Story ids are ``"s"`` + the article id of the
founding article (the earliest ``(event_time, article_id)``), so they are stable across replays.

numpy is imported because :attr:`StoryRecord.embedding` is a float32 ``numpy.ndarray`` (ranking
stacks them into a matrix for MMR); it is the only non-stdlib, non-pyarrow import here.
"""

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Optional

import numpy as np
import pyarrow as pa

from newsflow.schemas._arrow import UTC_TS, embedding_field, table_to_records

#: Article types (kinds of write-up that age slowly), kept apart from topics in every record. Records written
#: before the split carry them inside ``topics``; :func:`split_legacy_topics` separates them on read (kept for
#: one release).
ARTICLE_TYPES = ("obituary", "explainer", "historical")


def split_legacy_topics(labels, types) -> tuple[tuple, tuple]:
    """``(topics, types)`` of a record: article types found in ``labels`` move to ``types`` (records written
    before the two were separate fields), keeping order and dropping duplicates.

    ``labels`` are strings or ``(label, probability)`` pairs; ``types`` likewise (``None``: absent).
    """

    def name(x):
        return str(x[0] if isinstance(x, tuple) else x)

    labels, types = tuple(labels or ()), tuple(types or ())
    moved = tuple(x for x in labels if name(x).lower() in ARTICLE_TYPES and name(x) not in {name(t) for t in types})
    return tuple(x for x in labels if name(x).lower() not in ARTICLE_TYPES), types + moved


class TopicScore(NamedTuple):
    """One topic label with its classifier probability in [0, 1]."""

    label: str
    probability: float


class EntityRef(NamedTuple):
    """A named entity of an article.

    Attributes:
      key: normalized key ``"<LABEL>:<lower-case text>"``, e.g. ``"ORG:united nations"``.
      text: display text as found, e.g. ``"United Nations"``.
      label: entity group, e.g. ``"PERSON"``, ``"ORG"``, ``"LOC"``, ``"EVENT"``.
    """

    key: str
    text: str
    label: str


_TOPIC_SCORE_TYPE = pa.struct([("label", pa.string()), ("probability", pa.float32())])
_ENTITY_REF_TYPE = pa.struct([("key", pa.string()), ("text", pa.string()), ("label", pa.string())])
_STORY_ENTITY_TYPE = pa.struct(
    [("key", pa.string()), ("text", pa.string()), ("label", pa.string()), ("count", pa.int32())]
)


class StoryArticle(NamedTuple):
    """What story clustering needs from an enriched article.

    Attributes:
      article_id: stable article id (32 hex chars).
      event_time: UTC epoch seconds.
      title: headline.
      url: article URL (its slug words count as text).
      source_domain: outlet domain.
      cluster_id: near-duplicate group id (``None``: the article is its own cluster).
      authority: article authority in [0, 1] (0.7 source + 0.3 article quality).
      language: ISO 639 code.
      topics: :class:`TopicScore` ``(section, probability)`` pairs from the topic classifier (sections only).
      entities: :class:`EntityRef` ``(key, display text, label)`` triples.
      embedding: 128-dim unit embedding (float32 values) or ``None``.
      authority_if_original / authority_if_copy: the article's authority as the first report of its
        near-duplicate group and as a syndicated copy (``None``: not known, keep ``authority``). Which
        one applies is decided when the story step releases the article, from the group as Redis holds
        it then (an earlier copy arriving late makes this one a copy): :meth:`with_cluster`.
      types: :class:`TopicScore` ``(article type, probability)`` pairs (obituary, explainer, historical; see
        ``newsflow.core.topics``), apart from ``topics``.
      image / icon: stored thumbnail names of its lead image and publisher icon ("" when none); shown with the
        story when the article is its representative.

    Build ``topics``, ``types`` and ``entities`` from :class:`TopicScore` / :class:`EntityRef`, not plain
    tuples: Beam's row coder reads nested fields by name (plain tuples work outside Beam).
    """

    article_id: str
    event_time: float
    title: str
    url: str = ""
    source_domain: str = ""
    cluster_id: Optional[str] = None
    authority: float = 0.0
    language: str = "und"
    topics: Sequence[TopicScore] = ()
    entities: Sequence[EntityRef] = ()
    embedding: Optional[Sequence[float]] = None
    authority_if_original: Optional[float] = None
    authority_if_copy: Optional[float] = None
    types: Sequence[TopicScore] = ()
    image: str = ""
    icon: str = ""

    def with_cluster(self, cluster_id: str) -> "StoryArticle":
        """This article in near-duplicate group ``cluster_id``: the id, and the authority that goes with
        being that group's founder (``"c" + article_id``, the original) or a copy."""
        original = cluster_id == "c" + self.article_id
        value = self.authority_if_original if original else self.authority_if_copy
        return self._replace(cluster_id=cluster_id, authority=self.authority if value is None else value)


STORY_ARTICLE_SCHEMA = pa.schema(
    [
        pa.field("article_id", pa.string(), nullable=False),
        pa.field("event_time", UTC_TS),
        pa.field("title", pa.string()),
        pa.field("url", pa.string()),
        pa.field("source_domain", pa.string()),
        pa.field("cluster_id", pa.string()),
        pa.field("authority", pa.float32()),
        pa.field("language", pa.string()),
        pa.field("topics", pa.list_(_TOPIC_SCORE_TYPE)),
        pa.field("entities", pa.list_(_ENTITY_REF_TYPE)),
        embedding_field("embedding"),
        pa.field("authority_if_original", pa.float32()),
        pa.field("authority_if_copy", pa.float32()),
        pa.field("types", pa.list_(_TOPIC_SCORE_TYPE)),
        pa.field("image", pa.string()),
        pa.field("icon", pa.string()),
    ]
)


class StoryAssignment(NamedTuple):
    """Result of assigning one article to a story.

    Attributes:
      article_id: the article.
      story_id: live story id after this step (after any merge).
      created: the article founded a new story.
      duplicate: the article had been assigned before (replay); nothing changed.
      merged: ids of stories merged into ``story_id`` by this step.
      score: decayed similarity score of the joined story (0.0 when created or duplicate).
    """

    article_id: str
    story_id: str
    created: bool
    duplicate: bool
    merged: tuple[str, ...]
    score: float


STORY_ASSIGNMENT_SCHEMA = pa.schema(
    [
        pa.field("article_id", pa.string(), nullable=False),
        pa.field("story_id", pa.string(), nullable=False),
        pa.field("created", pa.bool_()),
        pa.field("duplicate", pa.bool_()),
        pa.field("merged", pa.list_(pa.string())),
        pa.field("score", pa.float64()),
    ]
)


class StoryRecord(NamedTuple):
    """A story as serving reads it (``nf:story:{story_id}``) and snapshots store it.

    Attributes:
      story_id: ``"s"`` + the founding article's id.
      title / url / domain: headline, URL and outlet domain of the lead article.
      representative_id: article id of the lead article (highest-authority independent report;
        ties: earliest event time, then smallest article id).
      article_count: member articles.
      source_count: distinct outlets (source domains).
      independent_count: distinct near-duplicate groups (independent reports).
      earliest_time: first seen, the earliest member event time, UTC epoch seconds.
      latest_time: latest member event time, UTC epoch seconds.
      topics: topic labels (sections, never article types), most probable first.
      languages: member languages (ISO 639 codes).
      authority: authority of the lead article in [0, 1].
      embedding: 128-dim unit centroid embedding, float32 ``numpy.ndarray``, or ``None``.
      entities: the story's top entities as ``{"key", "text", "label", "count"}`` dicts
        (``count``: members naming it), most frequent first.
      merged_into: id of the story it was merged into, ``""`` while live.
      topic_scores: :class:`TopicScore` pairs (mean member probability), most probable first;
        empty when the source only gave labels.
      outlets: distinct member source domains, sorted (empty when not loaded).
      article_ids: member article ids in event-time order (empty when not loaded).
      article_type: the lead article's type (live, opinion, analysis, feature, service, news; see
        ``newsflow.core.ranking.article_type``), filled by the nightly story snapshot; ``None`` when not set.
      types: the story's article types of ``newsflow.core.topics.ARTICLE_TYPES`` (obituary, explainer,
        historical): those of at least half its members' headlines; never in ``topics``.
      image / icon: stored thumbnail names (``/img/<name>``) of the lead article's picture and its outlet's icon,
        "" when none.
    """

    story_id: str
    title: str
    url: str
    domain: str
    representative_id: str
    article_count: int
    source_count: int
    independent_count: int
    earliest_time: float
    latest_time: float
    topics: Sequence[str]
    languages: Sequence[str]
    authority: float
    embedding: Optional[np.ndarray]
    entities: Sequence[Mapping[str, Any]]
    merged_into: str
    topic_scores: Sequence[TopicScore] = ()
    outlets: Sequence[str] = ()
    article_ids: Sequence[str] = ()
    article_type: Optional[str] = None
    types: Sequence[str] = ()
    image: str = ""
    icon: str = ""

    def summary(self) -> dict:
        """JSON-safe dict of the fields a feed item shows."""
        return {
            "story_id": self.story_id,
            "title": self.title,
            "url": self.url,
            "domain": self.domain,
            "topics": list(self.topics),
            "types": list(self.types),
            "languages": list(self.languages),
            "article_count": self.article_count,
            "source_count": self.source_count,
            "independent_count": self.independent_count,
            "earliest_time": self.earliest_time,
            "latest_time": self.latest_time,
            "authority": self.authority,
            "image": self.image,
            "icon": self.icon,
        }


STORY_SCHEMA = pa.schema(
    [
        pa.field("story_id", pa.string(), nullable=False),
        pa.field("title", pa.string()),
        pa.field("url", pa.string()),
        pa.field("domain", pa.string()),
        pa.field("representative_id", pa.string()),
        pa.field("article_count", pa.int32()),
        pa.field("source_count", pa.int32()),
        pa.field("independent_count", pa.int32()),
        pa.field("earliest_time", UTC_TS),
        pa.field("latest_time", UTC_TS),
        pa.field("topics", pa.list_(pa.string())),
        pa.field("languages", pa.list_(pa.string())),
        pa.field("authority", pa.float32()),
        embedding_field("embedding"),
        pa.field("entities", pa.list_(_STORY_ENTITY_TYPE)),
        pa.field("merged_into", pa.string()),
        pa.field("topic_scores", pa.list_(_TOPIC_SCORE_TYPE)),
        pa.field("outlets", pa.list_(pa.string())),
        pa.field("article_ids", pa.list_(pa.string())),
        pa.field("article_type", pa.string()),
        pa.field("types", pa.list_(pa.string())),
        pa.field("image", pa.string()),
        pa.field("icon", pa.string()),
    ]
)


def _topic_scores(values) -> tuple:
    return tuple(TopicScore(v["label"], v["probability"]) for v in values)


def story_articles_from_table(table: pa.Table) -> list:
    """StoryArticles from a table with :data:`STORY_ARTICLE_SCHEMA` (tuples where written as tuples); tables
    written before ``types`` existed get their article types moved out of ``topics``."""
    rows = table_to_records(
        table,
        StoryArticle,
        {
            "topics": _topic_scores,
            "types": _topic_scores,
            "entities": lambda vs: tuple(EntityRef(v["key"], v["text"], v["label"]) for v in vs),
            "embedding": tuple,
        },
    )
    out = []
    for r in rows:
        topics, types = split_legacy_topics(r.topics, r.types)
        out.append(r._replace(topics=topics, types=types))
    return out


def story_assignments_from_table(table: pa.Table) -> list:
    """StoryAssignments from a table with :data:`STORY_ASSIGNMENT_SCHEMA`."""
    return table_to_records(table, StoryAssignment, {"merged": tuple})


def story_records_from_table(table: pa.Table) -> list:
    """StoryRecords from a table with :data:`STORY_SCHEMA` (embeddings back as float32 arrays); tables written
    before ``types`` existed get their article types moved out of ``topics`` and ``topic_scores``."""
    rows = table_to_records(
        table,
        StoryRecord,
        {
            "embedding": lambda v: np.asarray(v, dtype=np.float32),
            "topic_scores": _topic_scores,
            "types": tuple,
        },
    )
    out = []
    for r in rows:
        topics, types = split_legacy_topics(r.topics, r.types)
        scores, _ = split_legacy_topics(r.topic_scores, ())
        out.append(r._replace(topics=list(topics), types=types, topic_scores=scores))
    return out
