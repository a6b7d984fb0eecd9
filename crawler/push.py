"""Push ingestion: an authenticated HTTP endpoint where wire services deliver articles.

A pushed article skips the poll interval: it is validated, deduplicated
against the crawler's seen-URL set and landed as a :class:`schemas.RawDocument`
through the same :class:`newsflow.crawler.landing.Publisher` the crawler uses, and the
landing file is committed before the response is sent.

Protocol (``POST /v1/push``, ``Content-Type: application/json``)::

    {"url": "https://wire.example/2024/05/01/quake",      # required, absolute http(s)
     "title": "Quake hits ...",                           # required
     "summary": "...", "body": "<html>...</html>",        # at least one of the two
     "published_time": "2024-05-01T10:00:00Z",            # optional: RFC 3339 or UTC epoch seconds
     "source_name": "Wire Example"}                       # optional

The body is one such object or a JSON array of them (at most
``max_documents``). Every client has a name and a shared secret and
authenticates with ``Authorization: Bearer <secret>`` or an HMAC signature
(``X-Newsflow-Client``, ``X-Newsflow-Timestamp``, ``X-Newsflow-Signature``);
see :mod:`newsflow.crawler.push_auth`. Each document is checked as
:mod:`newsflow.crawler.push_validate` describes (known fields only, valid Unicode, no
control characters, a public http(s) URL checked without DNS, a plausible
``published_time``). Client mistakes are always 4xx with a reason, never 5xx.

Responses (JSON): ``200 {"accepted", "duplicates", "files"}``; ``400`` malformed
JSON (including nesting too deep to parse) or wrong top-level shape; ``401`` no credentials; ``403`` wrong
credentials or a stale signature; ``413`` body over ``max_body_bytes`` or too
many documents; ``415`` not JSON; ``422`` invalid documents (nothing of the
request is landed; ``rejected`` lists each bad document's index and reasons);
``503`` the landing write failed (nothing is marked seen, the client retries).

The same app serves WebSub subscriber callbacks at ``/websub/<id>`` (hub
verification of intent and signed feed deliveries, landed as feed-only
documents); see :mod:`newsflow.crawler.websub`.

This module holds the endpoint's settings (:class:`PushConfig`), its logic
without HTTP (:class:`PushIngestor`) and the Starlette app (:func:`create_app`).
Run it with ``newsflow push-server`` (see :mod:`newsflow.cli.push_server`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from newsflow.core.urls import article_id
from newsflow.crawler.feeds import FeedParseError, parse_feed
from newsflow.crawler.push_auth import CREDENTIALS_ENV, MIN_SECRET_CHARS, PushError, authenticate
from newsflow.crawler.push_validate import validate_document
from newsflow.crawler.websub import feed_documents, hub_signature_ok, verify_intent
from newsflow.schemas import RawDocument

PUSH_PATH = "/v1/push"


@dataclass(frozen=True)
class PushConfig:
    """Settings of the push endpoint. Sizes are bytes or characters, times seconds.

    Attributes:
      credentials: ``{client name: shared secret}``; at least one is required.
      max_body_bytes: larger request bodies are refused with 413.
      max_documents: more documents in one request are refused with 413.
      max_title_chars / max_summary_chars / max_url_chars: per-field limits (422).
      signature_tolerance_s: allowed distance between ``X-Newsflow-Timestamp`` and the server clock.
      future_tolerance_s: a ``published_time`` further than this in the future is refused.
      seen_ttl_s: how long a landed URL stays in the seen set (same set as the crawler's).
      allow_hosts: hosts/IPs/CIDRs exempt from the URL safety check (e.g. ``("127.0.0.1",)`` in tests).
      websub: ``{subscription id: (topic URL, secret)}`` for WebSub callbacks at ``/websub/<id>``.
      clock: UTC epoch seconds source.
    """

    credentials: Mapping[str, str]
    max_body_bytes: int = 1024 * 1024
    max_documents: int = 100
    max_title_chars: int = 1000
    max_summary_chars: int = 20_000
    max_url_chars: int = 2048
    signature_tolerance_s: float = 300.0
    future_tolerance_s: float = 86400.0
    seen_ttl_s: float = 7 * 86400.0
    allow_hosts: tuple[str, ...] = ()
    websub: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    clock: Callable[[], float] = field(default=time.time, compare=False)

    def __post_init__(self):
        if not self.credentials:
            raise ValueError(f"push endpoint needs at least one client credential (set {CREDENTIALS_ENV})")
        short = [c for c, s in self.credentials.items() if len(s) < MIN_SECRET_CHARS]
        if short:
            raise ValueError(f"secret of client {short[0]!r} is shorter than {MIN_SECRET_CHARS} characters")
        if self.max_body_bytes <= 0 or self.max_documents <= 0:
            raise ValueError("max_body_bytes and max_documents must be positive")


class PushIngestor:
    """The endpoint's logic without HTTP: authenticate, validate, deduplicate, land.

    Args:
      config: credentials and limits.
      publisher: where documents go (e.g. :class:`newsflow.crawler.landing.LandingWriter`); flushed per request.
      frontier: :class:`newsflow.crawler.frontier.Frontier` whose seen-URL set is shared with the crawler.
    """

    def __init__(self, config: PushConfig, publisher, frontier):
        self.config = config
        self.publisher = publisher
        self.frontier = frontier

    def ingest(self, headers: Mapping[str, str], body: bytes) -> tuple[int, dict]:
        """Handles one push request.

        Args:
          headers: request headers, lower-case names.
          body: raw request body.

        Returns:
          ``(HTTP status, JSON-able response)``; see the module doc for the statuses.
        """
        now = self.config.clock()
        try:
            if len(body) > self.config.max_body_bytes:
                raise PushError(413, f"body is larger than {self.config.max_body_bytes} bytes")
            client = authenticate(headers, body, self.config, now)
            ctype = headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype != "application/json":
                raise PushError(415, f"Content-Type must be application/json, got {ctype or 'none'!r}")
            docs = self._parse(body, client, now)
        except PushError as e:
            if e.status in (401, 403):
                self.frontier.incr("push_auth_refused")
            return e.status, e.payload
        return self._land(docs)

    def _parse(self, body: bytes, client: str, now: float) -> list[RawDocument]:
        try:
            payload = json.loads(body.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise PushError(400, f"body is not UTF-8: {e.reason} at byte {e.start}") from None
        except json.JSONDecodeError as e:
            raise PushError(400, f"malformed JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
        except RecursionError:
            raise PushError(400, "malformed JSON: arrays or objects nested too deeply") from None
        except ValueError as e:  # e.g. an integer literal over the 4,300-digit conversion limit
            raise PushError(400, f"malformed JSON: {e}") from None
        if not isinstance(payload, (list, dict)):
            raise PushError(400, "body must be a JSON object or an array of objects")
        items = payload if isinstance(payload, list) else [payload]
        if not items:
            raise PushError(400, "empty document list")
        if len(items) > self.config.max_documents:
            raise PushError(413, f"more than {self.config.max_documents} documents in one request")
        docs, rejected = [], []
        for i, item in enumerate(items):
            try:
                docs.append(validate_document(item, client, now, self.config))
            except ValueError as e:
                rejected.append({"index": i, "reasons": [str(a) for a in e.args]})
        if rejected:
            self.frontier.incr("push_rejected", len(rejected))
            raise PushError(422, "invalid documents; nothing was landed", rejected=rejected)
        return docs

    def _land(self, docs: Sequence[RawDocument]) -> tuple[int, dict]:
        fresh, duplicates, marked = [], [], []
        for d in docs:
            aid = article_id(d.url)
            if aid in marked or not self.frontier.mark_seen(d.url, self.config.seen_ttl_s):
                duplicates.append(d.url)
                continue
            marked.append(aid)
            fresh.append(d)
        files: list[str] = []
        if fresh:
            try:
                self.publisher.publish(fresh)
                files = self.publisher.flush()
            except Exception as e:  # landing is down: forget the marks so the client's retry lands them
                for aid in marked:
                    self.frontier.r.delete(self.frontier.keys.crawl_seen(aid))
                self.frontier.incr("push_landing_failed")
                return 503, {"error": f"landing failed, retry later: {type(e).__name__}: {e}"}
        self.frontier.incr("push_landed", len(fresh))
        self.frontier.incr("push_duplicates", len(duplicates))
        return 200, {"accepted": len(fresh), "duplicates": duplicates, "files": len(files)}

    def websub_verify(self, sub_id: str, params: Mapping[str, str]) -> tuple[int, str]:
        """Answers a hub's verification of intent (WebSub section 5.3) or denial notice (5.2).

        Returns:
          ``(200, hub.challenge)`` to confirm, ``(200, "")`` to acknowledge a denial,
          ``(404, reason)`` for an unknown subscription, topic or mode.
        """
        sub = self.config.websub.get(sub_id)
        if sub is None:
            return 404, "unknown subscription"
        status, text = verify_intent(sub[0], params)
        if status == 200 and params.get("hub.mode", "") == "denied":
            self.frontier.incr("websub_denied")
        return status, text

    def websub_deliver(self, sub_id: str, headers: Mapping[str, str], body: bytes) -> tuple[int, dict]:
        """Lands the entries of a hub's content distribution (WebSub sections 7 and 8).

        Returns:
          ``(200, {"accepted", "duplicates", "files", "skipped"})`` when landed;
          ``(202, {"ignored": reason})`` for a missing or wrong ``X-Hub-Signature``;
          ``(404, ...)`` unknown subscription, ``(413, ...)`` too large,
          ``(422, ...)`` not a feed; ``(503, ...)`` landing failed.
        """
        sub = self.config.websub.get(sub_id)
        if sub is None:
            return 404, {"error": "unknown subscription"}
        topic, secret = sub
        if len(body) > self.config.max_body_bytes:
            return 413, {"error": f"body is larger than {self.config.max_body_bytes} bytes"}
        if not hub_signature_ok(secret, headers.get("x-hub-signature", ""), body):
            self.frontier.incr("websub_bad_signature")
            return 202, {"ignored": "missing or invalid X-Hub-Signature"}
        try:
            feed = parse_feed(body, topic, headers.get("content-type", ""))
        except FeedParseError as e:
            return 422, {"error": f"not a feed: {e}"}
        docs, skipped = feed_documents(feed, topic, self.config.clock(), self.config)
        status, payload = self._land(docs)
        if status == 200:
            payload["skipped"] = skipped
        return status, payload


def create_app(ingestor: PushIngestor):
    """Starlette ASGI app: ``POST /v1/push``, WebSub ``GET``/``POST /websub/<id>`` and ``GET /healthz``.

    The body is read in chunks and refused with 413 as soon as it passes
    ``max_body_bytes`` (or when ``Content-Length`` announces more); the
    blocking landing write runs in Starlette's thread pool.
    """
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import JSONResponse, PlainTextResponse
    from starlette.routing import Route

    limit = ingestor.config.max_body_bytes

    async def push(request):
        body, problem = await _read_capped(request)
        if problem == "bad_length":
            return JSONResponse({"error": "invalid Content-Length"}, status_code=400)
        if body is None:
            return JSONResponse({"error": f"body is larger than {limit} bytes"}, status_code=413)
        headers = {k.lower(): v for k, v in request.headers.items()}
        status, payload = await run_in_threadpool(ingestor.ingest, headers, body)
        extra = {"WWW-Authenticate": 'Bearer realm="newsflow-push"'} if status == 401 else None
        return JSONResponse(payload, status_code=status, headers=extra)

    async def healthz(request):
        return JSONResponse({"ok": True})

    async def websub_get(request):
        status, text = ingestor.websub_verify(request.path_params["sub_id"], dict(request.query_params))
        return PlainTextResponse(text, status_code=status)

    async def websub_post(request):
        body, _ = await _read_capped(request)
        if body is None:  # over the limit, or a Content-Length that is not a number
            return JSONResponse({"error": f"body is larger than {limit} bytes"}, status_code=413)
        headers = {k.lower(): v for k, v in request.headers.items()}
        status, payload = await run_in_threadpool(ingestor.websub_deliver, request.path_params["sub_id"], headers, body)
        return JSONResponse(payload, status_code=status)

    async def _read_capped(request) -> tuple[bytes | None, str]:
        """The request body, or ``(None, reason)`` with reason ``"too_large"`` (declared or streamed
        past ``limit``) or ``"bad_length"`` (a Content-Length that is not a number)."""
        try:
            if int(request.headers.get("content-length") or 0) > limit:
                return None, "too_large"
        except ValueError:
            return None, "bad_length"
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                return None, "too_large"
            chunks.append(chunk)
        return b"".join(chunks), ""

    return Starlette(
        routes=[
            Route(PUSH_PATH, push, methods=["POST"]),
            Route("/websub/{sub_id}", websub_get, methods=["GET"]),
            Route("/websub/{sub_id}", websub_post, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ]
    )
