"""Muted words and phrases: what a reader never wants to see, matched in any script.

A muted phrase is one to :data:`MAX_PHRASE_CHARS` characters after Unicode normalization: NFKC (so full-width
``ＡＢＣ`` is ``ABC``), case folding (``str.casefold``: ``Straße`` and ``STRASSE`` are one phrase), and runs of
white space collapsed to one space. A reader keeps at most :data:`MAX_MUTED` phrases.

Matching (:class:`MuteMatcher`) is case-insensitive and on whole words: ``"kardashian"`` hides "Kim Kardashian
wins" and "KARDASHIAN'S new show" but not "Kardashianism"; ``"north korea"`` hides "North  Korea talks"
(any white space between the words). A word boundary is a change between a word character (Unicode
``\\w``: letters, digits, marks, ``_`` of every script) and anything else, so Cyrillic, Greek, Arabic or
Devanagari words match as whole words too. Scripts written without spaces between words (Han, Hiragana,
Katakana, Thai, Lao, Khmer, Myanmar, Tibetan) have no word boundary inside a sentence, so a phrase holding
one of their letters matches wherever it occurs ("北京" hides "在北京举行"), the rule Unicode UAX #29 leaves
to dictionary segmentation, which a mute list does not need.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

MAX_PHRASE_CHARS = 100
MAX_MUTED = 200
_SPACE = re.compile(r"\s+")
# letters of scripts written without spaces between words (Unicode blocks): Thai, Lao, Tibetan, Myanmar,
# Khmer, CJK radicals/punctuation/Hiragana/Katakana/Bopomofo/Hangul compatibility/CJK ext A/unified ideographs,
# CJK compatibility ideographs, half-width Katakana, CJK ext B-F (plane 2)
_UNSPACED = re.compile(
    "[\u0e00-\u0eff\u0f00-\u0fff\u1000-\u109f\u1780-\u17ff\u2e80-\u2fdf\u3000-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002fa1f]"
)


def normalize_phrase(value) -> str:
    """A muted phrase in its stored form (module docstring): NFKC, case-folded, white space collapsed.

    Raises:
      ValueError: not a string, empty after normalization, longer than :data:`MAX_PHRASE_CHARS`, or holding a
        control character.
    """
    if not isinstance(value, str):
        raise ValueError(f"a muted word must be a string, got {type(value).__name__}")
    text = _SPACE.sub(" ", unicodedata.normalize("NFKC", value).casefold()).strip()
    if not text or len(text) > MAX_PHRASE_CHARS:
        raise ValueError(f"a muted word or phrase is 1-{MAX_PHRASE_CHARS} characters, got {value[:120]!r}")
    if any(unicodedata.category(c) in ("Cc", "Cf") for c in text):
        raise ValueError(f"a muted word may not hold control characters, got {value[:120]!r}")
    return text


def _pattern(phrase: str) -> str:
    body = r"\s+".join(re.escape(w) for w in phrase.split(" "))
    if _UNSPACED.search(phrase):
        return body
    return rf"(?<!\w){body}(?!\w)"


class MuteMatcher:
    """Tests texts against a reader's muted phrases (module docstring); an empty list matches nothing.

    Args:
      phrases: muted phrases (normalized here with :func:`normalize_phrase`; invalid ones are skipped, so a
        stored list written by an older version never breaks a page).
    """

    def __init__(self, phrases: Iterable[str] = ()):
        norm = set()
        for p in phrases:
            try:
                norm.add(normalize_phrase(p))
            except ValueError:
                continue
        self.phrases = frozenset(norm)
        self._re = re.compile("|".join(_pattern(p) for p in sorted(self.phrases))) if self.phrases else None

    def __bool__(self) -> bool:
        return self._re is not None

    def search(self, *texts) -> str | None:
        """The first muted phrase found in any of ``texts`` (strings; ``None`` and non-strings are skipped), as
        it appears after normalization, else ``None``."""
        if self._re is None:
            return None
        for text in texts:
            if isinstance(text, str) and text:
                m = self._re.search(unicodedata.normalize("NFKC", text).casefold())
                if m:
                    return m.group(0)
        return None

    def mutes(self, item) -> bool:
        """True when a story or article mapping's ``title``, ``entities`` (strings or ``{"name"|"text"}``
        objects) or ``description`` holds a muted phrase."""
        if self._re is None:
            return False
        entities = item.get("entities") or ()
        names = [
            e if isinstance(e, str) else (e.get("name") or e.get("text"))
            for e in entities
            if isinstance(e, (str, dict))
        ]
        return (
            self.search(item.get("title"), item.get("description"), *[n for n in names if isinstance(n, str)])
            is not None
        )
