"""Article quality signals and authority."""

from __future__ import annotations

import math

import pytest

from newsflow.core.quality import (
    WEIGHTS,
    article_quality,
    authority,
    flesch_reading_ease,
    is_original,
    quality_signals,
    syllables,
)


def test_syllables_and_flesch_by_hand():
    assert [syllables(w) for w in ("cat", "table", "reading", "make", "free")] == [1, 2, 2, 1, 1]
    # "The cat sat on the mat." 6 words, 1 sentence, 6 syllables
    assert flesch_reading_ease("The cat sat on the mat.") == pytest.approx(206.835 - 1.015 * 6 - 84.6 * 1)
    assert flesch_reading_ease("") is None


def test_signals_by_hand():
    text = (
        'The minister said the plan works. "We will build it this year," she told reporters. '
        "According to officials, costs fell."
    )
    s = quality_signals(text, authors=["Ann Lee"], original=True)
    assert s.quotes == pytest.approx(1 / 3)
    assert s.named_sources == pytest.approx(1.0)  # said, told, according to
    assert s.byline == 1.0 and s.original == 1.0
    assert s.length == pytest.approx(math.log1p(20) / math.log1p(800), abs=1e-6)
    expected = sum(WEIGHTS[k] * getattr(s, k) for k in WEIGHTS)
    assert s.quality == pytest.approx(expected, abs=1e-6)
    copy = quality_signals(text, authors=["Ann Lee"], original=False)
    assert s.quality - copy.quality == pytest.approx(WEIGHTS["original"], abs=1e-6)


def test_quality_range_and_authority():
    assert article_quality("") == pytest.approx(WEIGHTS["original"])
    assert 0 <= article_quality("word " * 5000) <= 1
    assert authority(0.9, 0.5) == pytest.approx(0.7 * 0.9 + 0.3 * 0.5)
    with pytest.raises(ValueError, match="source_authority"):
        authority(1.2, 0.5)
    with pytest.raises(ValueError, match="quality"):
        authority(0.5, float("nan"))


def test_is_original():
    assert is_original("abc", "cabc") and is_original("abc", None) and not is_original("abc", "cxyz")


def test_length_of_text_without_spaces_is_counted_fairly():
    from newsflow.core.quality import dense_word_estimate, quality_signals

    zh = "本市新建的公共图书馆于周六正式开放，首日共接待读者约三千余人次。" * 10  # 320 chars, 300 Han
    assert len(zh) == 320
    assert dense_word_estimate(zh) == round((300 * 3 + 20) / 6) == 153
    en = "The city opened its new public library on Saturday and welcomed three thousand readers. " * 10
    assert dense_word_estimate(en) == 0
    # word_count from \w+ is 20 clause-long tokens; the estimate wins.
    assert quality_signals(zh, word_count=20).length == quality_signals(en, word_count=153).length
