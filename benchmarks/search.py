"""Benchmark: the full-text search index at 100k synthetic articles — indexing cost and query latency.

Run: ``python -m benchmarks.search --json`` prints ONE JSON line.

Data: ``--articles`` (100,000) synthetic articles in ``--stories`` stories, written from the words of the bundled
headlines (``data/corpus/headlines.jsonl.gz``) drawn with a Zipf law, so common and rare words occur as in news
text: a 10-word headline, a 60-word lead, 3 entities out of 2,000, one of 300 outlets, 80 % English, 10 % German,
10 % French, topics out of 12, event times over 30 days.

Indexing: the job's two upserts per article (:meth:`SearchIndex.put_texts` then :meth:`SearchIndex.put_stories`,
500 per transaction, as the sink batches them) into a fresh file: ``index_ms_per_article`` (goal ≤ 2 ms), and
the floor, the same rows inserted into a plain SQLite table without analysis or FTS
(``floor_insert_ms_per_article``), with their ratio.

Queries: ``--queries`` (1,000) searches of 1-3 words drawn from the article texts (half of them with a filter:
language, topic, outlet or a 7-day range), each returning the best 500 matching articles (what
:mod:`newsflow.serving.search` groups into stories): ``query_ms`` p50/p99 (goal p99 < 50 ms) and the floor, a
bare FTS5 ``MATCH`` of each query's first word, unranked, 500 rows (``floor_match_ms``), with the ratio of the
p99s. Grouping the hits by story and reading story records from Redis is not included (one pipelined Redis
call; see ``benchmarks.serving`` for Redis round trips).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import sqlite3
import sys
import tempfile
import time

from benchmarks._common import emit, environment, parse_args, percentiles, sig
from newsflow.serving.search import MAX_HITS
from newsflow.storage.search_index import Filters, SearchIndex, StoryRow, TextRow

HEADLINES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "corpus", "headlines.jsonl.gz"
)
TOPICS = [
    "politics",
    "business",
    "technology",
    "sports",
    "science",
    "health",
    "world",
    "gaming",
    "climate",
    "music",
    "film",
    "travel",
]
LANGUAGES = ["en"] * 8 + ["de", "fr"]
DAY = 86400.0
START = 1_700_000_000.0


def vocabulary() -> list[str]:
    """Distinct words of the bundled headlines, most frequent first."""
    counts: dict[str, int] = {}
    with gzip.open(HEADLINES, "rt", encoding="utf-8") as f:
        for line in f:
            for w in re.findall(r"[^\W\d_]{2,}", json.loads(line).get("title") or ""):
                counts[w] = counts.get(w, 0) + 1
    return sorted(counts, key=lambda w: (-counts[w], w))


def synthetic(n: int, n_stories: int, seed: int):
    """``(texts, stories, words drawn)`` of ``n`` articles (module docstring)."""
    rng = random.Random(seed)
    vocab = vocabulary()
    weights = [1.0 / (r + 1) for r in range(len(vocab))]
    entities = [" ".join(rng.choices(vocab[200:], k=2)).title() for _ in range(2000)]
    outlets = [f"www.outlet{i}.com" for i in range(300)]
    texts, stories = [], []
    for i in range(n):
        words = rng.choices(vocab, weights, k=70)
        aid = f"{i:032x}"
        texts.append(
            TextRow(
                aid,
                " ".join(words[:10]).capitalize(),
                " ".join(words[10:]),
                f"https://{outlets[i % 300]}/a/{i}",
                rng.choice(outlets),
                rng.choice(LANGUAGES),
                START + rng.random() * 30 * DAY,
            )
        )
        stories.append(
            StoryRow(
                aid, f"s{rng.randrange(n_stories):031x}", tuple(rng.sample(TOPICS, 2)), tuple(rng.sample(entities, 3))
            )
        )
    return texts, stories, vocab, weights


def queries(n: int, texts, rng: random.Random) -> list[tuple[str, Filters]]:
    """``n`` queries of 1-3 words taken from random articles; every second one with a filter."""
    out = []
    for i in range(n):
        t = rng.choice(texts)
        words = (t.title + " " + t.lead).split()
        q = " ".join(rng.sample(words, rng.randint(1, 3)))
        f = Filters()
        if i % 2:
            kind = (i // 2) % 4
            if kind == 0:
                f = Filters(language=t.language)
            elif kind == 1:
                f = Filters(topic=rng.choice(TOPICS))
            elif kind == 2:
                f = Filters(outlet=t.domain.removeprefix("www."))
            else:
                since = START - START % DAY + rng.randrange(23) * DAY
                f = Filters(since=since, until=since + 7 * DAY)
        out.append((q, f))
    return out


def _floor_insert(path: str, texts, stories, batch: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("CREATE TABLE docs(article_id TEXT PRIMARY KEY, a, b, c, d, e, f, story_id, topics, entities)")
    t0 = time.perf_counter()
    for i in range(0, len(texts), batch):
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO docs(article_id, a, b, c, d, e, f) VALUES (?, ?, ?, ?, ?, ?, ?)", texts[i : i + batch]
        )
        conn.executemany(
            "UPDATE docs SET story_id = ?, topics = ?, entities = ? WHERE article_id = ?",
            [(s.story_id, "\t".join(s.topics), "\t".join(s.entities), s.article_id) for s in stories[i : i + batch]],
        )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - t0
    conn.close()
    return elapsed


def main(argv=None) -> int:
    def extra(ap):
        ap.add_argument("--articles", type=int, default=100_000)
        ap.add_argument("--stories", type=int, default=20_000)
        ap.add_argument("--queries", type=int, default=1000)
        ap.add_argument("--batch", type=int, default=500, help="upserts per transaction (the sink's batch size)")
        ap.add_argument("--seed", type=int, default=7)

    a = parse_args(__doc__.splitlines()[0], argv, extra)
    if a.articles < 1 or a.stories < 1 or a.queries < 1 or a.batch < 1:
        print("error: --articles, --stories, --queries and --batch must be >= 1", file=sys.stderr)
        return 2
    texts, stories, _, _ = synthetic(a.articles, a.stories, a.seed)
    with tempfile.TemporaryDirectory(prefix="nf-search-bench-") as tmp:
        floor_s = _floor_insert(os.path.join(tmp, "floor.sqlite3"), texts, stories, a.batch)
        index = SearchIndex(os.path.join(tmp, "index.sqlite3"))
        t0 = time.perf_counter()
        for i in range(0, len(texts), a.batch):
            index.put_texts(texts[i : i + a.batch])
            index.put_stories(stories[i : i + a.batch])
        index_s = time.perf_counter() - t0
        size = os.path.getsize(index.path)
        index.close()
        reader = SearchIndex(os.path.join(tmp, "index.sqlite3"), readonly=True)
        qs = queries(a.queries, texts, random.Random(a.seed + 1))
        conn = reader._thread_conn()
        for q, f in qs[:20]:  # warm the page cache
            reader.search(q, f, MAX_HITS)
        times, floor, hits = [], [], []
        for q, f in qs:
            t = time.perf_counter()
            found = reader.search(q, f, MAX_HITS)
            times.append((time.perf_counter() - t) * 1000.0)
            hits.append(len(found))
            first = q.split()[0].lower()
            t = time.perf_counter()
            conn.execute("SELECT rowid FROM terms WHERE terms MATCH ? LIMIT ?", (f'"{first}"', MAX_HITS)).fetchall()
            floor.append((time.perf_counter() - t) * 1000.0)
    qp, fp = percentiles(times, (50, 99)), percentiles(floor, (50, 99))
    result = {
        "benchmark": "search",
        "articles": a.articles,
        "stories": a.stories,
        "index_seconds": sig(index_s),
        "index_ms_per_article": sig(index_s * 1000.0 / a.articles),
        "floor_insert_ms_per_article": sig(floor_s * 1000.0 / a.articles),
        "index_to_floor_ratio": sig(index_s / floor_s),
        "index_bytes": size,
        "queries": a.queries,
        "query_ms_p50": sig(qp["p50"]),
        "query_ms_p99": sig(qp["p99"]),
        "floor_match_ms_p50": sig(fp["p50"]),
        "floor_match_ms_p99": sig(fp["p99"]),
        "query_p99_to_floor_p99": sig(qp["p99"] / fp["p99"]) if fp["p99"] else None,
        "hits_mean": sig(sum(hits) / len(hits)),
        "queries_with_no_hit": sum(1 for h in hits if h == 0),
        "goals": {
            "index_ms_per_article_le_2": index_s * 1000.0 / a.articles <= 2.0,
            "query_ms_p99_lt_50": qp["p99"] < 50.0,
        },
        "environment": environment(),
    }
    emit(result, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
