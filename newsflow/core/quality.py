"""Article quality in [0, 1] and article authority (0.7 x source authority + 0.3 x quality).

Quality is a weighted sum of six signals, each in [0, 1] (weights in :data:`WEIGHTS`, sum 1):

* ``length``: ``ln(1 + words) / ln(1 + 800)``, capped at 1 (800+ words is a full article; a
  feed-only blurb of 40 words scores 0.55); in a text written mostly without spaces (Chinese,
  Japanese, Thai...: :mod:`newsflow.core.scripts`) ``\\w+`` finds clause-long "words", so there
  ``words`` is its Latin-letter-equivalent length / 6 (:data:`CHARS_PER_WORD`);
* ``readability``: Flesch reading ease (Flesch 1948; ``206.835 - 1.015 * words/sentence -
  84.6 * syllables/word`` with a vowel-group syllable count) mapped to 1 at 60 ("plain English")
  falling linearly to 0 at 0 and 120;
* ``quotes``: quoted passages (straight or curly double quotes, at least 3 words inside), 3+ = 1;
* ``named_sources``: attributions ("said", "told", "according to", "says", "stated"), 3+ = 1;
* ``original``: 1 for the first report of its near-duplicate group, 0 for a syndicated copy;
* ``byline``: 1 when the article names an author.

The syndication test uses the near-duplicate group id convention (``"c" + founding article id``,
see ``schemas/group.py``): an article is original when it founded its cluster.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import NamedTuple

from newsflow.core.scripts import is_dense, latin_equivalent_length

WEIGHTS = {"length": 0.30, "readability": 0.15, "quotes": 0.15, "named_sources": 0.20, "original": 0.15, "byline": 0.05}
SOURCE_WEIGHT = 0.7
QUALITY_WEIGHT = 0.3

CHARS_PER_WORD = 6
"""Average English word length plus its space, in characters, for word estimates of dense scripts."""

DENSE_SHARE = 0.3
"""A text counts as written without spaces when at least this share of its characters is dense."""

_WORD = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?]+(?=\s|$)")
_QUOTE = re.compile(r"[\"“]([^\"“”]{3,600})[\"”]")
_ATTRIBUTION = re.compile(r"\b(said|says|told|according to|stated|announced|confirmed)\b", re.I)
_VOWEL_GROUPS = re.compile(r"[aeiouy]+")


class QualitySignals(NamedTuple):
    """The six quality signals, each in [0, 1], and their weighted sum ``quality``."""

    length: float
    readability: float
    quotes: float
    named_sources: float
    original: float
    byline: float
    quality: float


def syllables(word: str) -> int:
    """Vowel-group syllable estimate of an English word (silent final "e" dropped), at least 1."""
    w = word.lower()
    n = len(_VOWEL_GROUPS.findall(w))
    if w.endswith("e") and not w.endswith(("le", "ee")) and n > 1:
        n -= 1
    return max(1, n)


def flesch_reading_ease(text: str) -> float | None:
    """Flesch reading ease of ``text`` (higher = easier), ``None`` when it has no words."""
    words = _WORD.findall(text or "")
    if not words:
        return None
    sentences = max(1, len(_SENTENCE_END.findall(text)))
    syl = sum(syllables(w) for w in words)
    return 206.835 - 1.015 * (len(words) / sentences) - 84.6 * (syl / len(words))


def dense_word_estimate(text: str) -> int:
    """Word-count estimate of a text written mostly without spaces, else 0.

    Returns ``round(latin_equivalent_length(text) / CHARS_PER_WORD)`` when at least
    :data:`DENSE_SHARE` of the characters are dense-script letters (:func:`newsflow.core.scripts.is_dense`),
    else 0 (the ``\\w+`` count stands). Example: 300 Han characters -> 150.
    """
    if not text:
        return 0
    dense = sum(1 for ch in text if ord(ch) >= 0x0E00 and is_dense(ch))
    if dense < DENSE_SHARE * len(text):
        return 0
    return round(latin_equivalent_length(text) / CHARS_PER_WORD)


def is_original(article_id: str, cluster_id: str | None) -> bool:
    """True when the article founded its near-duplicate group (or has none yet)."""
    return cluster_id is None or cluster_id == "c" + article_id


def quality_signals(
    text: str, *, authors: Sequence[str] = (), original: bool = True, word_count: int | None = None
) -> QualitySignals:
    """Computes the quality signals of one article.

    Args:
      text: main text (for feed-only articles the summary).
      authors: author names.
      original: False for a syndicated copy (see :func:`is_original`).
      word_count: ``\\w+`` token count when already known (else counted here).

    Returns:
      :class:`QualitySignals`; ``quality`` in [0, 1].
    """
    text = text or ""
    words = word_count if word_count is not None else len(_WORD.findall(text))
    words = max(words, dense_word_estimate(text))
    length = min(1.0, math.log1p(max(0, words)) / math.log1p(800))
    fre = flesch_reading_ease(text)
    readability = 0.0 if fre is None else max(0.0, 1.0 - abs(fre - 60.0) / 60.0)
    quotes = min(1.0, sum(1 for q in _QUOTE.findall(text) if len(q.split()) >= 3) / 3.0)
    sources = min(1.0, len(_ATTRIBUTION.findall(text)) / 3.0)
    orig = 1.0 if original else 0.0
    byline = 1.0 if any(a.strip() for a in authors) else 0.0
    vals = {
        "length": length,
        "readability": readability,
        "quotes": quotes,
        "named_sources": sources,
        "original": orig,
        "byline": byline,
    }
    quality = sum(WEIGHTS[k] * v for k, v in vals.items())
    return QualitySignals(**{k: round(v, 6) for k, v in vals.items()}, quality=round(min(1.0, max(0.0, quality)), 6))


def article_quality(
    text: str, *, authors: Sequence[str] = (), original: bool = True, word_count: int | None = None
) -> float:
    """Article quality in [0, 1] (see :func:`quality_signals`)."""
    return quality_signals(text, authors=authors, original=original, word_count=word_count).quality


def authority(source_authority: float, quality: float) -> float:
    """Article authority = 0.7 x source authority + 0.3 x article quality, in [0, 1].

    Raises:
      ValueError: an input is outside [0, 1] or not finite.
    """
    for name, v in (("source_authority", source_authority), ("quality", quality)):
        if not (isinstance(v, (int, float)) and math.isfinite(v) and 0.0 <= v <= 1.0):
            raise ValueError(f"{name} must be in [0, 1], got {v!r}")
    return SOURCE_WEIGHT * float(source_authority) + QUALITY_WEIGHT * float(quality)
