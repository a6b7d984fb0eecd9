"""Batch job: the text-embedding model, and (with ``--force``) the topic classifier, from shipped data.

The topic classifier is shipped in the repository (``data/topics/topic_model.npz``); this command rebuilds it
reproducibly from ``data/topics/`` (:mod:`newsflow.core.topic_training` describes data, split and model). Sentence
vectors are cached by content under ``<data dir>/vectors``: the first rebuild embeds about 8,300 texts.

Run::

    newsflow train-topics                 # builds the 128-dim text model when missing (seconds)
    newsflow train-topics --force         # rebuilds data/topics/topic_model.npz (+ .json summary with CV figures)
    newsflow train-topics --cv            # 5-fold cross-validation of the settings on buckets 0-7; writes nothing
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from newsflow.core.embedder import default_cache_dir
from newsflow.core.embedding import default_embedding_path, ensure_embedding_model
from newsflow.core.topic_training import MODEL_PARAMS, cross_validate, train
from newsflow.core.topics import MODEL_FORMAT, TopicClassifier, default_topic_path
from newsflow.runtime.settings import Settings, add_settings_arguments

COMMAND = "train-topics"
HELP = "build the text-embedding model; --force rebuilds the shipped topic classifier from data/topics"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds ``--data-dir``, ``--model-dir``, ``--output``, ``--force`` and ``--cv``."""
    add_settings_arguments(parser, redis=False, models=True)
    parser.add_argument("--output", default=None, help="topic model path (default data/topics/topic_model.npz)")
    parser.add_argument("--force", action="store_true", help="rebuild the topic classifier")
    parser.add_argument(
        "--cv",
        action="store_true",
        help="print the 5-fold cross-validated section accuracy of the settings on buckets 0-7; writes no model",
    )


def run(args: argparse.Namespace) -> int:
    """Prints one JSON line; returns 0."""
    settings = Settings.resolve(args)
    cache = default_cache_dir(settings.data_dir)
    if getattr(args, "cv", False):
        print(json.dumps({"cross_validation": cross_validate(cache_dir=cache), "params": MODEL_PARAMS}))
        return 0
    path = args.output or default_topic_path()
    if args.force or not os.path.exists(path):
        summary = train(path, cache_dir=cache)
    else:
        summary = {"model": path, "format": MODEL_FORMAT, "skipped": "shipped (use --force to rebuild)"}
        TopicClassifier.load(path)  # a broken file fails here, not in the pipeline
    summary["embedding_model"] = ensure_embedding_model(default_embedding_path(settings.model_dir))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(prog="python -m newsflow.cli.train_topics", description=HELP)
    add_arguments(p)
    sys.exit(run(p.parse_args()))
