"""newsflow.core.coverage: the top coverage of a story and its timeline in brief (expected values by hand)."""

from __future__ import annotations

import pytest

from newsflow.core.coverage import ReportFacts, Timeline, coverage_order, timeline_summary

R = ReportFacts
REPORTS = [
    R("g1", "a.com", 0.9, 100),
    R("g2", "a.com", 0.8, 50),
    R("g3", "a.com", 0.95, 200),
    R("g4", "b.com", 0.5, 10),
    R("g5", "c.com", 0.7, 300, paywalled=True),
    R("g6", "c.com", 0.6, 20),
    R("g7", "d.com", 0.9, 400),
]


def test_every_outlets_best_report_first_then_second_best_two_per_outlet_rest_by_time():
    # per outlet: a.com g3 > g1 > g2 (g2 is a third: out of the top); c.com's free g6 before paywalled g5
    # best reports by authority: g3 .95, g7 .9, g6 .6, g4 .5; then the seconds: g1 (free) before g5 (paywalled)
    assert coverage_order(REPORTS) == (["g3", "g7", "g6", "g4", "g1", "g5"], ["g2"])
    # a top of 4: the seconds move to the rest, earliest first
    assert coverage_order(REPORTS, limit=4) == (["g3", "g7", "g6", "g4"], ["g2", "g1", "g5"])
    assert coverage_order(REPORTS, per_outlet=1) == (["g3", "g7", "g6", "g4"], ["g2", "g1", "g5"])
    assert coverage_order(REPORTS, per_outlet=3) == (["g3", "g7", "g6", "g4", "g1", "g5", "g2"], [])
    # input order does not matter
    assert coverage_order(reversed(REPORTS)) == coverage_order(REPORTS)


def test_ties_go_to_the_earlier_report_then_the_smaller_id():
    same = [R("z", "x.com", 0.5, 10), R("b", "y.com", 0.5, 5), R("a", "w.com", 0.5, 10)]
    assert coverage_order(same) == (["b", "a", "z"], [])
    assert coverage_order([]) == ([], [])


def test_a_group_twice_or_a_bad_size_is_an_error():
    with pytest.raises(ValueError, match="'g1' appears twice"):
        coverage_order([R("g1", "a.com", 0.5, 1), R("g1", "b.com", 0.4, 2)])
    with pytest.raises(ValueError, match="limit and per_outlet"):
        coverage_order(REPORTS, limit=0)


def test_timeline_summary_names_first_latest_and_busiest_hours():
    items = [(7210, "x"), (7200 + 3500, "y"), (10800, "z"), (100, "w"), (7210, "a"), (100, "v")]
    # hour 0: w, v (2); hour 7200: x, y, a (3); hour 10800: z (1); first: (100, "v") beats (100, "w")
    assert timeline_summary(items) == Timeline("v", "z", [(7200, 3), (0, 2), (10800, 1)], 6, 3)
    assert timeline_summary(items, busiest=1).busiest == [(7200, 3)]
    # equal counts: the earlier hour first
    assert timeline_summary([(3600, "b"), (0, "a")]).busiest == [(0, 1), (3600, 1)]
    assert timeline_summary([]) == Timeline("", "", [], 0, 0)
