"""Writing systems: Unicode normalization, scripts written without spaces, and script-fair lengths.

Three facts about text in any language that several modules rely on:

* **NFC at input.** The same word can be spelled with precomposed or combining characters
  (``"é"`` is U+00E9 in NFC, ``"e"`` + U+0301 in NFD). Every text that enters the system goes
  through :func:`nfc` once, so tokens, entities, fingerprints and stored titles do not depend on
  how a publisher's CMS happened to encode it (Unicode Standard Annex #15).
* **Dense scripts.** Chinese, Japanese (Han, Hiragana, Katakana), Thai, Lao, Khmer and Burmese
  (Myanmar) do not put spaces between words, so a ``\\w+`` regex returns clause-long "words".
  Tokenizers in this code base therefore treat every letter, digit or combining mark of these
  scripts (:data:`DENSE_RANGES`) as a token of its own and build character n-grams from them:
  character 3-grams in SimHash (:mod:`newsflow.core.simhash`), character bigrams in the TF-IDF
  model (:mod:`newsflow.core.embedding`), the standard for CJK retrieval without a dictionary
  (Lucene's ``CJKBigramFilter``; Kwok, "Comparing representations in Chinese information
  retrieval", SIGIR 1997). Korean Hangul is written with spaces and keeps word tokens.
* **Script-fair length.** A Chinese character carries about as much as three Latin letters
  (translations of the same text into Chinese have roughly a third of the characters of the
  English), so length thresholds written for alphabetic text count it as
  :data:`DENSE_CHAR_WEIGHT` characters (:func:`latin_equivalent_length`).

No module-level work beyond constants: the code-point table is built on first use.
"""

from __future__ import annotations

import functools
import unicodedata

import numpy as np

DENSE_RANGES: tuple[tuple[int, int, str], ...] = (
    (0x0E00, 0x0E7F, "Thai"),
    (0x0E80, 0x0EFF, "Lao"),
    (0x1000, 0x109F, "Myanmar"),
    (0x1780, 0x17FF, "Khmer"),
    (0x19E0, 0x19FF, "Khmer Symbols"),
    (0x2E80, 0x2FDF, "CJK Radicals, Kangxi Radicals"),
    (0x3005, 0x3007, "Ideographic iteration mark, closing mark, number zero"),
    (0x3021, 0x3029, "Hangzhou numerals"),
    (0x3031, 0x3035, "Vertical kana repeat marks"),
    (0x3038, 0x303C, "Han iteration marks"),
    (0x3040, 0x309F, "Hiragana"),
    (0x30A0, 0x30FF, "Katakana"),
    (0x31F0, 0x31FF, "Katakana Phonetic Extensions"),
    (0x3400, 0x4DBF, "CJK Unified Ideographs Extension A"),
    (0x4E00, 0x9FFF, "CJK Unified Ideographs"),
    (0xA9E0, 0xA9FF, "Myanmar Extended-B"),
    (0xAA60, 0xAA7F, "Myanmar Extended-A"),
    (0xF900, 0xFAFF, "CJK Compatibility Ideographs"),
    (0xFF66, 0xFF9F, "Halfwidth Katakana"),
    (0x20000, 0x3134F, "CJK Unified Ideographs Extensions B-G"),
)
"""Code-point blocks ``(first, last, name)`` of the scripts written without spaces between words.
Within them, letters, digits and combining marks are "dense" characters (:func:`is_dense`);
punctuation and symbols are not."""

DENSE_CHAR_WEIGHT = {"han_kana": 3, "hangul": 2}
"""Latin-letter equivalents of one character, used by :func:`latin_equivalent_length`:
Han/Kana 3 (CJK translations have about a third of the English character count), Hangul
syllables 2 (a syllable block spells 2-3 letters). Thai, Lao, Khmer and Burmese are alphabetic
abugidas whose character counts are close to English ones: weight 1."""


def nfc(text: str | None) -> str:
    """Unicode NFC form of ``text`` (``""`` for ``None``); cheap when already NFC.

    Example: ``nfc("He\\u0301le\\u0300ne") == "Hélène"``.
    """
    if not text:
        return ""
    if unicodedata.is_normalized("NFC", text):
        return text
    return unicodedata.normalize("NFC", text)


def _is_token_char(ch: str) -> bool:
    return ch.isalnum() or ch == "_" or unicodedata.category(ch).startswith("M")


def is_dense(ch: str) -> bool:
    """True when ``ch`` (one character) is a letter, digit or mark of a script in :data:`DENSE_RANGES`."""
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi, _ in DENSE_RANGES) and _is_token_char(ch)


@functools.cache
def dense_table() -> np.ndarray:
    """Boolean array over all code points (``0x110000``): True where :func:`is_dense` holds."""
    table = np.zeros(0x110000, dtype=bool)
    for lo, hi, _ in DENSE_RANGES:
        for cp in range(lo, hi + 1):
            if _is_token_char(chr(cp)):
                table[cp] = True
    return table


@functools.cache
def dense_class() -> str:
    """The dense characters as the body of a regex character class (``"\\u0e01-\\u0e3a..."``)."""
    table = dense_table()
    idx = np.flatnonzero(table)
    breaks = np.flatnonzero(np.diff(idx) != 1)
    starts = np.concatenate(([idx[0]], idx[breaks + 1]))
    ends = np.concatenate((idx[breaks], [idx[-1]]))
    return "".join(
        f"\\U{int(a):08x}" if a == b else f"\\U{int(a):08x}-\\U{int(b):08x}" for a, b in zip(starts, ends, strict=True)
    )


def _is_han_kana(cp: int) -> bool:
    return 0x2E80 <= cp <= 0x9FFF or 0xF900 <= cp <= 0xFAFF or 0xFF66 <= cp <= 0xFF9F or 0x20000 <= cp <= 0x3134F


def latin_equivalent_length(text: str | None) -> int:
    """Length of ``text`` in Latin-letter equivalents, for length thresholds set on alphabetic text.

    Every character counts 1, except Han/Kana letters (3) and Hangul syllables U+AC00-U+D7A3 (2),
    see :data:`DENSE_CHAR_WEIGHT`. Example: a 187-character Chinese brief of 170 Han characters
    and 17 punctuation marks counts ``170 * 3 + 17 = 527``.

    Args:
      text: any string (``None`` counts 0).

    Returns:
      A non-negative int, ``>= len(text)``.
    """
    if not text:
        return 0
    extra = 0
    for ch in text:
        cp = ord(ch)
        if cp < 0x2E80:
            continue
        if _is_han_kana(cp) and ch.isalnum():
            extra += DENSE_CHAR_WEIGHT["han_kana"] - 1
        elif 0xAC00 <= cp <= 0xD7A3:
            extra += DENSE_CHAR_WEIGHT["hangul"] - 1
    return len(text) + extra
