"""Prometheus metrics of ``newsflow serve``, scraped at ``GET /metrics`` (text format, prometheus-client).

Metrics (default registry, defined once here):

* ``newsflow_http_request_duration_seconds`` (histogram, seconds) by ``method`` (standard ones, else
  ``other``), ``route`` (the matched route
  template such as ``/v1/topics/{topic}``, ``/static/{path}`` for a mount's files, ``unmatched`` for a path no
  route matches; never the raw path) and ``status`` (class: ``2xx`` … ``5xx``);
* ``newsflow_serve_redis_errors_total`` (counter): Redis errors on the request path that opened the circuit
  breaker (:class:`newsflow.serving.resilience.RedisBreaker`); the fast failures while it stays open are not
  Redis calls and are not counted.

Process metrics (``process_*``, ``python_*``) come from prometheus-client's default collectors.
"""

from __future__ import annotations

import time

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Histogram, generate_latest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

REQUEST_SECONDS = Histogram(
    "newsflow_http_request_duration_seconds",
    "Time from request start to the response's last byte, by route template and status class.",
    ["method", "route", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)
REDIS_ERRORS = Counter(
    "newsflow_serve_redis_errors_total",
    "Redis errors on the serving request path that opened the circuit breaker.",
)

UNMATCHED = "unmatched"
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"})  # any other: "other"


def metrics_route() -> Route:
    """``GET /metrics``: the default registry in Prometheus text format."""
    return Route("/metrics", _metrics, methods=["GET"])


def _metrics(request: Request) -> Response:
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST, headers={"Cache-Control": "no-store"})


def route_template(scope: dict, root_path: str) -> str:
    """The template of the route that handled ``scope`` (after routing), e.g. ``/v1/admin/sources/{ref}``.

    Args:
      scope: the ASGI scope the router updated (``route``, ``root_path`` of the innermost mount).
      root_path: the scope's ``root_path`` before routing.
    """
    route = scope.get("route")
    if route is None:
        return UNMATCHED
    prefix = scope.get("root_path", "")[len(root_path) :]
    if isinstance(route, Mount):  # a mount with no inner route table (static files) or none of its routes matched
        return prefix + "/{path}"
    return prefix + getattr(route, "path", "")


class MetricsMiddleware:
    """ASGI middleware observing :data:`REQUEST_SECONDS` for every HTTP request.

    Args:
      app: the ASGI app to wrap (the Starlette app's inner stack).
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        root_path = scope.get("root_path", "")
        status = [500]  # an exception before the response started is answered 500 by the outer middleware

        async def send_status(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            method = scope["method"] if scope["method"] in METHODS else "other"
            REQUEST_SECONDS.labels(method, route_template(scope, root_path), f"{status[0] // 100}xx").observe(
                time.perf_counter() - start
            )
