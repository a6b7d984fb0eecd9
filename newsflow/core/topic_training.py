"""Training of the topic classifier (pure, Beam-free; ``newsflow train-topics`` is its command).

Data (``data/topics/``, see its README.md): the HuffPost News Category sample (CC BY 4.0; headline +
short description, 29 categories), the UCI News Aggregator headlines (CC BY 4.0; b/t/e/m) and 75 web
news texts labelled by their URL's section (MIT-licensed fixtures; provenance and builder in the README).
AG News (non-commercial) is never used here.

Split, by SHA-256 of a stable key (HuffPost: ``link|headline``; News Aggregator: the STORY id, so a whole story
stays on one side; web pages: the URL): bucket = sha256("newsflow-topics:" + key) mod 10. Buckets 0-7 (80 %) are
the rows settings are chosen on, by 5-fold cross-validation (:func:`cross_validate`; fold =
sha256("newsflow-topics-cv:" + key) mod 5); buckets 8-9 (the fixed held-out 20 %) are never read here and are
what ``newsflow eval topics`` scores on the shipped file. The shipped model is fitted on buckets 0-7.

Features: the embedding of each text (:class:`newsflow.core.embedder.Embedder`, the pipeline's embedder),
standardised per dimension. Model: scikit-learn ``LogisticRegression`` (multinomial, lbfgs, L2, ``C`` of
:data:`MODEL_PARAMS`) over the source classes (``target: "source_class"``,
:func:`newsflow.core.topics.source_class`; ``"section"`` trains on the 9 sections instead). Deterministic given
the vectors. Vectors are cached by content under ``<data dir>/vectors``
(:class:`newsflow.core.embedder.VectorCache`): the first build embeds about 8,300 texts (about 30 ms each on an
idle core), later builds read them.

Output: :data:`newsflow.core.topics.MODEL_FILE` (``data/topics/topic_model.npz``, about 100 kB) and a
``.json`` summary beside it (params, data counts, cross-validation figures).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Sequence

import numpy as np

from newsflow.core.embedder import Embedder, VectorCache, default_cache_dir, load_embedder
from newsflow.core.topics import (
    MODEL_FORMAT,
    SECTIONS,
    Example,
    TopicClassifier,
    class_section,
    default_topic_path,
    huffpost_example,
    load_training_examples,
    split_bucket,
)

# Chosen by :func:`cross_validate` on buckets 0-7 (figures in data/topics/README.md).
MODEL_PARAMS = {
    "c": 0.01,
    "target": "source_class",
    "class_weight": None,
    "headline_copies": False,
    "threshold": 0.0,
}
CV_FOLDS = 5
#: News Aggregator headlines used per story: its 4,588 headlines are 62 stories, mostly rewordings of each other,
#: so more of them add embedding cost to a rebuild, not information.
AGGREGATOR_PER_STORY = 10


def cv_fold(key: str, folds: int = CV_FOLDS) -> int:
    """Cross-validation fold of an example key: sha256("newsflow-topics-cv:" + key) mod ``folds``."""
    return int(hashlib.sha256(("newsflow-topics-cv:" + key).encode("utf-8")).hexdigest(), 16) % folds


def fit_rows(params: dict = MODEL_PARAMS) -> list[Example]:
    """The examples of buckets 0-7 that have a source class, at most :data:`AGGREGATOR_PER_STORY` News Aggregator
    headlines per story (the first in file order), with HuffPost headline copies per ``params``; with
    ``params["target"] == "section"`` each row's class is its section (``"section:<Section>"``) and rows without
    one are left out."""
    copies = ("train", "calibration") if params.get("headline_copies") else ()
    data = load_training_examples(copy_splits=copies)
    per_story: Counter = Counter()
    out = []
    for e in data["train"] + data["calibration"]:
        if not e.source_class:
            continue
        if e.source_class.startswith("aggregator:"):
            per_story[e.key] += 1
            if per_story[e.key] > params.get("aggregator_per_story", AGGREGATOR_PER_STORY):
                continue
        if params.get("target") == "section":
            section = class_section(e.source_class)
            if not section:
                continue
            e = e._replace(source_class=f"section:{section}")
        out.append(e)
    return out


def fit(
    vectors: np.ndarray, classes: Sequence[str], embedder_name: str, params: dict = MODEL_PARAMS
) -> TopicClassifier:
    """Fits the classifier on ``vectors`` (``(n, dim)``) labelled with source ``classes``.

    Raises:
      ValueError: fewer than two classes, or lengths that differ.
    """
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(vectors, dtype=np.float64)
    if len(x) != len(classes):
        raise ValueError(f"{len(x)} vectors but {len(classes)} classes")
    if len(set(classes)) < 2:
        raise ValueError("a topic model needs at least two classes")
    mean = x.mean(axis=0)
    scale = x.std(axis=0) + 1e-6
    lr = LogisticRegression(C=params["c"], class_weight=params.get("class_weight"), max_iter=2000)
    lr.fit((x - mean) / scale, list(classes))
    return TopicClassifier(
        [str(c) for c in lr.classes_], lr.coef_, lr.intercept_, mean, scale, embedder_name, params["threshold"]
    )


def embed_texts(texts: Sequence[str], embedder: Embedder | None = None, cache_dir: str | None = None) -> np.ndarray:
    """Vectors of ``texts`` through the content-addressed cache (default ``<data dir>/vectors``)."""
    embedder = embedder or load_embedder()
    return VectorCache(cache_dir or default_cache_dir()).embed(embedder, list(texts))


def _heldout_huffpost(buckets: Sequence[int]) -> list[tuple[Example, str]]:
    """HuffPost rows of ``buckets`` with a section, as ("headline. description") examples with their section."""
    from newsflow.core.embedding import read_huffpost

    out = []
    for r in read_huffpost():
        e = huffpost_example(r)
        section = class_section(e.source_class)
        if e.text and section and split_bucket(e.key) in buckets:
            out.append((e, section))
    return out


def cross_validate(params: dict = MODEL_PARAMS, embedder: Embedder | None = None, cache_dir: str | None = None) -> dict:
    """Section accuracy of ``params`` by 5-fold cross-validation on buckets 0-7 (never buckets 8-9).

    Each fold fits on the other folds' examples (copies included) and scores its HuffPost rows that have a section,
    as "headline. description", exactly like ``newsflow eval topics`` (an abstention counts as an error).

    Returns:
      ``{"accuracy", "accuracy_sd", "coverage", "fold_accuracy": [...], "docs", "seconds"}``; ``accuracy_sd`` is the
      standard deviation of the fold accuracies.
    """
    t0 = time.perf_counter()
    embedder = embedder or load_embedder()
    pool = fit_rows(params)
    scored = _heldout_huffpost(range(0, 8))
    x_pool = embed_texts([e.text for e in pool], embedder, cache_dir)
    x_scored = embed_texts([e.text for e, _ in scored], embedder, cache_dir)
    pool_fold = np.array([cv_fold(e.key) for e in pool])
    scored_fold = np.array([cv_fold(e.key) for e, _ in scored])
    fold_acc, covered, total = [], 0, 0
    for k in range(CV_FOLDS):
        keep = pool_fold != k
        clf = fit(x_pool[keep], [e.source_class for e, m in zip(pool, keep, strict=True) if m], embedder.name, params)
        idx = np.flatnonzero(scored_fold == k)
        pred = clf.predict(x_scored[idx], [""] * len(idx))
        gold = [scored[i][1] for i in idx]
        hits = sum(bool(p.topics) and p.topics[0][0] == g for p, g in zip(pred, gold, strict=True))
        covered += sum(bool(p.topics) for p in pred)
        total += len(idx)
        fold_acc.append(round(hits / len(idx), 4))
    return {
        "accuracy": round(float(np.mean(fold_acc)), 4),
        "accuracy_sd": round(float(np.std(fold_acc)), 4),
        "coverage": round(covered / total, 4) if total else 0.0,
        "fold_accuracy": fold_acc,
        "docs": total,
        "seconds": round(time.perf_counter() - t0, 1),
    }


def train(
    output: str | None = None,
    params: dict = MODEL_PARAMS,
    embedder: Embedder | None = None,
    cache_dir: str | None = None,
    with_cv: bool = True,
) -> dict:
    """Fits the shipped classifier on buckets 0-7 and writes it (and its ``.json`` summary); returns the summary.

    Raises:
      OSError: the output cannot be written.
    """
    t0 = time.perf_counter()
    output = output or default_topic_path()
    embedder = embedder or load_embedder()
    rows = fit_rows(params)
    vectors = embed_texts([e.text for e in rows], embedder, cache_dir)
    clf = fit(vectors, [e.source_class for e in rows], embedder.name, params)
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    clf.save(output)
    summary = {
        "model": os.path.basename(output),
        "format": MODEL_FORMAT,
        "embedder": embedder.name,
        "params": params,
        "fitted_examples": len(rows),
        "classes": clf.classes,
        "sections_with_classes": [s for s in SECTIONS if any(class_section(c) == s for c in clf.classes)],
        "cross_validation": cross_validate(params, embedder, cache_dir) if with_cv else None,
        "sha256": _sha256(output),
    }
    with open(_summary_path(output), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1, sort_keys=True)
        f.write("\n")
    summary["seconds"] = round(time.perf_counter() - t0, 1)
    return summary


def _summary_path(model_path: str) -> str:
    return os.path.splitext(model_path)[0] + ".json"


def _sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()
