"""``eval language`` on bad input: every problem is ``error: <file>[:<line>]: <problem>`` and exit code 2."""

from __future__ import annotations

import argparse
import gzip
import json

import pytest

from newsflow.cli.evaluation import language as ev


def _run(path) -> int:
    return ev.run(argparse.Namespace(data=path, threshold=None))


def _index(tmp_path, *records) -> object:
    p = tmp_path / "index.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return p


def test_csv_given_as_index(tmp_path, capsys):
    p = tmp_path / "stories.csv"
    p.write_text("ID,TITLE,URL\n1,Quake,http://a.com/q\n", encoding="utf-8")
    assert _run(p) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"error: {p}:1: not a JSON line (Expecting value at column 1)")


@pytest.mark.parametrize(
    "record, problem",
    [
        ({"id": "a", "kind": "text_only", "language": "en", "html_file": None}, None),  # unlabelled-file: skipped
        (
            {"id": "a", "kind": "text_only", "language": "en", "text_file": 7},
            "field 'text_file' must be a string, got int",
        ),
        ({"kind": "text_only", "language": "en", "text_file": "a.txt"}, "record has no string 'id'"),
        (
            {"id": "a", "kind": "text_only", "language": ["en"], "text_file": "a.txt"},
            "field 'language' must be a string",
        ),
    ],
)
def test_bad_records(tmp_path, capsys, record, problem):
    p = _index(tmp_path, record)
    assert _run(p) == 2
    err = capsys.readouterr().err
    if problem is None:  # nothing labelled with a file is left
        assert err == f"error: {p}: no record has a language label and an html_file or text_file\n"
    else:
        assert err.startswith(f"error: {p}:1: {problem}")


def test_record_without_text_file_uses_its_html_and_missing_files_are_named(tmp_path, capsys):
    # a non-article record with only an html_file (used to raise KeyError: 'text_file'); its file is missing
    p = _index(tmp_path, {"id": "x", "kind": "text_only", "language": "de", "html_file": "html/x.html.gz"})
    assert _run(p) == 2
    assert capsys.readouterr().err == f"error: {p}:1: cannot read {tmp_path / 'html' / 'x.html.gz'}: file not found\n"
    (tmp_path / "html").mkdir()
    full = gzip.compress(
        b"<html lang='de'><body><p>" + "Die Brücke bleibt gesperrt. ".encode() * 50 + b"</p></body></html>"
    )
    (tmp_path / "html" / "x.html.gz").write_bytes(full[:-20])  # truncated
    assert _run(p) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {p}:1: cannot read {tmp_path / 'html' / 'x.html.gz'}: corrupt or truncated gzip")


def test_missing_index(tmp_path, capsys):
    assert _run(tmp_path / "nope.jsonl") == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'nope.jsonl'}: file not found\n"
