"""Extraction speed: our extraction and the pipeline's extract step against bare ``trafilatura.bare_extraction``.

Runs every page of the article-extraction-benchmark (138 shared pages) through, interleaved page by
page so drift hits both alike:

* ``bare``: ``trafilatura.bare_extraction(bytes, url=..., with_metadata=True)``
  with the same trafilatura options as :class:`ExtractionConfig` (the baseline);
* ``inline``: :func:`newsflow.core.extraction.extract_content` (our decoding, checks
  and date handling, no time limit);

and then through the page-extraction DoFn of the pipeline (:class:`newsflow.transforms.content._ExtractPageFn`)
in a Beam pipeline on the local FnApiRunner, alternately (``--rounds`` times each, best round kept):

* ``pipeline_in_process``: ``ParDo(...).with_exception_handling()`` (the DoFn in the runner's thread);
* ``pipeline_subprocess``: ``ParDo(...).with_exception_handling(use_subprocess=True, timeout=5)``, as the
  job runs it (elements and results pickled to and from one long-lived process).

``subprocess_overhead_ms_per_page = (pipeline_subprocess - pipeline_in_process) / pages`` is the cost of
the time limit and crash isolation; ``inline / bare`` is the cost of our decoding and checks. Also reported:
``timeout_cutoff``: the extra wall time of a pipeline in which one slow page hits a 1 s limit (the
process is killed and replaced, then the next page is extracted) over the same pipeline without it.

    python -m benchmarks.extraction --json
"""

from __future__ import annotations

import gzip
import json
import statistics
import time
from pathlib import Path

from benchmarks._common import emit, environment, parse_args, percentiles, sig

DEFAULT_DATA = Path("/work/shared/data/article-extraction-benchmark")
#: The time limit of the timeout_cutoff measurement, seconds.
TIMEOUT_LIMIT_S = 1.0


def _summary(samples: list[float]) -> dict:
    p = percentiles(samples, (50, 99))
    return {
        "pages_per_s": sig(len(samples) / sum(samples)),
        "mean_ms": sig(1000 * statistics.fmean(samples)),
        "p50_ms": sig(1000 * p["p50"]),
        "p99_ms": sig(1000 * p["p99"]),
    }


def _pipeline_s(raws, use_subprocess: bool, timeout_s: float = 5.0) -> tuple[float, int, int]:
    """Wall seconds of a FnApiRunner pipeline extracting ``raws`` with the job's page DoFn, and the
    numbers of good and failed outputs."""
    import apache_beam as beam
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    from newsflow.core.extraction import ExtractionConfig
    from newsflow.transforms.content import ContentConfig, _ExtractPageFn
    from newsflow.transforms.deadletter import DEAD_LETTER_TAG

    config = ContentConfig(extraction=ExtractionConfig(timeout_s=timeout_s), use_registry=False)
    handling = {"use_subprocess": True, "timeout": timeout_s} if use_subprocess else {}
    t0 = time.perf_counter()
    p = beam.Pipeline(runner=FnApiRunner())
    out = (
        p
        | beam.Create(raws, reshuffle=False)
        | beam.ParDo(_ExtractPageFn(config))
        .with_exception_handling(main_tag="main", dead_letter_tag="failed", **handling)
        .with_outputs(DEAD_LETTER_TAG, main="main")
    )
    _ = out["main"] | "Good" >> beam.Map(lambda _: beam.metrics.Metrics.counter("bench", "good").inc())
    _ = out["failed"] | "Failed" >> beam.Map(lambda _: beam.metrics.Metrics.counter("bench", "failed").inc())
    result = p.run()
    result.wait_until_finish()
    elapsed = time.perf_counter() - t0
    counts = {c.key.metric.name: c.committed for c in result.metrics().query()["counters"]}
    return elapsed, counts.get("good", 0), counts.get("failed", 0)


def main(argv=None) -> int:
    args = parse_args(
        __doc__.splitlines()[0],
        argv,
        extra=lambda p: (
            p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="article-extraction-benchmark folder"),
            p.add_argument("--passes", type=int, default=1, help="passes over all pages"),
            p.add_argument("--rounds", type=int, default=3, help="pipeline runs of each kind (best kept)"),
        ),
    )
    import trafilatura

    from newsflow.core.extraction import ExtractionConfig, ExtractionError, extract_content
    from newsflow.core.urls import source_domain
    from newsflow.schemas.raw import RawDocument

    gt = json.loads((args.data / "ground-truth.json").read_text(encoding="utf-8"))
    fetch_time = time.time()
    raws = []
    for page_id, item in gt.items():
        body = gzip.open(args.data / "html" / f"{page_id}.html.gz", "rb").read()
        raws.append(
            RawDocument(
                url=item["url"],
                source_domain=source_domain(item["url"]),
                fetch_time=fetch_time,
                http_status=200,
                content_type="text/html",
                body=body,
            )
        )
    config = ExtractionConfig()
    options = dict(
        with_metadata=True,
        favor_precision=config.favor_precision,
        favor_recall=config.favor_recall,
        include_comments=config.include_comments,
        include_tables=config.include_tables,
        deduplicate=config.deduplicate,
    )

    def run(fn, raw):
        t = time.perf_counter()
        try:
            fn(raw)
        except ExtractionError:
            pass
        return time.perf_counter() - t

    for raw in raws[:5]:  # warm-up (imports, caches)
        trafilatura.bare_extraction(raw.body, url=raw.url, **options)
        run(lambda r: extract_content(r, config), raw)
    bare, inline = [], []
    for _ in range(max(1, args.passes)):
        for raw in raws:
            bare.append(run(lambda r: trafilatura.bare_extraction(r.body, url=r.url, **options), raw))
            inline.append(run(lambda r: extract_content(r, config), raw))

    in_process, in_subprocess = [], []
    for _ in range(max(1, args.rounds)):
        in_process.append(_pipeline_s(raws, use_subprocess=False))
        in_subprocess.append(_pipeline_s(raws, use_subprocess=True))
    assert {r[1:] for r in in_process} == {r[1:] for r in in_subprocess}, (in_process, in_subprocess)
    in_process_s = min(r[0] for r in in_process)
    subprocess_s = min(r[0] for r in in_subprocess)

    # cost of a timeout: a slow page (~1.7 s of parsing here) is cut off, its process replaced
    slow = RawDocument(
        url="https://slow.example/",
        source_domain="slow.example",
        fetch_time=fetch_time,
        http_status=200,
        body=(
            "<html><body>"
            + "".join(
                f"<div><p>Paragraph {i} about the council <a href='/l{i}'>link</a></p></div>" for i in range(8000)
            )
            + "</body></html>"
        ).encode(),
    )
    few = raws[:5]
    plain_s = min(_pipeline_s(few, True, timeout_s=TIMEOUT_LIMIT_S)[0] for _ in range(2))
    with_slow = [_pipeline_s([*few[:2], slow, *few[2:]], True, timeout_s=TIMEOUT_LIMIT_S) for _ in range(2)]
    slow_s, _, failed = min(with_slow)
    result = {
        "benchmark": "extraction",
        "pages": len(raws),
        "passes": max(1, args.passes),
        "bare_trafilatura": _summary(bare),
        "inline": _summary(inline),
        "ratio_inline_to_bare_throughput": sig(sum(bare) / sum(inline)),
        "pipeline_in_process": {"s": sig(in_process_s), "ms_per_page": sig(1000 * in_process_s / len(raws))},
        "pipeline_subprocess": {"s": sig(subprocess_s), "ms_per_page": sig(1000 * subprocess_s / len(raws))},
        "subprocess_overhead_ms_per_page": sig(1000 * (subprocess_s - in_process_s) / len(raws)),
        "ratio_subprocess_to_in_process": sig(subprocess_s / in_process_s),
        "ratio_subprocess_to_bare": sig(subprocess_s / sum(bare) * max(1, args.passes)),
        "pipeline_good_failed": list(in_process[0][1:]),
        "timeout_cutoff": {
            "limit_s": TIMEOUT_LIMIT_S,
            "timed_out": failed == 1,
            "extra_s": sig(slow_s - plain_s),
        },
        "environment": environment(),
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
