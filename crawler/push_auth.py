"""Who is pushing: push client credentials, request signatures and authentication.

Every push client has a name and a shared secret (config, never in code:
``NEWSFLOW_PUSH_CREDENTIALS="wire:SECRET,other:SECRET2"``, parsed by
:func:`parse_credentials`) and authenticates in one of two ways:

* ``Authorization: Bearer <secret>`` (only over TLS), or
* an HMAC signature that keeps the secret off the wire:
  ``X-Newsflow-Client: <name>``, ``X-Newsflow-Timestamp: <UTC epoch seconds>``
  and ``X-Newsflow-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + body)>``
  (:func:`sign`); the timestamp must be within ``signature_tolerance_s`` of the
  server clock, which bounds replays.

Secrets and signatures are compared with :func:`hmac.compare_digest` (constant
time). :func:`authenticate` raises :class:`PushError` (401 or 403), the refusal
type of the whole push endpoint (:mod:`newsflow.crawler.push`).
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from newsflow.crawler.push import PushConfig

CREDENTIALS_ENV = "NEWSFLOW_PUSH_CREDENTIALS"
MIN_SECRET_CHARS = 16


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
