"""``/metrics`` in Prometheus text format on ``newsflow serve``, ``newsflow crawl`` and
``newsflow run-continuous``: real HTTP on 127.0.0.1, scraped and parsed with ``prometheus_client.parser``;
every asserted value follows from the requests, fetches or runs the test made (deltas between two scrapes,
since the metrics live in the process's default registry)."""

from __future__ import annotations

import argparse
import json
import os
import socket
import time

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from newsflow.cli import crawl
from newsflow.cli.build_feeds import build_feeds
from newsflow.crawler.replay import ReplayWeb, load_corpus, serve
from newsflow.serving.app import ServingConfig, create_app, serving_client
from tests.integration.asgi_server import serve_in_thread
from tests.integration.ranking_data import NOW, populate
from tests.integration.test_run_continuous import Loop, _pages

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "corpus")
needs_corpus = pytest.mark.skipif(
    not os.path.exists(os.path.join(CORPUS, "pages.jsonl.gz")), reason="bundled corpus absent"
)


def scrape(get) -> dict[tuple[str, frozenset], float]:
    """``{(sample name, labels): value}`` of one scrape; ``get`` returns the response text."""
    out = {}
    for family in text_string_to_metric_families(get()):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def delta(after: dict, before: dict, name: str, **labels) -> float:
    key = (name, frozenset(labels.items()))
    return after.get(key, 0.0) - before.get(key, 0.0)


def test_serve_metrics_count_requests_by_route_template_and_status_class(redis_server, tmp_path):
    client, _url = redis_server
    populate(client)
    build_feeds(client, NOW)
    cfg = ServingConfig(
        token_secret=b"m" * 32, snapshot_dir=str(tmp_path / "snap"), local_cache_seconds=0, clock=lambda: NOW
    )
    app = create_app(client, cfg)
    with serve_in_thread(app) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20) as http:
        before = scrape(lambda: http.get("/metrics").text)
        for _ in range(3):
            assert http.get("/v1/top").status_code == 200
        for topic in ("politics", "sport"):  # two raw paths, one template
            http.get(f"/v1/topics/{topic}")
        assert http.get("/v1/top", params={"limit": "zero"}).status_code == 400
        assert http.get("/no/such/page").status_code == 404
        resp = http.get("/metrics")
        assert resp.headers["content-type"].startswith("text/plain")
        after = scrape(lambda: resp.text)
    hist = "newsflow_http_request_duration_seconds"
    top = {"method": "GET", "route": "/v1/top"}
    assert delta(after, before, hist + "_count", **top, status="2xx") == 3
    assert delta(after, before, hist + "_count", **top, status="4xx") == 1
    assert delta(after, before, hist + "_bucket", **top, status="2xx", le="+Inf") == 3
    assert delta(after, before, hist + "_sum", **top, status="2xx") > 0
    topics = [k for k in after if k[0] == hist + "_count" and ("route", "/v1/topics/{topic}") in k[1]]
    assert sum(delta(after, before, hist + "_count", **dict(k[1])) for k in topics) == 2
    assert delta(after, before, hist + "_count", method="GET", route="unmatched", status="4xx") == 1
    routes = {dict(k[1]).get("route") for k in after if k[0] == hist + "_count"}
    assert not {r for r in routes if "politics" in r or "sport" in r or "no/such" in r}  # templates only


def test_serve_metrics_count_the_redis_error_that_opened_the_breaker(tmp_path):
    cfg = ServingConfig(
        token_secret=b"m" * 32, snapshot_dir=str(tmp_path / "snap"), local_cache_seconds=0, redis_backoff_seconds=3600
    )
    app = create_app(serving_client(f"unix://{tmp_path}/absent.sock"), cfg)
    with serve_in_thread(app) as port, httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=20) as http:
        before = scrape(lambda: http.get("/metrics").text)
        for _ in range(2):  # the first reaches Redis and fails; the second fails fast on the open breaker
            resp = http.get("/v1/top")
            assert resp.status_code == 200 and resp.headers["x-newsflow-stale"] == "1"
        after = scrape(lambda: http.get("/metrics").text)
    assert delta(after, before, "newsflow_serve_redis_errors_total") == 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@needs_corpus
def test_crawl_metrics_count_fetches_by_outcome_dead_letters_and_pending(tmp_path, monkeypatch, capsys):
    docs = load_corpus(CORPUS)
    pages = [d for d in docs if d.body][:6]
    web = ReplayWeb(pages, speed=1.0, start_fraction=1.0, inject_failures=False)
    feeds = web.feed_urls()
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(feeds + ["http://metadata.google.internal/computeMetadata/v1/"]) + "\n")
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("NEWSFLOW_DATA_DIR", str(tmp_path / "data"))
    port = free_port()
    parser = argparse.ArgumentParser()
    crawl.add_arguments(parser)
    url = f"http://127.0.0.1:{port}/metrics"
    # the counters are process-wide (other crawls of this test process counted too): the registry's values
    # before this crawl are the baseline
    before = scrape(lambda: generate_latest().decode())
    server = serve(web)
    try:
        args = parser.parse_args(
            ["--seeds", str(seeds), "--resolve", f"*=127.0.0.1:{server.port}", "--allow-host", "127.0.0.1"]
            + ["--min-host-delay", "0", "--idle-exit", "1.0", "--duration", "30", "--metrics-port", str(port)]
        )
        assert crawl.run(args) == 0
    finally:
        server.stop()
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    after = scrape(lambda: httpx.get(url, timeout=10).text)  # the listener lives as long as the process
    fetches = "newsflow_crawl_fetches_total"
    assert summary["pages_landed"] == 6
    assert delta(after, before, fetches, kind="page", outcome="2xx") == 6
    assert delta(after, before, fetches, kind="feed", outcome="2xx") == len(feeds)
    sites = {"/".join(u.split("/")[:3]).lower() for u in feeds + [d.url for d in pages]}  # one robots.txt each
    assert delta(after, before, fetches, kind="robots", outcome="2xx") == len(sites)
    # the metadata address: its robots.txt fetch is refused by the safety guard, the feed is dead-lettered
    assert delta(after, before, fetches, kind="robots", outcome="unsafe_address") == 1
    assert delta(after, before, "newsflow_crawl_dead_letters_total", step="feed", reason="unsafe_address") == 1
    # every page is done; every feed (the refused one too) stays queued for its next poll
    assert after[("newsflow_crawl_frontier_pending", frozenset())] == len(feeds) + 1


def test_run_continuous_metrics_count_runs_articles_dead_letters_and_lag(redis_server, tmp_path):
    _client, redis_url = redis_server
    landing = tmp_path / "landing"
    landing.mkdir()
    port = free_port()
    loop = Loop(tmp_path, redis_url, ["--metrics-port", str(port)])
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        dropped_at = time.time()
        pages = _pages(0, 3)  # fetched now, published 60 s ago: event time = now - 60
        newest = max(json.loads(line)["published_time"] for line in pages)
        (landing / ".raw.tmp").write_bytes(b"".join(pages) + b"{not json\n")  # committed as LandingWriter does
        os.replace(landing / ".raw.tmp", landing / "raw-0001-a-000001.jsonl")
        [run] = loop.wait_runs(1)
        got = scrape(lambda: httpx.get(url, timeout=10).text)  # a fresh process: every value is this run's
        scraped_at = time.time()
    finally:
        loop.stop()
    assert run["job"]["parsed"] == 3
    assert got[("newsflow_continuous_runs_total", frozenset({("outcome", "ok")}))] == 1
    assert got[("newsflow_continuous_articles_total", frozenset())] == 3
    assert got[("newsflow_continuous_dead_letters_total", frozenset({("step", "parse")}))] == 1
    assert got[("newsflow_continuous_trend_inputs_late_total", frozenset())] == 0  # bounded runs have no late data
    lag = got[("newsflow_continuous_lag_seconds", frozenset())]
    assert dropped_at - newest - 1 <= lag <= scraped_at - newest
    last = got[("newsflow_continuous_last_success_timestamp_seconds", frozenset())]
    assert dropped_at <= last <= scraped_at
