"""Extraction speed: ArticleExtractor against bare ``trafilatura.bare_extraction``.

Runs every page of the article-extraction-benchmark (138 shared pages) through,
interleaved page by page so drift hits all three alike:

* ``bare``: ``trafilatura.bare_extraction(bytes, url=..., with_metadata=True)``
  with the same trafilatura options as :class:`ExtractionConfig` (the baseline);
* ``inline``: :func:`newsflow.core.extraction.extract_content` (our decoding, checks
  and date handling, no time limit);
* ``isolated``: :class:`newsflow.runtime.sandbox.ArticleExtractor` (the same work in a
  child process behind the time limit: pickling, two pipe transfers).

``isolated - inline`` per page is the cost of the timeout mechanism;
``inline / bare`` is the cost of our decoding and checks. Also reported: child
start-up time and the cost of recovering from a timeout (kill + respawn).

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


def _summary(samples: list[float]) -> dict:
    p = percentiles(samples, (50, 99))
    return {
        "pages_per_s": sig(len(samples) / sum(samples)),
        "mean_ms": sig(1000 * statistics.fmean(samples)),
        "p50_ms": sig(1000 * p["p50"]),
        "p99_ms": sig(1000 * p["p99"]),
    }


def main(argv=None) -> int:
    args = parse_args(
        __doc__.splitlines()[0],
        argv,
        extra=lambda p: (
            p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="article-extraction-benchmark folder"),
            p.add_argument("--passes", type=int, default=1, help="passes over all pages"),
        ),
    )
    import trafilatura

    from newsflow.core.extraction import ExtractionConfig, ExtractionError, extract_content
    from newsflow.core.urls import source_domain
    from newsflow.runtime.sandbox import ArticleExtractor
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
    inline_config = ExtractionConfig(isolate=False)
    options = dict(
        with_metadata=True,
        favor_precision=config.favor_precision,
        favor_recall=config.favor_recall,
        include_comments=config.include_comments,
        include_tables=config.include_tables,
        deduplicate=config.deduplicate,
    )

    t0 = time.perf_counter()
    extractor = ArticleExtractor(config)
    extractor.extract(raws[0])  # starts the child
    startup_s = time.perf_counter() - t0

    def run(fn, raw):
        t = time.perf_counter()
        try:
            fn(raw)
        except ExtractionError:
            pass
        return time.perf_counter() - t

    for raw in raws[:5]:  # warm-up (imports, caches)
        trafilatura.bare_extraction(raw.body, url=raw.url, **options)
        run(lambda r: extract_content(r, inline_config), raw)
        run(extractor.extract, raw)
    bare, inline, isolated = [], [], []
    for _ in range(max(1, args.passes)):
        for raw in raws:
            bare.append(run(lambda r: trafilatura.bare_extraction(r.body, url=r.url, **options), raw))
            inline.append(run(lambda r: extract_content(r, inline_config), raw))
            isolated.append(run(extractor.extract, raw))

    # cost of a timeout: cut off a slow page, then the next call must respawn the child
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
    short = ArticleExtractor(ExtractionConfig(timeout_s=0.2))
    short.extract(raws[0])
    t = time.perf_counter()
    try:
        short.extract(slow)
    except ExtractionError as e:
        timed_out = e.error_type == "timeout"
    else:
        timed_out = False
    cutoff_s = time.perf_counter() - t
    t = time.perf_counter()
    short.extract(raws[0])
    respawn_s = time.perf_counter() - t - statistics.median(isolated)
    short.close()
    extractor.close()

    overhead = [b - a for a, b in zip(inline, isolated, strict=False)]
    result = {
        "benchmark": "extraction",
        "pages": len(raws),
        "passes": max(1, args.passes),
        "bare_trafilatura": _summary(bare),
        "inline": _summary(inline),
        "isolated": _summary(isolated),
        "ratio_isolated_to_bare_throughput": sig(sum(bare) / sum(isolated)),
        "ratio_inline_to_bare_throughput": sig(sum(bare) / sum(inline)),
        "timeout_mechanism_overhead_ms_per_page": {
            "mean": sig(1000 * statistics.fmean(overhead)),
            "median": sig(1000 * statistics.median(overhead)),
        },
        "child_startup_ms": sig(1000 * startup_s),
        "timeout_cutoff": {
            "limit_ms": 200,
            "timed_out": timed_out,
            "returned_after_ms": sig(1000 * cutoff_s),
            "respawn_ms": sig(1000 * respawn_s),
        },
        "environment": environment(),
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
