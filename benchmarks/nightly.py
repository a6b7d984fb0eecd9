"""Nightly jobs and build-feeds as the readers grow: peak memory, pipeline size and wall time per reader.

Run::

    python -m benchmarks.nightly --json                          # 10k, 100k, 400k readers (<= 25 min)
    python -m benchmarks.nightly --sizes 10000,50000 --json      # a quicker look

For each size ``n`` (readers), a synthetic night (seeded): ``--stories`` stories (128-dim unit embeddings,
8 topics, Zipf(1.1) popularity) live in an embedded Redis, and every reader has exactly 3 events on the
night's date: a tenth impression + two clicks (two distinct clicks: the readers the MinHash clustering
sees), three tenths impression + click + dwell, six tenths three impressions (positions 0-19). One reader
in ten also has a previous-night interest row (``models/interest/date=D-1``), so ``ranking_weights`` joins
real models. Each job (``snapshot_stories``, ``decay_rates``, ``interest_vectors``, ``ranking_weights``)
runs as ``python -m newsflow.jobs.<job>`` with ``--direct_running_mode multi_processing
--direct_num_workers 2``; per job:

* ``peak_rss_bytes``: the largest resident set of any one process of the job (the launcher or a worker),
  from a 0.2 s poll of the process tree (psutil; ``wait4``'s ``ru_maxrss`` is not used: a forked child
  inherits this process's high-water mark);
* ``pipeline_bytes``: ``len(pipeline.to_runner_api().SerializeToString())`` of the job's pipeline built
  for that night (``--dry_run true``: built, not run);
* ``wall_s_per_reader``: the job's wall seconds / ``n``.

Then the night's models are switched in, every reader is marked active and ``build_feeds`` runs in this
process for the first ``--feed-sizes`` sizes: ``build_feeds_ms_per_reader`` (wall ms / active readers;
the count of written feeds must equal the readers, or the benchmark fails).

Growth figures (goals of issue 31: the first two <= 1.5, wall and build-feeds per reader <= 1.2):
``rss_growth_10k_to_400k`` and ``pipeline_size_growth_10k_to_400k`` are the ratios of the largest job's
(the job with the largest peak RSS at the largest size) figures between the smallest and largest size;
``wall_per_reader_growth`` per job; ``build_feeds_growth`` between the two feed sizes. A size whose
predicted duration (the previous size's, less four times its ``snapshot_stories`` wall as reader-independent
start-up, scaled by readers) does not fit the ``--budget-minutes`` left is
skipped and listed in ``skipped``; the growth keys then name the sizes that ran.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from benchmarks._common import emit, environment, parse_args, sig

DATE = "2026-11-30"
PREVIOUS = "2026-11-29"
JOBS = ("snapshot_stories", "decay_rates", "interest_vectors", "ranking_weights")
RUNNER_FLAGS = ["--direct_running_mode", "multi_processing", "--direct_num_workers", "2"]


def synthetic_night(client, root: str, readers: int, stories: int, seed: int = 7) -> dict:
    """Writes the stories to Redis (serving hashes + live index, as the streaming job leaves them), the night's
    events (3 per reader) as ``events/date=DATE`` Parquet and previous-night interest rows; returns sizes."""

    from newsflow.jobs.interest_vectors import INTEREST_OUTPUT_SCHEMA
    from newsflow.jobs.nightly_common import write_partition
    from newsflow.schemas.event import EVENT_SCHEMA
    from newsflow.storage.keys import Keys
    from newsflow.storage.ranking import encode_embedding

    rng = np.random.default_rng(seed)
    day = dt.datetime.fromisoformat(DATE).replace(tzinfo=dt.UTC).timestamp()
    emb = rng.normal(size=(stories, 128)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    keys, pipe = Keys(), client.pipeline(transaction=False)
    for i in range(stories):
        pipe.hset(
            keys.story(f"s{i}"),
            mapping={
                "title": f"story {i}",
                "url": f"https://o{i % 500}.com/{i}",
                "domain": f"o{i % 500}.com",
                "representative_id": f"a{i}",
                "article_count": 3,
                "source_count": 2,
                "independent_count": 2,
                "earliest_time": repr(day - 3600.0 * float(rng.uniform(0, 48))),
                "latest_time": repr(day + 86000.0),
                "topics": json.dumps([f"topic{i % 8}"]),
                "languages": '["en"]',
                "authority": repr(float(rng.uniform(0.3, 1.0))),
                "embedding": encode_embedding(emb[i]),
                "entities": "[]",
                "merged_into": "",
            },
        )
        pipe.zadd(keys.story_active_of(f"s{i}"), {f"s{i}": day + 86000.0})
    pipe.execute()
    pop = np.arange(1, stories + 1, dtype=np.float64) ** -1.1
    pop /= pop.sum()
    picks = rng.choice(stories, size=(readers, 3), p=pop)
    kind = np.arange(readers) % 10
    start = day + rng.uniform(0, 86000, size=readers)
    users, types, story, times, positions, dwell = [], [], [], [], [], []
    for r in range(readers):
        a, b, c = (f"s{x}" for x in picks[r])
        t, pos = float(start[r]), int(picks[r][0] % 20)
        if kind[r] == 0:
            rows = [("impression", a, t, pos, None), ("click", a, t + 5, pos, None), ("click", b, t + 60, 3, None)]
        elif kind[r] <= 3:
            rows = [("impression", a, t, pos, None), ("click", a, t + 5, pos, None), ("dwell", a, t + 65, None, 60.0)]
        else:
            rows = [("impression", s, t + j, (pos + j) % 20, None) for j, s in enumerate((a, b, c))]
        for typ, sid, ts, p, dw in rows:
            users.append(f"u{r}")
            types.append(typ)
            story.append(sid)
            times.append(ts)
            positions.append(p)
            dwell.append(dw)
    stamps = pa.array((np.asarray(times) * 1e6).astype("int64"), pa.timestamp("us", tz="UTC"))
    table = pa.Table.from_arrays(
        [
            pa.array([f"e{i}" for i in range(len(users))]),
            pa.array(users),
            pa.array(types),
            pa.array(story),
            stamps,
            stamps,
            pa.array(positions, pa.int32()),
            pa.array(dwell, pa.float32()),
            pa.array(["feed"] * len(users)),
        ],
        schema=EVENT_SCHEMA,
    )
    edir = os.path.join(root, "events", f"date={DATE}")
    os.makedirs(edir)
    path = os.path.join(edir, "events-synthetic.parquet")
    pq.write_table(table, path)
    previous = [
        {
            "user_id": f"u{r}",
            "interest": [float(x) for x in emb[picks[r][0]]],
            "clicks": 1,
            "recent": [f"s{picks[r][0]}"],
            "cluster_id": None,
            "topics": [{"label": f"topic{picks[r][0] % 8}", "share": 1.0}],
        }
        for r in range(0, readers, 10)
    ]
    write_partition(root, "models/interest", PREVIOUS, pa.Table.from_pylist(previous, INTEREST_OUTPUT_SCHEMA))
    return {"events": len(users), "events_parquet_bytes": os.path.getsize(path)}


def _job_argv(job: str, root: str, redis_url: str, data_dir: str) -> list[str]:
    flags = ["--date", DATE, "--output", root, "--redis_url", redis_url, "--data_dir", data_dir]
    return [sys.executable, "-m", f"newsflow.jobs.{job}", *flags, *RUNNER_FLAGS]


def pipeline_bytes(job: str, root: str, redis_url: str, data_dir: str) -> int:
    """Serialized size of the job's pipeline for the night (built with ``--dry_run true``, not run)."""
    import importlib

    from newsflow.pipelines.launcher import launch

    spec = importlib.import_module(f"newsflow.jobs.{job}").SPEC
    size = {}

    def measure(pipeline, _config):
        size["bytes"] = len(pipeline.to_runner_api().SerializeToString())

    launch(spec, _job_argv(job, root, redis_url, data_dir)[3:] + ["--dry_run", "true"], build_hook=measure)
    return size["bytes"]


def run_job(job: str, root: str, redis_url: str, data_dir: str) -> dict:
    """One job in its own process tree: wall seconds and the largest process's peak RSS (bytes)."""
    import psutil

    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(_job_argv(job, root, redis_url, data_dir), stdout=subprocess.DEVNULL, stderr=err)
        peak = {"rss": 0}
        done = threading.Event()

        def poll():
            while not done.is_set():
                try:
                    parent = psutil.Process(proc.pid)
                    tree = [parent, *parent.children(recursive=True)]
                except psutil.Error:
                    return
                for p in tree:
                    try:
                        peak["rss"] = max(peak["rss"], p.memory_info().rss)
                    except psutil.Error:
                        pass
                done.wait(0.2)

        watcher = threading.Thread(target=poll, daemon=True)
        watcher.start()
        proc.wait()  # not wait4's ru_maxrss: a forked child starts with this process's high-water mark
        done.set()
        watcher.join()
        seconds = time.perf_counter() - t0
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{job} failed: {err.read().decode(errors='replace')[-3000:]}")
    return {"seconds": seconds, "peak_rss_bytes": peak["rss"]}


def one_size(readers: int, stories: int, feeds: bool) -> dict:
    """The night of ``readers`` readers: every job's figures and, with ``feeds``, build-feeds'."""
    from newsflow.runtime.redis_conn import connect, stop_embedded
    from newsflow.storage.events import mark_active
    from newsflow.storage.feeds import build_feeds
    from newsflow.storage.keys import Keys
    from newsflow.storage.models import MODEL_NAMES, ModelStore

    tmp = tempfile.mkdtemp(prefix=f"nf-bench-nightly-{readers}-")
    root, data_dir = os.path.join(tmp, "output"), os.path.join(tmp, "data")
    rdb = os.path.join(tmp, "redis", "bench.rdb")
    client = connect(embedded_path=rdb)
    url = f"unix://{client.socket_file}"
    try:
        t0 = time.perf_counter()
        sizes = synthetic_night(client, root, readers, stories)
        out: dict = {"readers": readers, "events": sizes["events"], "setup_s": sig(time.perf_counter() - t0)}
        jobs = {}
        for job in JOBS:
            size = pipeline_bytes(job, root, url, data_dir)
            ran = run_job(job, root, url, data_dir)
            jobs[job] = {
                "peak_rss_bytes": int(ran["peak_rss_bytes"]),
                "pipeline_bytes": size,
                "wall_s": sig(ran["seconds"]),
                "wall_s_per_reader": sig(ran["seconds"] / readers),
            }
        out["jobs"] = jobs
        store = ModelStore(client, Keys())
        out["interest_vectors_written"] = (store.manifest("interest", DATE) or {}).get("fields", 0)
        if feeds:
            store.switch({name: DATE for name in MODEL_NAMES})
            now = dt.datetime.fromisoformat(DATE).replace(tzinfo=dt.UTC).timestamp() + 86399.0
            for i in range(0, readers, 20000):
                pipe = client.pipeline(transaction=False)
                mark_active(pipe, {f"u{r}": now - 60 for r in range(i, min(readers, i + 20000))})
                pipe.execute()
            t0 = time.perf_counter()
            stats = build_feeds(client, now)
            seconds = time.perf_counter() - t0
            if stats.user_feeds != readers:
                raise RuntimeError(f"build_feeds wrote {stats.user_feeds} feeds for {readers} active readers")
            out["build_feeds"] = {
                "feeds": stats.user_feeds,
                "s": sig(seconds),
                "ms_per_reader": sig(1000 * seconds / readers),
            }
        return out
    finally:
        stop_embedded(rdb, False)
        shutil.rmtree(tmp, True)


def main(argv=None) -> None:
    """Runs the benchmark and prints its JSON."""

    def extra(p):
        p.add_argument("--sizes", default="10000,100000,400000", help="readers per night, comma-separated")
        p.add_argument("--feed-sizes", type=int, default=2, help="build-feeds runs at the first this-many sizes")
        p.add_argument("--stories", type=int, default=2_000, help="synthetic stories")
        p.add_argument("--budget-minutes", type=float, default=25.0, help="skip sizes predicted to overrun this")

    args = parse_args(__doc__.splitlines()[0], argv, extra)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    started = time.perf_counter()
    runs, skipped = [], []
    for i, n in enumerate(sizes):
        left = args.budget_minutes * 60 - (time.perf_counter() - started)
        if runs:
            last = runs[-1]
            fixed = len(JOBS) * last["jobs"]["snapshot_stories"]["wall_s"]  # per-job start-up, reader-independent
            predicted = fixed + max(0.0, last["total_s"] - fixed) * n / last["readers"]
            if predicted > left:
                skipped.append({"readers": n, "predicted_s": sig(predicted), "left_s": sig(left)})
                continue
        t0 = time.perf_counter()
        run = one_size(n, args.stories, feeds=i < args.feed_sizes)
        run["total_s"] = sig(time.perf_counter() - t0)
        runs.append(run)
        print(json.dumps(run), file=sys.stderr, flush=True)  # each size as it ends, should a later one be cut off
    result: dict = {"benchmark": "nightly", "runner_flags": " ".join(RUNNER_FLAGS), "stories": args.stories}
    result["runs"] = runs
    result["skipped"] = skipped
    if len(runs) >= 2:
        first, last = runs[0], runs[-1]
        tag = f"{first['readers'] // 1000}k_to_{last['readers'] // 1000}k"
        largest = max(last["jobs"], key=lambda j: last["jobs"][j]["peak_rss_bytes"])
        result["largest_job"] = largest
        result[f"rss_growth_{tag}"] = sig(
            last["jobs"][largest]["peak_rss_bytes"] / first["jobs"][largest]["peak_rss_bytes"]
        )
        result[f"pipeline_size_growth_{tag}"] = sig(
            last["jobs"][largest]["pipeline_bytes"] / first["jobs"][largest]["pipeline_bytes"]
        )
        result[f"wall_per_reader_growth_{tag}"] = {
            j: sig(last["jobs"][j]["wall_s_per_reader"] / first["jobs"][j]["wall_s_per_reader"]) for j in JOBS
        }
    feeds = [r for r in runs if "build_feeds" in r]
    for r in feeds:
        result[f"build_feeds_ms_per_reader_{r['readers'] // 1000}k"] = r["build_feeds"]["ms_per_reader"]
    if len(feeds) >= 2:
        result["build_feeds_growth"] = sig(
            feeds[-1]["build_feeds"]["ms_per_reader"] / feeds[0]["build_feeds"]["ms_per_reader"]
        )
    result["seconds"] = sig(time.perf_counter() - started)
    result["environment"] = environment()
    emit(result, args.json)


if __name__ == "__main__":
    main()
