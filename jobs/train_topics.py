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

from newsflow.embedding import ensure_embedding_model
from newsflow.topic_training import FASTTEXT_PARAMS, ensure_models, ensure_topic_model, train  # noqa: F401 (re-exported)
from newsflow.topics import default_topic_path

COMMAND = "train-topics"
HELP = "train the topic classifier and the text-embedding model from data/topics (deterministic, seconds)"


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
