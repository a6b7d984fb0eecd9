"""Push ingestion: an authenticated HTTP endpoint where wire services deliver articles.

A pushed article skips the poll interval: it is validated, deduplicated
against the crawler's seen-URL set and landed as a :class:`schemas.RawDocument`
through the same :class:`crawler.landing.Publisher` the crawler uses, and the
landing file is committed before the response is sent.

Protocol (``POST /v1/push``, ``Content-Type: application/json``)::

    {"url": "https://wire.example/2024/05/01/quake",      # required, absolute http(s)
     "title": "Quake hits ...",                           # required
     "summary": "...", "body": "<html>...</html>",        # at least one of the two
     "published_time": "2024-05-01T10:00:00Z",            # optional: RFC 3339 or UTC epoch seconds
     "source_name": "Wire Example"}                       # optional

The body is one such object or a JSON array of them (at most
``max_documents``). Every client has a name and a shared secret (config,
never in code: ``NEWSFLOW_PUSH_CREDENTIALS="wire:SECRET,other:SECRET2"``)
and authenticates in one of two ways:

* ``Authorization: Bearer <secret>`` (only over TLS), or
* an HMAC signature that keeps the secret off the wire:
  ``X-Newsflow-Client: <name>``, ``X-Newsflow-Timestamp: <UTC epoch seconds>``
  and ``X-Newsflow-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>``;
  the timestamp must be within ``signature_tolerance_s`` of the server clock,
  which bounds replays.

Secrets and signatures are compared with :func:`hmac.compare_digest` (constant time).

Every string field must be valid Unicode (a lone surrogate such as JSON
``"\\ud800"`` is refused), ``url``, ``title`` and ``source_name`` may hold no
control characters (CR, LF, TAB, NUL ...), ``summary`` and ``body`` no NUL; a URL
may not contain whitespace or exceed ``max_url_chars`` (2,048) characters.
Client mistakes are always 4xx with a reason, never 5xx.

Responses (JSON): ``200 {"accepted", "duplicates", "files"}``; ``400`` malformed
JSON (including nesting too deep to parse) or wrong top-level shape; ``401`` no credentials; ``403`` wrong
credentials or a stale signature; ``413`` body over ``max_body_bytes`` or too
many documents; ``415`` not JSON; ``422`` invalid documents (nothing of the
request is landed; ``rejected`` lists each bad document's index and reasons);
``503`` the landing write failed (nothing is marked seen, the client retries).

WebSub (W3C Recommendation, 2018) subscriber callbacks live at
``/websub/<id>`` for each configured subscription ``{id: (topic URL, secret)}``:
``GET`` answers the hub's verification of intent (echoes ``hub.challenge``
for a known ``hub.mode=subscribe|unsubscribe`` and ``hub.topic``, else 404;
``hub.mode=denied`` is acknowledged); ``POST`` is a content distribution: the
body (RSS/Atom) must carry ``X-Hub-Signature: sha256=<hex HMAC(secret, body)>``
(sha1/sha384/sha512 also accepted, as the spec allows); its entries land as
feed-only RawDocuments (``feed_url`` = the topic) after the same URL checks and
seen-set dedupe. A delivery with a missing or wrong signature is acknowledged
with 202 but ignored, as the spec recommends. Sending the subscription request
to the hub is not part of this module.

A pushed URL is checked without DNS (nothing is fetched from it here; the
crawler re-checks after resolution before it ever fetches): http(s) only, no
user info, and no host that :func:`newsflow.netsafety.literal_host_problem` refuses
(a private, loopback, link-local or reserved IP literal in any form the C resolver
accepts, e.g. decimal ``2852039166`` or octal ``0251.0376.0251.0376``; ``localhost``,
``*.local``/``*.internal`` names, metadata names, single-label hosts) unless allow-listed.

Run it with ``newsflow push-server`` (see :mod:`crawler.commands.push_server`).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import json
import math
import time
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence
from urllib.parse import urlsplit

from crawler.feeds import FeedParseError, parse_feed
from crawler.safety import AddressPolicy
from newsflow.netsafety import literal_host_problem, parse_ip_literal
from newsflow.urls import article_id, canonicalize_url, source_domain
from schemas import RawDocument

PUSH_PATH = "/v1/push"
CREDENTIALS_ENV = "NEWSFLOW_PUSH_CREDENTIALS"
MIN_SECRET_CHARS = 16
_FIELDS = frozenset({"url", "title", "summary", "body", "published_time", "source_name"})
_HUB_HASHES = {"sha1": hashlib.sha1, "sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}


class PushError(Exception):
    """A request that is refused; ``status`` is the HTTP status, ``payload`` the JSON body."""

    def __init__(self, status: int, error: str, **extra: Any):
        super().__init__(error)
        self.status = status
        self.payload = {"error": error, **extra}


def parse_credentials(text: str) -> dict[str, str]:
    """Parses ``"client:secret,client2:secret2"`` into ``{client: secret}``.

    Raises:
      ValueError: an entry has no ``:``, an empty or repeated client name, or a
        secret shorter than :data:`MIN_SECRET_CHARS` characters.
    """
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, secret = item.partition(":")
        name, secret = name.strip(), secret.strip()
        if not sep or not name:
            raise ValueError(f"credential entry must be CLIENT:SECRET, got {name or item[:20]!r}...")
        if name in out:
            raise ValueError(f"client {name!r} is listed twice")
        if len(secret) < MIN_SECRET_CHARS:
            raise ValueError(f"secret of client {name!r} is shorter than {MIN_SECRET_CHARS} characters")
        out[name] = secret
    return out


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """``X-Newsflow-Signature`` value for ``body``: ``"sha256=" + hex HMAC-SHA256(secret, timestamp + "." + body)``."""
    mac = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


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


def authenticate(headers: Mapping[str, str], body: bytes, config: PushConfig, now: float) -> str:
    """Returns the name of the client that sent the request.

    Args:
      headers: request headers with lower-case names.
      body: the raw request body (signed bytes).
      config: holds the credentials.
      now: UTC epoch seconds.

    Raises:
      PushError: 401 when no credentials are present, 403 when they are wrong
        or the signature timestamp is outside ``signature_tolerance_s``.
    """
    auth = headers.get("authorization", "")
    if auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise PushError(403, "Authorization must be 'Bearer <secret>'")
        given = token.strip().encode("utf-8")
        client = None
        for name, secret in config.credentials.items():  # no early exit: time does not depend on the match
            if hmac.compare_digest(given, secret.encode("utf-8")) and client is None:
                client = name
        if client is None:
            raise PushError(403, "invalid bearer token")
        return client
    signature = headers.get("x-newsflow-signature", "")
    if not signature:
        raise PushError(401, "missing credentials: send 'Authorization: Bearer <secret>' or an X-Newsflow-Signature")
    client = headers.get("x-newsflow-client", "")
    stamp = headers.get("x-newsflow-timestamp", "")
    secret = config.credentials.get(client)
    try:
        sent_at = float(stamp)
    except ValueError:
        raise PushError(403, "X-Newsflow-Timestamp must be UTC epoch seconds") from None
    if not math.isfinite(sent_at) or abs(now - sent_at) > config.signature_tolerance_s:
        raise PushError(403, f"signature timestamp is more than {config.signature_tolerance_s:g} s from server time")
    expected = sign(secret or "\0" * MIN_SECRET_CHARS, stamp, body)
    if not hmac.compare_digest(signature.encode("utf-8"), expected.encode("utf-8")) or secret is None:
        raise PushError(403, "invalid signature")
    return client


def _printable(value: str, limit: int) -> str:
    """``repr`` of at most ``limit`` characters of ``value``, safe to encode as UTF-8 (surrogates escaped)."""
    return repr(value[:limit]).encode("utf-8", "backslashreplace").decode("utf-8")


def text_problem(name: str, value: str, controls: bool = False) -> Optional[str]:
    """Why a pushed string field cannot be stored, or ``None`` if it can.

    Args:
      name: field name, used in the reason.
      value: the decoded JSON string.
      controls: also refuse every control character (Unicode category ``Cc``: C0, DEL, C1);
        otherwise only NUL is refused.

    Returns:
      A reason naming the field and the character offset: a lone surrogate (JSON
      ``"\\ud800"`` decodes to one; it cannot be encoded as UTF-8), NUL, or a control character.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"{name} contains a lone surrogate U+{ord(value[e.start]):04X} at character {e.start} (not valid Unicode)"
    if controls:
        for i, c in enumerate(value):
            if unicodedata.category(c) == "Cc":
                return f"{name} contains control character U+{ord(c):04X} at character {i}"
        return None
    i = value.find("\0")
    return f"{name} contains control character U+0000 at character {i}" if i >= 0 else None


def check_push_url(url: Any, config: PushConfig) -> str:
    """Validates a pushed article URL without DNS; returns it stripped of surrounding spaces.

    Raises:
      ValueError: with the reason: not a string, a lone surrogate, a control character
        (CR, LF, TAB, NUL ...), whitespace inside, longer than ``max_url_chars``, not
        absolute http(s), user info present, or a host that
        :func:`newsflow.netsafety.literal_host_problem` refuses (forbidden IP literal in any
        form, e.g. octal ``0251.0376.0251.0376``; local, metadata or single-label names)
        unless allow-listed.
    """
    if not isinstance(url, str) or not url.strip():
        raise ValueError("url must be a non-empty string")
    problem = text_problem("url", url, controls=True)
    if problem:
        raise ValueError(problem)
    url = url.strip(" ")
    if len(url) > config.max_url_chars:
        raise ValueError(f"url is longer than {config.max_url_chars} characters")
    if any(c.isspace() for c in url):
        raise ValueError("url contains whitespace (spaces must be percent-encoded as %20)")
    canonicalize_url(url)  # raises ValueError for non-http(s), no host, bad port
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise ValueError("url must not contain user info")
    host = (parts.hostname or "").rstrip(".").lower()
    if host in {h.strip().lower().rstrip(".") for h in config.allow_hosts}:
        return url
    problem = literal_host_problem(host)
    if problem:
        policy = AddressPolicy(config.allow_hosts)
        ip = parse_ip_literal(host)
        if ip is not None and policy.ip_allowed(str(ip)):
            return url
        raise ValueError(f"url host {host!r} is not a public host: {problem}")
    return url


def _published(value: Any, now: float, config: PushConfig) -> Optional[float]:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError("published_time must be RFC 3339 text or epoch seconds")
    if isinstance(value, (int, float)):
        try:
            t = float(value)
        except OverflowError:  # a JSON integer too large for a float
            raise ValueError("published_time must be a positive finite time") from None
    elif isinstance(value, str):
        try:
            d = _dt.datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"published_time is not RFC 3339: {_printable(value, 40)}") from None
        if d.tzinfo is None:
            raise ValueError("published_time needs a time zone offset (e.g. 'Z' or '+02:00')")
        t = d.timestamp()
    else:
        raise ValueError("published_time must be RFC 3339 text or epoch seconds")
    if not math.isfinite(t) or t <= 0:
        raise ValueError("published_time must be a positive finite time")
    if t > now + config.future_tolerance_s:
        raise ValueError(f"published_time is more than {config.future_tolerance_s:g} s in the future")
    return t


def validate_document(doc: Any, client: str, now: float, config: PushConfig) -> RawDocument:
    """Turns one pushed JSON object into a RawDocument.

    Args:
      doc: the decoded JSON value.
      client: authenticated client name (kept as ``feed_url = "push:<client>"``).
      now: UTC epoch seconds, becomes ``fetch_time``.
      config: limits.

    Returns:
      A RawDocument with ``http_status`` 0; ``body`` is the UTF-8 of the pushed
      ``body`` (``content_type`` ``text/html; charset=utf-8``) or ``None``.

    Raises:
      ValueError: whose ``args`` are all the reasons the document is refused.
    """
    if not isinstance(doc, dict):
        raise ValueError(f"a document must be a JSON object, got {type(doc).__name__}")
    reasons = []
    unknown = sorted(set(doc) - _FIELDS)
    if unknown:
        shown = ", ".join(k[:40].encode("utf-8", "backslashreplace").decode("utf-8") for k in unknown[:10])
        reasons.append(f"unknown field(s): {shown}" + (f" and {len(unknown) - 10} more" if len(unknown) > 10 else ""))
    url = None
    try:
        url = check_push_url(doc.get("url"), config)
    except ValueError as e:
        reasons.append(str(e))
    title = doc.get("title")
    if not isinstance(title, str) or not title.strip():
        reasons.append("title must be a non-empty string")
    elif len(title) > config.max_title_chars:
        reasons.append(f"title is longer than {config.max_title_chars} characters")
    elif problem := text_problem("title", title, controls=True):
        reasons.append(problem)
    summary, body = doc.get("summary"), doc.get("body")
    for name, value in (("summary", summary), ("body", body), ("source_name", doc.get("source_name"))):
        if value is not None and not isinstance(value, str):
            reasons.append(f"{name} must be a string")
        elif value is not None and (problem := text_problem(name, value, controls=name == "source_name")):
            reasons.append(problem)
    if isinstance(summary, str) and len(summary) > config.max_summary_chars:
        reasons.append(f"summary is longer than {config.max_summary_chars} characters")
    if not any(isinstance(v, str) and v.strip() for v in (summary, body)):
        reasons.append("summary or body is required")
    published = None
    try:
        published = _published(doc.get("published_time"), now, config)
    except ValueError as e:
        reasons.append(str(e))
    if reasons:
        raise ValueError(*reasons)
    has_body = isinstance(body, str) and body.strip()
    return RawDocument(
        url=url, source_domain=source_domain(url), fetch_time=now, http_status=0,
        content_type="text/html; charset=utf-8" if has_body else "",
        body=body.encode("utf-8") if has_body else None,
        title=title.strip(), summary=summary.strip() if isinstance(summary, str) and summary.strip() else None,
        published_time=published, source_name=(doc.get("source_name") or "").strip() or None,
        feed_url=f"push:{client}")


class PushIngestor:
    """The endpoint's logic without HTTP: authenticate, validate, deduplicate, land.

    Args:
      config: credentials and limits.
      publisher: where documents go (e.g. :class:`crawler.landing.LandingWriter`); flushed per request.
      frontier: :class:`crawler.frontier.Frontier` whose seen-URL set is shared with the crawler.
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
                    self.frontier.r.delete(self.frontier.p + "seen:" + aid)
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
        mode, topic = params.get("hub.mode", ""), params.get("hub.topic", "")
        if topic != sub[0]:
            return 404, "topic does not match this subscription"
        if mode == "denied":
            self.frontier.incr("websub_denied")
            return 200, ""
        challenge = params.get("hub.challenge", "")
        if mode not in ("subscribe", "unsubscribe") or not challenge:
            return 404, "hub.mode must be subscribe or unsubscribe, with a hub.challenge"
        return 200, challenge

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
        method, _, given = headers.get("x-hub-signature", "").partition("=")
        digest = _HUB_HASHES.get(method.strip().lower())
        expected = hmac.new(secret.encode("utf-8"), body, digest or hashlib.sha256).hexdigest()
        if digest is None or not hmac.compare_digest(given.strip().lower().encode(), expected.encode()):
            self.frontier.incr("websub_bad_signature")
            return 202, {"ignored": "missing or invalid X-Hub-Signature"}
        try:
            feed = parse_feed(body, topic, headers.get("content-type", ""))
        except FeedParseError as e:
            return 422, {"error": f"not a feed: {e}"}
        now = self.config.clock()
        docs, skipped = [], []
        for entry in feed.entries:
            try:
                url = check_push_url(entry.url, self.config)
            except ValueError as e:
                skipped.append({"url": entry.url, "reason": str(e)})
                continue
            title = (entry.title or "").strip() or None
            summary = (entry.summary or "").strip() or None
            problem = (text_problem("title", title, controls=True) if title else None) or (
                text_problem("summary", summary) if summary else None)
            if problem:
                skipped.append({"url": url, "reason": problem})
                continue
            if title is None and summary is None:
                skipped.append({"url": url, "reason": "entry has neither title nor summary"})
                continue
            docs.append(RawDocument(url=url, source_domain=source_domain(url), fetch_time=now, http_status=0,
                                    title=title, summary=summary, published_time=entry.published_time,
                                    source_name=feed.title or None, feed_url=topic))
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

    async def _read_capped(request) -> tuple[Optional[bytes], str]:
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

    return Starlette(routes=[
        Route(PUSH_PATH, push, methods=["POST"]),
        Route("/websub/{sub_id}", websub_get, methods=["GET"]),
        Route("/websub/{sub_id}", websub_post, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
    ])
