"""Could the ordered story commit be split into independent keys? (issue 29, item 2)

Run: ``python -m benchmarks.story_partition --json [--stories CSV]`` (one JSON line; about two
minutes). Reads the shared ``news-aggregator-stories`` CSV in place.

A split of the articles into groups (Beam keys) gives the stories of one ordered run only if no
decision in one group can see a story of another. Two conservative tests, each a union-find over
the rows (headline + URL slug TF-IDF vectors and entity keys as the story step computes them):

* ``shared_key``: articles are linked when they share any term or entity key (a story is found
  through a shared key, and a story's keys are its members'). Groups = connected components.
* ``score_bound``: after one ordered run (:func:`newsflow.cli.evaluation.clustering.story_labels`),
  an article is linked to another group's story when the Cauchy-Schwarz bound of its join score
  (``||v restricted to the story's terms|| + entity_weight * entity overlap``, times the time
  factor to the story's latest member at or before the article, within the window) reaches
  ``join_threshold``: only such a story could change the article's decision. Groups = connected
  components of the predicted stories under these links (merge checks would only add links).

Prints ``{"rows", "stories", "largest_story_share", "shared_key": {"groups", "largest_share"},
"score_bound": {"groups", "largest_share", "links"}}``; ``largest_share`` is the largest group's share
of the rows, the least ``story_max_key_share`` an exact split by these groups can reach.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
from collections import Counter

DEFAULT_STORIES = "/work/shared/data/news-aggregator-stories/newsCorpora_2014-03-10_11.csv"


class _Groups:
    """Union-find over hashable items (path halving; the smaller representative wins)."""

    def __init__(self):
        self.parent: dict = {}

    def find(self, x):
        p = self.parent
        while p.setdefault(x, x) != x:
            p[x] = p[p[x]]
            x = p[x]
        return x

    def union(self, a, b) -> None:
        a, b = self.find(a), self.find(b)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def measure(path: str) -> dict:
    """The figures printed by ``--json`` for the stories CSV at ``path``."""
    from newsflow.cli.evaluation.clustering import read_stories, row_languages, story_labels
    from newsflow.core.embedding import load_text_model
    from newsflow.core.entities import EntityExtractor
    from newsflow.core.stories import StoryConfig

    rows = read_stories(path)
    cfg = StoryConfig()
    model = load_text_model()
    languages = row_languages(rows)
    ents = EntityExtractor().extract_many([(r["TITLE"], "") for r in rows], languages)
    vecs = [
        model.article_vector(r["TITLE"], r["URL"], cfg.slug_weight, lang)
        for r, lang in zip(rows, languages, strict=True)
    ]
    keys = [{e.key for e in found} for found in ents]

    shared = _Groups()
    for r, v, ek in zip(rows, vecs, keys, strict=True):
        for k in [("t", t) for t in v] + [("e", e) for e in ek]:
            shared.union(("a", r["ID"]), k)
    shared_sizes = Counter(shared.find(("a", r["ID"])) for r in rows)

    labels, _ = story_labels(rows)
    stories: dict[str, dict] = {}
    for r, v, ek, lab in zip(rows, vecs, keys, labels, strict=True):
        s = stories.setdefault(lab, {"terms": set(), "ents": set(), "times": []})
        s["terms"].update(v)
        s["ents"].update(ek)
        s["times"].append(r["_t"])
    for s in stories.values():
        s["times"].sort()
    bound = _Groups()
    links = 0
    for r, v, ek, lab in zip(rows, vecs, keys, labels, strict=True):
        t = r["_t"]
        for sid, s in stories.items():
            i = bisect.bisect_right(s["times"], t) - 1
            if sid == lab or i < 0 or t - s["times"][i] > cfg.window_s:
                continue
            cos = math.sqrt(sum(w * w for term, w in v.items() if term in s["terms"]))
            overlap = len(ek & s["ents"]) / len(ek) if ek else 0.0
            factor = math.exp(-(t - s["times"][i]) / cfg.time_scale_s)
            if (cos + cfg.entity_weight * overlap) * factor >= cfg.join_threshold:
                bound.union(lab, sid)
                links += 1
    bound_sizes = Counter(bound.find(lab) for lab in labels)
    n = len(rows)
    return {
        "rows": n,
        "stories": len(stories),
        "largest_story_share": round(max(Counter(labels).values()) / n, 6),
        "shared_key": {"groups": len(shared_sizes), "largest_share": round(max(shared_sizes.values()) / n, 6)},
        "score_bound": {
            "groups": len(bound_sizes),
            "largest_share": round(max(bound_sizes.values()) / n, 6),
            "links": links,
        },
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", default=DEFAULT_STORIES, help="news-aggregator-stories CSV")
    parser.add_argument("--json", action="store_true", help="print one JSON line (the only output format)")
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.stories)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
