"""Topic classification accuracy against Google-News sections.

Formats:

* ``huffpost`` (default): News Category JSONL (``headline``, ``short_description``, ``category``,
  ``link``); categories are mapped with :data:`newsflow.core.topics.HUFFPOST_SECTIONS`, unmapped ones
  are skipped. The shipped copy of this file is also training data, so by default only rows in the
  held-out test buckets (8-9 of sha256("newsflow-topics:" + link|headline) mod 10, the fixed 20 % the
  classifier is never fitted or tuned on, see ``newsflow train-topics``) are scored; ``--all-rows`` scores
  every row (for files the model never saw, such as a held-back part).
* ``agnews``: AG News CSV (``row,class_index,title,description``), read from ../shared/data only
  (non-commercial: never copied into the repo, never trained on). Class 4 (Sci/Tech) accepts
  Technology or Science. All rows are scored (the model never saw AG News).

Rows whose text (case- and space-normalised) is also a training or calibration text of the shipped
data are never scored (``excluded_training_overlap`` counts them), so ``--all-rows`` on the shared
file still scores only rows the model never saw.

Prediction = what the product stores: the classifier's topic for the text's embedding (the pipeline's
embedder; vectors cached by content under ``<data dir>/vectors``), or none when it abstains (below its
threshold). ``accuracy`` counts an abstention as an error; ``coverage`` is the share of rows that got a
topic and ``accuracy_confident`` the accuracy on those. Baselines measured in the same run, trained on the
texts of buckets 0-7 with their headline and description copies: ``baseline_majority`` (most frequent
training section) and ``baseline_tfidf_logreg`` (TF-IDF 1-2-gram + one-vs-rest logistic regression,
liblinear, C=5). ``accuracy_over_baseline`` is the model's accuracy minus that baseline's.
``per_section`` (model and TF-IDF baseline) gives per gold class ``support``, ``precision``,
``recall`` and ``f1``.

Command (prints one JSON line)::

    newsflow eval topics --data /work/shared/data/huffpost-news-category/News_Category_Dataset_v3_sample.jsonl
    newsflow eval topics --format agnews --data /work/shared/data/ag-news-test/test.csv

Errors: bad input (a missing, unreadable or truncated file, a line that is not a JSON object,
a CSV without the AG News columns or with an unknown ``class_index``, no scorable row, an
unreadable ``--model``) prints ``error: <file>: <problem>`` to stderr and exits with code 2 (the
convention of :mod:`newsflow.cli.evaluation.inputs`).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import sys
import time
from collections import Counter
from collections.abc import Sequence

from newsflow.cli.evaluation.inputs import READ_ERRORS, InputError, describe, fail

COMMAND = "topics"
HELP = "score topic sections on HuffPost JSONL (or AG News CSV with --format agnews)"


def _open(path: str):
    return (
        gzip.open(path, "rt", encoding="utf-8", newline="")
        if path.endswith(".gz")
        else open(path, encoding="utf-8", newline="")
    )


def load_rows(path: str, fmt: str, all_rows: bool = False) -> list[tuple[str, tuple[str, ...], str]]:
    """``(text, accepted sections, gold class name)`` per scored row.

    Raises:
      InputError: the file cannot be read, a line is not a JSON object (huffpost), the CSV lacks
        ``class_index``/``title`` or has an unknown ``class_index`` (agnews).
      ValueError: unknown format.
    """
    try:
        return _load_rows(path, fmt, all_rows)
    except READ_ERRORS as e:
        if isinstance(e, InputError) or fmt not in ("huffpost", "agnews"):
            raise
        raise InputError(f"{path}: {describe(e)}") from None


def _load_rows(path: str, fmt: str, all_rows: bool) -> list[tuple[str, tuple[str, ...], str]]:
    from newsflow.core.topics import (
        AGNEWS_SECTIONS,
        HUFFPOST_SECTIONS,
        TEST_BUCKETS,
        split_bucket,
    )

    out = []
    if fmt == "huffpost":
        with _open(path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    r = json.loads(line)
                except json.JSONDecodeError as e:
                    raise InputError(
                        f"{path}:{n}: not a JSON line ({e.msg} at column {e.colno}); expected "
                        "HuffPost records {headline, short_description, category, link}"
                    ) from None
                if not isinstance(r, dict):
                    raise InputError(f"{path}:{n}: expected a JSON object, got {type(r).__name__}")
                for key in ("headline", "short_description", "category", "link"):
                    if r.get(key) is not None and not isinstance(r[key], str):
                        raise InputError(f"{path}:{n}: field {key!r} must be a string, got {type(r[key]).__name__}")
                section = HUFFPOST_SECTIONS.get(r.get("category") or "")
                if not section:
                    continue
                headline = r.get("headline") or ""
                if not all_rows and split_bucket(f"{r.get('link', '')}|{headline}") not in TEST_BUCKETS:
                    continue
                out.append((f"{headline}. {r.get('short_description') or ''}".strip(), (section,), section))
    elif fmt == "agnews":
        with _open(path) as f:
            reader = csv.DictReader(f)
            missing = [c for c in ("class_index", "title") if c not in (reader.fieldnames or [])]
            if missing:
                raise InputError(f"{path}: not an AG News CSV: missing columns {missing}")
            for r in reader:
                accepted = AGNEWS_SECTIONS.get(str(r.get("class_index", "")).strip())
                if accepted is None:
                    raise InputError(
                        f"{path}: row {r.get('row')!r} has an unknown class_index {r.get('class_index')!r}"
                    )
                text = f"{r.get('title') or ''}. {(r.get('description') or '').replace(chr(92) + 'n', ' ')}"
                out.append((text, accepted, "/".join(accepted)))
    else:
        raise ValueError(f"unknown format {fmt!r}")
    return out


def score(rows: Sequence[tuple[str, tuple[str, ...], str]], predicted: Sequence[str]) -> dict:
    """Accuracy and macro-F1 (over gold classes) of predicted sections.

    A prediction counts as correct when it is one of the row's accepted sections; for macro-F1 a
    prediction is mapped to the gold class that accepts it (else to itself).
    """
    table = per_section(rows, predicted)
    correct = [p in acc for p, (_, acc, _) in zip(predicted, rows, strict=False)]
    return {
        "accuracy": round(sum(correct) / len(rows), 4) if rows else 0.0,
        "macro_f1": round(sum(v["f1"] for v in table.values()) / len(table), 4) if table else 0.0,
    }


def per_section(rows: Sequence[tuple[str, tuple[str, ...], str]], predicted: Sequence[str]) -> dict[str, dict]:
    """Per gold class: ``{"support": int, "precision", "recall", "f1": float rounded to 4 places}``.

    Predictions are mapped to the gold class that accepts them (else kept as they are); precision is
    0.0 for a class never predicted.
    """
    gold = [g for _, _, g in rows]
    accept_to_class = {s: g for _, acc, g in rows for s in acc}
    pred_cls = [accept_to_class.get(p, p) for p in predicted]
    out = {}
    for c in sorted(set(gold)):
        tp = sum(1 for g, p in zip(gold, pred_cls, strict=False) if g == c and p == c)
        fp = sum(1 for g, p in zip(gold, pred_cls, strict=False) if g != c and p == c)
        fn = sum(1 for g, p in zip(gold, pred_cls, strict=False) if g == c and p != c)
        out[c] = {
            "support": tp + fn,
            "precision": round(tp / (tp + fp), 4) if tp + fp else 0.0,
            "recall": round(tp / (tp + fn), 4) if tp + fn else 0.0,
            "f1": round(2 * tp / (2 * tp + fp + fn), 4) if tp else 0.0,
        }
    return out


def _norm(text: str) -> str:
    return " ".join((text or "").lower().split())


def evaluate(path: str, fmt: str = "huffpost", all_rows: bool = False, model_path: str | None = None) -> dict:
    """Scores the topic model and the same-run baselines (see the module docstring)."""
    from newsflow.core.embedder import VectorCache, default_cache_dir, load_embedder
    from newsflow.core.topics import MODEL_FORMAT, SECTIONS, TopicClassifier, load_examples, load_training_examples

    rows = load_rows(path, fmt, all_rows)
    examples = load_examples()
    seen = {_norm(t) for split in ("train", "calibration") for t, _ in examples[split]}
    scored = [r for r in rows if _norm(r[0]) not in seen]
    excluded = len(rows) - len(scored)
    rows = scored
    if not rows:
        raise InputError(
            f"{path}: no scorable rows"
            + ("" if all_rows or fmt != "huffpost" else " in the held-out test buckets (try --all-rows)")
            + (f" ({excluded} rows are training texts)" if excluded else "")
        )
    try:
        clf = TopicClassifier.load(model_path)
    except (OSError, ValueError) as e:
        raise InputError(f"{model_path or 'topic model'}: cannot load the topic model: {describe(e)}") from None
    embedder = load_embedder()
    if clf.embedder_name != embedder.name:
        raise InputError(f"{model_path or 'topic model'}: trained on {clf.embedder_name!r}, not {embedder.name!r}")
    # The TF-IDF baseline is fitted on the texts of buckets 0-7 with their headline and description copies (its
    # code and settings are those it had beside the earlier TF-IDF + SVM model, so figures stay comparable).
    fitted_data = load_training_examples(copy_splits=("train", "calibration"), description_copies=True)
    fitted = fitted_data["train"] + fitted_data["calibration"]
    t0 = time.perf_counter()
    vectors = VectorCache(default_cache_dir()).embed(embedder, [t for t, _, _ in rows])
    labels = clf.predict(vectors, [""] * len(rows))
    seconds = time.perf_counter() - t0
    # an abstention (no topic) is an error: it is predicted as "" which no row accepts
    pred = [lab.topics[0][0] if lab.topics else "" for lab in labels]
    result = {
        "docs": len(rows),
        "format": fmt,
        "split": "all rows" if all_rows or fmt == "agnews" else "test buckets 8-9",
        "excluded_training_overlap": excluded,
        "model": MODEL_FORMAT,
        "embedder": embedder.name,
        **score(rows, pred),
    }
    confident = [(p, r) for p, r in zip(pred, rows, strict=True) if p]
    result["coverage"] = round(len(confident) / len(rows), 4)
    result["accuracy_confident"] = round(sum(p in r[1] for p, r in confident) / len(confident), 4) if confident else 0.0
    result["docs_per_second"] = round(len(rows) / seconds, 1) if seconds > 0 else None
    result["per_section"] = per_section(rows, pred)

    train = [
        (ex.text, next(lab for lab in ex.labels if lab in SECTIONS))
        for ex in fitted
        if any(lab in SECTIONS for lab in ex.labels)
    ]
    majority = Counter(s for _, s in train).most_common(1)[0][0]
    result["baseline_majority"] = {"section": majority, **score(rows, [majority] * len(rows))}
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier

    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
    x = vec.fit_transform([t for t, _ in train])
    lr = OneVsRestClassifier(LogisticRegression(max_iter=1000, C=5.0, solver="liblinear")).fit(x, [s for _, s in train])
    base_pred = list(lr.predict(vec.transform([t for t, _, _ in rows])))
    result["baseline_tfidf_logreg"] = {**score(rows, base_pred), "per_section": per_section(rows, base_pred)}
    result["accuracy_over_baseline"] = round(result["accuracy"] - result["baseline_tfidf_logreg"]["accuracy"], 4)
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds ``--data``, ``--format``, ``--all-rows``, ``--model``."""
    parser.add_argument("--data", required=True, help="HuffPost JSONL or AG News CSV (plain or .gz)")
    parser.add_argument(
        "--format", choices=("huffpost", "agnews"), default="huffpost", help="input format (default huffpost)"
    )
    parser.add_argument(
        "--all-rows", action="store_true", help="huffpost: score every row, not only the held-out test buckets"
    )
    parser.add_argument(
        "--model", default=None, help="topic model path (default: the shipped data/topics/topic_model.npz)"
    )


def run(args: argparse.Namespace) -> int:
    """Prints one JSON line.

    Returns:
      0 on success; 2 on bad input, after printing ``error: <file>: <problem>`` to stderr.
    """
    try:
        result = evaluate(args.data, args.format, args.all_rows, args.model)
    except InputError as e:
        return fail(e)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=HELP)
    add_arguments(p)
    sys.exit(run(p.parse_args()))
