"""Topics and article types are separate fields: the story's serving hash, its record read from Redis, Parquet and
the story-input log; records written before the split are read with their types moved out of ``topics``."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pytest

from newsflow.core.embedding import TextModel
from newsflow.core.stories import StoryAssigner, StoryConfig
from newsflow.core.story_state import InMemoryStoryStore
from newsflow.schemas import STORY_SCHEMA, StoryArticle, TopicScore, story_records_from_table
from newsflow.schemas.story import split_legacy_topics
from newsflow.storage.ranking import story_from_hash
from newsflow.storage.story_inputs import article_from_json, article_to_json

SAME = StoryConfig(join_threshold=0.5, merge_threshold=0.9, time_scale_s=math.inf, entity_weight=0.0)


def _model() -> TextModel:
    return TextModel(["alpha", "beta"], np.ones(2, np.float32), 1.0, np.eye(2, dtype=np.float32))


def test_split_legacy_topics():
    assert split_legacy_topics(["Business", "explainer", "World"], None) == (("Business", "World"), ("explainer",))
    pairs = (("Health", 0.7), ("Obituary", 0.6))
    assert split_legacy_topics(pairs, ()) == ((("Health", 0.7),), (("Obituary", 0.6),))
    # a type already in the new field is not repeated
    assert split_legacy_topics(["explainer"], ["explainer"]) == ((), ("explainer",))
    assert split_legacy_topics(None, None) == ((), ())


def test_serving_record_keeps_types_of_half_the_members_apart_from_topics():
    store = InMemoryStoryStore()
    c = StoryAssigner(store, _model(), SAME)
    labels = [
        ((("Business", 0.9),), (("explainer", 1.0),)),
        ((("Business", 0.7),), (("explainer", 1.0), ("historical", 1.0))),
        ((("World", 0.6),), ()),
        ((("Business", 0.8),), ()),
    ]
    for i, (topics, types) in enumerate(labels):
        a = StoryArticle(f"a{i}", float(i), "alpha beta", topics=topics, types=types)
        c.add(a._replace(topics=tuple(TopicScore(*t) for t in a.topics), types=tuple(TopicScore(*t) for t in types)))
    rec = store.get("sa0").serving_record()
    # topics: mean probability over the 4 members, sections only; types: share of members, kept at >= 0.5
    assert json.loads(rec["topics"]) == {"Business": pytest.approx(0.6), "World": pytest.approx(0.15)}
    assert json.loads(rec["types"]) == {"explainer": 0.5}  # historical: 1 of 4


def test_story_from_hash_reads_new_and_legacy_hashes():
    new = story_from_hash("s1", {b"topics": b'{"Business": 0.6}', b"types": b'{"explainer": 0.5}'})
    assert new.topics == ["Business"] and new.types == ("explainer",)
    assert new.summary()["types"] == ["explainer"] and new.summary()["topics"] == ["Business"]
    legacy = story_from_hash("s2", {b"topics": b'{"Business": 0.8, "explainer": 0.6, "World": 0.1}'})
    assert legacy.topics == ["Business", "World"] and legacy.types == ("explainer",)
    assert [t.label for t in legacy.topic_scores] == ["Business", "World"]


def test_parquet_story_rows_without_a_types_column_are_split_on_read():
    old_schema = pa.schema([f for f in STORY_SCHEMA if f.name != "types"])
    row = {f.name: None for f in old_schema}
    row.update(story_id="s1", topics=["Health", "obituary"], topic_scores=[{"label": "obituary", "probability": 0.9}])
    (rec,) = story_records_from_table(pa.Table.from_pylist([row], schema=old_schema))
    assert rec.topics == ["Health"] and rec.types == ("obituary",) and rec.topic_scores == ()
    row.update(topics=["Health"], types=["historical"], topic_scores=[])
    (rec,) = story_records_from_table(pa.Table.from_pylist([row], schema=STORY_SCHEMA))
    assert rec.topics == ["Health"] and rec.types == ("historical",)


def test_story_input_lines_carry_types_and_legacy_lines_are_split():
    a = StoryArticle("a1", 1.0, "t", topics=(TopicScore("World", 0.7),), types=(TopicScore("obituary", 1.0),))
    assert article_from_json(article_to_json(a)) == a
    legacy = json.loads(article_to_json(a))
    legacy["topics"], legacy["types"] = [["World", 0.7], ["obituary", 0.8]], None
    del legacy["types"]
    back = article_from_json(json.dumps(legacy))
    assert back.topics == (TopicScore("World", 0.7),) and back.types == (TopicScore("obituary", 0.8),)
