"""Signed reader tokens: the only way the API learns who a reader is.

Format (all parts base64url without padding)::

    nf1.<payload>.<signature>
    payload   = base64url(JSON {"sub": user_id, "iat": issued UTC epoch s, "exp": expiry UTC epoch s,
                                "jti": token id (personal tokens only)})
    signature = base64url(HMAC-SHA256(secret, "nf1." + payload))

The signature covers the version and the payload, so changing the user id, the expiry
or the version invalidates it; comparison is constant-time (``hmac.compare_digest``).
A token is refused when malformed, signed with another key, expired (``exp <= now``),
or issued in the future by more than :data:`CLOCK_SKEW_SECONDS`. The secret comes
from ``$NEWSFLOW_TOKEN_SECRET`` in production (at least 32 bytes); rotate it to revoke
every outstanding token. Two kinds share the format: an operator token (``newsflow serve --mint-token``,
``newsflow simulate-readers``) has no ``jti`` and is valid on its signature alone until it expires; a
reader's personal token (created on the account page) has a ``jti`` that the API also looks up in the
account's token list (:class:`newsflow.storage.accounts.AccountStore`), so revoking it or deleting the
account ends it at once. A web session cookie is neither: it is not an ``nf1.`` string.
Clients send ``Authorization: Bearer <token>``. A token has exactly one
accepted spelling: ASCII base64url without padding and with zero unused bits (RFC 4648 §3.5), so
``=`` appended or a last character changed within the padding bits is refused as malformed.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re

VERSION = "nf1"
CLOCK_SKEW_SECONDS = 60
MIN_SECRET_BYTES = 32
_USER_RE = re.compile(r"[A-Za-z0-9_.@:-]{1,128}\Z")
_JTI_RE = re.compile(r"[0-9a-f]{16}\Z")
# version, payload, and the 43-character unpadded base64url of a 32-byte HMAC-SHA256, ASCII only
_TOKEN_RE = re.compile(r"nf1\.[A-Za-z0-9_-]{1,1900}\.[A-Za-z0-9_-]{43}\Z")


class TokenError(ValueError):
    """A token was refused; ``reason`` is one of malformed, bad_signature, expired, not_yet_valid."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


def _b64e(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64d(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _check_secret(secret: bytes) -> bytes:
    if not isinstance(secret, (bytes, bytearray)) or len(secret) < MIN_SECRET_BYTES:
        raise ValueError(f"token secret must be at least {MIN_SECRET_BYTES} bytes")
    return bytes(secret)


#: longest token lifetime that :func:`sign_token` issues: 366 days (an operator token is a bearer
#: credential with no revocation list; a longer one is a mistake such as ``--token-ttl`` in ms).
MAX_TTL_SECONDS = 366 * 86400


def sign_token(user_id: str, secret: bytes, now: float, ttl_seconds: int = 86400, token_id: str | None = None) -> str:
    """Issues a token for ``user_id``.

    Args:
      user_id: 1–128 chars of ``[A-Za-z0-9_.@:-]``.
      secret: HMAC key, ≥ 32 bytes.
      now: issue time, UTC epoch seconds.
      ttl_seconds: lifetime in seconds, 1..:data:`MAX_TTL_SECONDS`.
      token_id: the ``jti`` of a personal token (16 lower-case hex digits), ``None`` for an operator token.

    Returns:
      The token string.

    Raises:
      ValueError: bad user id, secret or ttl.
    """
    if not isinstance(user_id, str) or not _USER_RE.match(user_id):
        raise ValueError(f"user id must be 1-128 chars of [A-Za-z0-9_.@:-], got {user_id!r}")
    if not 0 < ttl_seconds <= MAX_TTL_SECONDS:
        raise ValueError(f"ttl_seconds must be in 1..{MAX_TTL_SECONDS} (366 days), got {ttl_seconds!r}")
    claims = {"sub": user_id, "iat": int(now), "exp": int(now) + int(ttl_seconds)}
    if token_id is not None:
        if not isinstance(token_id, str) or not _JTI_RE.match(token_id):
            raise ValueError(f"token id must be 16 lower-case hex digits, got {token_id!r}")
        claims["jti"] = token_id
    payload = _b64e(json.dumps(claims, separators=(",", ":"), sort_keys=True).encode())
    signing_input = f"{VERSION}.{payload}".encode("ascii")
    sig = hmac.new(_check_secret(secret), signing_input, hashlib.sha256).digest()
    return f"{VERSION}.{payload}.{_b64e(sig)}"


def verify_token(token: str, secret: bytes, now: float) -> str:
    """Checks a token's signature and times and returns its user id (:func:`token_claims` without the token id)."""
    return token_claims(token, secret, now)[0]


def token_claims(token: str, secret: bytes, now: float) -> tuple[str, str | None]:
    """Checks a token's signature and times; returns ``(user id, token id)``, the token id ``None`` for an
    operator token (a personal token must also still be listed: the caller looks it up).

    Args:
      token: the ``nf1.…`` string.
      secret: HMAC key.
      now: current time, UTC epoch seconds.

    Returns:
      ``(sub, jti or None)``.

    Raises:
      TokenError: refused (``reason`` says why).
    """
    if not isinstance(token, str) or len(token) > 2048:
        raise TokenError("malformed", "token missing or too long")
    if not _TOKEN_RE.match(token):
        raise TokenError("malformed", "token must look like nf1.<payload>.<signature> in unpadded base64url")
    parts = token.split(".")
    try:
        sig = _b64d(parts[2])
        payload = _b64d(parts[1])
    except (ValueError, TypeError):
        raise TokenError("malformed", "token parts are not base64url") from None
    if _b64e(sig) != parts[2] or _b64e(payload) != parts[1]:
        # set bits in the unused padding bits of the last character: another spelling of the same bytes
        raise TokenError("malformed", "token is not in canonical base64url")
    expected = hmac.new(_check_secret(secret), f"{parts[0]}.{parts[1]}".encode("ascii"), hashlib.sha256).digest()
    if not hmac.compare_digest(sig, expected):
        raise TokenError("bad_signature", "token signature does not match")
    try:
        claims = json.loads(payload)
        sub, exp, iat, jti = claims["sub"], float(claims["exp"]), float(claims["iat"]), claims.get("jti")
    except (ValueError, TypeError, KeyError):
        raise TokenError("malformed", "token payload is not valid") from None
    if not isinstance(sub, str) or not _USER_RE.match(sub):
        raise TokenError("malformed", "token subject is not a valid user id")
    if jti is not None and (not isinstance(jti, str) or not _JTI_RE.match(jti)):
        raise TokenError("malformed", "token id is not valid")
    if exp <= now:
        raise TokenError("expired", "token expired")
    if iat > now + CLOCK_SKEW_SECONDS:
        raise TokenError("not_yet_valid", "token issued in the future")
    return sub, jti
