"""Batch job: train the topic classifier (and the text/embedding model) from shipped data.

Data (``data/topics/``, CC BY 4.0, see its README.md): the HuffPost News Category sample
(headline + short description, 29 sections mapped to Google-News sections) and the UCI News
Aggregator headlines (b/t/e/m mapped to Business/Technology/Entertainment/Health). Article types
(obituary, explainer, historical) are weak labels from headline patterns
(:data:`newsflow.topics.TYPE_PATTERNS`).

Split, by SHA-256 of a stable key (HuffPost: ``link|headline``; News Aggregator: the STORY id, so
a whole story stays on one side): bucket = sha256("newsflow-topics:" + key) mod 10; buckets 0-6
train, 7 calibration (Platt scaling), 8-9 test (``newsflow eval topics`` scores only these rows
of the shipped files). AG News is never used here.

Training is deterministic (fastText, one thread, seed 0) and takes a few seconds. Output:
``var/models/topics-v1.bin`` (about 13 MB; quantizing took 30 s, so it is not done) +
``topics-v1.bin.calibration.json``.

Run::

    python -m jobs.train_topics [--output PATH] [--force]
    newsflow train-topics [--output PATH] [--force]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Optional

import numpy as np

from newsflow.embedding import ensure_embedding_model
from newsflow.topics import LABELS, SECTIONS, TOPIC_VERSION, TopicClassifier, clean_text, default_topic_path, load_examples, platt_fit

COMMAND = "train-topics"
HELP = "train the topic classifier and the text-embedding model from data/topics (deterministic, seconds)"
FASTTEXT_PARAMS = dict(loss="ova", epoch=25, lr=0.5, wordNgrams=2, dim=50, minCount=1, bucket=50_000, thread=1, seed=0, verbose=0)


def train(output: Optional[str] = None) -> dict:
    """Trains, calibrates and writes the topic model; returns a summary dict.

    Raises:
      OSError: the output cannot be written.
    """
    import fasttext

    output = output or default_topic_path()
    t0 = time.perf_counter()
    data = load_examples()
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        train_file = os.path.join(tmp, "train.txt")
        with open(train_file, "w", encoding="utf-8") as f:
            for text, labels in data["train"]:
                f.write(" ".join("__label__" + l for l in labels) + " " + clean_text(text) + "\n")
        model = fasttext.train_supervised(input=train_file, **FASTTEXT_PARAMS)
    tmp_out = output + ".tmp"
    model.save_model(tmp_out)
    # calibration: Platt per label on the held-out calibration split
    clf = TopicClassifier(model, {})
    texts = [t for t, _ in data["calibration"]]
    raw = clf.raw_scores(texts)
    has_section = np.array([any(l in SECTIONS for l in ls) for _, ls in data["calibration"]])
    platt = {}
    # sections: one pooled (a, b) over all (example, section) pairs, so a label's prior in the small
    # calibration split (whole stories of one category) does not shift its intercept;
    # article types: one (a, b) each.
    n_sec = len(SECTIONS)
    y_sec = np.array([[s in ls for s in SECTIONS] for _, ls in data["calibration"]], dtype=float)[has_section]
    pooled = list(platt_fit(raw[has_section, :n_sec].ravel(), y_sec.ravel()))
    for label in SECTIONS:
        platt[label] = pooled
    for j in range(n_sec, len(LABELS)):
        y = np.array([LABELS[j] in ls for _, ls in data["calibration"]], dtype=float)
        platt[LABELS[j]] = list(platt_fit(raw[:, j], y))
    calib = {
        "version": TOPIC_VERSION,
        "method": "Platt scaling on split bucket 7 (sha256 of the example key mod 10): pooled over sections, per article type",
        "platt": platt,
        "fasttext": FASTTEXT_PARAMS,
        "examples": {k: len(v) for k, v in data.items()},
    }
    with open(output + ".calibration.json.tmp", "w", encoding="utf-8") as f:
        json.dump(calib, f, indent=1, sort_keys=True)
    os.replace(tmp_out, output)
    os.replace(output + ".calibration.json.tmp", output + ".calibration.json")
    types = {t: sum(t in ls for _, ls in data["train"]) for t in LABELS[len(SECTIONS):]}
    return {"model": output, "examples": calib["examples"], "train_type_examples": types, "seconds": round(time.perf_counter() - t0, 2)}


def ensure_topic_model(path: Optional[str] = None) -> str:
    """Returns the topic model path, training it first when the model or its calibration is missing."""
    path = path or default_topic_path()
    if not (os.path.exists(path) and os.path.exists(path + ".calibration.json")):
        train(path)
    return path


def ensure_models() -> dict[str, str]:
    """Builds every model this job owns when missing: ``{"topics": path, "embedding": path}``."""
    return {"topics": ensure_topic_model(), "embedding": ensure_embedding_model()}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds ``--output`` and ``--force``."""
    parser.add_argument("--output", default=None, help=f"model path (default {default_topic_path()})")
    parser.add_argument("--force", action="store_true", help="retrain even if the model exists")


def run(args: argparse.Namespace) -> int:
    """Trains the topic model (and the embedding model when missing); prints one JSON line."""
    path = args.output or default_topic_path()
    if args.force or not os.path.exists(path) or not os.path.exists(path + ".calibration.json"):
        summary = train(path)
    else:
        summary = {"model": path, "skipped": "exists (use --force to retrain)"}
    summary["embedding_model"] = ensure_embedding_model()
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m jobs.train_topics", description=HELP)
    add_arguments(p)
    sys.exit(run(p.parse_args()))
