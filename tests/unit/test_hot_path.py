"""serving.hot_path: remembered tokens answer exactly as newsflow.serving.tokens.verify_token at every time (also a
clock set back), the per-reader memo stays within its bound, a body and ETag are computed once."""

import random

import pytest

from newsflow.serving.hot_path import ReaderMemo, ServedPage, VerifiedTokens
from newsflow.serving.tokens import TokenError, sign_token, verify_token

SECRET = b"s" * 32
T0 = 1_700_000_000.0


def _outcome(check, token, now):
    try:
        return check(token, now)
    except TokenError as e:
        return ("refused", e.reason)


def test_remembered_tokens_answer_as_a_full_check_at_every_time():
    rng = random.Random(7)
    good = sign_token("alice", SECRET, T0, 3600)
    tokens = [
        good,
        sign_token("bob", SECRET, T0 + 200, 60),  # issued in the future at first
        sign_token("carol", SECRET, T0 - 7200, 3600),  # already expired
        sign_token("dave", b"x" * 32, T0, 3600),  # another key
        good[:-1] + ("A" if good[-1] != "A" else "B"),  # a changed signature
        "nf1.e30.",  # malformed
    ]
    verified = VerifiedTokens(SECRET)
    times = [T0, T0 + 139, T0 + 141, T0 + 3599, T0 + 3600, T0 + 140, T0] + [
        T0 + rng.uniform(-400, 4000) for _ in range(300)
    ]
    seen = set()
    for now in times:
        for token in rng.sample(tokens, len(tokens)):
            want = _outcome(lambda t, n: verify_token(t, SECRET, n), token, now)
            assert _outcome(verified.verify, token, now) == want, (token[:20], now - T0)
            seen.add(want if isinstance(want, tuple) else "ok")
    assert seen == {
        "ok",
        ("refused", "expired"),
        ("refused", "not_yet_valid"),
        ("refused", "bad_signature"),
        ("refused", "malformed"),
    }


def test_remembered_tokens_are_bounded():
    verified = VerifiedTokens(SECRET, max_entries=3)
    tokens = [sign_token(f"u{i}", SECRET, T0, 60) for i in range(5)]
    assert [verified.verify(t, T0) for t in tokens] == [f"u{i}" for i in range(5)]
    assert len(verified._ok) == 3 and set(verified._ok) == set(tokens[2:])


@pytest.mark.parametrize("bound", [0, 1, 3])
def test_the_reader_memo_keeps_the_newest_readers(bound):
    memo = ReaderMemo(bound)
    entries = {u: ServedPage(b"raw", None, {}, None, ("", 20, 1), {"user": u}, []) for u in "abcd"}
    for u in "abcd":
        memo.put(u, entries[u])
    memo.put("c", entries["c"])  # c is now the newest
    kept = [u for u in "abcd" if memo.get(u) is not None]
    assert kept == {0: [], 1: ["c"], 3: ["b", "c", "d"]}[bound]
    assert all(memo.get(u) is entries[u] for u in kept)


def test_a_served_page_computes_its_body_and_etag_once():
    page = ServedPage(b"raw", None, {}, None, ("", 20, 1), {}, [b"{}"])
    calls = []

    def body():
        calls.append(1)
        return b'{"x":1}'

    first = page.body_and_etag(body, lambda b: f'"{len(b)}"')
    assert first == (b'{"x":1}', '"7"')
    assert page.body_and_etag(body, lambda b: "other") == first and len(calls) == 1
