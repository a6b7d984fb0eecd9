"""The nightly loop end to end on a real embedded Redis and real Parquet: events -> Beam jobs ->
versioned models -> the reader's For You feed; the lock; failure; rerun; rollback.

The corpus is ``tests/integration/nightly_data.py``'s: twelve stories, the four "tech" ones last for a cold
reader.
"""

from __future__ import annotations

import datetime as dt
import os

import pyarrow.parquet as pq
import pytest

from newsflow.core.ranking.feeds import FeedConfig
from newsflow.jobs.nightly import MODELS, run_night
from newsflow.runtime.settings import Settings
from newsflow.storage.events import append_events
from newsflow.storage.feeds import build_feeds, build_user_feed
from newsflow.storage.keys import Keys
from newsflow.storage.models import ModelStore
from newsflow.storage.ranking import RankingStore
from newsflow.storage.story_index import live_story_count
from tests.integration.nightly_data import DATE, NOW, OTHER, TECH, H, populate, reader_events


@pytest.fixture()
def night(redis_server, tmp_path):
    client, url = redis_server
    keys = Keys()
    populate(client, keys)
    build_feeds(client, NOW)  # candidate pools
    settings = Settings.resolve(None, environ={}, data_dir=str(tmp_path / "data"), redis_url=url)
    return client, settings, str(tmp_path / "output")


def _ranks(doc: dict) -> dict[str, int]:
    return {item["story_id"]: i for i, item in enumerate(doc["stories"])}


def _feed(client, user: str) -> dict:
    store = RankingStore(client, Keys())
    return build_user_feed(store, store.user_profile(user), NOW, "", FeedConfig(k=12, user_k=12))


def test_twenty_clicks_on_one_topic_raise_it_in_for_you(night):
    client, settings, output = night
    before = _ranks(_feed(client, "reader"))
    assert sorted(before[s] for s in TECH) == [8, 9, 10, 11]  # a cold reader sees tech last
    events = reader_events("reader")
    assert sum(e.type == "click" for e in events) == 20
    append_events(client, events)
    summary = run_night(client, settings, DATE, output)
    assert summary["status"] == "ok", summary["error"]
    assert summary["events_flushed"] == len(events)
    jobs = ["snapshot_stories", "decay_rates", "interest_vectors", "ranking_weights"]
    assert [j["job"] for j in summary["jobs"]] == jobs
    assert summary["models"] == {name: DATE for name in MODELS}
    doc = _feed(client, "reader")
    after = _ranks(doc)
    assert doc["stories"][0]["story_id"] in TECH  # the reader's topic now leads
    # each of its stories is now more relevant to the reader than every other story ...
    rel = {item["story_id"]: item["relevance"] for item in doc["stories"]}
    assert min(rel[s] for s in TECH) > max(rel[s] for s in OTHER)
    # ... and none ranks lower than before; MMR still interleaves other topics: the tech stories are
    # near-duplicates of each other in embedding space (cosine ~0.92), so the least relevant of them
    # (t1, authority 0.3) can stay last (its diversity penalty 0.3 x 0.92 outweighs its relevance lead)
    assert all(after[s] <= before[s] for s in TECH)
    assert sum(after[s] for s in TECH) < sum(before[s] for s in TECH)
    why = {item["story_id"]: item["why"] for item in doc["stories"]}
    assert why["t1"]["top"] == "interest" and why["t1"]["interest"] > 0.8
    assert why["o1"]["interest"] < 0.1 and why["t1"]["versions"]["interest"] == DATE
    # the API's For You feed (/v1/feed) carries the same reasons
    from starlette.testclient import TestClient

    from newsflow.serving.app import ServingConfig, create_app
    from newsflow.serving.tokens import sign_token

    secret = b"s" * 32
    cfg = ServingConfig(token_secret=secret, snapshot_dir=output + "-snap", local_cache_seconds=0, clock=lambda: NOW)
    client.delete(Keys().feed("user", "reader"))
    resp = TestClient(create_app(client, cfg)).get(
        "/v1/feed", params={"limit": 12}, headers={"Authorization": "Bearer " + sign_token("reader", secret, NOW, 600)}
    )
    assert resp.status_code == 200
    served = resp.json()["stories"]
    assert served[0]["story_id"] in TECH and served[0]["why"]["top"] == "interest"
    assert {item["story_id"]: item["why"]["interest"] for item in served} == {
        sid: w["interest"] for sid, w in why.items()
    }
    # another reader with no events is untouched by the night
    assert sorted(_ranks(_feed(client, "stranger"))[s] for s in TECH) == [8, 9, 10, 11]
    # Parquet history: one file per dataset and date
    for name in ("stories", "models/decay", "models/interest", "models/covisit", "models/cluster", "models/weights"):
        files = os.listdir(os.path.join(output, name, f"date={DATE}"))
        assert files == ["part-00000.parquet"], (name, files)
    interest = pq.read_table(os.path.join(output, "models/interest", f"date={DATE}", "part-00000.parquet")).to_pylist()
    assert [(r["user_id"], r["clicks"]) for r in interest] == [("reader", 20)]
    # the lock is gone and nothing run-specific is left
    assert list(client.scan_iter(match="nf:nightly:*")) == []


def test_second_scheduler_for_the_same_date_runs_nothing(night):
    client, settings, output = night
    client.set(Keys().nightly_lock(DATE), "other-run")
    append_events(client, reader_events("reader"))
    summary = run_night(client, settings, DATE, output)
    assert summary["status"] == "locked" and summary["jobs"] == [] and summary["events_flushed"] == 0
    assert client.get(Keys().nightly_lock(DATE)) == b"other-run"  # not released by the loser
    assert ModelStore(client).current() == {}
    assert not os.path.exists(output)


def test_failed_job_keeps_previous_models_and_releases_the_lock(night):
    client, settings, output = night
    append_events(client, reader_events("reader"))
    assert run_night(client, settings, DATE, output)["status"] == "ok"
    with open(os.path.join(output, "models", "interest", "date=2026-12-01"), "w") as f:  # a file, not a directory
        f.write("x")
    summary = run_night(client, settings, "2026-12-01", output)
    assert summary["status"] == "failed" and summary["error"]
    assert [j["job"] for j in summary["jobs"]] == ["snapshot_stories", "decay_rates"]  # interest_vectors failed
    assert ModelStore(client).current() == {name: DATE for name in MODELS}
    assert list(client.scan_iter(match="nf:nightly:*")) == []


def test_rerun_of_a_date_replaces_and_rollback_restores(night):
    client, settings, output = night
    append_events(client, reader_events("reader"))
    first = run_night(client, settings, DATE, output)
    table1 = pq.read_table(os.path.join(output, "models/interest", f"date={DATE}", "part-00000.parquet"))
    again = run_night(client, settings, DATE, output)
    assert first["status"] == again["status"] == "ok"
    table2 = pq.read_table(os.path.join(output, "models/interest", f"date={DATE}", "part-00000.parquet"))
    assert table1.equals(table2)
    models = ModelStore(client)
    assert models.previous() == {}  # a rerun of the same date is not its own rollback target
    nxt = run_night(client, settings, "2026-12-01", output)
    assert nxt["status"] == "ok"
    assert models.current()["interest"] == "2026-12-01" and models.previous()["interest"] == DATE
    assert models.rollback(["interest", "history"])["interest"] == DATE
    assert models.previous().get("interest") is None


def test_the_night_recomputes_outlet_authority_and_applies_retention(night):

    from newsflow.core.outlets import outlet
    from newsflow.core.sources import SourceTable

    client, settings, output = night
    keys = Keys()
    latest = {
        sid.decode(): t for key in keys.story_active_keys for sid, t in client.zrange(key, 0, -1, withscores=True)
    }
    end_of_date = (dt.datetime.fromisoformat(DATE).replace(tzinfo=dt.UTC) + dt.timedelta(days=1)).timestamp()
    days = (end_of_date - (NOW - H) - 1.0) / 86400.0  # a cutoff one second after the stories' latest time
    summary = run_night(client, settings, DATE, output, retention_days=days)
    assert summary["status"] == "ok", summary["error"]
    seeded = [s for s in SourceTable.load().sources() if outlet(s.domain) == s.domain]
    assert summary["authority"]["outlets_written"] == len(seeded) > 100
    cutoff = end_of_date - days * 86400.0
    assert summary["retention"]["cutoff"] == pytest.approx(cutoff)
    assert summary["retention"]["stories"] == sum(1 for t in latest.values() if t < cutoff) == len(latest)
    assert live_story_count(client, keys) == 0 and float(client.get(keys.retention_cutoff)) == pytest.approx(cutoff)
    assert list(client.scan_iter(match="nf:nightly:*")) == []
