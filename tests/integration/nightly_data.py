"""The nightly tests' data set: 12 stories scored at ``NOW``. Four "tech" stories have low authority
(0.3-0.45) and embeddings near one direction; eight others have high authority (0.7-0.95) and orthogonal
embeddings. By the decay formula alone (every story 1 h old, λ = 0.1) the tech stories are the four lowest
scores, so a cold reader sees them last. A reader's events click the tech stories.
"""

from __future__ import annotations

import datetime as dt
import json

import numpy as np

from newsflow.schemas import Event
from newsflow.storage.events import append_events
from newsflow.storage.keys import Keys
from newsflow.storage.ranking import encode_embedding

NOW = dt.datetime(2026, 11, 30, 18, 0, tzinfo=dt.UTC).timestamp()
DATE = "2026-11-30"
H = 3600.0
TECH = ["t1", "t2", "t3", "t4"]
OTHER = [f"o{i}" for i in range(1, 9)]


def emb(axis: int, tilt: int | None = None) -> np.ndarray:
    """A unit 128-d embedding along ``axis``, tilted 0.3 towards ``tilt``."""
    v = np.zeros(128, dtype=np.float32)
    v[axis] = 1.0
    if tilt is not None:
        v[tilt] = 0.3
    return v / np.linalg.norm(v)


def populate(r, keys: Keys) -> None:
    """The twelve stories, scored and indexed as live at ``NOW`` (each an hour old)."""
    pipe = r.pipeline()
    stories = {sid: ("tech", 0.3 + 0.05 * i, emb(0, 10 + i)) for i, sid in enumerate(TECH)}
    topics = ["world", "business", "politics", "sports"]
    stories.update({sid: (topics[i % 4], 0.95 - 0.03 * i, emb(20 + i)) for i, sid in enumerate(OTHER)})
    for sid, (topic, auth, vec) in stories.items():
        pipe.hset(
            keys.story(sid),
            mapping={
                "title": f"story {sid}",
                "url": f"https://{sid}-news.com/a",
                "domain": f"{sid}-news.com",
                "representative_id": f"a-{sid}",
                "article_count": 1,
                "source_count": 1,
                "independent_count": 1,
                "earliest_time": repr(NOW - H),
                "latest_time": repr(NOW - H),
                "topics": json.dumps([topic]),
                "languages": json.dumps(["en"]),
                "authority": repr(auth),
                "embedding": encode_embedding(vec),
                "entities": "[]",
                "merged_into": "",
            },
        )
        pipe.zadd(keys.story_active_of(sid), {sid: NOW - H})  # the live-story index ranking reads
    pipe.execute()


def reader_events(user: str) -> list[Event]:
    """20 clicks on tech stories (5 each), with the impressions before them, all received on DATE."""
    out = []
    for rnd in range(5):
        for j, sid in enumerate(TECH):
            t = NOW - 3000 + rnd * 100 + j * 10
            out.append(Event(user, "impression", sid, t, t, 8 + j, None, "feed"))
            out.append(Event(user, "click", sid, t + 2, t + 2, 8 + j, None, "feed"))
            out.append(Event(user, "dwell", sid, t + 60, t + 60, None, 55.0, "feed"))
        for j, sid in enumerate(OTHER):  # seen and skipped
            out.append(Event(user, "impression", sid, NOW - 3000 + rnd * 100, NOW - 3000 + rnd * 100, j, None, "feed"))
    return out


def yesterday() -> str:
    """Yesterday's UTC date, ``YYYY-MM-DD``."""
    return (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=1)).isoformat()


def prepare_night(client) -> str:
    """Stories and one reader's events received yesterday (UTC); returns yesterday's date."""
    from newsflow.schemas import Event

    date = yesterday()
    noon = dt.datetime.fromisoformat(date).replace(hour=12, tzinfo=dt.UTC).timestamp()
    populate(client, Keys())
    events = []
    for i, sid in enumerate(TECH + OTHER):
        events.append(Event("reader", "impression", sid, noon + i, noon + i, i, None, "feed"))
        if sid in TECH:
            events.append(Event("reader", "click", sid, noon + i + 1, noon + i + 1, i, None, "feed"))
    append_events(client, events)
    return date
