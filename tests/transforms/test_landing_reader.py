"""Reading landing files: corrupt/truncated gzip and over-long lines become dead letters; the rest is read."""

from __future__ import annotations

import gzip
import json

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.util import assert_that, equal_to

from newsflow.transforms.deadletter import DEAD_LETTER_TAG
from newsflow.transforms.io import _ReadLinesFn


def _lines(i: int, n: int) -> list[bytes]:
    return [json.dumps({"n": f"{i}-{k}"}).encode() for k in range(n)]


def test_reader_keeps_good_lines_and_dead_letters_broken_files(tmp_path):
    good = _lines(0, 3)
    (tmp_path / "good.jsonl.gz").write_bytes(gzip.compress(b"\n".join(good) + b"\n"))
    full = gzip.compress(b"\n".join(_lines(1, 400)) + b"\n")
    (tmp_path / "truncated.jsonl.gz").write_bytes(full[: len(full) // 2])
    (tmp_path / "notgzip.jsonl.gz").write_bytes(b'{"plain": "text, not gzip"}\n')
    (tmp_path / "garbage-tail.jsonl.gz").write_bytes(gzip.compress(b'{"n": "t"}\n') + b"NOT GZIP")
    long_line = b'{"n": "' + b"x" * 5000 + b'"}'
    (tmp_path / "long.jsonl").write_bytes(good[0] + b"\n" + long_line + b"\n" + good[1] + b"\r\n")
    (tmp_path / "empty.jsonl").write_bytes(b"")

    with beam.Pipeline(runner=FnApiRunner()) as p:
        out = (
            p
            | beam.Create([str(tmp_path / "*")])
            | fileio.MatchAll()
            | fileio.ReadMatches()
            | beam.ParDo(_ReadLinesFn(max_record_bytes=1000)).with_outputs(DEAD_LETTER_TAG, main="main")
        )
        lines = out.main
        dead = out[DEAD_LETTER_TAG] | beam.Map(
            lambda d: (d.step, d.error_type, d.error.split(":")[0].rsplit("/", 1)[-1])
        )
        # good file whole, long.jsonl minus the long line, and the garbage-tail file's first member
        # (gzip reads it, then refuses the trailing bytes: the line before stays, the file is reported)
        assert_that(
            lines | "Small" >> beam.Filter(lambda b: len(b) < 200).with_output_types(bytes) | beam.Map(lambda b: b),
            equal_to(good + [good[0], good[1], b'{"n": "t"}'] + _truncated_prefix(full)),
            label="Lines",
        )
        assert_that(
            dead,
            equal_to(
                [
                    ("read", "corrupt_file", "truncated.jsonl.gz"),
                    ("read", "corrupt_file", "notgzip.jsonl.gz"),
                    ("read", "corrupt_file", "garbage-tail.jsonl.gz"),
                    ("read", "too_large", "long.jsonl"),
                ]
            ),
            label="DeadLetters",
        )


def _truncated_prefix(full: bytes) -> list[bytes]:
    """The complete lines Python's gzip yields from the first half of ``full`` before it fails."""
    import io

    out = []
    with gzip.GzipFile(fileobj=io.BytesIO(full[: len(full) // 2])) as f:
        try:
            for line in f:
                if line.endswith(b"\n"):
                    out.append(line.rstrip(b"\n"))
        except EOFError:
            pass
    return out


def test_parquet_landing_files_one_bad_file_is_a_dead_letter_and_the_rest_is_read(tmp_path):
    import datetime as dt

    import pyarrow as pa
    import pyarrow.parquet as pq

    from newsflow.schemas import RAW_DOCUMENT_SCHEMA
    from newsflow.transforms.io import ReadLandingFiles

    t = dt.datetime(2024, 5, 2, 6, 0, tzinfo=dt.UTC)
    rows = [
        {"url": f"https://example.org/{i}", "source_domain": "example.org", "fetch_time": t, "title": f"t{i}"}
        for i in range(3)
    ]
    good = pa.Table.from_pylist(rows, schema=RAW_DOCUMENT_SCHEMA)
    pq.write_table(good, tmp_path / "good.parquet")
    whole = (tmp_path / "good.parquet").read_bytes()
    (tmp_path / "truncated.parquet").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "notparquet.parquet").write_bytes(b'{"url": "not parquet"}\n')
    pq.write_table(pa.table({"other": [1, 2]}), tmp_path / "wrongcolumns.parquet")

    with beam.Pipeline(runner=FnApiRunner()) as p:
        out = p | ReadLandingFiles([str(tmp_path / "*.parquet")], "parquet")
        urls = out["main"] | beam.Map(lambda b: json.loads(b)["url"])
        assert_that(urls, equal_to([r["url"] for r in rows]), label="Rows")
        dead = out[DEAD_LETTER_TAG] | beam.Map(lambda d: (d.error_type, d.error.split(":")[0].rsplit("/", 1)[-1]))
        assert_that(
            dead,
            equal_to(
                [
                    ("corrupt_file", "truncated.parquet"),
                    ("corrupt_file", "notparquet.parquet"),
                    ("corrupt_file", "wrongcolumns.parquet"),
                ]
            ),
            label="Dead",
        )
