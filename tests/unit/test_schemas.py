"""Every ``schemas`` record round-trips through its Arrow schema (and through Parquet bytes)."""

from __future__ import annotations

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from newsflow import schemas
from newsflow.schemas import (
    ARTICLE_RECORD_SCHEMA,
    ARTICLE_SCHEMA,
    DEAD_LETTER_SCHEMA,
    EMBEDDING_DIM,
    EVENT_SCHEMA,
    GROUP_SCHEMA,
    RAW_DOCUMENT_SCHEMA,
    STORY_ARTICLE_SCHEMA,
    STORY_ASSIGNMENT_SCHEMA,
    STORY_ASSIGNMENTS_SCHEMA,
    STORY_SCHEMA,
    TREND_INPUT_SCHEMA,
    TREND_SCHEMA,
    USER_PROFILE_SCHEMA,
    Article,
    ArticleRecord,
    DeadLetter,
    EntityRef,
    Event,
    NearDuplicateGroup,
    RawDocument,
    StoryArticle,
    StoryAssignment,
    StoryAssignmentRow,
    StoryRecord,
    TopicScore,
    TrendCount,
    TrendInput,
    UserProfile,
    records_to_table,
    story_articles_from_table,
    story_assignments_from_table,
    story_records_from_table,
    table_to_records,
    user_profiles_from_table,
)

T0 = 1_700_000_000.25  # UTC epoch seconds; quarter seconds survive microsecond timestamps exactly
AID = "0123456789abcdef0123456789abcdef"
# float32-exact values, so a stored float32 field reads back equal
EMB = (np.arange(EMBEDDING_DIM, dtype=np.float32) - 64) / np.float32(128)


def _raw():
    return RawDocument(
        "https://example.com/a",
        "example.com",
        T0,
        200,
        "text/html",
        "en",
        '"e1"',
        "Tue, 14 Nov 2023 22:13:20 GMT",
        b"<html>\x00\xff</html>",
        "Title",
        None,
        T0 - 60,
        "Example",
        "https://example.com/feed",
    )


def _article():
    return Article(
        AID,
        "https://example.com/a?x=1",
        "https://example.com/a",
        "example.com",
        "Example",
        "Title",
        "Body text.",
        ("Ann Author", "Bob"),
        "Example",
        T0 - 60,
        T0,
        T0 - 60,
        "en",
        0.875,
        "00ff00ff00ff00ff",
        2,
        False,
        0.75,
        "c" + AID,
    )


def _story_record():
    return StoryRecord(
        story_id="s" + AID,
        title="Title",
        url="https://example.com/a",
        domain="example.com",
        representative_id=AID,
        article_count=3,
        source_count=2,
        independent_count=2,
        earliest_time=T0 - 3600,
        latest_time=T0,
        topics=["politics", "world"],
        languages=["de", "en"],
        authority=0.75,
        embedding=EMB.copy(),
        entities=[{"key": "ORG:united nations", "text": "United Nations", "label": "ORG", "count": 3}],
        merged_into="",
        topic_scores=(TopicScore("politics", 0.75), TopicScore("world", 0.5)),
        outlets=["example.com", "other.org"],
        article_ids=[AID, "f" * 32, "e" * 32],
    )


# (record, schema, reader) for every record type; reader None means schemas.table_to_records
CASES = [
    (_raw(), RAW_DOCUMENT_SCHEMA, None),
    (
        RawDocument("https://example.com/f", "example.com", T0, title="Feed title", summary="Summary"),
        RAW_DOCUMENT_SCHEMA,
        None,
    ),
    (_article(), ARTICLE_SCHEMA, None),
    (
        ArticleRecord(
            AID, "Title", "https://example.com/a", "example.com", "Example", T0, "c" + AID, "s" + AID, 0.75, "en"
        ),
        ARTICLE_RECORD_SCHEMA,
        None,
    ),
    (
        NearDuplicateGroup(
            "c" + AID,
            AID,
            "Title",
            "https://example.com/a",
            "example.com",
            2,
            ["example.com", "other.org"],
            ["en"],
            T0 - 60,
            T0,
            None,
        ),
        GROUP_SCHEMA,
        None,
    ),
    (
        DeadLetter("extract", "not_an_article", "no text", b'{"url": "x"}\xff', "https://example.com/a"),
        DEAD_LETTER_SCHEMA,
        None,
    ),
    (Event("u1", "dwell", "s" + AID, T0 - 5, T0, 3, 12.5, "top", "1700000000250-0"), EVENT_SCHEMA, None),
    (Event("u2", "impression", "s" + AID, T0, T0, event_id="1700000000250-1"), EVENT_SCHEMA, None),
    (
        StoryArticle(
            AID,
            T0,
            "Title",
            "https://example.com/a",
            "example.com",
            "c" + AID,
            0.75,
            "en",
            (TopicScore("politics", 0.75),),
            (EntityRef("ORG:united nations", "United Nations", "ORG"),),
            tuple(float(x) for x in EMB),
        ),
        STORY_ARTICLE_SCHEMA,
        story_articles_from_table,
    ),
    (StoryArticle(AID, T0, "Title"), STORY_ARTICLE_SCHEMA, story_articles_from_table),
    (
        StoryAssignment(AID, "s" + AID, False, False, ("s" + "f" * 32,), 0.421875),
        STORY_ASSIGNMENT_SCHEMA,
        story_assignments_from_table,
    ),
    (StoryAssignmentRow(AID, "s" + "f" * 32, "s" + AID, 1, T0, "c" + AID), STORY_ASSIGNMENTS_SCHEMA, None),
    (StoryAssignmentRow(AID, "s" + AID, "s" + AID, 0, T0), STORY_ASSIGNMENTS_SCHEMA, None),
    (_story_record(), STORY_SCHEMA, story_records_from_table),
    (
        _story_record()._replace(embedding=None, topic_scores=(), outlets=(), article_ids=()),
        STORY_SCHEMA,
        story_records_from_table,
    ),
    (
        TrendInput(AID, "s" + AID, ("politics",), ("United Nations", "Geneva")),
        TREND_INPUT_SCHEMA,
        lambda t: table_to_records(t, TrendInput, {"topics": tuple, "entities": tuple}),
    ),
    (TrendCount("story", "s" + AID, 21, T0 - 3600, T0, True, 0.5), TREND_SCHEMA, None),
    (
        UserProfile(
            "u1",
            EMB.copy(),
            25,
            "en",
            frozenset({"sports"}),
            frozenset({"example.com"}),
            frozenset({"politics", "world"}),
            frozenset(),
        ),
        USER_PROFILE_SCHEMA,
        user_profiles_from_table,
    ),
    (UserProfile("u2"), USER_PROFILE_SCHEMA, user_profiles_from_table),
]


def _same(a, b) -> bool:
    """Field-wise equality; numpy arrays compare by dtype and values, sequences by items."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _through_parquet(table: pa.Table) -> pa.Table:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    buf.seek(0)
    return pq.read_table(buf)


@pytest.mark.parametrize(
    "record,schema,reader", CASES, ids=lambda v: type(v).__name__ if isinstance(v, tuple) else None
)
def test_record_round_trips_through_its_arrow_schema(record, schema, reader):
    assert set(schema.names) == set(type(record)._fields), "the schema must name exactly the record's fields"
    table = records_to_table([record], schema)
    assert table.schema == schema
    for t in (table, _through_parquet(table)):
        (back,) = (reader or (lambda tb: table_to_records(tb, type(record))))(t)
        assert type(back) is type(record)
        bad = [f for f in record._fields if not _same(getattr(record, f), getattr(back, f))]
        assert bad == [], [(f, getattr(record, f), getattr(back, f)) for f in bad]


def test_every_record_type_has_a_round_trip_case():
    covered = {type(r) for r, _, _ in CASES}
    nested = {TopicScore, EntityRef}  # held inside StoryArticle / StoryRecord rows
    assert set(schemas.RECORD_TYPES) - nested <= covered


def test_story_schema_holds_what_a_story_snapshot_needs():
    s = STORY_SCHEMA
    assert s.field("story_id").type == pa.string()
    assert s.field("earliest_time").type == pa.timestamp("us", tz="UTC")  # first seen
    assert s.field("topic_scores").type.value_type.field("probability").type == pa.float32()
    assert s.field("entities").type.value_type.field("count").type == pa.int32()
    assert s.field("embedding").type == pa.list_(pa.float32())
    assert s.field("embedding").metadata == {b"length": b"128"}
    for name in ("outlets", "article_ids"):
        assert s.field(name).type == pa.list_(pa.string())
    assert s.field("representative_id").type == pa.string()  # lead article


def test_a_128_dim_embedding_is_enforced_by_the_schema():
    with pytest.raises(ValueError, match="embedding must have 128 values, got 3"):
        records_to_table([_story_record()._replace(embedding=np.zeros(3, np.float32))], STORY_SCHEMA)


def test_story_assignments_partition_is_the_utc_date_and_hour_of_the_event_time():
    from newsflow.schemas.story_assignments import partition_of

    assert partition_of(1394471386.119) == "date=2014-03-10/hour=17"  # 17:09:46 UTC
    assert partition_of(1394409600.0) == "date=2014-03-10/hour=00"  # midnight starts the day
    assert partition_of(1394409599.999) == "date=2014-03-09/hour=23"
