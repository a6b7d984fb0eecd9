"""``eval topics`` on bad input: ``error: <file>[:<line>]: <problem>`` on stderr, nothing on stdout, exit code 2.

Every bad-input case fails while reading the data, before the topic model or the embedder is loaded. Also: per-section
figures on hand-counted rows, and rows that are training texts are never scored.
"""

from __future__ import annotations

import argparse
import gzip
import json

import pytest

from newsflow.cli.evaluation import topics as ev


def _run(path, fmt="huffpost", all_rows=True) -> int:
    return ev.run(argparse.Namespace(data=str(path), format=fmt, all_rows=all_rows, model=None))


@pytest.mark.parametrize(
    "name, content, fmt, problem",
    [
        ("missing.jsonl", None, "huffpost", "file not found"),
        ("s.csv", b"ID,TITLE\n1,Quake\n", "huffpost", "1: not a JSON line (Expecting value at column 1)"),
        ("l.jsonl", b'["headline"]\n', "huffpost", "1: expected a JSON object, got list"),
        (
            "t.jsonl",
            b'{"headline": 5, "category": "POLITICS"}\n',
            "huffpost",
            "1: field 'headline' must be a string, got int",
        ),
        ("e.jsonl", b"\n\n", "huffpost", "no scorable rows"),
        ("u.jsonl", b'{"headline": "x", "category": "NOT A SECTION"}\n', "huffpost", "no scorable rows"),
        ("bad.jsonl", b'{"headline": "Caf\xe9"}\n', "huffpost", "not UTF-8 text"),
        ("h.jsonl", b'{"headline": "x"}\n', "agnews", "not an AG News CSV: missing columns ['class_index', 'title']"),
        ("k.csv", b"row,class_index,title,description\n1,9,t,d\n", "agnews", "row '1' has an unknown class_index '9'"),
    ],
)
def test_bad_input_exits_2(tmp_path, capsys, name, content, fmt, problem):
    p = tmp_path / name
    if content is not None:
        p.write_bytes(content)
    assert _run(p, fmt) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    sep = "" if problem[0].isdigit() else " "
    assert captured.err.startswith(f"error: {p}:{sep}{problem}"), captured.err


def test_truncated_gzip(tmp_path, capsys):
    p = tmp_path / "rows.jsonl.gz"
    data = gzip.compress(b'{"headline": "Quake hits", "category": "POLITICS", "link": "http://a.com/q"}\n' * 200)
    p.write_bytes(data[: len(data) // 2])
    assert _run(p) == 2
    assert capsys.readouterr().err.startswith(f"error: {p}: corrupt or truncated gzip data (EOFError")


def test_no_test_bucket_rows_suggests_all_rows(tmp_path, capsys):
    p = tmp_path / "one.jsonl"
    p.write_text("", encoding="utf-8")
    assert _run(p, all_rows=False) == 2
    assert capsys.readouterr().err == f"error: {p}: no scorable rows in the held-out test buckets (try --all-rows)\n"


def test_an_abstention_counts_as_an_error():
    rows = [("a", ("Sports",), "Sports"), ("b", ("World",), "World")]
    # "" is what evaluate() predicts when the classifier gives no topic
    assert ev.score(rows, ["Sports", ""]) == {"accuracy": 0.5, "macro_f1": 0.5}


def test_per_section_and_score_on_hand_counted_rows():
    rows = [("a", ("Sports",), "Sports")] * 3 + [("b", ("World",), "World")] * 2
    rows += [("c", ("Technology", "Science"), "Technology/Science")]
    predicted = ["Sports", "Sports", "World", "World", "Politics", "Science"]
    table = ev.per_section(rows, predicted)
    # Sports: tp 2, fn 1, fp 0; World: tp 1, fn 1, fp 1; Technology/Science: tp 1 (Science is accepted)
    assert table["Sports"] == {"support": 3, "precision": 1.0, "recall": 0.6667, "f1": 0.8}
    assert table["World"] == {"support": 2, "precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert table["Technology/Science"] == {"support": 1, "precision": 1.0, "recall": 1.0, "f1": 1.0}
    assert ev.score(rows, predicted) == {"accuracy": round(4 / 6, 4), "macro_f1": round((0.8 + 0.5 + 1.0) / 3, 4)}


def _shipped_training_row() -> dict:
    from newsflow.core.embedding import read_huffpost
    from newsflow.core.topics import HUFFPOST_SECTIONS, huffpost_example, split_of

    rows = [r for r in read_huffpost() if r["category"] in HUFFPOST_SECTIONS]
    return next(r for r in rows if split_of(huffpost_example(r).key) == "train")


def test_training_rows_are_never_scored(tmp_path, capsys):
    seen = _shipped_training_row()
    new = {
        "headline": "Lakers Beat Celtics In Overtime As LeBron James Scores 40",
        "short_description": "The guard hit two free throws with four seconds left.",
        "category": "SPORTS",
        "link": "https://example.org/lakers-celtics",
    }
    p = tmp_path / "rows.jsonl"
    p.write_text(json.dumps(seen) + "\n" + json.dumps(new) + "\n", encoding="utf-8")
    result = ev.evaluate(str(p), all_rows=True)
    assert result["docs"] == 1 and result["excluded_training_overlap"] == 1
    assert result["per_section"] == {"Sports": {"support": 1, "precision": 1.0, "recall": 1.0, "f1": 1.0}}
    assert result["accuracy"] == 1.0 and result["coverage"] == 1.0 and result["accuracy_confident"] == 1.0
    assert result["accuracy_over_baseline"] == round(1.0 - result["baseline_tfidf_logreg"]["accuracy"], 4)
    only_seen = tmp_path / "seen.jsonl"
    only_seen.write_text(json.dumps(seen) + "\n", encoding="utf-8")
    assert _run(only_seen) == 2
    assert capsys.readouterr().err == f"error: {only_seen}: no scorable rows (1 rows are training texts)\n"
