"""Text analysis of full-text search: the same words for the index and for queries.

A document is analysed in its own language (:func:`analyze`): Unicode words (``\\w+``), case-folded, each
reduced by that language's Snowball stemmer (PyStemmer, :data:`SNOWBALL`; a language without one keeps the
words as they are). Runs of CJK characters, which have no spaces between words, are indexed as overlapping
character bigrams, so a two-character word inside a longer run still matches. The index (SQLite FTS5's
``unicode61`` tokenizer with ``remove_diacritics 2``) then drops diacritics on both sides.

A query's language is usually unknown, so each query word matches any of its stems in the languages searched
(:func:`query_expression`): "elections" finds English "election" and "Wahlen" finds German "Wahl", and a
``language`` filter narrows the stems to that language. The result is an FTS5 ``MATCH`` expression whose
words are all double-quoted strings, so no query text is read as FTS5 syntax.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from functools import lru_cache

import Stemmer

SNOWBALL = {
    "ar": "arabic",
    "ca": "catalan",
    "cs": "czech",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "english",
    "eo": "esperanto",
    "es": "spanish",
    "et": "estonian",
    "eu": "basque",
    "fa": "persian",
    "fi": "finnish",
    "fr": "french",
    "ga": "irish",
    "hi": "hindi",
    "hu": "hungarian",
    "hy": "armenian",
    "id": "indonesian",
    "it": "italian",
    "lt": "lithuanian",
    "ne": "nepali",
    "nl": "dutch",
    "no": "norwegian",
    "nb": "norwegian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
    "yi": "yiddish",
}
"""ISO 639-1 code -> Snowball algorithm name (PyStemmer ``Stemmer.algorithms()``)."""

MAX_QUERY_WORDS = 12
"""Query words past this many are ignored (each word is an OR of its stems in every language)."""

_WORD = re.compile(r"\w+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")


@lru_cache(maxsize=64)
def _stemmer(language: str):
    name = SNOWBALL.get(base_language(language))
    return Stemmer.Stemmer(name) if name else None


def base_language(language: str) -> str:
    """``"en-us"`` -> ``"en"``; lower case; ``""`` for none."""
    return (language or "").split("-", 1)[0].split("_", 1)[0].lower()


def words(text: str) -> list[str]:
    """Case-folded ``\\w+`` words of ``text``, NFC-normalized; CJK runs split into character bigrams."""
    out: list[str] = []
    for w in _WORD.findall(unicodedata.normalize("NFC", text or "").casefold()):
        if _CJK.search(w):
            out.extend(_cjk_terms(w))
        else:
            out.append(w)
    return out


def _cjk_terms(word: str) -> list[str]:
    terms: list[str] = []
    pos = 0
    for m in _CJK.finditer(word):
        if m.start() > pos:
            terms.append(word[pos : m.start()])
        run = m.group()
        terms.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
        pos = m.end()
    if pos < len(word):
        terms.append(word[pos:])
    return terms


def analyze(text: str, language: str) -> str:
    """The index terms of ``text`` written in ``language`` (ISO 639, e.g. ``"de"``), space-separated."""
    ws = words(text)
    stemmer = _stemmer(language)
    return " ".join(stemmer.stemWords(ws) if stemmer is not None else ws)


def query_terms(query: str, languages: Iterable[str] = SNOWBALL) -> list[list[str]]:
    """Per query word (at most :data:`MAX_QUERY_WORDS`), its sorted distinct forms: the word itself and its stem
    in each of ``languages`` (those without a stemmer add nothing)."""
    stemmers = {s for s in (_stemmer(lang) for lang in languages) if s is not None}
    out = []
    for w in words(query)[:MAX_QUERY_WORDS]:
        out.append(sorted({w} | {s.stemWord(w) for s in stemmers}))
    return out


def query_expression(query: str, languages: Iterable[str] = SNOWBALL) -> str:
    """The FTS5 ``MATCH`` expression of ``query`` (module docstring): every word must match, each through any
    of its forms; ``""`` when the query has no word."""
    groups = query_terms(query, languages)
    return " AND ".join("(" + " OR ".join(f'"{t}"' for t in forms) + ")" for forms in groups)
