"""The story input log (newsflow/storage/story_inputs.py): exact round trip, one record per article id,
content-addressed files, and a clear error on a bad line."""

from __future__ import annotations

import gzip
import os

import pytest

from newsflow.schemas import StoryArticle
from newsflow.schemas.story import EntityRef, TopicScore
from newsflow.storage.story_inputs import StoryInputLog, article_from_json, article_to_json

A = StoryArticle(
    "a" * 32,
    1394470501.265,
    "ECB unlikely to end sterilisation of SMP purchases - traders",
    url="http://www.iii.co.uk/news-opinion/reuters/news/152615",
    source_domain="iii.co.uk",
    cluster_id="c" + "a" * 32,
    authority=0.123457,
    language="en",
    topics=(TopicScore("business", 0.8125), TopicScore("world", 0.1)),
    entities=(EntityRef("ORG:ecb", "ECB", "ORG"),),
    embedding=tuple(i / 7 for i in range(128)),
    authority_if_original=0.2,
    authority_if_copy=1 / 3,
)


def test_an_article_round_trips_exactly():
    back = article_from_json(article_to_json(A))
    assert back == A
    assert back.embedding[5] == 5 / 7 and back.authority_if_copy == 1 / 3  # floats exact, not rounded
    bare = StoryArticle("b" * 32, 1.5, "t")
    assert article_from_json(article_to_json(bare)) == bare


def test_the_log_keeps_one_record_per_id_the_earliest(tmp_path):
    log = StoryInputLog(str(tmp_path / "log"))
    assert log.read() == {} and log.files() == []
    later = A._replace(event_time=A.event_time + 60, title="later version")
    b = A._replace(article_id="b" * 32)
    first = log.add([later, b])
    assert log.add([b, later]) == first and len(log.files()) == 1  # same articles, same bytes, one file
    log.add([A])
    assert len(log.files()) == 2
    assert log.read() == {A.article_id: A, b.article_id: b}
    assert log.add([]) is None


def test_a_bad_line_names_its_file(tmp_path):
    log = StoryInputLog(str(tmp_path))
    path = os.path.join(str(tmp_path), "inputs-0000.jsonl.gz")
    with gzip.open(path, "wt") as f:
        f.write(article_to_json(A) + "\n" + '{"article_id": "x"}\n')
    with pytest.raises(ValueError, match="inputs-0000.jsonl.gz line 2"):
        log.read()


def test_prune_drops_the_records_before_the_cutoff(tmp_path):
    log = StoryInputLog(str(tmp_path / "log"))
    old, new = A, A._replace(article_id="b" * 32, event_time=A.event_time + 3600)
    log.add([old, new])
    log.add([new._replace(article_id="c" * 32)])
    assert log.prune(A.event_time + 1) == 1
    assert sorted(log.read()) == ["b" * 32, "c" * 32] and len(log.files()) == 2
    assert log.prune(A.event_time + 1) == 0
