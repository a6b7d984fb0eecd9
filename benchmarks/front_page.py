"""Front-page quality on the demo's Redis (issue 32, item 4): how many of the global feed's first 20 stories are
single-source, and how many of the ten stories with the most independent outlets in the replay's last 6 hours
they hold, for a grid of coverage weights (:mod:`newsflow.core.ranking.coverage`).

Run after ``make demo`` (reads ``var/redis/newsflow.rdb`` at its replay clock; changes nothing)::

    python -m benchmarks.front_page [--redis-path var/redis/newsflow.rdb] [--no-evergreen-topics]

``--no-evergreen-topics`` drops the article-type labels (explainer, historical, obituary) from the stories'
topics first, as separating topics from article types (issue 32, item 1) does. A story's independent outlets in
the last 6 hours are the distinct outlets among its member articles with event time in (clock - 6 h, clock],
bounded by their distinct near-duplicate groups. Prints one line per weight pair.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import numpy as np

from newsflow.core.outlets import outlet
from newsflow.core.ranking import coverage
from newsflow.core.ranking import feeds as ranking_feeds
from newsflow.core.ranking.decay import EVERGREEN_TOPICS
from newsflow.core.ranking.feeds import Candidates, FeedConfig, build_public_feeds, compute_pools, live_stories
from newsflow.runtime.redis_conn import connect, default_embedded_path
from newsflow.storage.feeds import replay_clock, velocity_map
from newsflow.storage.keys import Keys
from newsflow.storage.ranking import RankingStore

WEIGHTS = [(0.0, 0.0)] + [(w, v) for w in (0.3, 0.45, 0.6, 0.8, 1.0) for v in (0.0, 0.3)]


def recent_independent_outlets(client, keys: Keys, story_id: str, now: float, hours: float = 6.0) -> int:
    """Distinct outlets among a story's members of the last ``hours`` (bounded by their near-duplicate groups)."""
    outlets, groups = set(), set()
    for raw in client.zrangebyscore(keys.story_articles(story_id), now - hours * 3600.0, now):
        aid = raw.decode() if isinstance(raw, bytes) else raw
        dom, cluster = (
            x.decode() if isinstance(x, bytes) else (x or "")
            for x in client.hmget(keys.article(aid), "source_domain", "cluster_id")
        )
        if dom:
            outlets.add(outlet(dom))
            groups.add(cluster or aid)
    return min(len(outlets), len(groups))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.front_page", description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-path", default=default_embedded_path())
    parser.add_argument("--no-evergreen-topics", action="store_true")
    args = parser.parse_args(argv)
    client = connect(embedded_path=args.redis_path)
    keys = Keys()
    store = RankingStore(client, keys)
    now = replay_clock(client, keys)
    if now is None:
        print("no replay clock: run `make demo` first", file=sys.stderr)
        return 2
    stories = sorted(live_stories(store.get_stories(list(store.iter_story_ids())), now), key=lambda s: s.story_id)
    if args.no_evergreen_topics:
        stories = [s._replace(topics=tuple(t for t in s.topics if t.lower() not in EVERGREEN_TOPICS)) for s in stories]
    recent = {s.story_id: recent_independent_outlets(client, keys, s.story_id, now) for s in stories}
    widest = sorted(recent, key=lambda k: (-recent[k], k))[:10]
    shared = (velocity_map(store, now=now), store.lambda_overrides(), set(store.breaking(now)))
    print(f"{len(stories)} live stories at {now}; widest in the last 6 h: {[recent[k] for k in widest]}")
    for w_outlets, w_velocity in WEIGHTS:
        ranking_feeds.breadth = lambda o, v, a=w_outlets, b=w_velocity: coverage.breadth(o, v, a, b)
        cands = Candidates(stories, now, shared[1], shared[2], shared[0])
        pool = {("edition", "global"): compute_pools(cands)[("edition", "global")]}
        top = build_public_feeds(cands, pool, now, FeedConfig())[("edition", "global")]["stories"][:20]
        ids = {it["story_id"] for it in top}
        single = int(np.sum([it["source_count"] <= 1 for it in top]))
        print(
            f"w_outlets={w_outlets} w_velocity={w_velocity}: single-source {single} of 20, "
            f"widest ten in the first 20: {sum(k in ids for k in widest)}"
        )
    ranking_feeds.breadth = coverage.breadth
    return 0


if __name__ == "__main__":
    sys.exit(main())
