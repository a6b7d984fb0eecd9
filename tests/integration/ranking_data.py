"""Hand-built story/article/user records in the issue-3 Redis layout, for ranking tests.

NOW = 1_700_000_000 (UTC epoch s). Scores at NOW (λ 0.1 unless noted), by hand:
  s1 0.9·e^-0.1 = 0.814354   s2 0.8·e^-0.1 = 0.723870   s3 0.7·e^-0.2 = 0.573112
  s4 0.6·e^-0.2 (obituary, λ .02 over 10 h) = 0.491238   s5 0.5·e^-0.05 = 0.475615
  s6 0.9·e^-0.3 = 0.666736   s7 0.85·e^-0.1 = 0.769112   s8 merged into s1 (not ranked)
Embeddings are one-hot: s1 and s2 share direction 0 (same angle), the others are orthogonal.
"""

from __future__ import annotations

import json

import numpy as np

from newsflow.storage.keys import Keys
from newsflow.storage.ranking import encode_embedding

NOW = 1_700_000_000.0
NOW_MINUTE = 1_699_999_980.0  # the start of NOW's UTC minute (NOW % 60 == 20): breaking items are scored at it
H = 3600.0

# story_id: (title, domain, authority, age_hours, languages, topics, embedding axis)
STORIES = {
    "s1": ("Storm hits the coast", "a.com", 0.9, 1.0, ["en"], ["world"], 0),
    "s2": ("Storm damage counted", "a.com", 0.8, 1.0, ["en"], ["world"], 0),
    "s3": ("Markets rally", "b.com", 0.7, 2.0, ["en"], ["business"], 1),
    "s4": ("Obituary: a famous author", "c.com", 0.6, 10.0, ["en"], ["obituary"], 2),
    "s5": ("Local election called", "a.com", 0.5, 0.5, ["en"], ["politics"], 3),
    "s6": ("Bundesliga result", "d.de", 0.9, 3.0, ["de"], ["sports"], 4),
    "s7": ("New phone launched", "a.com", 0.85, 1.0, ["en"], ["tech"], 5),
}


def axis(i: int) -> np.ndarray:
    v = np.zeros(128, dtype=np.float32)
    v[i] = 1.0
    return v


def story_fields(sid, title, dom, auth, age, langs, topics, ax, outlets=1, entities=()) -> dict:
    """The story hash of one ``STORIES``-shaped row (``outlets`` independent outlets, ``entities`` texts)."""
    return {
        "title": title,
        "url": f"https://{dom}/{sid}",
        "domain": dom,
        "representative_id": f"a-{sid}",
        "article_count": outlets,
        "source_count": outlets,
        "independent_count": outlets,
        "earliest_time": repr(NOW - age * H),
        "latest_time": repr(NOW - age * H + 600),
        "topics": json.dumps(topics),
        "languages": json.dumps(langs),
        "authority": repr(auth),
        "embedding": encode_embedding(axis(ax)),
        "entities": json.dumps(
            [{"key": "PERSON:" + e.lower(), "text": e, "label": "PERSON", "count": 1} for e in entities]
        ),
        "merged_into": "",
    }


def populate(r, keys: Keys = Keys()) -> None:
    """Writes the stories, s1's articles, a merged story and nothing else."""
    pipe = r.pipeline()
    for sid, row in STORIES.items():
        pipe.hset(keys.story(sid), mapping=story_fields(sid, *row))
    # s3's topics in the stories step's {label: probability} form (Business first)
    pipe.hset(keys.story("s3"), "topics", json.dumps({"World": 0.41, "Business": 0.91}))
    # the stories step's own keys under the same prefix must not be read as stories
    for aid in ("a1", "a3"):
        pipe.hset(keys.story_assign_of(aid), aid, "s1")
    # the live-story index the stories step keeps (merged s8 is not in it): what ranking reads
    for sid, v in STORIES.items():
        pipe.zadd(keys.story_active_of(sid), {sid: NOW - v[3] * H + 600})
    merge = {"from": "s8", "into": "s1", "time": NOW, "article_id": "a3"}
    pipe.hset(keys.story_merges_of("a3"), "a3", json.dumps([merge]))
    pipe.set(keys.story_state("s1"), "{}")
    pipe.hset(
        keys.story("s8"),
        mapping={
            "title": "Storm (old cluster)",
            "url": "https://z.com/s8",
            "domain": "z.com",
            "authority": "0.9",
            "earliest_time": repr(NOW - H),
            "latest_time": repr(NOW - H),
            "topics": "[]",
            "languages": '["en"]',
            "merged_into": "s1",
        },
    )
    # s1 coverage: a1 + two syndicated copies (cluster c1), independent a3 (c2) and a4 (c3)
    arts = [
        ("a1", "a.com", "c1", 0.9, NOW - H),
        ("a2", "wire-copy.com", "c1", 0.5, NOW - H + 60),
        ("a5", "f.com", "c1", 0.4, NOW - H + 120),
        ("a3", "b.com", "c2", 0.7, NOW - H + 300),
        ("a4", "e.com", "c3", 0.6, NOW - H + 900),
    ]
    for aid, dom, cid, auth, t in arts:
        pipe.hset(
            keys.article(aid),
            mapping={
                "title": f"title {aid}",
                "url": f"https://{dom}/{aid}",
                "source_domain": dom,
                "source_name": dom,
                "event_time": repr(t),
                "cluster_id": cid,
                "story_id": "s1",
                "source_authority": repr(auth),
                "language": "en",
            },
        )
        pipe.zadd(keys.story_articles("s1"), {aid: t})
    pipe.execute()


def add_trending(r, counts: dict, window_end: float = NOW, keys: Keys = Keys()) -> None:
    """Writes one trending story window (``story_id -> new articles``)."""
    r.zadd(keys.trending_windows("story"), {str(int(window_end)): window_end})
    r.zadd(keys.trending("story", window_end), counts)
