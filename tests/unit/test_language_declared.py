"""Short headlines with the publisher's declared language as evidence (issue 11, item 10)."""

from __future__ import annotations

import math

import pytest

from newsflow.core.language import (
    DECLARED_PRIOR,
    UNDETERMINED,
    LanguageIdentifier,
    OutletLanguages,
    combine_with_declared,
    declared_code,
    mixture_prior,
)
from newsflow.core.sources import SourceTable

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


# --- the outlets' language mix as evidence (issue 32, item 2) ---------------------------------------------------

ENGLISH_TABLE = ["en"] * 130 + ["de"] * 12 + ["fr"] * 2 + ["it"] * 2


def test_mixture_prior_is_bounded_by_its_strength():
    prior = mixture_prior({"en": 0.75, "de": 0.25}, 0.1, 176)
    assert prior["en"] == pytest.approx(0.1 * 0.75 + 0.9 / 176)
    assert prior["de"] == pytest.approx(0.1 * 0.25 + 0.9 / 176)
    # the most favoured label is at most (s + (1 - s) / n) / ((1 - s) / n) times any other
    assert prior["en"] / (0.9 / 176) < 1 + 0.1 * 176 / 0.9


def test_outlet_languages_population_is_the_share_of_registered_outlets():
    langs = OutletLanguages(["en", "en-GB", "de", "", "iw", "english"])
    assert langs.population == {"en": 0.5, "de": 0.25, "he": 0.25}
    assert OutletLanguages(["", ""]).prior() == {}
    assert OutletLanguages.from_sources(SourceTable.load()).population["en"] > 0.7


def test_an_english_outlet_mix_keeps_short_english_headlines_english(lid):
    prior = OutletLanguages(ENGLISH_TABLE).prior()
    # a bundled aggregator headline; lid.176 alone: "it"
    italian_looking = "'True Detective's' predictable, simplistic finale"
    assert lid.detect(italian_looking)[0] == "it"
    assert lid.detect(italian_looking, prior=prior)[0] == "en"
    assert lid.detect(LNG)[0] == "zh"
    assert lid.detect(LNG, prior=prior)[0] == "en"


def test_long_text_still_beats_the_outlet_mix(lid):
    prior = OutletLanguages(ENGLISH_TABLE).prior()
    assert lid.detect(GERMAN, prior=prior)[0] == "de"
    assert lid.detect(GERMAN, declared="en", prior=prior)[0] == "de"  # wrong declaration and the mix together


def test_prior_posterior_is_bayes_rule_over_the_model_distribution(lid):
    # recompute the posterior independently from the model's full distribution
    prior = OutletLanguages(ENGLISH_TABLE).prior()
    labels, probs = lid._model.predict([LNG.lower()], k=-1)
    dist = {lab.replace("__label__", ""): float(p) for lab, p in zip(labels[0], probs[0], strict=True)}
    rest = (1 - sum(prior.values())) / (176 - len(prior))
    post = {k: v * prior.get(k, rest) for k, v in dist.items()}
    assert lid.detect(LNG, prior=prior)[1] == pytest.approx(post["en"] / sum(post.values()), rel=1e-6)
