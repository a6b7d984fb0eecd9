"""Landing records that used to stop the whole job become dead letters with a reason (DoFn called directly)."""

from __future__ import annotations

import json

import pytest
from apache_beam import pvalue

from newsflow.cli.demo import _scan_inputs
from newsflow.transforms.content import _ParseFn

GOOD = {
    "url": "https://www.example.com/news/1",
    "source_domain": "example.com",
    "fetch_time": 1700000000.0,
    "title": "A good record",
    "summary": "It parses.",
}


def _run(line: bytes):
    fn = _ParseFn()
    return list(fn.process(line))


def _dead(line: bytes):
    out = _run(line)
    assert len(out) == 1 and isinstance(out[0], pvalue.TaggedOutput), out
    return out[0].value


def test_good_record_parses():
    out = _run(json.dumps(GOOD).encode())
    assert len(out) == 1 and out[0].url == GOOD["url"] and out[0].fetch_time == 1700000000.0


@pytest.mark.parametrize(
    "field,error",
    [
        ("fetch_time", "fetch_time is not a UTC epoch time between 1970 and 2100 (<a number of 5000 digits>)"),
        ("published_time", "published_time is not a UTC epoch time between 1970 and 2100 (<a number of 5000 digits>)"),
        ("http_status", "http_status must be an integer, got <a number of 5000 digits>"),
        ("title", "title must be a string, got TooLongNumber"),
    ],
)
def test_5000_digit_number_in_any_field_is_an_invalid_field(field, error):
    record = dict(GOOD)
    record.pop(field, None)
    line = json.dumps(record)[:-1] + f', "{field}": ' + "7" * 5000 + "}"
    d = _dead(line.encode())
    assert (d.step, d.error_type, d.error) == ("parse", "invalid_field", error)
    assert d.url == GOOD["url"]  # the record still parses, so the dead letter names its URL


def test_5000_digit_number_in_an_unknown_field_is_ignored():
    out = _run((json.dumps(GOOD)[:-1] + ', "extra": ' + "7" * 5000 + "}").encode())
    assert out[0].url == GOOD["url"]


def test_huge_fetch_time_is_an_invalid_field_not_an_overflow():
    line = json.dumps(GOOD).replace('"fetch_time": 1700000000.0', '"fetch_time": 1' + "0" * 400)
    d = _dead(line.encode())
    assert d.error_type == "invalid_field"
    assert d.error == "fetch_time is not a UTC epoch time between 1970 and 2100 (a number of 401 digits)"
    assert d.payload == line.encode()  # the payload replays as-is


def test_deeply_nested_line_is_invalid_json():
    d = _dead(b"[" * 100_000 + b"]" * 100_000)
    assert d.error_type == "invalid_json" and "recursion" in d.error


def test_demo_line_scan_survives_hostile_lines(tmp_path):
    path = tmp_path / "landing.jsonl"
    lines = [
        json.dumps(GOOD).encode(),
        b"[" * 100_000 + b"]" * 100_000,
        json.dumps(GOOD).replace('"fetch_time": 1700000000.0', '"fetch_time": ' + "7" * 5000).encode(),
        json.dumps(dict(GOOD, fetch_time=1700000500.0)).encode(),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    n, newest = _scan_inputs(str(path))
    assert n == 4 and newest == {str(path): 1700000500.0}
