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


def test_the_log_files_articles_by_event_time_bucket_content_addressed(tmp_path):
    log = StoryInputLog(str(tmp_path / "log"), bucket_s=3600.0)
    assert log.read() == {} and log.files() == []
    b = A._replace(article_id="b" * 32)
    c = A._replace(article_id="c" * 32, event_time=A.event_time + 7200)
    first = log.add([A, b, c])
    assert len(first) == 2 and log.add([c, b, A]) == first  # same articles, same bytes, the same two files
    assert [k for k, _ in log.files()] == [int(A.event_time // 3600), int(A.event_time // 3600) + 2]
    assert log.read() == {A.article_id: A, b.article_id: b, c.article_id: c}
    assert log.read(since=A.event_time + 1) == {c.article_id: c}
    late = A._replace(article_id="d" * 32)
    log.add([(c.event_time, late)])  # an article of the late lane, ordered at the newest time
    assert log.entries(since=c.event_time)[late.article_id] == (c.event_time, late)
    assert log.add([]) == []


def test_only_the_buckets_of_the_asked_range_are_read(tmp_path):
    log = StoryInputLog(str(tmp_path), bucket_s=3600.0)
    log.add([A, A._replace(article_id="b" * 32, event_time=A.event_time + 7200)])
    old_path = log.files()[0][1]
    with open(old_path, "wb") as f:
        f.write(b"not gzip")  # a corrupt old bucket is not read for a window after it
    assert set(log.read(since=A.event_time + 3600)) == {"b" * 32}
    with pytest.raises(OSError):
        log.read()


def test_a_bad_line_names_its_file(tmp_path):
    log = StoryInputLog(str(tmp_path))
    path = os.path.join(str(tmp_path), "inputs-b1-" + "0" * 20 + ".jsonl.gz")
    with gzip.open(path, "wt") as f:
        f.write(article_to_json(A) + "\n" + '{"article_id": "x"}\n')
    with pytest.raises(ValueError, match="inputs-b1-0+.jsonl.gz line 2"):
        log.read()


def test_prune_and_drop_rewrite_only_the_buckets_they_touch(tmp_path):
    log = StoryInputLog(str(tmp_path / "log"), bucket_s=3600.0)
    old, new = A, A._replace(article_id="b" * 32, event_time=A.event_time + 3600)
    log.add([old, new])
    log.add([new._replace(article_id="c" * 32)])
    assert log.prune(A.event_time + 1) == 1
    assert sorted(log.read()) == ["b" * 32, "c" * 32] and len(log.files()) == 2
    assert log.prune(A.event_time + 1) == 0
    assert log.drop({"b" * 32: new.event_time}) == 1 and sorted(log.read()) == ["c" * 32]
    assert log.drop({"c" * 32: new.event_time + 1}) == 0  # another order time: another record


def test_the_state_round_trips_and_clear_starts_afresh(tmp_path):
    log = StoryInputLog(str(tmp_path / "log"))
    assert log.load_state() is None
    log.add([A])
    log.save_state({"assigned": 3, "cutoff": None, "newest": A.event_time})
    assert log.load_state() == {"assigned": 3, "cutoff": None, "newest": A.event_time}
    assert log.clear() == 1 and log.load_state() is None and log.read() == {}
