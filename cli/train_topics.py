"""Batch job: train the topic classifier (and the text/embedding model) from shipped data.

The data, the split and the training are described in :mod:`newsflow.core.topic_training`.

Run::

    python -m newsflow.cli.train_topics [--output PATH] [--force]
    newsflow train-topics [--output PATH] [--force]
    newsflow train-topics --cv    # cross-validated section accuracy on buckets 0-7 only; trains nothing
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from newsflow.core.embedding import default_embedding_path, ensure_embedding_model
from newsflow.core.topic_training import (  # noqa: F401 (re-exported)
    MODEL_PARAMS,
    cross_validate,
    ensure_models,
    ensure_topic_model,
    train,
)
from newsflow.core.topics import MODEL_FORMAT, default_topic_path, model_format
from newsflow.runtime.settings import Settings, add_settings_arguments

COMMAND = "train-topics"
HELP = "train the topic classifier and the text-embedding model from data/topics (deterministic, about 1-4 min)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds ``--model-dir``, ``--output`` and ``--force``."""
    add_settings_arguments(parser, redis=False, models=True)
    parser.add_argument("--output", default=None, help="topic model path (default <model dir>/topics-v1.bin)")
    parser.add_argument("--force", action="store_true", help="retrain even if the model exists")
    parser.add_argument(
        "--cv",
        action="store_true",
        help="print the cross-validated section accuracy of the model settings on buckets 0-7 (4 folds); "
        "writes no model",
    )


def run(args: argparse.Namespace) -> int:
    """Trains the topic model when forced, missing or of an older format (and the embedding model when
    missing), or with ``--cv`` only cross-validates its settings; prints one JSON line."""
    if getattr(args, "cv", False):
        print(json.dumps({"cross_validation": cross_validate(), "params": MODEL_PARAMS}, default=list))
        return 0
    settings = Settings.resolve(args)
    path = args.output or default_topic_path(settings.model_dir)
    if args.force or not os.path.exists(path) or model_format(path) != MODEL_FORMAT:  # missing, or an older format
        summary = train(path)
    else:
        summary = {"model": path, "skipped": "exists (use --force to retrain)"}
    summary["embedding_model"] = ensure_embedding_model(default_embedding_path(settings.model_dir))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m newsflow.cli.train_topics", description=HELP)
    add_arguments(p)
    sys.exit(run(p.parse_args()))
