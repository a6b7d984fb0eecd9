"""Typed records that cross tier boundaries, each with its Arrow schema.

Records are ``typing.NamedTuple`` so Beam encodes them with a ``RowCoder`` (registered in one
explicit place by the Beam tier, not here: this package imports only stdlib, pyarrow and,
for the two records holding embeddings, numpy). Record modules do not use ``from __future__ import
annotations``: Beam reads the field annotations to build the row schema, and string annotations
would turn every field into a pickled, non-deterministic "any" value. Times are UTC epoch seconds
(``float``) in the records and ``timestamp[us, tz=UTC]`` in Arrow; embeddings are 128 float32
values (``list<float32>``, the length in the field metadata and checked on write).
:func:`newsflow.schemas._arrow.records_to_table` and :func:`newsflow.schemas._arrow.table_to_records` (or the
``*_from_table`` readers, for records holding sets, arrays or nested pairs) convert between
records and tables.

==================  ==========================  ===========================================
record              schema                      what it is
==================  ==========================  ===========================================
RawDocument         RAW_DOCUMENT_SCHEMA         a landed page or feed entry
Article             ARTICLE_SCHEMA              an extracted, enriched article
ArticleRecord       ARTICLE_RECORD_SCHEMA       serving view of an article
Cluster             GROUP_SCHEMA              a near-duplicate group
DeadLetter          DEAD_LETTER_SCHEMA          a refused input with its reason
Event               EVENT_SCHEMA                a reader event (impression, click, dwell)
StoryArticle        STORY_ARTICLE_SCHEMA        an article as story clustering reads it
StoryAssignment     STORY_ASSIGNMENT_SCHEMA     an article's story after clustering
StoryRecord         STORY_SCHEMA                a story (serving view, snapshot row)
StoryAssignmentRow  STORY_ASSIGNMENTS_SCHEMA    an article's current story (``story_assignments``)
TrendInput          TREND_INPUT_SCHEMA          a new article as trending windows count it
TrendCount          TREND_SCHEMA                distinct new articles per key and window
UserProfile         USER_PROFILE_SCHEMA         what ranking knows about a reader
==================  ==========================  ===========================================
"""

from newsflow.schemas._arrow import EMBEDDING_DIM, records_to_table, table_to_records
from newsflow.schemas.article import ARTICLE_RECORD_SCHEMA, ARTICLE_SCHEMA, Article, ArticleRecord
from newsflow.schemas.deadletter import DEAD_LETTER_SCHEMA, DeadLetter
from newsflow.schemas.event import EVENT_SCHEMA, Event
from newsflow.schemas.group import GROUP_SCHEMA, NearDuplicateGroup
from newsflow.schemas.raw import RAW_DOCUMENT_SCHEMA, RawDocument, RecordError
from newsflow.schemas.story import (
    STORY_ARTICLE_SCHEMA,
    STORY_ASSIGNMENT_SCHEMA,
    STORY_SCHEMA,
    EntityRef,
    StoryArticle,
    StoryAssignment,
    StoryRecord,
    TopicScore,
    story_articles_from_table,
    story_assignments_from_table,
    story_records_from_table,
)
from newsflow.schemas.story_assignments import STORY_ASSIGNMENTS_SCHEMA, StoryAssignmentRow
from newsflow.schemas.trend import TREND_INPUT_SCHEMA, TREND_SCHEMA, TrendCount, TrendInput
from newsflow.schemas.user import USER_PROFILE_SCHEMA, UserProfile, user_profiles_from_table

# Every record type, for code that must treat them all alike (coder registration, schema tests).
RECORD_TYPES = (
    RawDocument,
    Article,
    ArticleRecord,
    NearDuplicateGroup,
    DeadLetter,
    Event,
    TopicScore,
    EntityRef,
    StoryArticle,
    StoryAssignment,
    StoryRecord,
    TrendInput,
    TrendCount,
    UserProfile,
)

__all__ = [
    "ARTICLE_RECORD_SCHEMA",
    "ARTICLE_SCHEMA",
    "Article",
    "ArticleRecord",
    "GROUP_SCHEMA",
    "NearDuplicateGroup",
    "DEAD_LETTER_SCHEMA",
    "DeadLetter",
    "EMBEDDING_DIM",
    "EVENT_SCHEMA",
    "EntityRef",
    "Event",
    "RAW_DOCUMENT_SCHEMA",
    "RECORD_TYPES",
    "RawDocument",
    "RecordError",
    "STORY_ARTICLE_SCHEMA",
    "STORY_ASSIGNMENT_SCHEMA",
    "STORY_ASSIGNMENTS_SCHEMA",
    "STORY_SCHEMA",
    "StoryArticle",
    "StoryAssignment",
    "StoryAssignmentRow",
    "StoryRecord",
    "TREND_INPUT_SCHEMA",
    "TREND_SCHEMA",
    "TopicScore",
    "TrendCount",
    "TrendInput",
    "USER_PROFILE_SCHEMA",
    "UserProfile",
    "records_to_table",
    "story_articles_from_table",
    "story_assignments_from_table",
    "story_records_from_table",
    "table_to_records",
    "user_profiles_from_table",
]
