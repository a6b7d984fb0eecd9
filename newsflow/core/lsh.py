"""In-memory LSH band index over 64-bit SimHash fingerprints.

Near-duplicate lookup per Manku, Jain and Das Sarma ("Detecting near-duplicates
for web crawling", WWW 2007): split each 64-bit fingerprint into ``n_bands``
bands (default 4 x 16 bits, :func:`newsflow.core.simhash.bands`) and keep, per band,
a table from band value to the items having that value. By pigeonhole, two
fingerprints within Hamming distance ``d <= n_bands - 1`` (3 for the default
layout) agree on at least one whole band, so looking up the query's band
values and checking the exact distance of every candidate finds *every* stored
item within that distance (no false negatives) and returns only true matches
(no false positives).

:class:`NearDuplicateIndex` is the protocol shared with the Redis-backed store
in ``newsflow/storage/``; :class:`BandIndex` is the in-memory implementation
used by tests, benchmarks and single-process runs.

Memory at 1,000,000 fingerprints: fingerprints in one ``array('Q')`` (8 bytes
each), per band a table (a 65,536-slot list for 16-bit bands) from band value
to an ``array('I')`` of item positions (4 bytes per entry), plus the id list
and the id -> position dict. Band values are those of
:func:`newsflow.core.simhash.bands` (band ``i`` = bits ``[16i, 16i + 16)`` from the
least significant bit), so they match the Redis store's band keys.
"""

from __future__ import annotations

from array import array
from typing import Protocol, runtime_checkable

import numpy as np

from newsflow.core.simhash import FINGERPRINT_BITS, MAX_FINGERPRINT

DEFAULT_MAX_DISTANCE = 3
"""Near-duplicate threshold in bits (Manku et al. 2007; DESIGN.md)."""

# Above this many candidate positions a query checks distances with numpy
# instead of a Python loop (the loop is faster for the usual ~60 candidates).
_NUMPY_CANDIDATES = 512


@runtime_checkable
class NearDuplicateIndex(Protocol):
    """An index of item ids by 64-bit SimHash, queried by Hamming distance."""

    def add(self, item_id: str, fp: int) -> None:
        """Stores ``item_id`` with fingerprint ``fp``; idempotent for the same pair.

        Raises:
          ValueError: ``item_id`` is already stored with a different fingerprint,
            or an argument is invalid.
        """
        ...

    def query(self, fp: int, max_distance: int = DEFAULT_MAX_DISTANCE) -> list[tuple[str, int]]:
        """All stored ``(item_id, distance)`` with distance <= max_distance, sorted by (distance, item_id)."""
        ...

    def nearest(self, fp: int, max_distance: int = DEFAULT_MAX_DISTANCE) -> tuple[str, int] | None:
        """The closest stored ``(item_id, distance)`` (ties: smallest id), or None."""
        ...


def _check_fp(fp: int) -> int:
    if isinstance(fp, (bool, np.bool_)) or not isinstance(fp, (int, np.integer)):
        raise TypeError(f"fingerprint must be an int, got {type(fp).__name__}")
    fp = int(fp)
    if fp < 0 or fp > MAX_FINGERPRINT:
        raise ValueError(f"fingerprint must be in [0, 2**64), got {fp}")
    return fp


class BandIndex:
    """In-memory near-duplicate index: LSH bands over 64-bit SimHash fingerprints.

    Queries with ``max_distance <= n_bands - 1`` (3 by default) are exact: every
    stored item within that Hamming distance is returned, and nothing else.
    Larger ``max_distance`` values (e.g. 4-5 for the "borderline" MinHash
    re-check) return only the items within that distance that also share a
    band with the query, which may miss some (see :attr:`exact_up_to`).

    Not thread-safe. Items cannot be removed.

    Example:
      >>> index = BandIndex()
      >>> index.add("a", 0b1011)
      >>> index.add("b", 0b1000)
      >>> index.query(0b1010)
      [('a', 1), ('b', 1)]
      >>> index.nearest(0b1011)
      ('a', 0)
    """

    def __init__(self, n_bands: int = 4, band_bits: int = 16) -> None:
        """Creates an empty index.

        Args:
          n_bands: number of bands, >= 1.
          band_bits: bits per band; ``n_bands * band_bits`` must be 64.

        Raises:
          ValueError: the band layout does not cover exactly 64 bits.
        """
        if n_bands < 1 or band_bits < 1 or n_bands * band_bits != FINGERPRINT_BITS:
            raise ValueError(
                f"n_bands * band_bits must be {FINGERPRINT_BITS} with both >= 1, got {n_bands} x {band_bits}"
            )
        self.n_bands = n_bands
        self.band_bits = band_bits
        self._fps = array("Q")
        self._ids: list[str] = []
        self._pos: dict[str, int] = {}
        # Band value -> array('I') of item positions. Up to 16-bit bands a
        # list with one slot per value (None = empty) is smaller and faster
        # than a dict; wider bands use a dict.
        self._tables: list = [[None] * (1 << band_bits) if band_bits <= 16 else {} for _ in range(n_bands)]
        self._lookups = [t.__getitem__ if isinstance(t, list) else t.get for t in self._tables]
        self._shifts = tuple(i * band_bits for i in range(n_bands))
        self._mask = (1 << band_bits) - 1

    @property
    def exact_up_to(self) -> int:
        """Largest ``max_distance`` for which queries have no false negatives (``n_bands - 1``)."""
        return self.n_bands - 1

    def __len__(self) -> int:
        """Number of stored items."""
        return len(self._ids)

    def __contains__(self, item_id: object) -> bool:
        """True if ``item_id`` is stored."""
        return item_id in self._pos

    def fingerprint(self, item_id: str) -> int | None:
        """The stored fingerprint of ``item_id``, or None if it is not stored."""
        pos = self._pos.get(item_id)
        return None if pos is None else self._fps[pos]

    def add(self, item_id: str, fp: int) -> None:
        """Stores ``item_id`` with fingerprint ``fp``.

        Re-adding the same id with the same fingerprint is a no-op.

        Args:
          item_id: non-empty string id (e.g. an article id).
          fp: fingerprint in ``[0, 2**64)``.

        Raises:
          TypeError: ``item_id`` is not a ``str`` or ``fp`` is not an int.
          ValueError: ``item_id`` is empty, ``fp`` is out of range, or
            ``item_id`` is already stored with a different fingerprint.
        """
        if not isinstance(item_id, str):
            raise TypeError(f"item_id must be str, got {type(item_id).__name__}")
        if not item_id:
            raise ValueError("item_id must be non-empty")
        fp = _check_fp(fp)
        pos = self._pos.get(item_id)
        if pos is not None:
            old = self._fps[pos]
            if old == fp:
                return
            raise ValueError(
                f"item {item_id!r} is already stored with fingerprint {old:016x}, cannot re-add it with {fp:016x}"
            )
        pos = len(self._ids)
        self._fps.append(fp)
        self._ids.append(item_id)
        self._pos[item_id] = pos
        mask = self._mask
        for table, lookup, shift in zip(self._tables, self._lookups, self._shifts, strict=False):
            value = (fp >> shift) & mask
            bucket = lookup(value)
            if bucket is None:
                table[value] = array("I", (pos,))
            else:
                bucket.append(pos)

    def query(self, fp: int, max_distance: int = DEFAULT_MAX_DISTANCE) -> list[tuple[str, int]]:
        """Stored items within ``max_distance`` bits of ``fp``.

        Args:
          fp: fingerprint in ``[0, 2**64)``.
          max_distance: Hamming distance threshold in bits, 0..64. Exact (no
            misses) for values up to :attr:`exact_up_to`.

        Returns:
          ``[(item_id, distance), ...]`` sorted by (distance, item_id).

        Raises:
          TypeError: ``fp`` or ``max_distance`` is not an int.
          ValueError: ``fp`` or ``max_distance`` is out of range.
        """
        fp = _check_fp(fp)
        if isinstance(max_distance, bool) or not isinstance(max_distance, (int, np.integer)):
            raise TypeError(f"max_distance must be an int, got {type(max_distance).__name__}")
        if not 0 <= max_distance <= FINGERPRINT_BITS:
            raise ValueError(f"max_distance must be in [0, 64], got {max_distance}")
        mask = self._mask
        buckets = [lookup((fp >> shift) & mask) for lookup, shift in zip(self._lookups, self._shifts, strict=False)]
        buckets = [b for b in buckets if b is not None]
        n_candidates = sum(map(len, buckets))
        if n_candidates == 0:
            return []
        ids = self._ids
        if n_candidates <= _NUMPY_CANDIDATES:
            fps = self._fps
            found: dict[int, int] = {}
            for bucket in buckets:
                for pos in bucket:
                    d = (fps[pos] ^ fp).bit_count()
                    if d <= max_distance:
                        found[pos] = d
            if not found:
                return []
            hits = [(ids[pos], d) for pos, d in found.items()]
        else:
            positions = np.unique(np.concatenate([np.frombuffer(b, dtype=np.uint32) for b in buckets]))
            # Fancy indexing copies, so no buffer export of self._fps outlives this line.
            stored = np.frombuffer(self._fps, dtype=np.uint64)[positions]
            dist = np.bitwise_count(stored ^ np.uint64(fp))
            keep = np.flatnonzero(dist <= max_distance)
            hits = [(ids[p], int(d)) for p, d in zip(positions[keep].tolist(), dist[keep].tolist(), strict=False)]
        hits.sort(key=lambda hit: (hit[1], hit[0]))
        return hits

    def nearest(self, fp: int, max_distance: int = DEFAULT_MAX_DISTANCE) -> tuple[str, int] | None:
        """The closest stored item within ``max_distance`` bits of ``fp``.

        Args:
          fp: fingerprint in ``[0, 2**64)``.
          max_distance: Hamming distance threshold in bits, 0..64.

        Returns:
          ``(item_id, distance)`` with the smallest distance (ties go to the
          smallest ``item_id``), or ``None`` if nothing is within range.

        Raises:
          TypeError: ``fp`` or ``max_distance`` is not an int.
          ValueError: ``fp`` or ``max_distance`` is out of range.
        """
        hits = self.query(fp, max_distance)
        return hits[0] if hits else None

    def fingerprints(self) -> np.ndarray:
        """A copy of all stored fingerprints, uint64, shape (len(self),), in insertion order."""
        return np.array(self._fps, dtype=np.uint64)
