"""Beam glue for enrichment: Article -> StoryArticle with topics, entities, embedding, authority.

:class:`EnrichArticles` batches articles (``BatchElements``) and runs, per batch, the pure
components: :class:`newsflow.core.topics.TopicClassifier` on title + lead, spaCy entities
(:class:`newsflow.core.entities.EntityExtractor`, one ``nlp.pipe`` per model over the batch: en, es, de,
fr, pt, it with language-neutral keys; other languages are counted), the 128-dim embedding
(:class:`newsflow.core.embedding.TextModel`; es, de, fr, pt, it in the cross-language form of
:mod:`newsflow.core.multilingual`) and article quality/authority (:mod:`newsflow.core.quality`). Every
model, spaCy's included, is loaded once per worker process through ``apache_beam.utils.shared`` in
``setup()``; parallelism comes from the runner's workers. The output feeds
:class:`newsflow.transforms.stories.AssignStories`.
"""

from __future__ import annotations

from dataclasses import dataclass

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics
from apache_beam.utils import shared

from newsflow.core.stories import story_article
from newsflow.transforms.deadletter import DEAD_LETTER_TAG, dead_letter

METRICS_NAMESPACE = "newsflow.enrich"
LEAD_CHARS = 1000


@dataclass(frozen=True)
class EnrichConfig:
    """Configuration of :class:`EnrichArticles`.

    Attributes:
      topic_model_path / text_model_path: model files (``None``: defaults, built when missing).
      topic_threshold: minimum calibrated probability for a topic label.
      max_batch_size: articles per batch (spaCy ``nlp.pipe`` and fastText calls).
    """

    topic_model_path: str | None = None
    text_model_path: str | None = None
    topic_threshold: float = 0.5
    max_batch_size: int = 64


class _Models:
    """Per-worker models (held through ``shared.Shared``): topics, text embedding and every spaCy entity
    model (languages share models)."""

    def __init__(self, config: EnrichConfig):
        from newsflow.core.embedding import load_text_model
        from newsflow.core.entities import SUPPORTED_LANGUAGES, load_nlp
        from newsflow.core.topic_training import ensure_topic_model
        from newsflow.core.topics import TopicClassifier

        self.topics = TopicClassifier.load(ensure_topic_model(config.topic_model_path), config.topic_threshold)
        self.text = load_text_model(config.text_model_path)
        for language in sorted(SUPPORTED_LANGUAGES):
            load_nlp(language)


class _EnrichFn(beam.DoFn):
    """Batch of Articles -> StoryArticles; a failing article is dead-lettered, the rest go on."""

    def __init__(self, config: EnrichConfig, handle: shared.Shared):
        self._config = config
        self._handle = handle
        self.enriched = Metrics.counter(METRICS_NAMESPACE, "enriched")
        self.no_entity_model = Metrics.counter(METRICS_NAMESPACE, "entities_unsupported_language")
        self.dead = Metrics.counter(METRICS_NAMESPACE, "dead_lettered_enrich")

    def setup(self):
        from newsflow.core.entities import EntityExtractor

        self._models = self._handle.acquire(lambda: _Models(self._config))
        self._entities = EntityExtractor(lead_chars=LEAD_CHARS, batch_size=self._config.max_batch_size)

    def process(self, batch):
        docs = [f"{a.title}\n{(a.text or '')[:LEAD_CHARS]}".strip() for a in batch]
        languages = [a.language for a in batch]
        topics = self._models.topics.predict(docs)
        emb = self._models.text.embed(docs, languages)
        skipped = sum(self._entities.skipped.values())
        ents = self._entities.extract_many([(a.title, a.text or "") for a in batch], languages)
        self.no_entity_model.inc(sum(self._entities.skipped.values()) - skipped)
        for i, a in enumerate(batch):
            try:
                story_art = story_article(a, topics[i], ents[i], emb[i])
            except ValueError as e:
                self.dead.inc()
                yield pvalue.TaggedOutput(
                    DEAD_LETTER_TAG,
                    dead_letter(
                        "enrich",
                        "invalid_article",
                        str(e),
                        repr(a._replace(text=(a.text or "")[:1000])).encode("utf-8"),
                        a.url,
                    ),
                )
                continue
            self.enriched.inc()
            yield story_art


class EnrichArticles(beam.PTransform):
    """Article -> StoryArticle (``{"main", "dead_letter"}``), timestamps restored to the article's event time
    (its message's timestamp: ``BatchElements`` does not keep element timestamps)."""

    def __init__(self, config: EnrichConfig = EnrichConfig()):
        super().__init__()
        self._config = config

    def expand(self, pcoll):
        out = (
            pcoll
            | "Batch" >> beam.BatchElements(min_batch_size=1, max_batch_size=self._config.max_batch_size)
            | "Enrich"
            >> beam.ParDo(_EnrichFn(self._config, shared.Shared())).with_outputs(DEAD_LETTER_TAG, main="main")
        )
        main = out.main | "RestampEventTime" >> beam.Map(lambda s: beam.window.TimestampedValue(s, s.event_time))
        return {"main": main, DEAD_LETTER_TAG: out[DEAD_LETTER_TAG]}
