"""One key layout end to end: the streaming job, the feed builder and the API all honour --key_prefix.

Runs the streaming job on a slice of the bundled corpus into a real embedded Redis with
``--key_prefix alt``, builds feeds and serves them with prefix ``alt``; then checks that every key
in Redis is under ``alt:``, that ``/v1/top`` serves the stories stored under ``alt:``, and that an
API on the default prefix over the same Redis serves nothing.
"""

from __future__ import annotations

import json

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from starlette.testclient import TestClient

from newsflow.pipelines.launcher import make_runner
from newsflow.pipelines.streaming import build_pipeline, job_config_from_options
from newsflow.serving.app import ServingConfig, create_app
from newsflow.storage.feeds import build_feeds, latest_story_time
from newsflow.storage.keys import Keys
from newsflow.storage.ranking import RankingStore
from newsflow.storage.story_index import live_story_count
from tests.helpers import corpus_subset

SECRET = b"k" * 32


def _run_job(tmp_path, redis_url: str, landing: str, prefix: str):
    opts = PipelineOptions(
        [
            "--input",
            landing,
            "--output",
            str(tmp_path / "out"),
            "--runner",
            "DirectRunner",
            "--redis_url",
            redis_url,
            "--key_prefix",
            prefix,
        ]
    )
    config = job_config_from_options(opts)
    assert config.cluster.store.prefix == config.stories.key_prefix == config.trending.key_prefix == prefix
    p = beam.Pipeline(runner=make_runner(opts), options=opts)
    build_pipeline(p, config)
    p.run().wait_until_finish()


def _api(client, tmp_path, keys: Keys, now: float) -> TestClient:
    cfg = ServingConfig(
        token_secret=SECRET,
        snapshot_dir=str(tmp_path / f"snap-{keys.prefix}"),
        local_cache_seconds=0,
        clock=lambda: now,
        keys=keys,
    )
    return TestClient(create_app(client, cfg))


def test_a_prefixed_deployment_writes_builds_and_serves_only_under_its_prefix(tmp_path, redis_server):
    client, url = redis_server
    alt = Keys("alt")
    _run_job(tmp_path, url, corpus_subset(tmp_path, n_pages=6, n_headlines=150), "alt")

    store = RankingStore(client, alt)
    story_ids = set(store.iter_story_ids())
    assert story_ids, "the job stored no stories under alt:"
    now = latest_story_time(store)
    stats = build_feeds(client, now, keys=alt)
    assert stats.public_feeds > 0

    keys = [k.decode() for k in client.scan_iter(match="*", count=1000)]
    assert keys and all(k.startswith("alt:") for k in keys), sorted(k for k in keys if not k.startswith("alt:"))
    assert client.exists(alt.feed("edition", "global")) and live_story_count(client, alt)

    top = _api(client, tmp_path, alt, now).get("/v1/top")
    assert top.status_code == 200
    served = [s["story_id"] for s in top.json()["stories"]]
    assert served and set(served) <= story_ids
    stored_feed = json.loads(client.get(alt.feed("edition", "global")))
    assert served == [s["story_id"] for s in stored_feed["stories"]][: len(served)]

    # the default layout finds nothing in the same Redis: no stories, no feeds, nothing served
    default = RankingStore(client, Keys())
    assert list(default.iter_story_ids()) == [] and default.read_feed_raw(Keys().feed("edition", "global")) is None
    resp = _api(client, tmp_path, Keys(), now).get("/v1/top")
    assert resp.status_code == 200 and resp.json()["stories"] == [] and resp.json()["stale"] is True
