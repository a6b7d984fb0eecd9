"""``eval topics`` on bad input: ``error: <file>[:<line>]: <problem>`` on stderr, nothing on stdout, exit code 2.

Every case fails while reading the data, before the topic model is loaded or trained.
"""

from __future__ import annotations

import argparse
import gzip

import pytest

from newsflow.evaluation import topics as ev


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
