"""Short headlines with the publisher's declared language as evidence (issue 11, item 10)."""

from __future__ import annotations

import math

import pytest

from newsflow.core.language import (
    DECLARED_PRIOR,
    UNDETERMINED,
    LanguageIdentifier,
    combine_with_declared,
    declared_code,
)

STACY = "Stacy weds techie beau"
LNG = "US urged to export more LNG in response to Russia-Ukraine crisis"
GERMAN = (
    "Die Entscheidung von US-Präsident Trump, den Golf von Mexiko umzubenennen, sorgt für Streit. "
    "Der Name ist ein Erbe des europäischen Imperialismus und wird seit Jahrhunderten verwendet."
)


@pytest.fixture(scope="module")
def lid():
    return LanguageIdentifier()


def test_headlines_alone_are_misread(lid):
    # The faults of the issue, as the model alone sees them.
    assert lid.detect(STACY)[0] == "nl"
    assert lid.detect(LNG)[0] == "zh"


def test_declared_language_settles_short_headlines(lid):
    code, conf = lid.detect(STACY, declared="en-US")
    assert code == "en" and conf > 0.55
    code, conf = lid.detect(LNG, declared="en")
    assert code == "en" and conf > 0.95


def test_lead_text_is_evidence_too(lid):
    lead = "The actress married her software engineer boyfriend in a small ceremony in Los Angeles on Sunday."
    assert lid.detect(f"{STACY}\n{lead}")[0] == "en"


def test_long_text_overrides_a_wrong_declaration(lid):
    code, conf = lid.detect(GERMAN, declared="en")
    assert code == "de" and conf > 0.9


def test_batch_with_declarations_keeps_order(lid):
    got = lid.detect_batch([STACY, "", GERMAN, LNG], declared=["en", "en", None, ""])
    assert [c for c, _ in got] == ["en", UNDETERMINED, "de", "zh"]
    with pytest.raises(ValueError):
        lid.detect_batch([STACY], declared=["en", "de"])


def test_unknown_declaration_is_ignored(lid):
    alone = lid.detect(STACY)
    for tag in ("xx", "english"):
        code, conf = lid.detect(STACY, declared=tag)
        assert code == alone[0] and conf == pytest.approx(alone[1], abs=1e-3)


def test_declared_code():
    assert declared_code("en-US") == "en"
    assert declared_code("nb-NO") == "no"
    assert declared_code("zh_Hant") == "zh"
    assert declared_code("iw") == "he"
    assert declared_code("") == "" and declared_code(None) == "" and declared_code("*") == ""


def test_combine_with_declared_is_bayes_rule():
    probs = {"nl": 0.875, "en": 0.0126, "de": 0.0124, "fr": 0.1}
    post = combine_with_declared(probs, "en")
    other = (1 - DECLARED_PRIOR) / 3
    assert combine_with_declared(probs, "en", n_labels=176)["en"] > post["en"]  # more labels share less
    z = 0.875 * other + 0.0126 * DECLARED_PRIOR + 0.0124 * other + 0.1 * other
    assert math.isclose(post["en"], 0.0126 * DECLARED_PRIOR / z)
    assert math.isclose(sum(post.values()), 1.0)
    assert combine_with_declared(probs, "") == pytest.approx({k: v / sum(probs.values()) for k, v in probs.items()})
