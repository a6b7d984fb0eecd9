"""Training of the topic classifier (pure, Beam-free; ``newsflow train-topics`` is its command).

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
``<model dir>/topics-v1.bin`` (about 13 MB; quantizing took 30 s, so it is not done) +
``topics-v1.bin.calibration.json``.

This module holds the training and the ``ensure_*`` helpers that build models when missing, so
every tier can share them.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import uuid

import numpy as np

from newsflow.embedding import ensure_embedding_model
from newsflow.resources import is_remote, local_model_file
from newsflow.topics import (
    LABELS,
    SECTIONS,
    TOPIC_VERSION,
    TopicClassifier,
    clean_text,
    default_topic_path,
    load_examples,
    platt_fit,
)

FASTTEXT_PARAMS = dict(
    loss="ova", epoch=25, lr=0.5, wordNgrams=2, dim=50, minCount=1, bucket=50_000, thread=1, seed=0, verbose=0
)


def train(output: str | None = None) -> dict:
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
                f.write(" ".join("__label__" + lab for lab in labels) + " " + clean_text(text) + "\n")
        model = fasttext.train_supervised(input=train_file, **FASTTEXT_PARAMS)
    tmp_out = f"{output}.{os.getpid()}.{uuid.uuid4().hex}.tmp"  # unique: concurrent trainers never share a temp file
    model.save_model(tmp_out)
    # calibration: Platt per label on the held-out calibration split
    clf = TopicClassifier(model, {})
    texts = [t for t, _ in data["calibration"]]
    raw = clf.raw_scores(texts)
    has_section = np.array([any(lab in SECTIONS for lab in ls) for _, ls in data["calibration"]])
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
        "method": "Platt scaling on split bucket 7 (sha256 of the example key mod 10): "
        "pooled over sections, per article type",
        "platt": platt,
        "fasttext": FASTTEXT_PARAMS,
        "examples": {k: len(v) for k, v in data.items()},
    }
    tmp_calib = tmp_out + ".calibration.json"
    with open(tmp_calib, "w", encoding="utf-8") as f:
        json.dump(calib, f, indent=1, sort_keys=True)
    os.replace(tmp_out, output)
    os.replace(tmp_calib, output + ".calibration.json")
    types = {t: sum(t in ls for _, ls in data["train"]) for t in LABELS[len(SECTIONS) :]}
    return {
        "model": output,
        "examples": calib["examples"],
        "train_type_examples": types,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def ensure_topic_model(path: str | None = None) -> str:
    """Returns the topic model path, training it first when the model or its calibration is missing; a
    remote path (``gs://...``) is copied with its calibration to a local cache instead (FileNotFoundError
    when absent)."""
    path = path or default_topic_path()
    if is_remote(path):
        return local_model_file(path, (".calibration.json",))
    if not (os.path.exists(path) and os.path.exists(path + ".calibration.json")):
        train(path)
    return path


def ensure_models() -> dict[str, str]:
    """Builds every model this job owns when missing: ``{"topics": path, "embedding": path}``."""
    return {"topics": ensure_topic_model(), "embedding": ensure_embedding_model()}
