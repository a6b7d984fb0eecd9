"""Trending reads the newest window at or before the ranking time (a replay's clock), not after it."""

from __future__ import annotations

from newsflow.storage.ranking import RankingStore
from tests.integration.ranking_data import NOW, add_trending


def test_latest_trending_respects_now(server):
    server.flushall()
    add_trending(server, {"early": 7}, window_end=NOW - 3600)
    add_trending(server, {"late": 3}, window_end=NOW + 86400 * 365)  # a window "from the future" of the replay
    store = RankingStore(server)
    assert store.latest_trending("story", 10) == (NOW + 86400 * 365, [("late", 3)])
    assert store.latest_trending("story", 10, now=NOW) == (NOW - 3600, [("early", 7)])
    assert store.latest_trending("story", 10, now=NOW - 7200) == (None, [])
