"""Tests for the article-extraction-benchmark metric and the ``eval extraction`` command."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from newsflow.cli.evaluation import extraction as ev
from newsflow.cli.evaluation.extraction import (
    PageScore,
    aggregate,
    evaluate,
    page_score,
    shingles,
    tokenize,
)
from tests.conftest import SHARED_DATA

DATA = Path(SHARED_DATA) / "article-extraction-benchmark"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "extraction"


def test_tokens_are_unicode_words():
    assert tokenize("Größe über-all, 3.5 km!") == ["Größe", "über", "all", "3", "5", "km"]
    assert tokenize(None) == []


def test_shingles_are_a_multiset_of_4_grams():
    # "a b c d a b c d": abcd, bcda, cdab, dabc, abcd -> abcd counted twice
    s = shingles("a b c d a b c d")
    assert s[("a", "b", "c", "d")] == 2 and sum(s.values()) == 5
    # fewer than 4 tokens: one shorter shingle; no tokens: none
    assert shingles("hello world") == {("hello", "world"): 1}
    assert shingles("  ,. ") == {}


def test_page_score_by_hand():
    # true: abcd, bcde   pred: abcd, bcdx -> tp 1, fp 1, fn 1 -> each 1/3
    s = page_score("a b c d e", "a b c d x")
    assert s == pytest.approx(PageScore(1 / 3, 1 / 3, 1 / 3))
    # repeated shingle: true abcd x2 (+3 others), pred abcd x1 -> tp 1, fp 0, fn 4
    assert page_score("a b c d a b c d", "a b c d") == pytest.approx(PageScore(0.2, 0.0, 0.8))
    assert page_score("", "") == PageScore(0.0, 0.0, 0.0)


def test_aggregate_averages_pages_then_takes_f1():
    pages = [
        page_score("a b c d e", "a b c d x"),  # P 0.5, R 0.5
        page_score("one two three four", "one two three four"),  # P 1, R 1 (fp = fn = 0)
        page_score("w x y z", ""),  # tp = fp = 0: left out of P; R 0
    ]
    scores = aggregate(pages)
    assert scores.pages == 3
    assert scores.precision == pytest.approx((0.5 + 1.0) / 2)  # 0.75
    assert scores.recall == pytest.approx((0.5 + 1.0 + 0.0) / 3)  # 0.5
    assert scores.f1 == pytest.approx(2 * 0.75 * 0.5 / 1.25)  # 0.6


def test_evaluate_treats_missing_predictions_as_empty():
    scores = evaluate({"p1": "a b c d e", "p2": "q r s t"}, {"p1": "a b c d e"})
    assert (scores.precision, scores.recall) == (1.0, pytest.approx(0.5))


def test_aggregate_needs_predictions():
    with pytest.raises(ValueError):
        aggregate([page_score("a b c d", "")])


@pytest.mark.parametrize(
    "name,f1,precision,recall",
    [
        ("trafilatura", 0.952, 0.932, 0.973),
        ("newspaper", 0.951, 0.967, 0.936),
        ("html-text", 0.672, 0.508, 0.994),
        ("readability", 0.924, 0.913, 0.936),
    ],
)
def test_reproduces_provenance_table(name, f1, precision, recall, capsys):
    if not DATA.is_dir():
        pytest.skip("shared data not available")
    code = ev.main(
        [
            "--ground-truth",
            str(DATA / "ground-truth.json"),
            "--predictions",
            str(DATA / "reference_outputs" / f"{name}.json"),
        ]
    )
    assert code == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1
    out = json.loads(lines[0])
    assert out["pages"] == 138
    assert (round(out["f1"], 3), round(out["precision"], 3), round(out["recall"], 3)) == (f1, precision, recall)


def test_command_extracts_html_dir(tmp_path, capsys):
    html = (FIXTURES / "article_de.html").read_text(encoding="utf-8")
    truth = re.findall(r"<p>(Nach vier.*?|Die Brücke ist.*?|Anwohnerinnen.*?)</p>", html)
    assert len(truth) == 3
    (tmp_path / "html").mkdir()
    shutil.copy(FIXTURES / "article_de.html", tmp_path / "html" / "elbe.html")
    gt = {
        "elbe": {"articleBody": "\n".join(truth), "url": "https://elbtal.example/bruecke"},
        "gone": {"articleBody": "this page file is missing", "url": "https://elbtal.example/gone"},
    }
    (tmp_path / "gt.json").write_text(json.dumps(gt), encoding="utf-8")
    assert ev.main(["--ground-truth", str(tmp_path / "gt.json"), "--html-dir", str(tmp_path / "html")]) == 0
    out = json.loads(capsys.readouterr().out)
    # The page repeats its headline at the top of the article; trafilatura keeps it and the
    # extractor drops it as page header (drop_header_matter), so exactly the body is predicted:
    # P = 1, R = 1 for the page. The missing page adds a recall of 0 and no precision term.
    assert out["pages"] == 2 and out["errors"] == {"missing_file": 1}
    assert out["precision"] == 1.0
    assert out["recall"] == round((1.0 + 0.0) / 2, 4)


def test_our_extractor_meets_the_target_on_the_shared_benchmark(capsys):
    if not DATA.is_dir():
        pytest.skip("shared data not available")
    assert ev.main(["--ground-truth", str(DATA / "ground-truth.json"), "--html-dir", str(DATA / "html")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pages"] == 138 and out["errors"] == {}
    assert out["f1"] >= 0.95


def test_bad_ground_truth_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "gt.json").write_text('["not", "a", "mapping"]', encoding="utf-8")
    assert ev.main(["--ground-truth", str(tmp_path / "gt.json"), "--predictions", str(tmp_path / "gt.json")]) == 2
    assert "ground truth" in capsys.readouterr().err


def test_truncated_html_gz_is_scored_empty_with_a_warning(tmp_path, capsys):
    import gzip

    html = (FIXTURES / "article_de.html").read_bytes()
    (tmp_path / "html").mkdir()
    (tmp_path / "html" / "elbe.html").write_bytes(html)
    full = gzip.compress(html)
    (tmp_path / "html" / "cut.html.gz").write_bytes(full[: len(full) // 2])  # truncated download
    gt = {
        "elbe": {"articleBody": "Die Brücke ist gesperrt und bleibt es", "url": "https://elbtal.example/bruecke"},
        "cut": {"articleBody": "lost words of a truncated page", "url": "https://elbtal.example/cut"},
    }
    (tmp_path / "gt.json").write_text(json.dumps(gt), encoding="utf-8")
    assert ev.main(["--ground-truth", str(tmp_path / "gt.json"), "--html-dir", str(tmp_path / "html")]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["pages"] == 2 and out["errors"] == {"unreadable_file": 1}
    assert captured.err.startswith(f"warning: {tmp_path / 'html' / 'cut.html.gz'}: corrupt or truncated gzip data")


@pytest.mark.parametrize(
    "content, problem",
    [
        (None, "file not found"),
        ("", "not JSON (Expecting value at line 1 column 1)"),
        ('{"p1": {"articleBody": 42}}', "ground truth page 'p1' has no string 'articleBody'"),
        ('{"p1": {"articleBody": "a b c d", "url": ["x"]}}', "ground truth page 'p1' has a non-string 'url'"),
        ("{}", "no pages to score"),
    ],
)
def test_bad_ground_truth_exits_2_naming_file_and_problem(tmp_path, capsys, content, problem):
    gt = tmp_path / "gt.json"
    if content is not None:
        gt.write_text(content, encoding="utf-8")
    preds = tmp_path / "p.json"
    preds.write_text('{"p1": "a b c d"}', encoding="utf-8")
    assert ev.main(["--ground-truth", str(gt), "--predictions", str(preds)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"error: {gt}: {problem}\n"


def test_bad_predictions_exit_2(tmp_path, capsys):
    gt = tmp_path / "gt.json"
    gt.write_text('{"p1": {"articleBody": "a b c d"}}', encoding="utf-8")
    preds = tmp_path / "p.json"
    for content, problem in (
        ('{"output": {"p1": {"articleBody": 7}}}', "prediction 'p1' is not a string (got int)"),
        ('{"other": ""}', "nothing to score against"),
    ):
        preds.write_text(content, encoding="utf-8")
        assert ev.main(["--ground-truth", str(gt), "--predictions", str(preds)]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {preds}: ") and problem in err
    assert ev.main(["--ground-truth", str(gt), "--html-dir", str(tmp_path / "none")]) == 2
    assert capsys.readouterr().err == f"error: --html-dir {tmp_path / 'none'}: not a directory\n"
