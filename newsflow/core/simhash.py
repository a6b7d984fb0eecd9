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
   Why not a cryptographic hash such as BLAKE2b per shingle: a word
   polynomial can be computed for every token at once with numpy prefix sums
   (:func:`simhash_many`), with no per-token Python call, which makes the
   batch path several times faster; SimHash needs well-mixed, deterministic
   feature hashes, not collision resistance against an adversary. Python's
   ``hash()`` is never used: it is salted per process.
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
returns identical fingerprints; the tests and ``benchmarks/simhash.py`` check
this.

LSH bands (:func:`bands`): band ``i`` of a fingerprint is bits
``[i * band_bits, (i + 1) * band_bits)`` counting from the least significant
bit, i.e. ``(fp >> (i * band_bits)) & (2**band_bits - 1)``. This function is
the reference for that layout; the indexes compute bands themselves with the
same layout: :class:`newsflow.core.lsh.BandIndex` with shifts and masks, and the
Redis store on the 16-hex-digit fingerprint text (band ``i`` = hex digits
``[12 - 4i, 16 - 4i)``, in :meth:`newsflow.storage.keys.Keys.lsh_bands` and in
``newsflow/storage/lua/assign.lua``). ``tests/integration/test_redis_store.py``
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

from newsflow.core.scripts import dense_class, dense_table

FINGERPRINT_BITS = 64
"""Width of a fingerprint in bits."""

SHINGLE_SIZE = 3
"""Default shingle size: word 3-grams."""

MAX_FINGERPRINT = (1 << FINGERPRINT_BITS) - 1

_MASK64 = MAX_FINGERPRINT
_MIX_C1 = 0xBF58476D1CE4E5B9
_MIX_C2 = 0x94D049BB133111EB
_WORD_BASE = 0x100000001B3  # the 64-bit FNV prime; odd, so invertible mod 2**64
_WORD_BASE_INV = pow(_WORD_BASE, -1, 1 << 64)
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
    n = len(tokens)
    if n < k:
        return list(tokens)
    if k == 1:
        return list(tokens)
    if k == 3:
        return [" ".join(g) for g in zip(tokens, tokens[1:], tokens[2:], strict=False)]
    return [" ".join(tokens[i : i + k]) for i in range(n - k + 1)]


def _mix64_int(z: int) -> int:
    """splitmix64 finalizer on a Python int (see the module docstring)."""
    z ^= z >> 30
    z = (z * _MIX_C1) & _MASK64
    z ^= z >> 27
    z = (z * _MIX_C2) & _MASK64
    return z ^ (z >> 31)


def _mix64(z: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer on a uint64 array (wrapping multiplication); modifies ``z``."""
    z ^= z >> np.uint64(30)
    z *= np.uint64(_MIX_C1)
    z ^= z >> np.uint64(27)
    z *= np.uint64(_MIX_C2)
    z ^= z >> np.uint64(31)
    return z


def _word_hash_int(word: str) -> int:
    """Word hash on Python ints: mix64(sum(ord(c) * B**i) mod 2**64)."""
    acc = 0
    power = 1
    for ch in word:
        acc = (acc + ord(ch) * power) & _MASK64
        power = (power * _WORD_BASE) & _MASK64
    return _mix64_int(acc)


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
        raise TypeError(f"feature must be str, got {type(feature).__name__}")
    h = 0
    for word in feature.split(" "):
        h = _mix64_int(h ^ _word_hash_int(word))
    return h


class _Powers:
    """Cached ``B**i`` and ``B**-i`` mod 2**64 (uint64) for i < n, grown on demand."""

    def __init__(self) -> None:
        self.fwd = np.ones(1, dtype=np.uint64)
        self.inv = np.ones(1, dtype=np.uint64)

    def get(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        if len(self.fwd) < n:
            size = max(n, 2 * len(self.fwd))
            fwd = np.full(size, _WORD_BASE, dtype=np.uint64)
            inv = np.full(size, _WORD_BASE_INV, dtype=np.uint64)
            fwd[0] = inv[0] = 1
            # cumprod wraps modulo 2**64, which is the arithmetic we want.
            self.fwd, self.inv = np.cumprod(fwd), np.cumprod(inv)
        return self.fwd, self.inv


_POWERS = _Powers()


def _span_word_hashes(code_points: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Word hashes of the spans ``code_points[starts[k]:ends[k]]``, uint64 (len(starts),).

    With ``t_i = cp_i * B**i`` (i = global index) and prefix sums ``c``, a span's
    polynomial is ``(c[end] - c[start]) * B**-start`` (B is odd, so invertible
    mod 2**64); all arithmetic wraps modulo 2**64.
    """
    n = len(code_points)
    fwd, inv = _POWERS.get(n + 1)
    prefix = np.zeros(n + 1, dtype=np.uint64)
    np.cumsum(code_points.astype(np.uint64) * fwd[:n], out=prefix[1:])
    return _mix64((prefix[ends] - prefix[starts]) * inv[starts])


def _code_points(text: str) -> np.ndarray:
    """Unicode code points of ``text`` as uint32 (lone surrogates kept as-is)."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")


_WORD_TABLE: np.ndarray | None = None


def _word_table() -> np.ndarray:
    """int8 table over all code points: 0 = no token, 1 = word character (``\\w``), 2 = dense.

    Built once, on first use (~0.3 s), by running ``\\w+`` over a string of every
    code point and marking :func:`newsflow.core.scripts.dense_table`, so it agrees with
    :func:`tokenize` by construction.
    """
    global _WORD_TABLE
    if _WORD_TABLE is None:
        table = np.zeros(0x110000, dtype=np.int8)
        for m in re.finditer(r"\w+", "".join(map(chr, range(0x110000)))):
            table[m.start() : m.end()] = 1
        table[dense_table()] = 2
        _WORD_TABLE = table
    return _WORD_TABLE


def _feature_hashes(features: list[str]) -> np.ndarray:
    """Vectorized :func:`feature_hash` over a list of feature strings; uint64 array."""
    parts: list[str] = []
    lengths = np.empty(len(features), dtype=np.int64)
    for i, f in enumerate(features):
        if not isinstance(f, str):
            raise TypeError(f"features must be str, got {type(f).__name__}: {f!r}")
        split = f.split(" ")
        lengths[i] = len(split)
        parts.extend(split)
    part_len = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    ends = np.cumsum(part_len)
    word = _span_word_hashes(_code_points("".join(parts)), ends - part_len, ends)
    offsets = np.zeros(len(features), dtype=np.int64)
    np.cumsum(lengths[:-1], out=offsets[1:])
    h = np.zeros(len(features), dtype=np.uint64)
    for j in range(int(lengths.max(initial=0))):
        active = np.flatnonzero(lengths > j)
        h[active] = _mix64(h[active] ^ word[offsets[active] + j])
    return h


# Per-segment bit counting. Bit b + 16q of a hash is moved into 16-bit lane q of
# row b (rows b = 0..15, lanes q = 0..3), so one uint64 addition adds four bit
# counters at once; a lane holds counts up to 65535 features per segment.
_LANE_MASK = np.uint64(0x0001000100010001)
_LANE_SHIFTS = np.arange(16, dtype=np.uint64)
_LANE_OFFSETS = np.array([0, 16, 32, 48], dtype=np.uint64)
_MAX_LANE_COUNT = 0xFFFF


def _segment_bit_counts(hashes: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Counts set bits per segment.

    Args:
      hashes: uint64 array, shape (n,).
      starts: int64 array, shape (m,), strictly increasing segment starts, all
        ``< n``; segment s is ``hashes[starts[s]:starts[s+1]]`` (the last one runs
        to the end), each at most 65535 long.

    Returns:
      int64 array (m, 64); ``[s, j]`` = number of hashes in segment s with bit j set.
    """
    lanes = (hashes[None, :] >> _LANE_SHIFTS[:, None]) & _LANE_MASK  # (16, n)
    sums = np.add.reduceat(lanes, starts, axis=1)  # (16, m)
    counts = (sums[:, :, None] >> _LANE_OFFSETS) & np.uint64(_MAX_LANE_COUNT)  # (16, m, 4): [b, s, q]
    return counts.transpose(1, 2, 0).reshape(len(starts), 64).astype(np.int64)  # column 16q + b


def _counts_per_text(hashes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """(n_texts, 64) int64 set-bit counts for consecutive runs of ``lengths`` hashes."""
    m = len(lengths)
    out = np.zeros((m, 64), dtype=np.int64)
    # Split every run into pieces of at most 65535 hashes (lane capacity).
    pieces = np.maximum(1, -(-lengths // _MAX_LANE_COUNT))
    pieces[lengths == 0] = 0
    owner = np.repeat(np.arange(m), pieces)
    if owner.size == 0:
        return out
    text_start = np.zeros(m, dtype=np.int64)
    np.cumsum(lengths[:-1], out=text_start[1:])
    first_piece = np.zeros(m, dtype=np.int64)
    np.cumsum(pieces[:-1], out=first_piece[1:])
    piece_rank = np.arange(owner.size) - first_piece[owner]
    starts = text_start[owner] + piece_rank * _MAX_LANE_COUNT
    counts = _segment_bit_counts(hashes, starts)
    if owner.size == m:
        out[:] = counts
    else:
        np.add.at(out, owner, counts)
    return out


def _pack_bits(set_bits: np.ndarray) -> np.ndarray:
    """(m, 64) bool, column j = bit j -> uint64 array (m,)."""
    packed = np.packbits(set_bits, axis=1, bitorder="little")  # byte k = bits 8k..8k+7
    return packed.view("<u8").reshape(-1).astype(np.uint64)


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
      TypeError: a feature is not a ``str``.
      ValueError: ``weights`` has a different length than ``features``, or a
        weight is negative or not finite.
    """
    if isinstance(features, str):
        raise TypeError("features must be an iterable of str, not a single str")
    feats = list(features)
    if weights is None:
        w = np.ones(len(feats), dtype=np.float64)
    else:
        try:
            w = np.asarray(list(weights), dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("weights must be numbers") from None
        if w.shape != (len(feats),):
            raise ValueError(f"got {len(feats)} features but {w.size} weights")
        if not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError("weights must be finite and >= 0")
    hashes = _feature_hashes(feats)
    total = float(w.sum())
    if not feats or total == 0.0:
        return 0
    bits = np.unpackbits(hashes.astype("<u8").view(np.uint8), bitorder="little").reshape(-1, 64)
    ones = w @ bits  # (64,), column j = bit j
    return int(_pack_bits((2.0 * ones > total)[None, :])[0])


def simhash(text: str) -> int:
    """SimHash fingerprint of a text, per the module specification.

    Short texts (normalized length <= 160 characters, e.g. headlines) are
    fingerprinted in plain Python, which is faster than numpy's per-call
    overhead; longer ones go through :func:`simhash_many`. Both give the same
    value. For many texts, :func:`simhash_many` is much faster.

    Args:
      text: any Unicode string.

    Returns:
      Unsigned 64-bit fingerprint in ``[0, 2**64)``; 0 for text without any
      ``\\w`` token (e.g. ``""``).

    Raises:
      TypeError: ``text`` is not a ``str``.
    """
    norm = normalize(text)
    if len(norm) <= _SMALL_TEXT_CHARS:
        return _simhash_small(norm)
    return int(_fingerprints([norm])[0])


_SMALL_TEXT_CHARS = 160


# Word hashes of recent tokens: token -> w(token) and mix64(w(token)) as one 256-bit lane (32
# little-endian bytes: w in the low 128 bits, mix64(w) in the high 128), the first link of every
# shingle chain starting at it. Token frequencies are Zipfian, so most tokens of a new headline were
# seen before and skip the per-character loop; cleared when full (values never change). Keys are str
# tokens, or ASCII bytes tokens from the ASCII fast path of _simhash_small (the same code points).
_WORD_CACHE: dict = {}
_WORD_CACHE_MAX = 1 << 17

_LANE = 256  # bits per lane of _simhash_small
_HALF = _LANE // 2
_LANE_MASKS = [0]  # [n]: the low 64 bits of each of n lanes
_FIELD_MASKS = [0]  # [n]: bits 0, 8, ..., 56 of each of n lanes
_FIELD_ONES = sum(1 << (8 * j) for j in range(64))  # 1 in each of 64 8-bit fields
_BIT_CHARS = bytes.maketrans(b"\x00\x01", b"01")
# ASCII bytes: word characters (\w: alnum or "_") kept, every other byte -> space
_ASCII_WORDS = bytes(c if (chr(c).isalnum() or c == 0x5F) else 0x20 for c in range(128)) + b" " * 128
_MAX_SMALL_FEATURES = 255  # 8-bit field sums of _simhash_small stay below 256


def _word_entry(token) -> bytes:
    """``w(token)`` and ``mix64(w(token))`` as one 32-byte lane, remembered in ``_WORD_CACHE``. The
    polynomial is evaluated by Horner's rule, highest power first (same value as ``_word_hash_int``)."""
    acc = 0
    for c in reversed(token) if isinstance(token, bytes) else map(ord, reversed(token)):
        acc = (acc * _WORD_BASE + c) & _MASK64
    w = _mix64_int(acc)
    entry = w.to_bytes(16, "little") + _mix64_int(w).to_bytes(16, "little")
    if len(_WORD_CACHE) >= _WORD_CACHE_MAX:
        _WORD_CACHE.clear()
    _WORD_CACHE[token] = entry
    return entry


def _lane_masks(n: int) -> tuple[int, int]:
    """(``_LANE_MASKS[n]``, ``_FIELD_MASKS[n]``), extended on demand."""
    while len(_LANE_MASKS) <= n:
        shift = _LANE * (len(_LANE_MASKS) - 1)
        _LANE_MASKS.append(_LANE_MASKS[-1] | (_MASK64 << shift))
        _FIELD_MASKS.append(_FIELD_MASKS[-1] | (0x0101010101010101 << shift))
    return _LANE_MASKS[n], _FIELD_MASKS[n]


def _simhash_small(norm: str) -> int:
    """SimHash of one normalized text with Python ints (same result as numpy), all features at once.

    Tokens: for ASCII text ``bytes.translate`` + ``split`` (ASCII ``\\w`` is ``[A-Za-z0-9_]`` and ASCII has
    no dense characters, so these are the regex's tokens); else the token regex. SIMD within one Python
    int: token ``i``'s cached ``(w, mix64(w))`` is lane ``i`` (256 bits) of one integer ``x``, and feature
    ``i`` is lane ``i`` of ``z`` (value in the low 64 bits), so each step of the 3-gram chain
    ``mix64(mix64(mix64(w_i) ^ w_i+1) ^ w_i+2)`` is one big-int operation over every shingle: after a shift
    the bits that crossed in from the next lane are masked off, and a lane's 64 x 64-bit product fits in
    it. Counting: ``(z >> p) & 0x0101..01`` puts bit ``8q + p`` of every feature into an 8-bit field;
    four ``p`` share a lane, and halving folds (``low lanes + high lanes``) sum the fields over all
    features. Adding ``127 - n // 2`` to every field sets its top bit iff ``count > n / 2`` (the
    specification's rule; no field passes 255 for n <= 255 features); those 64 bits, put back in column
    order, are the fingerprint.
    """
    toks = norm.encode("ascii").translate(_ASCII_WORDS).split() if norm.isascii() else _token_re().findall(norm)
    n_tok = len(toks)
    if not n_tok:
        return 0
    get = _WORD_CACHE.get
    x = int.from_bytes(b"".join([get(t) or _word_entry(t) for t in toks]), "little")
    if n_tok < SHINGLE_SIZE:  # unigrams: mix64(w)
        nf = n_tok
        lanes, fields = _lane_masks(nf)
        z = (x >> _HALF) & lanes
    else:  # SHINGLE_SIZE == 3
        nf = n_tok - SHINGLE_SIZE + 1
        if nf > _MAX_SMALL_FEATURES:
            return int(_fingerprints([norm])[0])
        lanes, fields = _lane_masks(nf)
        c1, c2 = _MIX_C1, _MIX_C2
        z = ((x >> _HALF) ^ (x >> _LANE)) & lanes  # mix64(w_i) ^ w_i+1
        z ^= (z >> 30) & lanes
        z = (z * c1) & lanes
        z ^= (z >> 27) & lanes
        z = (z * c2) & lanes
        z ^= ((z >> 31) ^ (x >> (2 * _LANE))) & lanes  # ... ^ w_i+2
        z ^= (z >> 30) & lanes
        z = (z * c1) & lanes
        z ^= (z >> 27) & lanes
        z = (z * c2) & lanes
        z ^= (z >> 31) & lanes
    # field 8p + q (bit 64p + 8q) of a lane of lo (p < 4) / hi (p >= 4) counts bit 8q + p
    lo = (z & fields) | ((z >> 1) & fields) << 64 | ((z >> 2) & fields) << 128 | ((z >> 3) & fields) << 192
    hi = ((z >> 4) & fields) | ((z >> 5) & fields) << 64 | ((z >> 6) & fields) << 128 | ((z >> 7) & fields) << 192
    n = nf
    while n > 1:
        keep = (n + 1) >> 1
        low = (1 << (_LANE * keep)) - 1
        lo = (lo & low) + (lo >> (_LANE * keep))
        hi = (hi & low) + (hi >> (_LANE * keep))
        n = keep
    tops = ((((lo | hi << _LANE) + (127 - nf // 2) * _FIELD_ONES) >> 7) & _FIELD_ONES).to_bytes(64, "little")
    # byte 8p + q is bit 8q + p: tops[q::8] are bits 8q .. 8q + 7
    bits = tops[0::8] + tops[1::8] + tops[2::8] + tops[3::8] + tops[4::8] + tops[5::8] + tops[6::8] + tops[7::8]
    return int(bits[::-1].translate(_BIT_CHARS), 2)


# simhash_many works in chunks of about this many characters to bound the
# memory of its temporary arrays (~30 bytes per character).
_CHUNK_CHARS = 1 << 19


def simhash_many(texts: Iterable[str]) -> np.ndarray:
    """Batch SimHash: the same fingerprints as :func:`simhash`, computed fast.

    All per-character and per-token work is vectorized with numpy: normalized
    texts are joined (with ``"\\n"``, never part of a token) into one array of
    code points; tokens are the runs of ``\\w`` code points and the single dense
    characters (a lookup table equal to the regex); word hashes come from prefix sums of ``cp_i * B**i``;
    word hashes are chained into shingle hashes with splitmix64; set bits are
    counted per text, four counters per uint64 addition (16-bit lanes), with
    ``np.add.reduceat``. Each occurrence of a shingle adds weight 1, which
    equals weighting by count. Texts are processed in chunks of about 524,288
    characters, so memory stays bounded.

    Args:
      texts: Unicode strings.

    Returns:
      ``np.ndarray`` of shape ``(n_texts,)``, dtype ``uint64``;
      ``out[i] == simhash(texts[i])``.

    Raises:
      TypeError: an element (or ``texts`` itself) is not a ``str``.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be an iterable of str, not a single str")
    results: list[np.ndarray] = []
    chunk: list[str] = []
    chars = 0
    for text in texts:
        norm = normalize(text)
        chunk.append(norm)
        chars += len(norm) + 1
        if chars >= _CHUNK_CHARS:
            results.append(_fingerprints(chunk))
            chunk, chars = [], 0
    if chunk or not results:
        results.append(_fingerprints(chunk))
    return results[0] if len(results) == 1 else np.concatenate(results)


def _fingerprints(normalized: list[str]) -> np.ndarray:
    """Fingerprints of already normalized texts (see simhash_many)."""
    k = SHINGLE_SIZE
    m = len(normalized)
    out = np.zeros(m, dtype=np.uint64)
    if m == 0:
        return out
    cps = _code_points("\n".join(normalized))
    cls = _word_table()[cps]
    is_tok = cls > 0
    single = cls == 2  # a dense character is a token by itself
    prev = np.concatenate((np.zeros(1, dtype=np.int8), cls[:-1]))
    nxt = np.concatenate((cls[1:], np.zeros(1, dtype=np.int8)))
    tok_start = np.flatnonzero(is_tok & (single | (prev != 1)))
    if tok_start.size == 0:
        return out
    tok_end = np.flatnonzero(is_tok & (single | (nxt != 1))) + 1
    word = _span_word_hashes(cps, tok_start, tok_end)  # (N,) per token, in order
    text_start = np.zeros(m, dtype=np.int64)
    np.cumsum(np.fromiter((len(t) + 1 for t in normalized[:-1]), dtype=np.int64, count=m - 1), out=text_start[1:])
    doc = np.searchsorted(text_start, tok_start, side="right") - 1  # text of each token
    n = np.bincount(doc, minlength=m)
    # chain[i] = hash of the (j+1)-gram starting at token i (across text borders;
    # invalid windows are never selected below).
    unigram = _mix64(word.copy())
    chain = unigram
    for j in range(1, k):
        chain = _mix64(chain[:-1] ^ word[j:])
    total = word.size
    start = np.zeros(m, dtype=np.int64)
    np.cumsum(n[:-1], out=start[1:])
    pos_in_doc = np.arange(total) - start[doc]
    long_doc = n >= k
    n_features = np.where(long_doc, n - k + 1, n)
    is_long = long_doc[doc]
    keep = ~is_long | (pos_in_doc <= n[doc] - k)
    kgram = np.zeros(total, dtype=np.uint64)
    kgram[: chain.size] = chain
    features = np.where(is_long, kgram, unigram)[keep]
    counts = _counts_per_text(features, n_features)
    out[:] = _pack_bits(2 * counts > n_features[:, None])
    out[n_features == 0] = 0
    return out


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
