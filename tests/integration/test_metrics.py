"""``/metrics`` in Prometheus text format on ``newsflow serve``, ``newsflow crawl`` and
``newsflow run-continuous``: real HTTP on 127.0.0.1, scraped and parsed with ``prometheus_client.parser``;
every asserted value follows from the requests, fetches or runs the test made (deltas between two scrapes,
since the metrics live in the process's default registry)."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from newsflow.cli.build_feeds import build_feeds
from newsflow.serving.app import ServingConfig, create_app, serving_client
from tests.integration.asgi_server import serve_in_thread
from tests.integration.ranking_data import NOW, populate


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
