"""64-bit SimHash fingerprints of article text, for near-duplicate detection.

SimHash (Charikar, "Similarity estimation techniques from rounding
algorithms", STOC 2002) maps a weighted set of features to a 64-bit
fingerprint such that similar sets get fingerprints with a small Hamming
distance. Manku, Jain and Das Sarma ("Detecting near-duplicates for web
crawling", WWW 2007) showed that 64-bit SimHash with a Hamming distance of at
most 3 finds near-duplicate web pages; newsflow uses that threshold (see
``DESIGN.md``) together with the band index in :mod:`newsflow.core.lsh`.

The fingerprint of a text is fully specified here, so that any process, machine
or language can reproduce it bit for bit:

1. **Normalization**: Unicode NFKC, then ``str.casefold()``.
2. **Tokenization** by script: every letter, digit or combining mark of a
   script written without spaces (Chinese, Japanese, Thai, Lao, Khmer,
   Burmese: :func:`newsflow.core.scripts.is_dense`) is a token of its own, so the
   3-gram shingles of step 3 are character 3-grams there; everything else is
   split into maximal runs of Unicode word characters (a code point ``c`` is a
   word character iff ``c.isalnum() or c == "_"``), the regex ``\\w+``. As one
   regex: ``[D]|[^\\WD]+`` with ``D`` the dense characters.
3. **Shingles (features)**: word 3-grams, the three tokens joined by a single
   space (``"the quick brown"``). A text with 1 or 2 tokens uses its tokens as
   unigram features. A text with no tokens has no features.
4. **Feature hash** (64 bits, unsigned; all arithmetic modulo 2**64). A
   feature string is split on single spaces into words ``p_1 .. p_m``
   (``m = 3`` for a shingle, 1 for a unigram). Each word gets a polynomial
   hash over its Unicode code points, finalized with splitmix64:
   ``w(p) = mix64(sum(ord(p[i]) * B**i for i in range(len(p))))`` with
   ``B = 0x100000001B3`` (the 64-bit FNV prime). The words are chained:
   ``h_0 = 0``, ``h_i = mix64(h_{i-1} XOR w(p_i))``, feature hash ``= h_m``.
   ``mix64(z)`` is
   ``z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31``
   (the splitmix64 finalizer: Steele, Lea and Flood, "Fast splittable
   pseudorandom number generators", OOPSLA 2014; constants from Vigna's
   ``splitmix64.c``), a bijection with full avalanche, so feature hashes are
   well spread and order-sensitive (``"a b c"`` and ``"c b a"`` differ).
   Why not a cryptographic hash such as BLAKE2b per shingle: SimHash needs
   well-mixed, deterministic feature hashes, not collision resistance against
   an adversary, and fingerprints already stored must keep their bits.
   Python's ``hash()`` is never used: it is salted per process.
5. **Weights**: a feature's weight is the number of times it occurs in the
   text (repeated shingles count once per occurrence).
6. **Bit accounting** (Charikar): for each bit position ``j`` (0 = least
   significant), ``V[j] = sum(w for features whose hash has bit j set) -
   sum(w for features whose hash has bit j clear)``; bit ``j`` of the
   fingerprint is 1 iff ``V[j] > 0`` (ties give 0). Equivalently: iff the
   weight of features with bit ``j`` set is more than half the total weight.
   No features (empty text) gives fingerprint 0.

With the same features, weights and feature hash, the PyPI ``simhash`` package
(``simhash.Simhash(features, hashfunc=lambda b: feature_hash(b.decode()).to_bytes(8, "big"))``)
returns identical fingerprints; ``tests/unit/test_simhash.py`` checks this.

LSH bands (:func:`bands`): band ``i`` of a fingerprint is bits
``[i * band_bits, (i + 1) * band_bits)`` counting from the least significant
bit, i.e. ``(fp >> (i * band_bits)) & (2**band_bits - 1)``. This function is
the reference for that layout; the indexes compute bands themselves with the
same layout: :class:`newsflow.core.lsh.BandIndex` with shifts and masks, and the
Redis store on the 16-hex-digit fingerprint text (band ``i`` = hex digits
``[12 - 4i, 16 - 4i)``, in :meth:`newsflow.storage.keys.Keys.lsh_bands`).
``tests/integration/test_redis_store.py``
checks that the store's band keys equal this function's bands.

Example:
  >>> fp = simhash("Storm hits the coast; thousands without power.")
  >>> len(to_hex(fp))
  16
  >>> hamming(fp, simhash("STORM hits the coast, thousands without power!"))
  0
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable, Sequence

import numpy as np

from newsflow.core.scripts import dense_class

FINGERPRINT_BITS = 64
"""Width of a fingerprint in bits."""

SHINGLE_SIZE = 3
"""Default shingle size: word 3-grams."""

MAX_FINGERPRINT = (1 << FINGERPRINT_BITS) - 1

_MASK64 = MAX_FINGERPRINT
_MIX_C1 = 0xBF58476D1CE4E5B9
_MIX_C2 = 0x94D049BB133111EB
_WORD_BASE = 0x100000001B3  # the 64-bit FNV prime
_HEX_RE = re.compile(r"[0-9a-fA-F]{16}")


@functools.cache
def _token_re() -> re.Pattern:
    """The token regex of step 2 (built on first use: the dense class spans ~100k code points)."""
    dense = dense_class()
    return re.compile(f"[{dense}]|[^\\W{dense}]+")


def normalize(text: str) -> str:
    """Normalizes text for fingerprinting: Unicode NFKC, then casefold.

    Args:
      text: any Unicode string.

    Returns:
      The normalized string.

    Raises:
      TypeError: ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    if not unicodedata.is_normalized("NFKC", text):  # quick check; most text is already NFKC
        text = unicodedata.normalize("NFKC", text)
    return text.casefold()


def tokenize(text: str) -> list[str]:
    """Splits text into normalized word tokens.

    Normalizes with :func:`normalize` (NFKC + casefold) and returns the tokens
    of the module docstring's step 2 in order: single characters of scripts
    written without spaces, runs of word characters (``\\w+``) otherwise.

    Args:
      text: any Unicode string.

    Returns:
      The tokens, e.g. ``tokenize("Hello, World!") == ["hello", "world"]``,
      ``tokenize("東京 2024") == ["東", "京", "2024"]``.

    Raises:
      TypeError: ``text`` is not a ``str``.
    """
    return _token_re().findall(normalize(text))


def shingles(tokens: Sequence[str], k: int = SHINGLE_SIZE) -> list[str]:
    """Word k-gram shingles of a token sequence, joined by single spaces.

    Args:
      tokens: tokens as returned by :func:`tokenize`.
      k: shingle size in tokens, >= 1.

    Returns:
      ``len(tokens) - k + 1`` shingles in order (repeats kept) when there are
      at least ``k`` tokens; otherwise the tokens themselves as unigrams
      (an empty list for no tokens).

    Raises:
      ValueError: ``k < 1``.
    """
    if k < 1:
        raise ValueError(f"shingle size k must be >= 1, got {k}")
    if len(tokens) < k:
        return list(tokens)
    return [" ".join(tokens[i : i + k]) for i in range(len(tokens) - k + 1)]


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer (module docstring) on a uint64 array, multiplication wrapping mod 2**64."""
    z = z ^ (z >> np.uint64(30))
    z *= np.uint64(_MIX_C1)
    z ^= z >> np.uint64(27)
    z *= np.uint64(_MIX_C2)
    z ^= z >> np.uint64(31)
    return z


@functools.lru_cache(maxsize=1 << 16)
def _word_polynomial(word: str) -> int:
    """``sum(ord(word[i]) * B**i) mod 2**64`` by Horner's rule from the last character.

    Cached: word frequencies are Zipfian, so most words of a new text were seen before."""
    acc = 0
    for ch in reversed(word):
        acc = (acc * _WORD_BASE + ord(ch)) & _MASK64
    return acc


def _feature_hashes(words: Sequence[str], k: int) -> np.ndarray:
    """Hashes of the ``k``-word features of ``words`` (module docstring, step 4), uint64 array.

    Feature ``i`` is the words ``i .. i + k - 1``; with ``k = 1`` every word is a unigram
    feature. ``len(words) - k + 1`` hashes (none when fewer than ``k`` words)."""
    n = len(words) - k + 1
    if n <= 0:
        return np.zeros(0, dtype=np.uint64)
    w = _mix64(np.array([_word_polynomial(p) for p in words], dtype=np.uint64))
    h = np.zeros(n, dtype=np.uint64)
    for j in range(k):
        h = _mix64(h ^ w[j : j + n])
    return h


def feature_hash(feature: str) -> int:
    """The 64-bit hash of one feature (module docstring, step 4).

    The feature is split on single spaces into words; each word ``p`` gets
    ``w(p) = mix64(sum(ord(p[i]) * 0x100000001B3**i) mod 2**64)`` and the words
    are chained: ``h = 0; for p in words: h = mix64(h ^ w(p))``.

    Args:
      feature: a shingle (``"storm hits the"``), a unigram, or any string.

    Returns:
      Unsigned int in ``[0, 2**64)``.

    Raises:
      TypeError: ``feature`` is not a ``str``.
    """
    if not isinstance(feature, str):
        raise TypeError(f"feature must be str, got {type(feature).__name__}: {feature!r}")
    words = feature.split(" ")
    return int(_feature_hashes(words, len(words))[0])


def _majority_bits(hashes: np.ndarray, weights: np.ndarray) -> int:
    """Step 6: bit ``j`` is 1 iff the weight of ``hashes`` with bit ``j`` set is more than half the total."""
    total = float(weights.sum())
    if total == 0.0:
        return 0
    bits = np.unpackbits(hashes.astype("<u8").view(np.uint8), bitorder="little").reshape(-1, 64)  # column j = bit j
    set_bits = 2.0 * (weights @ bits) > total
    return int.from_bytes(np.packbits(set_bits, bitorder="little").tobytes(), "little")


def simhash_features(features: Iterable[str], weights: Iterable[float] | None = None) -> int:
    """SimHash of a weighted feature set (Charikar 2002), 64 bits.

    Each feature is hashed with :func:`feature_hash`; bit ``j`` of the result
    is 1 iff the total weight of features whose hash has bit ``j`` set is more
    than half of the total weight (ties give 0). A feature listed twice counts
    twice.

    Args:
      features: feature strings, e.g. from :func:`shingles`.
      weights: one non-negative finite weight per feature (int or float), or
        ``None`` for weight 1 each.

    Returns:
      Unsigned fingerprint in ``[0, 2**64)``; 0 when there are no features or
      the total weight is 0.

    Raises:
      TypeError: ``features`` is a single ``str``, or a feature is not a ``str``.
      ValueError: ``weights`` has a different length than ``features``, or a
        weight is negative or not finite.
    """
    if isinstance(features, str):
        raise TypeError("features must be an iterable of str, not a single str")
    hashes = np.array([feature_hash(f) for f in features], dtype=np.uint64)
    if weights is None:
        return _majority_bits(hashes, np.ones(len(hashes)))
    try:
        w = np.asarray(list(weights), dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("weights must be numbers") from None
    if w.shape != hashes.shape:
        raise ValueError(f"got {len(hashes)} features but {w.size} weights")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be finite and >= 0")
    return _majority_bits(hashes, w)


def simhash(text: str) -> int:
    """SimHash fingerprint of a text, per the module specification.

    The same value as ``simhash_features(shingles(tokenize(text)))`` (every
    occurrence of a shingle counts once), with the shingle hashes chained
    from the token hashes instead of joining and splitting shingle strings.

    Args:
      text: any Unicode string.

    Returns:
      Unsigned 64-bit fingerprint in ``[0, 2**64)``; 0 for text without any
      ``\\w`` token (e.g. ``""``).

    Raises:
      TypeError: ``text`` is not a ``str``.
    """
    tokens = tokenize(text)
    hashes = _feature_hashes(tokens, SHINGLE_SIZE if len(tokens) >= SHINGLE_SIZE else 1)
    return _majority_bits(hashes, np.ones(len(hashes)))


def _check_fp(fp: int, name: str = "fingerprint") -> int:
    if isinstance(fp, (bool, np.bool_)) or not isinstance(fp, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(fp).__name__}")
    fp = int(fp)
    if fp < 0 or fp > MAX_FINGERPRINT:
        raise ValueError(f"{name} must be in [0, 2**64), got {fp}")
    return fp


def to_hex(fp: int) -> str:
    """Formats a fingerprint as 16 lower-case hex characters (zero padded).

    Args:
      fp: fingerprint in ``[0, 2**64)``.

    Returns:
      E.g. ``to_hex(255) == "00000000000000ff"``.

    Raises:
      TypeError: ``fp`` is not an integer.
      ValueError: ``fp`` is out of range.
    """
    return format(_check_fp(fp), "016x")


def from_hex(s: str) -> int:
    """Parses a fingerprint written by :func:`to_hex`.

    Args:
      s: exactly 16 hex digits (either case); no ``0x`` prefix, sign,
        whitespace or underscores.

    Returns:
      The fingerprint in ``[0, 2**64)``.

    Raises:
      ValueError: ``s`` is not a string of exactly 16 hex digits.
    """
    if not isinstance(s, str) or not _HEX_RE.fullmatch(s):
        raise ValueError(f"fingerprint hex must be exactly 16 hex digits, got {s!r}")
    return int(s, 16)


def hamming(a: int, b: int) -> int:
    """Hamming distance between two 64-bit fingerprints (number of differing bits).

    Args:
      a: fingerprint in ``[0, 2**64)``.
      b: fingerprint in ``[0, 2**64)``.

    Returns:
      An int in ``[0, 64]``.

    Raises:
      TypeError: an argument is not an integer.
      ValueError: an argument is out of range.
    """
    return (_check_fp(a, "a") ^ _check_fp(b, "b")).bit_count()


def bands(fp: int, n_bands: int = 4, band_bits: int = 16) -> tuple[int, ...]:
    """Splits a fingerprint into LSH bands.

    Band ``i`` is bits ``[i * band_bits, (i + 1) * band_bits)`` counting from
    the least significant bit: ``(fp >> (i * band_bits)) & (2**band_bits - 1)``.
    With the default 4 bands x 16 bits, two fingerprints within Hamming
    distance 3 share at least one identical band (pigeonhole: 3 differing bits
    touch at most 3 of the 4 bands). The Redis store does not call this
    function: it slices the hex fingerprint into the same bands (see the module
    docstring), and a test checks the two agree.

    Args:
      fp: fingerprint in ``[0, 2**64)``.
      n_bands: number of bands, >= 1.
      band_bits: bits per band, >= 1; ``n_bands * band_bits`` must be 64.

    Returns:
      ``n_bands`` ints, each in ``[0, 2**band_bits)``, band 0 first.

    Raises:
      TypeError: ``fp`` is not an integer.
      ValueError: ``fp`` is out of range, or the band layout does not cover
        exactly 64 bits.
    """
    fp = _check_fp(fp)
    if n_bands < 1 or band_bits < 1 or n_bands * band_bits != FINGERPRINT_BITS:
        raise ValueError(f"n_bands * band_bits must be {FINGERPRINT_BITS} with both >= 1, got {n_bands} x {band_bits}")
    mask = (1 << band_bits) - 1
    return tuple((fp >> (i * band_bits)) & mask for i in range(n_bands))
