"""Prometheus metrics of ``newsflow crawl`` (default registry, defined once here), served on
``--metrics-port`` by :func:`serve_metrics` (prometheus-client's HTTP server, ``GET /metrics``).

* ``newsflow_crawl_fetches_total`` (counter) by ``kind`` (``robots``, ``feed``, ``page``) and ``outcome``:
  :func:`fetch_outcome`;
* ``newsflow_crawl_dead_letters_total`` (counter) by ``step`` and ``reason`` (the frontier's dead-letter
  records, :meth:`newsflow.crawler.frontier.Frontier.dead_letter`);
* ``newsflow_crawl_frontier_pending`` (gauge): queued plus leased tasks of the frontier, read from Redis at
  scrape time (NaN while Redis does not answer).

Every label takes values from a fixed set (fetch error kinds, dead-letter reasons), never a URL or host.
"""

from __future__ import annotations

import math

from prometheus_client import Counter, Gauge, start_http_server

FETCHES = Counter("newsflow_crawl_fetches", "HTTP fetches of the crawler by kind and outcome.", ["kind", "outcome"])
DEAD_LETTERS = Counter(
    "newsflow_crawl_dead_letters", "Crawler dead-letter records by step and reason.", ["step", "reason"]
)
FRONTIER_PENDING = Gauge("newsflow_crawl_frontier_pending", "Queued plus leased crawl tasks (read at scrape time).")


def fetch_outcome(res) -> str:
    """The ``outcome`` label of a :class:`newsflow.crawler.fetch.FetchResult`: its ``error_kind`` when set
    (``timeout``, ``too_large``, ``unsafe_address``, …), else ``not_modified`` for 304, else the status class
    (``2xx``, ``3xx``, ``4xx``, ``5xx``)."""
    if res.error_kind:
        return res.error_kind
    if res.status == 304:
        return "not_modified"
    return f"{res.status // 100}xx"


def serve_metrics(port: int, frontier, addr: str = "0.0.0.0"):
    """Starts the metrics HTTP server (a daemon thread) on ``addr:port`` and makes the pending gauge read
    ``frontier``.

    Returns:
      ``(server, thread)`` from :func:`prometheus_client.start_http_server` (``server.shutdown()`` stops it).

    Raises:
      OSError: the port cannot be bound.
    """
    import redis

    def pending() -> float:
        try:
            return float(frontier.pending())
        except (redis.RedisError, OSError):
            return math.nan

    FRONTIER_PENDING.set_function(pending)
    return start_http_server(port, addr)
