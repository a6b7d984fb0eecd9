"""ExtractArticles: pages are parsed in Beam's exception-handling subprocess under the time limit; a page that
hangs or kills that process becomes a dead letter (step, reason, raw payload) and the job goes on; feed-only
documents are extracted in-process."""

from __future__ import annotations

import gzip
import json
import os
import threading

import apache_beam as beam
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from newsflow.core.articles import build_article
from newsflow.core.extraction import ExtractionConfig, ExtractionError, extract_content
from newsflow.schemas import RawDocument
from newsflow.transforms.content import PAGES_TAG, ContentConfig, ExtractArticles, _RouteFn
from newsflow.transforms.deadletter import DEAD_LETTER_TAG, raw_payload
from tests.conftest import REPO_ROOT

TIMEOUT_S = 5.0


def hanging_or_crashing_extractor(raw: RawDocument, config: ExtractionConfig):
    """The page extractor of these tests: blocks forever on ``/hang`` pages, ends its process with
    ``os._exit`` (no exception, no cleanup: as a crash in C code) on ``/crash`` pages, else extracts."""
    if "/hang" in raw.url:
        threading.Event().wait()
    if "/crash" in raw.url:
        os._exit(70)
    return extract_content(raw, config)


def _pages(n: int) -> list[RawDocument]:
    docs = []
    with gzip.open(os.path.join(REPO_ROOT, "data", "corpus", "pages.jsonl.gz"), "rb") as f:
        for line in f:
            raw = RawDocument.from_json_dict(json.loads(line))
            if raw.body is not None:
                try:
                    extract_content(raw)
                except ExtractionError:
                    continue
                docs.append(raw)
            if len(docs) == n:
                return docs
    raise AssertionError("the demo corpus has too few article pages")


def _docs():
    good = _pages(4)
    base = good[0]
    hang = base._replace(url="https://hang.example.com/hang/1", source_domain="hang.example.com")
    crash = base._replace(url="https://crash.example.com/crash/1", source_domain="crash.example.com")
    short = base._replace(url="https://bad.example.com/short", body=b"<html><body><p>Too short.</p></body></html>")
    # a feed-only document on a /crash URL: it never reaches the page extractor
    feed = RawDocument(
        url="https://feed.example.com/crash/story",
        source_domain="feed.example.com",
        fetch_time=base.fetch_time,
        title="Council approves riverside park",
        summary="<p>The council voted on Tuesday.</p>",
        published_time=base.fetch_time,
    )
    return good, hang, crash, short, feed


def test_hanging_and_crashing_pages_become_dead_letters_and_the_rest_are_extracted():
    good, hang, crash, short, feed = _docs()
    docs = [good[0], hang, good[1], crash, good[2], short, feed, good[3]]
    config = ContentConfig(
        extraction=ExtractionConfig(timeout_s=TIMEOUT_S),
        use_registry=False,
        page_extractor=hanging_or_crashing_extractor,
    )
    # expected articles: the libraries called directly in this process
    expected_articles = [
        (a.article_id, a.title, a.text, a.feed_only)
        for a in (build_article(d, extract_content(d), source_authority=0.0) for d in [*good, feed])
    ]
    expected_dead = [
        ("extract", "timeout", hang.url, raw_payload(hang)),
        ("extract", "crashed", crash.url, raw_payload(crash)),
        ("extract", "not_an_article", short.url, raw_payload(short)),
    ]
    with TestPipeline() as p:
        out = p | beam.Create(docs, reshuffle=False) | ExtractArticles(config)
        assert_that(
            out["main"] | "ArticleFields" >> beam.Map(lambda a: (a.article_id, a.title, a.text, a.feed_only)),
            equal_to(expected_articles),
            label="Articles",
        )
        assert_that(
            out[DEAD_LETTER_TAG] | "DeadFields" >> beam.Map(lambda d: (d.step, d.error_type, d.url, d.payload)),
            equal_to(expected_dead),
            label="DeadLetters",
        )


def test_dead_letter_messages_name_the_limit_and_the_crash():
    _good, hang, crash, _short, _feed = _docs()
    config = ContentConfig(
        extraction=ExtractionConfig(timeout_s=TIMEOUT_S),
        use_registry=False,
        page_extractor=hanging_or_crashing_extractor,
    )
    with TestPipeline() as p:
        out = p | beam.Create([hang, crash], reshuffle=False) | ExtractArticles(config)
        assert_that(out["main"], equal_to([]), label="NoArticles")
        assert_that(
            out[DEAD_LETTER_TAG]
            | beam.Map(
                lambda d: (
                    d.error_type,
                    f"timeout_s={TIMEOUT_S} s" in d.error,
                    "process" in d.error and "terminated abruptly" in d.error,
                )
            ),
            equal_to([("timeout", True, False), ("crashed", False, True)]),
            label="Messages",
        )


def test_route_keeps_feed_only_documents_in_process_and_sends_pages_on():
    good, _hang, _crash, _short, feed = _docs()
    failing = good[0]._replace(url="https://bad.example.com/500", http_status=500)
    fn = _RouteFn(ContentConfig(use_registry=False))
    fn.setup()
    (page,) = list(fn.process(good[0]))
    assert isinstance(page, beam.pvalue.TaggedOutput) and page.tag == PAGES_TAG and page.value is good[0]
    (feed_out,) = list(fn.process(feed))
    raw, content, seconds = feed_out
    assert raw is feed and content == extract_content(feed) and seconds >= 0
    (dead,) = list(fn.process(failing))
    assert dead.tag == DEAD_LETTER_TAG
    assert (dead.value.step, dead.value.error_type, dead.value.payload) == (
        "extract",
        "http_error",
        raw_payload(failing),
    )
