"""Pure parts of accounts: personal-token claims, the session cookie format and the name and password rules."""

from __future__ import annotations

import base64
import json

import pytest

from newsflow.serving.tokens import TokenError, sign_token, token_claims, verify_token
from newsflow.storage.accounts import AccountError, check_name, check_password_rules, split_session

SECRET = b"s" * 32
NOW = 1_700_000_000.0


def test_personal_tokens_carry_a_token_id_operator_tokens_none():
    personal = sign_token("ana", SECRET, NOW, 600, token_id="0123456789abcdef")
    assert token_claims(personal, SECRET, NOW) == ("ana", "0123456789abcdef")
    assert verify_token(personal, SECRET, NOW) == "ana"
    assert token_claims(sign_token("ana", SECRET, NOW, 600), SECRET, NOW) == ("ana", None)
    for bad in ("0123", "0123456789ABCDEF", "0123456789abcdeg", 7):
        with pytest.raises(ValueError, match="token id"):
            sign_token("ana", SECRET, NOW, 600, token_id=bad)
    # another token id under the same signature: refused
    head, payload, sig = personal.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["jti"] = "fedcba9876543210"
    forged = base64.urlsafe_b64encode(json.dumps(claims, separators=(",", ":")).encode()).rstrip(b"=").decode()
    with pytest.raises(TokenError) as refused:
        token_claims(f"{head}.{forged}.{sig}", SECRET, NOW)
    assert refused.value.reason == "bad_signature"


def test_session_cookies_are_name_and_random_id_and_never_tokens():
    sid = "A" * 43
    head = base64.urlsafe_b64encode(b"ana.b@x").rstrip(b"=").decode()
    assert split_session(f"{head}.{sid}") == ("ana.b@x", sid)
    assert split_session(sign_token("ana", SECRET, NOW, 600)) is None  # an API token is no session
    assert split_session(f"{head}.{sid[:-1]}") is None
    assert split_session(f"{base64.urlsafe_b64encode(b'no spaces').decode()}.{sid}") is None
    assert split_session("") is None and split_session("x" * 300) is None


def test_name_and_password_rules():
    assert check_name("ana_b-1@x.org") == "ana_b-1@x.org"
    # "vic:tokens" would name the keys of account "vic"'s tokens hash (account:<name>:tokens)
    for bad in ("", "a b", "x" * 65, "ä", "vic:tokens", "vic:sessions"):
        with pytest.raises(AccountError) as e:
            check_name(bad)
        assert e.value.reason == "bad_name"
    assert check_password_rules("12345678") == "12345678"
    for bad in ("1234567", "x" * 257):
        with pytest.raises(AccountError):
            check_password_rules(bad)
