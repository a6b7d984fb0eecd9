"""The revision rule (newsflow.core.revisions; rule 5 of "Article identity" in newsflow.core.urls) without Redis."""

from __future__ import annotations

import itertools

import pytest

from newsflow.core.outlets import outlet
from newsflow.core.revisions import Version, current_version, is_revision, revision_components, stored_id
from newsflow.core.urls import article_id

OLD_URL = "https://www.gazette.example.org/city/mayor-opens-library-b2210/"
NEW_URL = "https://www.gazette.example.org/city/mayor-opens-new-central-library-b2210/"
T = 1_730_000_000.0


def v(url: str, fetched: float, published: float | None = T) -> Version:
    return Version(article_id(url), outlet(url), published, published if published is not None else fetched, fetched)


OLD = v(OLD_URL, T + 600)
NEW = v(NEW_URL, T + 7200)


def test_the_example_is_a_revision_and_the_first_fetched_id_shows_the_newest_version():
    assert OLD.outlet == NEW.outlet == "example.org"
    assert OLD.article_id != NEW.article_id
    assert is_revision(OLD, NEW, near=True) and is_revision(NEW, OLD, near=True)
    for order in ([OLD, NEW], [NEW, OLD]):
        assert stored_id(order) == OLD.article_id
        assert current_version(order) == NEW


@pytest.mark.parametrize(
    "other",
    [
        v("https://www.other.example.com/city/mayor-opens-library", T + 900),  # another outlet: a copy
        v(NEW_URL, T + 7200, published=T + 60),  # another publish time
        v(NEW_URL, T + 7200, published=None),  # publish time unknown
    ],
)
def test_not_a_revision(other):
    assert not is_revision(OLD if other.publish_time is not None else v(OLD_URL, T + 600, None), other, near=True)


def test_texts_that_are_not_near_duplicates_are_not_revisions():
    assert not is_revision(OLD, NEW, near=False)
    assert not is_revision(OLD, OLD, near=True)


def test_ties_in_fetch_time_go_to_the_smaller_id():
    a, b = v(OLD_URL, T + 600), v(NEW_URL, T + 600)
    small, large = sorted([a, b], key=lambda x: x.article_id)
    assert stored_id([a, b]) == stored_id([b, a]) == small.article_id
    assert current_version([a, b]) == current_version([b, a]) == large


def test_components_are_transitive_and_independent_of_input_order():
    mid = v("https://gazette.example.org/city/mayor-opens-central-library-b2210", T + 3600)
    copy = v("https://www.other.example.com/x", T + 900)
    near_pairs = {frozenset((OLD, mid)), frozenset((mid, NEW)), frozenset((OLD, copy))}

    def near(x, y):
        return frozenset((x, y)) in near_pairs

    for order in itertools.permutations([OLD, NEW, mid, copy]):
        comps = revision_components(list(order), near)
        assert sorted(sorted(x.article_id for x in c) for c in comps) == sorted(
            [sorted([OLD.article_id, NEW.article_id, mid.article_id]), [copy.article_id]]
        )
        (three,) = [c for c in comps if len(c) == 3]
        assert stored_id(three) == OLD.article_id and current_version(three) == NEW


def test_empty_input_is_an_error():
    with pytest.raises(ValueError):
        stored_id([])
    with pytest.raises(ValueError):
        current_version([])
