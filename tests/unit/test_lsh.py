"""Tests for newsflow.core.lsh: the in-memory BandIndex against brute force.

The checks are written against the NearDuplicateIndex protocol and run for every
factory in INDEX_FACTORIES, so another implementation (e.g. a Redis-backed one)
can be added to that list and share them.
"""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from newsflow.core.lsh import BandIndex, NearDuplicateIndex

M64 = (1 << 64) - 1

INDEX_FACTORIES = [pytest.param(BandIndex, id="BandIndex")]


def popcount(x: int) -> int:
    return bin(x).count("1")


def brute_force(items: dict[str, int], fp: int, max_distance: int) -> list[tuple[str, int]]:
    hits = [(i, popcount(f ^ fp)) for i, f in items.items()]
    return sorted([h for h in hits if h[1] <= max_distance], key=lambda h: (h[1], h[0]))


def flip(fp: int, positions) -> int:
    for p in positions:
        fp ^= 1 << p
    return fp


@settings(max_examples=150, deadline=None)
@given(
    base=st.integers(0, M64),
    near_flips=st.lists(st.sets(st.integers(0, 63), max_size=3), min_size=1, max_size=8),
    far_flips=st.lists(st.sets(st.integers(0, 63), min_size=4, max_size=12), max_size=8),
    others=st.lists(st.integers(0, M64), max_size=20),
    max_distance=st.integers(0, 3),
)
@pytest.mark.parametrize("make_index", INDEX_FACTORIES)
def test_every_pair_within_distance_3_is_found_with_true_distance(
    make_index, base, near_flips, far_flips, others, max_distance
):
    index = make_index()
    items: dict[str, int] = {}
    # near: <= 3 flipped bits; far: 4..12 flips, so they often share a band with
    # the base yet must not be returned; others: unrelated random fingerprints.
    groups = [
        ("near", [flip(base, f) for f in near_flips]),
        ("far", [flip(base, f) for f in far_flips]),
        ("other", others),
    ]
    for name, fps in groups:
        for i, fp in enumerate(fps):
            items[f"{name}-{i}"] = fp
            index.add(f"{name}-{i}", fp)
    got = index.query(base, max_distance=max_distance)
    assert got == brute_force(items, base, max_distance)
    for i, f in enumerate(near_flips):
        if len(f) <= max_distance:
            assert (f"near-{i}", len(f)) in got
    # and from every stored item's point of view
    for _item_id, fp in items.items():
        assert index.query(fp) == brute_force(items, fp, 3)


@pytest.mark.parametrize("make_index", INDEX_FACTORIES)
def test_all_one_two_and_three_bit_neighbours_are_found(make_index):
    base = 0xF0E1D2C3B4A59687
    index = make_index()
    expected = []
    for r in (1, 2, 3):
        for combo in itertools.combinations(range(64), r):
            item_id = f"{r}:{','.join(map(str, combo))}"
            index.add(item_id, flip(base, combo))
            expected.append((item_id, r))
    # 64 + 2016 + 41664 neighbours, all within distance 3.
    assert len(index) == 43744
    expected.sort(key=lambda h: (h[1], h[0]))
    assert index.query(base) == expected
    assert index.query(base, max_distance=1) == expected[:64]
    assert index.nearest(base) == expected[0] == ("1:0", 1)
    assert index.query(base, max_distance=0) == []


@pytest.mark.parametrize("make_index", INDEX_FACTORIES)
def test_add_is_idempotent_and_rejects_a_changed_fingerprint(make_index):
    index = make_index()
    index.add("a", 42)
    index.add("a", 42)
    assert len(index) == 1
    assert index.query(42) == [("a", 0)]
    with pytest.raises(ValueError, match="already stored"):
        index.add("a", 43)
    assert index.query(42) == [("a", 0)]
    assert index.query(43) == [("a", 1)]
    assert "a" in index and "b" not in index


@pytest.mark.parametrize("make_index", INDEX_FACTORIES)
def test_sorting_and_nearest_ties(make_index):
    index = make_index()
    base = 0x1234_5678_9ABC_DEF0
    index.add("zeta", flip(base, [0]))
    index.add("alpha", flip(base, [5]))
    index.add("mid", flip(base, [1, 2]))
    index.add("exact", base)
    index.add("far", flip(base, range(10)))
    assert index.query(base) == [("exact", 0), ("alpha", 1), ("zeta", 1), ("mid", 2)]
    assert index.nearest(base) == ("exact", 0)
    assert index.nearest(flip(base, [40])) == ("exact", 1)
    assert index.nearest(flip(base, [0, 5, 40])) == ("alpha", 2)  # tie with zeta -> smallest id
    assert index.nearest(base ^ M64) is None
    assert make_index().nearest(base) is None
    assert make_index().query(base) == []


def test_bandindex_satisfies_protocol_and_validates_arguments():
    index = BandIndex()
    assert isinstance(index, NearDuplicateIndex)
    assert index.exact_up_to == 3
    with pytest.raises(TypeError):
        index.add(7, 1)
    with pytest.raises(ValueError):
        index.add("", 1)
    with pytest.raises(ValueError):
        index.add("a", -1)
    with pytest.raises(ValueError):
        index.add("a", 1 << 64)
    with pytest.raises(TypeError):
        index.add("a", "ff")
    with pytest.raises(ValueError):
        index.query(1, max_distance=-1)
    with pytest.raises(ValueError):
        index.query(1, max_distance=65)
    with pytest.raises(TypeError):
        index.query(1, max_distance=1.5)
    with pytest.raises(ValueError):
        BandIndex(n_bands=3, band_bits=16)
    assert len(index) == 0
    index.add("a", np.uint64(M64))
    assert index.fingerprint("a") == M64 and index.fingerprint("b") is None


def test_other_band_layouts_are_exact_up_to_n_bands_minus_1():
    rng = random.Random(7)
    index = BandIndex(n_bands=8, band_bits=8)
    assert index.exact_up_to == 7
    base = rng.getrandbits(64)
    items = {}
    for i in range(300):
        fp = flip(base, rng.sample(range(64), rng.randint(0, 9)))
        items[f"i{i}"] = fp
        index.add(f"i{i}", fp)
    assert index.query(base, max_distance=7) == brute_force(items, base, 7)


def test_large_buckets_take_the_numpy_path_with_the_same_results():
    # 2,000 items share band 0 (low 16 bits), so a query sees > 512 candidates.
    rng = random.Random(3)
    index = BandIndex()
    base = rng.getrandbits(64)
    items = {}
    for i in range(2000):
        fp = (rng.getrandbits(48) << 16) | (base & 0xFFFF)
        if i % 10 == 0:
            fp = flip(base, rng.sample(range(16, 64), rng.randint(0, 3)))
        items[f"id{i:05d}"] = fp
        index.add(f"id{i:05d}", fp)
    # Beyond distance 3 only band-sharing candidates are returned; here every
    # item shares band 0 with the base, so brute force is the exact answer.
    for max_distance in (0, 3, 40):
        assert index.query(base, max_distance) == brute_force(items, base, max_distance)
    # still growable after numpy read the arrays
    index.add("late", base)
    items["late"] = base
    assert index.query(base, 0) == brute_force(items, base, 0)
    assert ("late", 0) in index.query(base, 0)
    assert np.array_equal(
        index.fingerprints()[:3], np.array([items["id00000"], items["id00001"], items["id00002"]], dtype=np.uint64)
    )
