"""_ExtractFn with several extraction children: a bundle's documents are extracted in parallel, and every
output (article or dead letter) leaves with its own input's timestamp, exactly as with one child."""

from __future__ import annotations

import glob
import gzip
import json
import os

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms.window import TimestampedValue
from apache_beam.utils import shared

from newsflow.core.extraction import ExtractionConfig, ExtractionError
from newsflow.runtime.sandbox import ArticleExtractor
from newsflow.schemas import RawDocument
from newsflow.transforms.content import ContentConfig, _ExtractFn
from newsflow.transforms.deadletter import DEAD_LETTER_TAG

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _docs() -> list[RawDocument]:
    path = sorted(glob.glob(os.path.join(REPO, "data", "corpus", "pages.jsonl.gz")))[0]
    docs = []
    with gzip.open(path, "rb") as f:
        for line in f:
            raw = RawDocument.from_json_dict(json.loads(line))
            if raw.body is not None:
                docs.append(raw)
            if len(docs) == 24:
                break
    base = docs[0]
    docs += [
        base._replace(url="https://bad.example.com/garbage", body=bytes(range(256)) * 40),  # not HTML
        base._replace(url="https://bad.example.com/short", body=b"<html><body><p>Too short.</p></body></html>"),
        base._replace(url="https://bad.example.com/huge", body=b"<p>x</p>" * 200_000),  # over max_body_bytes
        base._replace(url="https://bad.example.com/status", http_status=500),
    ]
    return docs


def _expected(docs, config: ExtractionConfig):
    """Outputs computed by a plain loop over one ArticleExtractor: (kind, error type, input time in us)."""
    out = []
    with ArticleExtractor(config) as ex:
        for i, raw in enumerate(docs):
            try:
                ex.extract(raw)
                out.append(("article", "", i * 1_000_000))
            except ExtractionError as e:
                out.append(("dead", e.error_type, i * 1_000_000))
    return out


def _run(docs, config: ExtractionConfig, expected) -> None:
    stamped = [TimestampedValue(d, float(i)) for i, d in enumerate(docs)]
    fn = _ExtractFn(ContentConfig(extraction=config, registry_redis_url=None), shared.Shared())
    with beam.Pipeline(runner=FnApiRunner(), options=PipelineOptions(["--runner", "DirectRunner"])) as p:
        out = p | beam.Create(stamped, reshuffle=False) | beam.ParDo(fn).with_outputs(DEAD_LETTER_TAG, main="main")
        arts = out.main | "A" >> beam.Map(lambda a, ts=beam.DoFn.TimestampParam: ("article", "", ts.micros))
        dead = out[DEAD_LETTER_TAG] | "D" >> beam.Map(
            lambda d, ts=beam.DoFn.TimestampParam: ("dead", d.error_type, ts.micros)
        )
        assert_that((arts, dead) | beam.Flatten(), equal_to(expected))


def test_two_children_give_the_outputs_of_one_with_each_inputs_timestamp():
    docs = _docs()
    config = ExtractionConfig(max_body_bytes=1_000_000, workers=2)
    expected = _expected(docs, ExtractionConfig(max_body_bytes=1_000_000))
    kinds = [k for k, _, _ in expected]
    assert kinds.count("dead") >= 4 and kinds.count("article") >= 20
    _run(docs, config, expected)
    _run(docs, ExtractionConfig(max_body_bytes=1_000_000, workers=1), expected)


def test_extract_workers_flag_is_bounded_and_automatic_by_runner(tmp_path):
    """--extract_workers: 0 is the CPU count on a local runner (at most MAX_EXTRACT_WORKERS) and 1 on a
    remote one; values outside 0..MAX_EXTRACT_WORKERS are refused (99999999 once started a process per
    document in flight and lost pages to timeouts)."""
    import pytest

    from newsflow.pipelines.streaming import MAX_EXTRACT_WORKERS, default_extract_workers, job_config_from_options

    landing = tmp_path / "in.jsonl"
    landing.write_text("{}\n")

    def workers(*flags: str) -> int:
        opts = PipelineOptions(["--input", str(landing), "--runner", "DirectRunner", *flags])
        return job_config_from_options(opts).content.extraction.workers

    assert workers() == min(MAX_EXTRACT_WORKERS, os.cpu_count() or 1) == default_extract_workers(True)
    assert default_extract_workers(False) == 1
    assert workers("--extract_workers", "3") == 3
    assert workers("--extract_workers", str(MAX_EXTRACT_WORKERS)) == MAX_EXTRACT_WORKERS
    for bad in ("-1", str(MAX_EXTRACT_WORKERS + 1), "99999999"):
        with pytest.raises(ValueError, match="--extract_workers must be in 0..64"):
            workers("--extract_workers", bad)
