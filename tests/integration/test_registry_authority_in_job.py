"""The streaming job uses the sources registry's authority: an outlet re-rated (or added) with
``newsflow sources`` is scored with that authority, over the shipped CSV table."""

from __future__ import annotations

from newsflow.core.sources import SourceTable
from newsflow.pipelines.streaming import run
from newsflow.storage.keys import Keys
from newsflow.storage.source_registry import SourceRegistry
from tests.helpers import nd_articles, write_headlines

KEYS = Keys()


def _authorities(client, domain_suffix: str) -> set[float]:
    out = set()
    for aid in nd_articles(client, KEYS):
        dom, auth = client.hmget(KEYS.article(aid), "source_domain", "source_authority")
        if dom.decode().endswith(domain_suffix):
            out.add(float(auth))
    return out


def test_the_job_scores_outlets_with_the_registry_authority(tmp_path, redis_server):
    client, url = redis_server
    landing = write_headlines(tmp_path / "in.jsonl", 40)
    argv = ["--runner", "DirectRunner", "--input", landing, "--output", str(tmp_path / "a"), "--redis_url", url]
    assert run(argv, environ={}).state == "DONE"
    shipped = SourceTable.load().authority("in.reuters.com")
    assert _authorities(client, "reuters.com") == {shipped}  # no registry records yet: the CSV table

    client.flushall()
    registry = SourceRegistry(client, KEYS, seed=SourceTable.load())
    registry.seed_outlets(SourceTable.load())
    registry.set_outlet("reuters.com", authority=0.123)
    argv[-3] = str(tmp_path / "b")
    assert run(argv, environ={}).state == "DONE"
    assert shipped != 0.123 and _authorities(client, "reuters.com") == {0.123}
