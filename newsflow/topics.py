"""Topic classification: Google-News-style sections plus evergreen article types.

Labels (:data:`SECTIONS`, :data:`ARTICLE_TYPES`):

* sections: World, Nation, Business, Technology, Entertainment, Sports, Science, Health, Politics;
* article types, which drive the evergreen decay rate: obituary, explainer, historical.

The model is a fastText supervised classifier with one-vs-all losses (so one text can carry a
section and a type) trained by ``newsflow train-topics`` from the CC BY data in ``data/topics/``.
Raw one-vs-all scores are calibrated per label by Platt scaling (a logistic regression on the
logit of the raw score, fitted on a held-out calibration split; Platt 1999), stored next to the
model as ``<model>.calibration.json``. :meth:`TopicClassifier.predict` returns only labels whose
calibrated probability reaches the threshold (default 0.5): low confidence gives no label.

Label mappings from the source data sets (documented in ``data/topics/README.md``) live here so
that training and evaluation use the same ones.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence

import numpy as np

TOPIC_VERSION = "v1"
TRAIN_BUCKETS = range(0, 7)
CALIBRATION_BUCKET = 7
TEST_BUCKETS = (8, 9)
SECTIONS = ("World", "Nation", "Business", "Technology", "Entertainment", "Sports", "Science", "Health", "Politics")
ARTICLE_TYPES = ("obituary", "explainer", "historical")
LABELS = SECTIONS + ARTICLE_TYPES

# HuffPost News Category v3 -> section. Categories not listed (lifestyle and identity sections such
# as STYLE & BEAUTY, PARENTING, QUEER VOICES, WEIRD NEWS, MEDIA, IMPACT, ...) have no Google-News
# section and are not used for sections.
HUFFPOST_SECTIONS = {
    "POLITICS": "Politics",
    "WORLD NEWS": "World",
    "U.S. NEWS": "Nation",
    "CRIME": "Nation",
    "EDUCATION": "Nation",
    "ENTERTAINMENT": "Entertainment",
    "COMEDY": "Entertainment",
    "CULTURE & ARTS": "Entertainment",
    "SPORTS": "Sports",
    "BUSINESS": "Business",
    "MONEY": "Business",
    "TECH": "Technology",
    "SCIENCE": "Science",
    "ENVIRONMENT": "Science",
    "WELLNESS": "Health",
}
# UCI News Aggregator CATEGORY -> section (t is "science and technology"; it maps to Technology).
AGGREGATOR_SECTIONS = {"b": "Business", "t": "Technology", "e": "Entertainment", "m": "Health"}
# AG News class index -> accepted sections (class 4 is "Sci/Tech": Technology or Science).
AGNEWS_SECTIONS = {"1": ("World",), "2": ("Sports",), "3": ("Business",), "4": ("Technology", "Science")}

# Distant supervision for article types: headline patterns (see data/topics/README.md).
TYPE_PATTERNS = {
    "obituary": re.compile(
        r"\b(dies|died|dead at \d+|obituary|passes away|passed away|dies at \d+|remembering|rip|in memoriam)\b", re.I
    ),
    "explainer": re.compile(
        r"(^(what|why|how|who|when|where)\b.*\?$)|\b(explained|explainer|what you need to know|what to know|"
        r"everything you need to know|here's what|here’s what|what we know|q&a|faq|how to)\b",
        re.I,
    ),
    "historical": re.compile(
        r"\b(\d+ years ago|years after|anniversary|on this day|in history|history of|historic|decades ago|"
        r"century ago|\d+(st|nd|rd|th) anniversary)\b",
        re.I,
    ),
}


def rule_types(headline: str) -> list[str]:
    """Article types whose headline pattern matches (the weak labels used for training)."""
    return [t for t, rx in TYPE_PATTERNS.items() if rx.search(headline or "")]


def clean_text(text: str) -> str:
    """One line of lower-cased text with punctuation split off, as fastText is trained on."""
    text = (text or "").replace("\n", " ").replace("\r", " ").lower()
    text = re.sub(r"([.!?,'\"():;])", r" \1 ", text)
    return re.sub(r"\s+", " ", text).strip()


def split_bucket(key: str) -> int:
    """Bucket 0-9 of a stable example key (0-6 train, 7 calibration, 8-9 test)."""
    return int(hashlib.sha256(("newsflow-topics:" + key).encode("utf-8")).hexdigest(), 16) % 10


def huffpost_example(row: dict) -> tuple[str, str, list[str]]:
    """``(split key, text, labels)`` for a HuffPost row (labels may be empty)."""
    headline = row.get("headline") or ""
    text = f"{headline}. {row.get('short_description') or ''}".strip()
    labels = []
    section = HUFFPOST_SECTIONS.get(row.get("category", ""))
    if section:
        labels.append(section)
    labels += rule_types(headline)
    return f"{row.get('link', '')}|{headline}", text, labels


def aggregator_example(row: dict) -> tuple[str, str, list[str]]:
    """``(split key, text, labels)`` for a News Aggregator row."""
    title = row.get("TITLE") or ""
    labels = []
    section = AGGREGATOR_SECTIONS.get(row.get("CATEGORY", ""))
    if section:
        labels.append(section)
    labels += rule_types(title)
    return "story:" + row.get("STORY", ""), title, labels


def load_examples() -> dict[str, list[tuple[str, list[str]]]]:
    """Labelled examples of the shipped data by split: ``{"train", "calibration", "test"}``.

    HuffPost rows are "headline. description"; in the train split each also appears as its
    headline alone, because the News Aggregator rows are headlines only and the model would
    otherwise learn "long text -> HuffPost sections" (measured: +5 points on held-out HuffPost,
    +2.6 on AG News titles).
    """
    from newsflow.embedding import read_huffpost, read_news_aggregator

    out: dict[str, list] = {"train": [], "calibration": [], "test": []}
    exs = [huffpost_example(r) + (r.get("headline") or "",) for r in read_huffpost()]
    exs += [aggregator_example(r) + ("",) for r in read_news_aggregator()]
    for key, text, labels, headline_only in exs:
        if not labels or not text:
            continue
        b = split_bucket(key)
        split = "train" if b in TRAIN_BUCKETS else "calibration" if b == CALIBRATION_BUCKET else "test"
        out[split].append((text, labels))
        if split == "train" and headline_only and headline_only != text:
            out[split].append((headline_only, labels))
    return out


def default_topic_path(model_dir: str | None = None) -> str:
    """``<model_dir>/topics-v1.bin``; ``model_dir`` defaults to the resolved settings' model directory
    (``$NEWSFLOW_MODEL_DIR`` or ``<repo>/var/models``, read at call time)."""
    from newsflow.embedding import default_model_dir

    return os.path.join(model_dir or default_model_dir(), f"topics-{TOPIC_VERSION}.bin")


class TopicClassifier:
    """Calibrated topic classifier (load once per process/worker).

    Args:
      model: a loaded ``fasttext`` model.
      calibration: label -> ``[a, b]`` Platt parameters: p = sigmoid(a * logit(raw) + b).
      threshold: minimum calibrated probability for a label to be returned.
    """

    def __init__(self, model, calibration: dict[str, Sequence[float]], threshold: float = 0.5):
        self.model = model
        self.calibration = {k: (float(v[0]), float(v[1])) for k, v in calibration.items()}
        self.threshold = threshold

    @classmethod
    def load(cls, path: str, threshold: float = 0.5) -> TopicClassifier:
        """Loads ``path`` (fastText model) and ``path + ".calibration.json"``.

        Raises:
          FileNotFoundError: a file is missing.
        """
        import fasttext

        if not os.path.exists(path):
            raise FileNotFoundError(f"topic model not found: {path} (build it with `newsflow train-topics`)")
        with open(path + ".calibration.json", encoding="utf-8") as f:
            calib = json.load(f)["platt"]
        return cls(fasttext.load_model(path), calib, threshold)

    def raw_scores(self, texts: Sequence[str]) -> np.ndarray:
        """Uncalibrated one-vs-all scores, float array ``(len(texts), len(LABELS))`` in [0, 1]."""
        out = np.zeros((len(texts), len(LABELS)), dtype=np.float64)
        if not texts:
            return out
        col = {lab: i for i, lab in enumerate(LABELS)}
        labels, probs = self.model.predict([clean_text(t) for t in texts], k=-1, threshold=0.0)
        for r, (ls, ps) in enumerate(zip(labels, probs, strict=False)):
            for lab, p in zip(ls, ps, strict=False):
                name = lab[len("__label__") :]
                if name in col:
                    out[r, col[name]] = float(p)
        return out

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """Calibrated probabilities, float array ``(len(texts), len(LABELS))``, columns as :data:`LABELS`."""
        raw = np.clip(self.raw_scores(texts), 1e-6, 1 - 1e-6)
        logit = np.log(raw / (1 - raw))
        out = np.zeros_like(raw)
        for j, label in enumerate(LABELS):
            a, b = self.calibration.get(label, (1.0, 0.0))
            out[:, j] = 1.0 / (1.0 + np.exp(-(a * logit[:, j] + b)))
        return out

    def predict(self, texts: Sequence[str], threshold: float | None = None) -> list[list[tuple[str, float]]]:
        """Labels with calibrated probability >= threshold, most probable first.

        Args:
          texts: article texts (title + lead); any length, newlines allowed.
          threshold: overrides the instance threshold.

        Returns:
          One list of ``(label, probability)`` per text; at most one section (the most probable)
          plus any article types; ``[]`` when nothing is confident.
        """
        th = self.threshold if threshold is None else threshold
        probs = self.probabilities(texts)
        n_sec = len(SECTIONS)
        out = []
        for row in probs:
            labels = []
            j = int(np.argmax(row[:n_sec]))
            if row[j] >= th:
                labels.append((SECTIONS[j], round(float(row[j]), 4)))
            for k in range(n_sec, len(LABELS)):
                if row[k] >= th:
                    labels.append((LABELS[k], round(float(row[k]), 4)))
            labels.sort(key=lambda x: -x[1])
            out.append(labels)
        return out

    def top_section(self, texts: Sequence[str]) -> list[tuple[str, float]]:
        """Most probable section and its calibrated probability per text (no threshold)."""
        probs = self.probabilities(texts)[:, : len(SECTIONS)]
        return [(SECTIONS[int(np.argmax(r))], float(np.max(r))) for r in probs]


def platt_fit(raw: np.ndarray, y: np.ndarray, c: float = 1.0) -> tuple[float, float]:
    """Fits Platt scaling p = sigmoid(a * logit(raw) + b) (Platt 1999).

    A one-feature L2-regularized logistic regression (scikit-learn, lbfgs, inverse strength ``c``)
    on the logit of the raw score; the regularization keeps the slope finite when the calibration
    split is separable. Returns ``(a, b)``; ``(1.0, 0.0)`` when ``y`` has a single class.
    """
    from sklearn.linear_model import LogisticRegression

    raw = np.clip(np.asarray(raw, dtype=np.float64), 1e-6, 1 - 1e-6)
    y = np.asarray(y).astype(int)
    if y.min(initial=0) == y.max(initial=0) or len(np.unique(y)) < 2:
        return 1.0, 0.0
    x = np.log(raw / (1 - raw)).reshape(-1, 1)
    lr = LogisticRegression(C=c, solver="lbfgs", max_iter=1000).fit(x, y)
    return float(lr.coef_[0, 0]), float(lr.intercept_[0])
