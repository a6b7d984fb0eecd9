"""Continuous local mode: the streaming job over new landing files as they arrive, then fresh feeds.

Beam's local streaming runner cannot watch a directory, so this runs the same job (the same
transforms, :mod:`newsflow.pipelines.streaming`) as repeated bounded runs over a durable file cursor:

1. every ``every_s`` seconds, list the landing directory (``*.jsonl``, ``*.jsonl.gz``; names
   starting with ``.`` or ``_`` are in-flight temp files and skipped; landing files are
   committed atomically and never rewritten, so a name identifies its content);
2. if some are not in the cursor, run the job over them (at most ``max_files`` per run, oldest
   name first);
3. append their names to the cursor (a JSON-lines manifest under the data directory, fsynced);
4. rebuild the candidate pools and precomputed feeds (:func:`newsflow.storage.feeds.build_feeds`)
   at the ranking time: ``--now`` when given (``wall`` = the clock), else the replay clock in
   Redis when ``newsflow demo`` set one, else the wall clock (UTC epoch seconds).

Stories equal those of one bounded run. A run's files may hold articles older than ones an earlier
run assigned; story assignment is ordered by ``(event_time, article_id)``, so every job run gets
``--story_input_log`` (:func:`default_story_log_dir`): its story step rewinds the story state to the
latest checkpoint at or before the run's earliest article and re-clusters the logged articles after it
together with its own (:mod:`newsflow.transforms.stories_continuous`). After any sequence of runs whose
articles are within the late bound (24 h before the newest logged article), the story partition, the
stories' Redis records, the trending windows and the breaking set are those of one ``newsflow run`` over
the same files on a fresh Redis (tests/integration/test_continuous_equals_bounded.py); older articles go
to the story step's late lane (``stories_late_lane``). A run costs its own articles plus the logged ones
after the checkpoint it rewinds to and one trending window of context, not the history.

A crash between a run and the cursor update only makes the next run replay those files, which
changes nothing (every write of the job is keyed by stable ids). Run it with
``newsflow run-continuous --input-dir var/landing --every 5`` beside ``newsflow crawl`` and
``newsflow serve``; each run that found files prints one JSON line.

Metrics (prometheus-client, default registry; ``newsflow run-continuous --metrics-port`` serves them):

* ``newsflow_continuous_runs_total`` by ``outcome`` (``ok``: a job run over new files and the feed build
  finished; ``error``: a run failed and will be retried);
* ``newsflow_continuous_articles_total``: landing records parsed into documents (the job's ``parsed``);
* ``newsflow_continuous_lag_seconds``: at the end of the last ok run, the clock minus the newest event time
  it processed (seconds; event time as :func:`newsflow.core.articles.event_time`);
* ``newsflow_continuous_last_success_timestamp_seconds``: UTC epoch seconds of the last ok run;
* ``newsflow_continuous_dead_letters_total`` by ``step`` (the job's ``dead_lettered_<step>`` counters;
  ``stories`` for ``stories_dead_lettered``);
* ``newsflow_continuous_trend_inputs_late_total``: articles that went to trending's late lane.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from prometheus_client import Counter, Gauge

LANDING_SUFFIXES = (".jsonl", ".jsonl.gz")

RUNS = Counter("newsflow_continuous_runs", "Continuous job runs over new landing files, by outcome.", ["outcome"])
ARTICLES = Counter("newsflow_continuous_articles", "Landing records the continuous runs parsed into documents.")
LAG = Gauge("newsflow_continuous_lag_seconds", "Last ok run's end minus the newest event time it processed.")
LAST_SUCCESS = Gauge("newsflow_continuous_last_success_timestamp_seconds", "UTC epoch seconds of the last ok run.")
DEAD_LETTERS = Counter("newsflow_continuous_dead_letters", "Dead letters of the continuous runs by step.", ["step"])
TREND_LATE = Counter("newsflow_continuous_trend_inputs_late", "Articles sent to trending's late lane.")

# fields of the job's summary each run reports
JOB_FIELDS = (
    "state",
    "parsed",
    "stories_assigned",
    "stories_reclustered",
    "stories_recluster_refused",
    "stories_late_lane",
    "dead_lettered",
)


@dataclass(frozen=True)
class ContinuousConfig:
    """One continuous loop.

    Attributes:
      input_dir: local landing directory.
      cursor_path: the manifest of processed files (see :class:`FileCursor`).
      job_argv: flags of every job run besides ``--input`` (``--redis_url``, ``--key_prefix``,
        ``--data_dir``, ``--output``, Beam flags).
      every_s: seconds between two looks at the directory.
      max_files: most files per run.
      now: ranking time of the feeds: ``None`` (replay clock, else wall clock), ``"wall"``,
        ``"latest"``, epoch seconds or ISO 8601.
    """

    input_dir: str
    cursor_path: str
    job_argv: tuple[str, ...] = ()
    every_s: float = 5.0
    max_files: int = 200
    now: str | None = None
    key_prefix: str = "nf"


def _tag(input_dir: str, key_prefix: str) -> str:
    return hashlib.sha256(f"{os.path.abspath(input_dir)}|{key_prefix}".encode()).hexdigest()[:12]


def default_cursor_path(data_dir: str, input_dir: str, key_prefix: str) -> str:
    """``<data dir>/continuous/cursor-<12 hex>.jsonl``, one per (landing directory, key prefix)."""
    return os.path.join(data_dir, "continuous", f"cursor-{_tag(input_dir, key_prefix)}.jsonl")


def default_story_log_dir(data_dir: str, input_dir: str, key_prefix: str) -> str:
    """``<data dir>/continuous/stories-<12 hex>``, the story input log of the job runs (the job's
    ``--story_input_log``), one per (landing directory, key prefix) like the cursor."""
    return os.path.join(data_dir, "continuous", f"stories-{_tag(input_dir, key_prefix)}")


class FileCursor:
    """Append-only manifest of processed landing files: one JSON line ``{"file", "bytes", "at"}``
    per file (``at``: UTC epoch seconds of the run's end). A torn last line (crash mid-append) is
    ignored, so its file is processed again."""

    def __init__(self, path: str):
        self.path = path
        self.done: set[str] = set()
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        self.done.add(json.loads(line)["file"])
                    except (ValueError, KeyError, TypeError):
                        continue

    def add(self, names: Sequence[str], sizes: Sequence[int], at: float) -> None:
        """Records ``names`` as processed (appended and fsynced before returning)."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        lines = [
            json.dumps({"file": n, "bytes": s, "at": round(at, 3)}) + "\n" for n, s in zip(names, sizes, strict=True)
        ]
        text = "".join(lines)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        self.done.update(names)


def landing_files(input_dir: str) -> list[str]:
    """Names of the committed landing files in ``input_dir``, sorted (``[]`` when it does not exist)."""
    try:
        entries = list(os.scandir(input_dir))
    except FileNotFoundError:
        return []
    return sorted(
        e.name
        for e in entries
        if e.is_file() and e.name.endswith(LANDING_SUFFIXES) and not e.name.startswith((".", "_"))
    )


def run_once(
    config: ContinuousConfig,
    cursor: FileCursor,
    client,
    clock: Callable[[], float] = time.time,
    run_job: Callable[[list[str]], dict] | None = None,
) -> dict | None:
    """One look at the directory; runs the job and rebuilds the feeds when there are new files (an ok run is
    added to the module's metrics).

    Args:
      config: the loop's configuration.
      cursor: processed files.
      client: Redis client for the feed build (the job's Redis).
      clock: UTC epoch seconds.
      run_job: ``argv -> summary dict`` (default: :func:`newsflow.pipelines.streaming.run` in this process).

    Returns:
      ``None`` when nothing was new, else ``{"files", "job", "feeds", "job_s", "feed_s", ...}``.

    Raises:
      ValueError: the job refused its flags or Redis is unreachable (the cursor is unchanged).
    """
    from newsflow.storage.feeds import build_feeds, parse_now
    from newsflow.storage.keys import Keys
    from newsflow.storage.ranking import RankingStore

    new = [n for n in landing_files(config.input_dir) if n not in cursor.done][: config.max_files]
    if not new:
        return None
    paths = [os.path.join(config.input_dir, n) for n in new]
    sizes = [os.path.getsize(p) for p in paths]
    t0 = time.monotonic()
    argv = list(config.job_argv) + [f"--input={p}" for p in paths]
    summary = (run_job or _run_streaming_job)(argv)
    job_s = time.monotonic() - t0
    cursor.add(new, sizes, clock())
    t1 = time.monotonic()
    keys = Keys(config.key_prefix)
    now = parse_now(config.now, RankingStore(client, keys), clock)
    stats = build_feeds(client, now, keys=keys)
    _observe(summary, clock())
    return {
        "files": len(new),
        "first": new[0],
        "last": new[-1],
        "job_s": round(job_s, 3),
        "feed_s": round(time.monotonic() - t1, 3),
        "feeds_now": now,
        "stories": stats.stories,
        "job": {k: summary.get(k) for k in JOB_FIELDS},
    }


def _observe(summary: dict, now: float) -> None:
    """Adds one ok run's job summary to the module's metrics (``now``: UTC epoch seconds)."""
    RUNS.labels("ok").inc()
    ARTICLES.inc(summary.get("parsed") or 0)
    TREND_LATE.inc(summary.get("trend_inputs_late") or 0)
    for step, n in (summary.get("dead_letters_by_step") or {}).items():
        DEAD_LETTERS.labels(step).inc(n)
    if summary.get("newest_event_time") is not None:
        LAG.set(now - summary["newest_event_time"])
    LAST_SUCCESS.set(now)


def _run_streaming_job(argv: list[str]) -> dict:
    """Runs the streaming job in this process: :func:`newsflow.pipelines.launcher.summary` plus
    ``dead_letters_by_step`` (``{step: count}``, from the job's dead-letter counters) and ``newest_event_time``
    (UTC epoch seconds, max of the ``event_time_ms`` distribution; ``None`` when nothing was parsed)."""
    from apache_beam.metrics.metric import MetricsFilter

    from newsflow.pipelines.launcher import counters, summary
    from newsflow.pipelines.streaming import run

    launched = run(argv)
    out = summary(launched)
    by_step = {}
    for name, n in (counters(launched.result) or {}).items():
        step = name.removeprefix("dead_lettered_") if name.startswith("dead_lettered_") else ""
        step = step or (name.removesuffix("_dead_lettered") if name.endswith("_dead_lettered") else "")
        if step and n:
            by_step[step] = by_step.get(step, 0) + n
    out["dead_letters_by_step"] = by_step
    out["newest_event_time"] = None
    try:
        dists = launched.result.metrics().query(MetricsFilter().with_name("event_time_ms"))["distributions"]
    except Exception:  # noqa: BLE001 - a runner without metrics: no lag
        dists = []
    for d in dists:
        v = d.committed if d.committed is not None else d.attempted
        if v is not None and v.count:
            newest = v.max / 1000.0
            out["newest_event_time"] = max(out["newest_event_time"] or newest, newest)
    return out


def run_loop(
    config: ContinuousConfig,
    client,
    stop: threading.Event | None = None,
    max_runs: int | None = None,
    idle_exit_s: float | None = None,
    report: Callable[[dict], None] = print,
    clock: Callable[[], float] = time.time,
) -> int:
    """Runs :func:`run_once` every ``config.every_s`` seconds until stopped.

    Args:
      config: the loop's configuration.
      client: Redis client for the feed builds.
      stop: set it to end the loop (checked between looks).
      max_runs: stop after this many runs that found files.
      idle_exit_s: stop after this many seconds without new files.
      report: receives each run's dict (and ``{"error": ...}`` when a run failed; it is retried
        at the next look, as the cursor did not move).
      clock: UTC epoch seconds.

    Returns:
      How many runs found files.
    """
    cursor = FileCursor(config.cursor_path)
    stop = stop or threading.Event()
    runs = 0
    last_new = time.monotonic()
    while not stop.is_set():
        try:
            out = run_once(config, cursor, client, clock)
        except Exception as e:  # noqa: BLE001 - a failed run is reported and retried; the loop keeps going
            out = None
            RUNS.labels("error").inc()
            report({"error": f"{type(e).__name__}: {e}"[:500]})
        if out is not None:
            runs += 1
            last_new = time.monotonic()
            report(out)
            if max_runs is not None and runs >= max_runs:
                break
        elif idle_exit_s is not None and time.monotonic() - last_new >= idle_exit_s:
            break
        stop.wait(config.every_s)
    return runs
