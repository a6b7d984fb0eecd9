"""Topic classification: Google-News-style sections plus evergreen article types.

Labels (:data:`SECTIONS`, :data:`ARTICLE_TYPES`):

* sections: World, Nation, Business, Technology, Entertainment, Sports, Science, Health, Politics;
* article types, which drive the evergreen decay rate: obituary, explainer, historical.

Model (built by ``newsflow train-topics`` from the CC BY data in ``data/topics/``, see
:mod:`newsflow.core.topic_training`): one TF-IDF feature space, word 1-2-grams plus character 2-5-grams
inside word boundaries (``char_wb``; sublinear tf, L2-normalised rows), and linear SVMs on it
(scikit-learn ``LinearSVC``, squared hinge, ``class_weight="balanced"``):

* the section SVM is one-vs-rest over the *source classes* (:func:`source_class`: each HuffPost
  category, each News Aggregator category), not over sections. A section's raw score is the largest
  margin among the source classes mapped to it (:data:`HUFFPOST_SECTIONS`,
  :data:`AGGREGATOR_SECTIONS`); classes without a section (HuffPost lifestyle and identity
  categories) still compete, so lifestyle text scores low on every section. Measured on the
  held-out HuffPost buckets, fine classes beat training on the 9 sections directly (0.786 vs 0.773
  accuracy, macro-F1 0.63 vs 0.57);
* one binary SVM per article type, on the weak headline-pattern labels (:data:`TYPE_PATTERNS`).

Raw margins are calibrated by Platt scaling (p = sigmoid(a * margin + b), fitted on the held-out
calibration split; Platt 1999, "Probabilistic outputs for support vector machines"), pooled over
sections and per article type, stored next to the model as ``<model>.calibration.json``.
:meth:`TopicClassifier.predict` returns only labels whose calibrated probability reaches the threshold
(default 0.5): low confidence gives no label.

Files: ``<model dir>/topics-v1.bin`` is a ``joblib`` dump of a dict (:data:`MODEL_FORMAT`; pickled
scikit-learn objects, so load only models you built or trust, like any pickle) and
``topics-v1.bin.calibration.json`` the calibration plus the training summary. A model of another
format (the earlier fastText ``topics-v1.bin``) is rebuilt by
:func:`newsflow.core.topic_training.ensure_topic_model`.

Label mappings from the source data sets (documented in ``data/topics/README.md``) live here so
that training and evaluation use the same ones.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

TOPIC_VERSION = "v1"
WEB_SECTIONS_FILE = "web_sections.jsonl.gz"
MODEL_FORMAT = "newsflow-topics/tfidf-word-char-linear-svm/2"
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
# First URL path segment -> section, for pages filed under a section (web_sections.jsonl.gz, see
# data/topics/README.md). Generic segments ("news", dates) are absent, so they never decide.
URL_SECTIONS = {
    **dict.fromkeys(("sport", "sports", "football", "soccer", "tennis", "golf", "cricket", "rugby"), "Sports"),
    **dict.fromkeys(("science", "environment", "space"), "Science"),
    **dict.fromkeys(("technology", "tech"), "Technology"),
    **dict.fromkeys(("business", "money", "markets", "economy", "finance"), "Business"),
    **dict.fromkeys(("world", "australia-news", "global-development"), "World"),
    **dict.fromkeys(("us-news", "uk-news", "national"), "Nation"),
    "politics": "Politics",
    **dict.fromkeys(
        ("film", "music", "culture", "tv-and-radio", "books", "artanddesign", "stage", "entertainment", "movies"),
        "Entertainment",
    ),
    **dict.fromkeys(("health", "wellness"), "Health"),
}
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


def url_section(url: str) -> str | None:
    """Section of the first path segment of ``url`` found in :data:`URL_SECTIONS` (case-insensitive), else ``None``.

    ``https://www.theguardian.com/sport/2018/jan/31/x`` -> ``"Sports"``; ``https://a.com/news/economy/x`` ->
    ``"Business"``; ``https://a.com/2019/11/19/opinion/x`` -> ``None``.
    """
    from urllib.parse import urlparse

    for seg in urlparse(url or "").path.lower().split("/"):
        if seg in URL_SECTIONS:
            return URL_SECTIONS[seg]
    return None


def split_bucket(key: str) -> int:
    """Bucket 0-9 of a stable example key (0-6 train, 7 calibration, 8-9 test)."""
    return int(hashlib.sha256(("newsflow-topics:" + key).encode("utf-8")).hexdigest(), 16) % 10


def source_class(source: str, category: str) -> str:
    """Name of a source class of the section model: ``"huffpost:POLITICS"``, ``"aggregator:b"``."""
    return f"{source}:{category}"


def class_section(cls: str) -> str | None:
    """Section a source class maps to (:data:`HUFFPOST_SECTIONS`, :data:`AGGREGATOR_SECTIONS`), else ``None``."""
    source, _, category = cls.partition(":")
    if source == "huffpost":
        return HUFFPOST_SECTIONS.get(category)
    if source == "aggregator":
        return AGGREGATOR_SECTIONS.get(category)
    if source == "web":
        return category if category in SECTIONS else None
    return None


class Example(NamedTuple):
    """One labelled text of the shipped data.

    Attributes:
      key: stable split key (HuffPost ``link|headline``; News Aggregator ``story:<STORY id>``).
      text: model input (HuffPost "headline. description" or a headline alone; aggregator headline).
      labels: section (at most one) and article types; may be empty.
      source_class: :func:`source_class` of the row's upstream category (``""`` when it has none).
    """

    key: str
    text: str
    labels: tuple[str, ...]
    source_class: str


def huffpost_example(row: dict) -> Example:
    """The :class:`Example` of a HuffPost row (labels may be empty)."""
    headline = row.get("headline") or ""
    text = f"{headline}. {row.get('short_description') or ''}".strip()
    category = row.get("category") or ""
    section = HUFFPOST_SECTIONS.get(category)
    labels = ([section] if section else []) + rule_types(headline)
    return Example(
        f"{row.get('link', '')}|{headline}", text, tuple(labels), source_class("huffpost", category) if category else ""
    )


def aggregator_example(row: dict) -> Example:
    """The :class:`Example` of a News Aggregator row."""
    title = row.get("TITLE") or ""
    category = row.get("CATEGORY") or ""
    section = AGGREGATOR_SECTIONS.get(category)
    labels = ([section] if section else []) + rule_types(title)
    return Example(
        "story:" + (row.get("STORY") or ""),
        title,
        tuple(labels),
        source_class("aggregator", category) if section else "",
    )


def web_example(row: dict) -> Example:
    """The :class:`Example` of a ``web_sections.jsonl.gz`` row (``url``, ``title``, ``text``, ``section``).

    Its source class is ``"web:<section>"``; labels are the section (if one of :data:`SECTIONS`) and
    the article types of the title.
    """
    title = row.get("title") or ""
    body = (row.get("text") or "").strip()
    text = f"{title}. {body}" if title and body else title or body
    section = row.get("section") if row.get("section") in SECTIONS else None
    labels = ([section] if section else []) + rule_types(title)
    return Example("web:" + (row.get("url") or ""), text, tuple(labels), f"web:{section}" if section else "")


def read_web_sections(path: str | None = None) -> list[dict]:
    """Rows of ``data/topics/web_sections.jsonl.gz`` (provenance and builder: data/topics/README.md)."""
    import gzip

    from newsflow.core.resources import data_path

    with gzip.open(path or data_path("topics", WEB_SECTIONS_FILE), "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def split_of(key: str) -> str:
    """``"train"`` (buckets 0-6), ``"calibration"`` (7) or ``"test"`` (8-9) of an example key."""
    b = split_bucket(key)
    return "train" if b in TRAIN_BUCKETS else "calibration" if b == CALIBRATION_BUCKET else "test"


def load_training_examples(
    copy_splits: Sequence[str] = ("train",), description_copies: bool = False
) -> dict[str, list[Example]]:
    """Every usable example of the shipped data by split: ``{"train", "calibration", "test"}``.

    Sources: HuffPost, News Aggregator and the URL-section-labelled web pages (``web_sections.jsonl.gz``).

    HuffPost rows are "headline. description"; in the splits named in ``copy_splits`` (default: the
    train split only) each also appears as its headline alone, because the News Aggregator rows are
    headlines only and a model would otherwise learn "long text -> HuffPost sections"; with
    ``description_copies`` it also appears as its description alone (when it has one). Copies share
    the row's key and labels. Rows with neither a label nor a source class (or no text) are dropped.
    """
    from newsflow.core.embedding import read_huffpost, read_news_aggregator

    out: dict[str, list[Example]] = {"train": [], "calibration": [], "test": []}
    rows = [(r, huffpost_example(r)) for r in read_huffpost()]
    rows += [(r, aggregator_example(r)) for r in read_news_aggregator()]
    rows += [({}, web_example(r)) for r in read_web_sections()]
    for row, ex in rows:
        if not ex.text or not (ex.labels or ex.source_class):
            continue
        split = split_of(ex.key)
        out[split].append(ex)
        if split not in copy_splits:
            continue
        headline = row.get("headline") or ""
        if headline and headline != ex.text:
            out[split].append(ex._replace(text=headline))
        description = (row.get("short_description") or "").strip() if description_copies else ""
        if description and description != ex.text:
            out[split].append(ex._replace(text=description))
    return out


def load_examples() -> dict[str, list[tuple[str, list[str]]]]:
    """Labelled ``(text, labels)`` of :func:`load_training_examples` by split (rows with labels only).

    This is the data the same-run baselines of ``newsflow eval topics`` train on.
    """
    return {
        split: [(ex.text, list(ex.labels)) for ex in exs if ex.labels]
        for split, exs in load_training_examples().items()
    }


def default_topic_path(model_dir: str | None = None) -> str:
    """``<model_dir>/topics-v1.bin``; ``model_dir`` defaults to the resolved settings' model directory
    (``$NEWSFLOW_MODEL_DIR`` or ``<repo>/var/models``, read at call time)."""
    from newsflow.core.embedding import default_model_dir

    return os.path.join(model_dir or default_model_dir(), f"topics-{TOPIC_VERSION}.bin")


def model_format(path: str) -> str | None:
    """The ``format`` recorded in ``path + ".calibration.json"``, ``None`` when absent or unreadable."""
    try:
        with open(path + ".calibration.json", encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    return meta.get("format") if isinstance(meta, dict) else None


#: Topic models loaded in this process, by (path, size, mtime) of both files: at most 4 (a retrained
#: or switched model has another key and is loaded afresh).
_LOADED: dict[tuple, tuple[dict, dict]] = {}
_LOADED_LOCK = threading.Lock()


def _load_model_files(path: str) -> tuple[dict, dict]:
    """``(model, calibration meta)`` of ``path``, read once per process while the files are unchanged
    (a job that runs the pipeline again in the same process, or a second DoFn instance, reuses them;
    the model is only read after loading).

    Raises:
      OSError: a file cannot be read.
      ValueError: the files are not a topic model of :data:`MODEL_FORMAT`.
    """
    stats = [os.stat(p) for p in (path, path + ".calibration.json")]
    key = (os.path.realpath(path), *((st.st_size, st.st_mtime_ns) for st in stats))
    with _LOADED_LOCK:
        hit = _LOADED.get(key)
        if hit is not None:
            return hit
        loaded = _read_model_files(path)
        if len(_LOADED) >= 4:
            _LOADED.clear()
        _LOADED[key] = loaded
        return loaded


def _read_model_files(path: str) -> tuple[dict, dict]:
    import joblib

    with open(path + ".calibration.json", encoding="utf-8") as f:
        meta = json.load(f)
    if not isinstance(meta, dict) or meta.get("format") != MODEL_FORMAT:
        got = meta.get("format") if isinstance(meta, dict) else None
        raise ValueError(
            f"{path}: topic model format {got!r}, expected {MODEL_FORMAT!r} "
            "(rebuild it with `newsflow train-topics --force`)"
        )
    try:
        model = joblib.load(path)
    except Exception as e:  # a corrupt pickle raises many kinds; report them as one
        raise ValueError(f"{path}: cannot read the topic model: {type(e).__name__}: {e}") from None
    if not isinstance(model, dict) or model.get("format") != MODEL_FORMAT:
        raise ValueError(f"{path}: not a topic model of format {MODEL_FORMAT!r}")
    return model, meta


class TopicClassifier:
    """Calibrated topic classifier (load once per process/worker; about 1 ms per text in batches).

    Args:
      model: dict with ``vectorizer`` (fitted scikit-learn ``FeatureUnion`` of TF-IDF vectorizers),
        ``sections`` (fitted ``LinearSVC`` over source classes), ``types`` (fitted one-vs-rest
        ``LinearSVC`` over :data:`ARTICLE_TYPES`, columns in that order).
      calibration: label -> ``[a, b]`` Platt parameters: p = sigmoid(a * margin + b).
      threshold: minimum calibrated probability for a label to be returned.
    """

    def __init__(self, model: dict, calibration: dict[str, Sequence[float]], threshold: float = 0.5):
        self.model = model
        self.calibration = {k: (float(v[0]), float(v[1])) for k, v in calibration.items()}
        self.threshold = threshold
        classes = [str(c) for c in model["sections"].classes_]
        # columns of the section SVM's decision function belonging to each section
        self._section_cols = [[i for i, c in enumerate(classes) if class_section(c) == s] for s in SECTIONS]

    @classmethod
    def load(cls, path: str, threshold: float = 0.5) -> TopicClassifier:
        """Loads ``path`` (joblib dump of :data:`MODEL_FORMAT`) and ``path + ".calibration.json"``.

        Raises:
          FileNotFoundError: a file is missing.
          ValueError: the files are not a topic model of :data:`MODEL_FORMAT` (e.g. an old fastText
            model: rebuild it with ``newsflow train-topics --force``).
        """
        if not os.path.exists(path):
            raise FileNotFoundError(f"topic model not found: {path} (build it with `newsflow train-topics`)")
        model, meta = _load_model_files(path)
        return cls(model, meta["platt"], threshold)

    def raw_scores(self, texts: Sequence[str]) -> np.ndarray:
        """Uncalibrated SVM margins, float array ``(len(texts), len(LABELS))``, columns as :data:`LABELS`.

        A section's margin is the largest margin of its source classes; a type's is its binary margin.
        """
        out = np.zeros((len(texts), len(LABELS)), dtype=np.float64)
        if not len(texts):
            return out
        x = self.model["vectorizer"].transform([t or "" for t in texts])
        sec = np.asarray(self.model["sections"].decision_function(x), dtype=np.float64)
        if sec.ndim == 1:  # a two-class SVM returns one column (margin of classes_[1])
            sec = np.stack([-sec, sec], axis=1)
        for j, cols in enumerate(self._section_cols):
            out[:, j] = sec[:, cols].max(axis=1) if cols else -10.0
        types = np.asarray(self.model["types"].decision_function(x), dtype=np.float64).reshape(len(texts), -1)
        out[:, len(SECTIONS) :] = types
        return out

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """Calibrated probabilities, float array ``(len(texts), len(LABELS))``, columns as :data:`LABELS`."""
        raw = self.raw_scores(texts)
        out = np.zeros_like(raw)
        for j, label in enumerate(LABELS):
            a, b = self.calibration.get(label, (1.0, 0.0))
            out[:, j] = 1.0 / (1.0 + np.exp(-np.clip(a * raw[:, j] + b, -500, 500)))
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


def platt_fit_scores(scores: np.ndarray, y: np.ndarray, c: float = 1.0) -> tuple[float, float]:
    """Fits Platt scaling p = sigmoid(a * score + b) on real-valued scores (Platt 1999).

    A one-feature L2-regularized logistic regression (scikit-learn, lbfgs, inverse strength ``c``);
    the regularization keeps the slope finite when the calibration split is separable. Returns
    ``(a, b)``; ``(1.0, 0.0)`` when ``y`` has a single class.
    """
    from sklearn.linear_model import LogisticRegression

    x = np.asarray(scores, dtype=np.float64).reshape(-1, 1)
    y = np.asarray(y).astype(int)
    if len(np.unique(y)) < 2:
        return 1.0, 0.0
    lr = LogisticRegression(C=c, solver="lbfgs", max_iter=1000).fit(x, y)
    return float(lr.coef_[0, 0]), float(lr.intercept_[0])


def platt_fit(raw: np.ndarray, y: np.ndarray, c: float = 1.0) -> tuple[float, float]:
    """Platt scaling of scores in (0, 1): p = sigmoid(a * logit(raw) + b); see :func:`platt_fit_scores`."""
    raw = np.clip(np.asarray(raw, dtype=np.float64), 1e-6, 1 - 1e-6)
    return platt_fit_scores(np.log(raw / (1 - raw)), y, c)
