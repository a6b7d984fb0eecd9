"""Beam glue for enrichment: Article -> StoryArticle with topics, entities, embedding, authority.

:class:`EnrichArticles` batches articles (``BatchElements``) and runs, per batch, the pure
components: :class:`newsflow.core.topics.TopicClassifier` on title + lead, spaCy entities
(:class:`newsflow.core.entities.EntityExtractor`: en, es, de, fr, pt, it with language-neutral keys;
other languages are counted), the 128-dim embedding (:class:`newsflow.core.embedding.TextModel`; es, de,
fr, pt, it in the cross-language form of :mod:`newsflow.core.multilingual`) and article quality/authority
(:mod:`newsflow.core.quality`). Models are loaded once per worker through ``apache_beam.utils.shared``.
The output feeds :class:`newsflow.transforms.stories.AssignStories`.

With ``EnrichConfig.entity_process`` (the streaming job sets it on local runners with more than one
CPU) entities come from :class:`newsflow.runtime.entity_process.EntityProcess`, one child process per worker
process: a batch's NER runs there while this process computes its topics and embeddings and goes on
with the next batches and the fused steps after enrichment; outputs leave in input order with each
batch's own timestamp and window, the last ones at ``finish_bundle``. If the child dies or fails on a
batch, that batch's entities are extracted in-process (counter ``entities_in_process_fallback``), so
the output is the same either way.
"""

from __future__ import annotations

import collections
import logging
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

import apache_beam as beam
from apache_beam import pvalue
from apache_beam.metrics import Metrics
from apache_beam.utils import shared
from apache_beam.utils.windowed_value import WindowedValue

from newsflow.core.stories import story_article
from newsflow.transforms.deadletter import DEAD_LETTER_TAG, dead_letter, rewindowed

_LOG = logging.getLogger(__name__)
METRICS_NAMESPACE = "newsflow.enrich"
LEAD_CHARS = 1000
#: Batches whose entities may be pending in the entity child process (each ``max_batch_size`` articles).
BATCHES_IN_FLIGHT = 16
#: Seconds to wait for one batch's entities from the child (the first answer also waits for its model
#: loading, ~5-7 s here; a batch takes well under a second) before the child is taken for hung: it is
#: killed and this and every later batch is extracted in-process.
ENTITY_WAIT_S = 120.0


@dataclass(frozen=True)
class EnrichConfig:
    """Configuration of :class:`EnrichArticles`.

    Attributes:
      topic_model_path / text_model_path: model files (``None``: defaults, built when missing).
      topic_threshold: minimum calibrated probability for a topic label.
      max_batch_size: articles per batch (spaCy ``nlp.pipe`` and fastText calls).
      entity_process: run spaCy NER in a child process beside the rest of the job
        (:class:`newsflow.runtime.entity_process.EntityProcess`) instead of in the DoFn's thread.
    """

    topic_model_path: str | None = None
    text_model_path: str | None = None
    topic_threshold: float = 0.5
    max_batch_size: int = 64
    entity_process: bool = False


class _Models:
    """Per-worker models (held through ``shared.Shared``)."""

    def __init__(self, config: EnrichConfig):
        from newsflow.core.embedding import load_text_model
        from newsflow.core.entities import SUPPORTED_LANGUAGES, load_nlp
        from newsflow.core.topic_training import ensure_topic_model
        from newsflow.core.topics import TopicClassifier

        self.topics = TopicClassifier.load(ensure_topic_model(config.topic_model_path), config.topic_threshold)
        self.text = load_text_model(config.text_model_path)
        if not config.entity_process:  # else the entity child loads them
            for language in sorted(SUPPORTED_LANGUAGES):  # every entity model, once (languages share models)
                load_nlp(language)


def _entity_inputs(batch) -> tuple[list[tuple[str, str]], list[str]]:
    """``([(title, text), ...], [language, ...])`` of a batch of Articles: what entity extraction reads."""
    return [(a.title, a.text or "") for a in batch], [a.language for a in batch]


class _EnrichFn(beam.DoFn):
    """Batch of Articles -> StoryArticles; a failing article is dead-lettered, the rest go on."""

    def __init__(self, config: EnrichConfig, handle: shared.Shared):
        self._config = config
        self._handle = handle
        self.enriched = Metrics.counter(METRICS_NAMESPACE, "enriched")
        self.no_entity_model = Metrics.counter(METRICS_NAMESPACE, "entities_unsupported_language")
        self.dead = Metrics.counter(METRICS_NAMESPACE, "dead_lettered_enrich")
        self.fallback = Metrics.counter(METRICS_NAMESPACE, "entities_in_process_fallback")

    def setup(self):
        from newsflow.core.entities import EntityExtractor
        from newsflow.runtime.entity_process import shared_entity_process

        # the child first: it loads the entity models while this process loads the others
        self._child = shared_entity_process(LEAD_CHARS) if self._config.entity_process else None
        self._models = self._handle.acquire(lambda: _Models(self._config))
        self._entities = EntityExtractor(lead_chars=LEAD_CHARS)
        self._pending: collections.deque = collections.deque()

    def start_bundle(self):
        self._pending = collections.deque()

    def process(self, batch, timestamp=beam.DoFn.TimestampParam, win=beam.DoFn.WindowParam):
        if self._child is None:
            yield from self._outputs(batch, None)
            return
        future = self._child.submit(*_entity_inputs(batch))
        computed = self._topics_and_embeddings(batch)
        self._pending.append((batch, future, computed, WindowedValue(None, timestamp, (win,))))
        while self._pending and (len(self._pending) > BATCHES_IN_FLIGHT or self._pending[0][1].done()):
            yield from self._earlier_outputs(*self._pending.popleft())

    def finish_bundle(self):
        while self._pending:
            yield from self._earlier_outputs(*self._pending.popleft())

    def _earlier_outputs(self, batch, future, computed, where: WindowedValue):
        """The outputs of an earlier batch, carrying that batch's timestamp and window."""
        return rewindowed(self._outputs(batch, future, computed), where)

    def _topics_and_embeddings(self, batch):
        docs = [f"{a.title}\n{(a.text or '')[:LEAD_CHARS]}".strip() for a in batch]
        return self._models.topics.predict(docs), self._models.text.embed(docs, [a.language for a in batch])

    def _entities_of(self, batch, future):
        """Entities of a batch: the child's answer, else (no child, or it failed) extracted here."""
        from newsflow.runtime.entity_process import EntityProcessError

        if future is not None:
            try:
                ents, skipped = future.result(timeout=ENTITY_WAIT_S)
                self.no_entity_model.inc(sum(skipped.values()))
                return ents
            except (EntityProcessError, FutureTimeout):
                if not future.done():  # hung child: stop it; later batches fall back at once
                    _LOG.warning(
                        "entity child process %s gave no answer within %s s: killed; entities are extracted "
                        "in-process from now on",
                        self._child.pid,
                        ENTITY_WAIT_S,
                    )
                    self._child.close()
                self.fallback.inc()
        before = sum(self._entities.skipped.values())
        ents = self._entities.extract_many(*_entity_inputs(batch))
        self.no_entity_model.inc(sum(self._entities.skipped.values()) - before)
        return ents

    def _outputs(self, batch, future, computed=None):
        topics, emb = computed if computed is not None else self._topics_and_embeddings(batch)
        ents = self._entities_of(batch, future)
        out = []
        for i, a in enumerate(batch):
            try:
                story_art = story_article(a, topics[i], ents[i], emb[i])
            except ValueError as e:
                self.dead.inc()
                out.append(
                    pvalue.TaggedOutput(
                        DEAD_LETTER_TAG,
                        dead_letter(
                            "enrich",
                            "invalid_article",
                            str(e),
                            repr(a._replace(text=(a.text or "")[:1000])).encode("utf-8"),
                            a.url,
                        ),
                    )
                )
                continue
            self.enriched.inc()
            out.append(story_art)
        return out


class EnrichArticles(beam.PTransform):
    """Article -> StoryArticle (``{"main", "dead_letter"}``), timestamps restored to event time."""

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
