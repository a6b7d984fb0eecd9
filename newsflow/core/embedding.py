"""Text features shared by story clustering, MMR and personalization.

Two representations of an article's text come from one small model trained from text shipped in
``data/topics/`` (see ``data/topics/README.md``):

* a sparse, unit-length **TF-IDF vector** (``dict`` term -> weight) over the headline plus the
  words of the URL slug; the IDF table is learned from the HuffPost headlines + descriptions only,
  so the news-aggregator set that scores story clustering never influences it. Terms unseen in
  training get the largest IDF (a rare word is a strong story signal: "Titanfall", "Fyffes").
* a dense, unit-length **128-dim topic embedding** = TF-IDF vector projected by a TruncatedSVD
  (LSA; Deerwester et al. 1990) fitted on the HuffPost texts plus the news-aggregator headlines.
  It is what MMR and user interest vectors compare (cosine = dot product).

Chosen over fastText word vectors because it trains in about a second on 2 cores, is exactly
reproducible (fixed seed, no threads), needs no extra model download and keeps the vocabulary
inspectable. ``python -m benchmarks.enrichment --json`` reports its speed.

The model file is versioned (``var/models/embedding-v1.npz``); :func:`ensure_embedding_model`
builds it when missing.
"""

from __future__ import annotations

import functools
import gzip
import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from urllib.parse import urlsplit

import numpy as np

from newsflow.core.resources import configured_model_dir, data_path, is_remote, local_model_file
from newsflow.core.scripts import dense_class, nfc
from newsflow.schemas import EMBEDDING_DIM  # one definition, next to the Arrow schemas that store embeddings

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOPIC_DATA_DIR = data_path("topics")  # packaged with an installed newsflow, data/topics in a checkout
HUFFPOST_PATH = os.path.join(TOPIC_DATA_DIR, "huffpost_news_category_v3_sample.jsonl.gz")
NEWS_AGGREGATOR_PATH = os.path.join(TOPIC_DATA_DIR, "news_aggregator_2014-03-10_11.csv.gz")
EMBEDDING_VERSION = "v1"
# Languages whose words take the cross-language form in :meth:`TextModel.article_vector`.
CROSS_LANGUAGE = frozenset({"es", "de", "fr", "pt", "it"})

# Scikit-learn's English stop-word list (Glasgow IR group), copied so tokenizing needs no sklearn.
STOPWORDS = frozenset(
    """a about above across after afterwards again against all almost alone along already also although
    always am among amongst amoungst amount an and another any anyhow anyone anything anyway anywhere are
    around as at back be became because become becomes becoming been before beforehand behind being below
    beside besides between beyond bill both bottom but by call can cannot cant co con could couldnt cry de
    describe detail do done down due during each eg eight either eleven else elsewhere empty enough etc even
    ever every everyone everything everywhere except few fifteen fifty fill find fire first five for former
    formerly forty found four from front full further get give go had has hasnt have he hence her here
    hereafter hereby herein hereupon hers herself him himself his how however hundred i ie if in inc indeed
    interest into is it its itself keep last latter latterly least less ltd made many may me meanwhile might
    mill mine more moreover most mostly move much must my myself name namely neither never nevertheless next
    nine no nobody none noone nor not nothing now nowhere of off often on once one only onto or other others
    otherwise our ours ourselves out over own part per perhaps please put rather re same see seem seemed
    seeming seems serious several she should show side since sincere six sixty so some somehow someone
    something sometime sometimes somewhere still such system take ten than that the their them themselves
    then thence there thereafter thereby therefore therein thereupon these they thick thin third this those
    though three through throughout thru thus to together too top toward towards twelve twenty two un under
    until up upon us very via was we well were what whatever when whence whenever where whereafter whereas
    whereby wherein whereupon wherever whether which while whither who whoever whole whom whose why will
    with within without would yet you your yours yourself yourselves""".split()
)
# Path words that say nothing about the story.
URL_STOPWORDS = frozenset(
    "www http https com html htm php aspx asp shtml cms story stories article articles news post posts blog "
    "blogs node index default page content amp".split()
)

_TOKEN_RE = re.compile(r"[^\W_]+(?:['’.][^\W_]+)*", re.UNICODE)
_SLUG_SPLIT_RE = re.compile(r"[-_+.,]")


def stem(word: str) -> str:
    """Light English stemmer: drops possessives, dots and apostrophes and a plural ``s``/``ies``.

    Deliberately weaker than Porter: headlines are short and over-stemming merges unrelated names.
    """
    if word.endswith("'s") or word.endswith("’s"):
        word = word[:-2]
    word = word.replace("'", "").replace("’", "").replace(".", "")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@functools.cache
def _dense_run_re() -> re.Pattern:
    """Runs of characters of scripts written without spaces (see :mod:`newsflow.core.scripts`)."""
    return re.compile(f"([{dense_class()}]+)")


def tokenize(text: str | None) -> list[str]:
    """Tokens of ``text`` by script, in order (``[]`` for ``None``).

    Text is put in NFC and lower-cased. Runs of a script written without spaces (Chinese,
    Japanese, Thai, Lao, Khmer, Burmese; :func:`newsflow.core.scripts.is_dense`) give their
    overlapping character bigrams (a one-character run gives itself), the usual dictionary-free
    indexing of CJK text (Lucene ``CJKBigramFilter``). Other text gives stop-word-free, lightly
    stemmed words of at least two characters.

    Example: ``tokenize("Tokyo 東京都で大雪") == ["tokyo", "東京", "京都", "都で", "で大", "大雪"]``.
    """
    if not text:
        return []
    out = []
    for i, part in enumerate(_dense_run_re().split(nfc(text).lower())):
        if i % 2:  # a dense run (the split pattern's captured group)
            out.extend([part] if len(part) == 1 else [part[j : j + 2] for j in range(len(part) - 1)])
            continue
        for raw in _TOKEN_RE.findall(part):
            w = stem(raw)
            if len(w) > 1 and w not in STOPWORDS:
                out.append(w)
    return out


def url_slug_tokens(url: str | None) -> list[str]:
    """Words of the URL path segments that look like a slug (at least 3 alphabetic parts).

    ``http://x.com/2014/03/new-deal-makes-chiquita-world-s-top-banana-company`` ->
    ``["new", "deal", "chiquita", "world", "banana", "company"]`` (stop words dropped, stemmed).
    Numeric ids and short path segments are ignored. Returns ``[]`` for ``None`` or a bad URL.
    """
    return [stem(p) for p in url_slug_words(url) if p not in STOPWORDS]


def url_slug_words(url: str | None) -> list[str]:
    """The lower-case alphabetic words of a URL's slug-like path segments (see
    :func:`url_slug_tokens`), before English stop words and stemming; ``[]`` for ``None`` or a bad URL."""
    if not url:
        return []
    try:
        path = urlsplit(url.replace("\\", "")).path
    except ValueError:
        return []
    out = []
    for seg in path.split("/"):
        parts = _SLUG_SPLIT_RE.split(seg.lower())
        if sum(1 for p in parts if p.isalpha()) < 3:
            continue
        out.extend(p for p in parts if p.isalpha() and len(p) > 1 and p not in URL_STOPWORDS)
    return out


def sparse_dot(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Dot product of two sparse vectors (iterates over the smaller one)."""
    if len(a) > len(b):
        a, b = b, a
    return float(sum(w * b.get(t, 0.0) for t, w in a.items()))


def sparse_normalize(v: Mapping[str, float]) -> dict[str, float]:
    """``v`` scaled to unit L2 norm (``{}`` when ``v`` is all zero)."""
    n = math.sqrt(sum(w * w for w in v.values()))
    return {t: w / n for t, w in v.items()} if n > 0 else {}


def centroid_update(mean: np.ndarray | None, count: int, vector: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Adds one member to a cluster's running mean embedding.

    Args:
      mean: running (unnormalized) mean of the ``count`` member embeddings, shape ``(d,)`` float32,
        or ``None`` when ``count == 0``.
      count: members already averaged into ``mean``.
      vector: the new member's embedding, shape ``(d,)``.

    Returns:
      ``(new_mean, unit)``: the updated running mean (``mean + (vector - mean) / (count + 1)``) and
      the same vector renormalized to unit length (all zero if the mean is zero), both float32.

    Raises:
      ValueError: ``count`` is negative or the shapes differ.
    """
    vector = np.asarray(vector, dtype=np.float32)
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    if mean is None or count == 0:
        new = vector.copy()
    else:
        mean = np.asarray(mean, dtype=np.float32)
        if mean.shape != vector.shape:
            raise ValueError(f"shape mismatch: mean {mean.shape} vs vector {vector.shape}")
        new = mean + (vector - mean) / np.float32(count + 1)
    norm = float(np.linalg.norm(new))
    unit = (new / norm).astype(np.float32) if norm > 0 else np.zeros_like(new)
    return new.astype(np.float32), unit


def merge_means(mean_a: np.ndarray, count_a: int, mean_b: np.ndarray, count_b: int) -> tuple[np.ndarray, np.ndarray]:
    """Running mean of two merged clusters (weighted by member counts) and its unit version."""
    total = count_a + count_b
    if total <= 0:
        raise ValueError("merging two empty clusters")
    new = (np.asarray(mean_a, np.float32) * count_a + np.asarray(mean_b, np.float32) * count_b) / np.float32(total)
    norm = float(np.linalg.norm(new))
    return new.astype(np.float32), (new / norm).astype(np.float32) if norm > 0 else np.zeros_like(new)


class TextModel:
    """IDF table + SVD projection: sparse TF-IDF vectors and dense 128-dim embeddings.

    Args:
      vocabulary: terms, shape ``(V,)``.
      idf: IDF per term, shape ``(V,)`` float32 (smoothed: ``ln((N + 1) / (df + 1)) + 1``).
      unseen_idf: IDF given to a term not in ``vocabulary`` (``ln(N + 1) + 1``, the maximum).
      components: SVD components, shape ``(dim, V)`` float32.
      version: model version string.
    """

    def __init__(
        self,
        vocabulary: Sequence[str],
        idf: np.ndarray,
        unseen_idf: float,
        components: np.ndarray,
        version: str = EMBEDDING_VERSION,
    ):
        self.vocabulary = list(vocabulary)
        self.index = {t: i for i, t in enumerate(self.vocabulary)}
        self.idf = np.asarray(idf, dtype=np.float32)
        self.unseen_idf = float(unseen_idf)
        self.components = np.asarray(components, dtype=np.float32)
        self.version = version
        if self.components.shape[1] != len(self.vocabulary) or self.idf.shape[0] != len(self.vocabulary):
            raise ValueError("vocabulary, idf and components disagree in size")

    @property
    def dim(self) -> int:
        """Embedding dimension (128 for the shipped model)."""
        return int(self.components.shape[0])

    def idf_of(self, term: str) -> float:
        """IDF of ``term`` (``unseen_idf`` for out-of-vocabulary terms)."""
        i = self.index.get(term)
        return float(self.idf[i]) if i is not None else self.unseen_idf

    def tfidf(
        self, tokens: Iterable[str], extra_tokens: Iterable[str] = (), extra_weight: float = 1.0
    ) -> dict[str, float]:
        """Unit-length sparse TF-IDF vector, sublinear tf (``1 + ln tf``).

        Args:
          tokens: main tokens (e.g. :func:`tokenize` of the headline).
          extra_tokens: further tokens counted with ``extra_weight`` each (e.g. URL slug words).
          extra_weight: term-frequency weight of one extra token.

        Returns:
          ``dict`` term -> weight with unit L2 norm, ``{}`` if there are no tokens.
        """
        tf: Counter = Counter(tokens)
        for t in extra_tokens:
            tf[t] += extra_weight
        vec = {}
        for t, c in tf.items():
            w = (1.0 + math.log(c)) if c >= 1.0 else c
            vec[t] = w * self.idf_of(t)
        return sparse_normalize(vec)

    def article_vector(
        self, title: str, url: str = "", slug_weight: float = 1.0, language: str | None = None
    ) -> dict[str, float]:
        """TF-IDF vector of a headline plus its URL slug words (what story clustering compares).

        Args:
          title: the headline.
          url: the article URL (its slug words count with ``slug_weight`` each).
          slug_weight: term-frequency weight of one slug word.
          language: ISO 639-1 code. For Spanish, German, French, Portuguese and Italian the words
            are first put in the cross-language form of :func:`newsflow.core.multilingual.cross_language_text`
            (ASCII-transliterated, place names as their English names, the language's stop words
            removed), so they share terms with English reports of the same names, places and
            numbers; English and any other language are tokenized as before.

        Returns:
          unit-length ``dict`` term -> weight (see :meth:`tfidf`).
        """
        if language in CROSS_LANGUAGE:
            from newsflow.core.multilingual import cross_language_text

            return self.tfidf(
                tokenize(cross_language_text(title, language)),
                tokenize(cross_language_text(" ".join(url_slug_words(url)), language)),
                slug_weight,
            )
        return self.tfidf(tokenize(title), url_slug_tokens(url), slug_weight)

    def embed_vectors(self, vectors: Sequence[Mapping[str, float]]) -> np.ndarray:
        """Dense embeddings of sparse TF-IDF vectors.

        Returns:
          float32 array ``(len(vectors), dim)``, rows unit-normalized; a row is all zero when none of
          its terms is in the vocabulary.
        """
        out = np.zeros((len(vectors), self.dim), dtype=np.float32)
        for r, vec in enumerate(vectors):
            idx = [self.index[t] for t in vec if t in self.index]
            if not idx:
                continue
            w = np.array([vec[self.vocabulary[i]] for i in idx], dtype=np.float32)
            out[r] = self.components[:, idx] @ w
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def embed(self, texts: Sequence[str], languages: Sequence[str | None] | None = None) -> np.ndarray:
        """128-dim unit-normalized embeddings of ``texts`` (title + lead), float32 ``(n, dim)``.

        Args:
          texts: the documents.
          languages: optional ISO 639-1 code per text; Spanish, German, French, Portuguese and
            Italian texts are embedded in their cross-language form (see :meth:`article_vector`),
            so their names, places and numbers land on the English model's terms.

        Raises:
          ValueError: ``languages`` has a different length than ``texts``.
        """
        if languages is None:
            return self.embed_vectors([self.tfidf(tokenize(t)) for t in texts])
        if len(languages) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(languages)} languages")
        from newsflow.core.multilingual import cross_language_text

        return self.embed_vectors(
            [
                self.tfidf(tokenize(cross_language_text(t, lang) if lang in CROSS_LANGUAGE else t))
                for t, lang in zip(texts, languages, strict=True)
            ]
        )

    def save(self, path: str) -> None:
        """Writes the model to ``path`` (``.npz``), atomically (temp file + rename)."""
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = path + ".tmp.npz"
        np.savez_compressed(
            tmp,
            vocabulary=np.array(self.vocabulary, dtype=object).astype(str),
            idf=self.idf,
            unseen_idf=np.float32(self.unseen_idf),
            components=self.components,
            version=np.array(self.version),
        )
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str) -> TextModel:
        """Reads a model written by :meth:`save`.

        Raises:
          FileNotFoundError: no file at ``path``.
          ValueError: the file is not a text model.
        """
        with np.load(path, allow_pickle=False) as z:
            try:
                return cls(list(z["vocabulary"]), z["idf"], float(z["unseen_idf"]), z["components"], str(z["version"]))
            except KeyError as e:
                raise ValueError(f"{path} is not a newsflow text model (missing {e})") from None


def read_huffpost(path: str = HUFFPOST_PATH) -> list[dict]:
    """Rows of the HuffPost News Category JSONL (plain or ``.gz``)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_news_aggregator(path: str = NEWS_AGGREGATOR_PATH) -> list[dict]:
    """Rows of the UCI News Aggregator CSV (plain or ``.gz``), as dicts of the header columns."""
    import csv

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def train_text_model(
    idf_texts: Sequence[str], svd_texts: Sequence[str], dim: int = EMBEDDING_DIM, seed: int = 0
) -> TextModel:
    """Learns the IDF table from ``idf_texts`` and the SVD projection from ``idf_texts + svd_texts``.

    Deterministic: randomized SVD with a fixed ``seed`` and iteration count.

    Raises:
      ValueError: fewer distinct terms than ``dim``.
    """
    from scipy import sparse
    from sklearn.decomposition import TruncatedSVD

    docs_idf = [set(tokenize(t)) for t in idf_texts]
    df: Counter = Counter()
    for d in docs_idf:
        df.update(d)
    n = len(docs_idf)
    all_docs = [tokenize(t) for t in list(idf_texts) + list(svd_texts)]
    # keep terms seen in at least two documents so the projection is not fitted to hapaxes
    total = Counter(t for d in all_docs for t in set(d))
    terms = sorted(t for t, c in total.items() if c >= 2)
    if len(terms) <= dim:
        raise ValueError(f"only {len(terms)} terms for a {dim}-dim embedding")
    index = {t: i for i, t in enumerate(terms)}
    idf = np.array([math.log((n + 1) / (df.get(t, 0) + 1)) + 1 for t in terms], dtype=np.float32)
    unseen = math.log(n + 1) + 1
    rows, cols, vals = [], [], []
    for r, d in enumerate(all_docs):
        tf = Counter(t for t in d if t in index)
        ws = {t: (1 + math.log(c)) * idf[index[t]] for t, c in tf.items()}
        norm = math.sqrt(sum(w * w for w in ws.values())) or 1.0
        for t, w in ws.items():
            rows.append(r)
            cols.append(index[t])
            vals.append(w / norm)
    x = sparse.csr_matrix((vals, (rows, cols)), shape=(len(all_docs), len(terms)), dtype=np.float32)
    svd = TruncatedSVD(n_components=dim, algorithm="randomized", n_iter=7, random_state=seed)
    svd.fit(x)
    return TextModel(terms, idf, unseen, svd.components_.astype(np.float32))


def default_model_dir() -> str:
    """The configured model directory (:func:`newsflow.core.resources.configured_model_dir`), read at call time."""
    return configured_model_dir()


def default_embedding_path(model_dir: str | None = None) -> str:
    """``<model_dir>/embedding-v1.npz``; ``model_dir`` defaults to :func:`default_model_dir`."""
    return os.path.join(model_dir or default_model_dir(), f"embedding-{EMBEDDING_VERSION}.npz")


def build_embedding_model(path: str | None = None) -> str:
    """Trains the text model from the shipped data and writes it to ``path``; returns the path."""
    path = path or default_embedding_path()
    hp = read_huffpost()
    idf_texts = [f"{r['headline']} {r['short_description']}" for r in hp]
    svd_texts = [r["TITLE"] for r in read_news_aggregator()]
    train_text_model(idf_texts, svd_texts).save(path)
    return path


def ensure_embedding_model(path: str | None = None) -> str:
    """Returns the model path, building the model first when the file is missing; a remote path
    (``gs://...``) is copied to a local cache instead (FileNotFoundError when it is absent)."""
    path = path or default_embedding_path()
    if is_remote(path):
        return local_model_file(path)
    if not os.path.exists(path):
        build_embedding_model(path)
    return path


_MODELS: dict[str, TextModel] = {}


def load_text_model(path: str | None = None) -> TextModel:
    """Loads (once per process and path) the text model, building it when missing."""
    path = ensure_embedding_model(path)
    model = _MODELS.get(path)
    if model is None:
        model = _MODELS[path] = TextModel.load(path)
    return model
