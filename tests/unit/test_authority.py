"""The default authority rubric (newsflow.core.authority): tier base, shrunk originality, counts from groups."""

from __future__ import annotations

import pytest

from newsflow.core.authority import (
    TIER_AUTHORITY,
    default_authority,
    originality,
    originality_counts,
    validate_authority,
)


def test_tier_bases_match_the_seed_table_rubric():
    import csv

    from newsflow.core.sources import DEFAULT_SOURCES_PATH

    with open(DEFAULT_SOURCES_PATH, encoding="utf-8") as f:
        for row in csv.DictReader(f):
            assert default_authority(row["tier"]) == float(row["authority"]), row
    assert default_authority("") == 0.5 and default_authority("unheard-of") == 0.5
    assert set(TIER_AUTHORITY) == {"wire", "record", "national", "popular", "low"}


def test_originality_is_shrunk_towards_one_half():
    assert originality(0, 0) == 0.5
    # 10 firsts, 0 copies, prior 10: (10 + 5) / 20
    assert originality(10, 0) == pytest.approx(0.75)
    assert originality(0, 30) == pytest.approx(5 / 40)
    assert originality(1000, 0, prior=0) == 1.0
    with pytest.raises(ValueError):
        originality(-1, 0)


def test_default_authority_with_originality_stays_within_a_tier_step():
    assert default_authority("national", 1.0) == pytest.approx(0.85)
    assert default_authority("national", 0.0) == pytest.approx(0.65)
    assert default_authority("wire", 1.0) == 1.0  # clipped
    assert default_authority("low", 0.0) == pytest.approx(0.2)
    assert default_authority("popular", 0.5) == 0.6


def test_originality_counts_from_groups():
    groups = [
        # founded by reuters.com (earliest), copied by two outlets
        [(100.0, "a1", "reuters.com"), (160.0, "a2", "example.com"), (130.0, "a3", "example.org")],
        # same event time: the smaller article id founds it
        [(50.0, "b2", "example.com"), (50.0, "b1", "reuters.com")],
        # one outlet republishing itself: not syndication
        [(10.0, "c1", "example.com"), (20.0, "c2", "example.com")],
        # example.com founds; its own second copy does not count twice
        [(5.0, "d1", "example.com"), (6.0, "d2", "example.com"), (7.0, "d3", "example.org"), (8.0, "d4", "")],
    ]
    assert originality_counts(groups) == {
        "reuters.com": (2, 0),
        "example.com": (1, 2),
        "example.org": (0, 2),
    }


def test_validate_authority():
    assert validate_authority("0.25") == 0.25
    for bad in (-0.1, 1.5, "x", float("nan"), None):
        with pytest.raises(ValueError):
            validate_authority(bad)
