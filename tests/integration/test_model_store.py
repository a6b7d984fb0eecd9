"""Versioned nightly models on a real Redis: a version is invisible until the switch, the switch moves
every pointer at once, the previous version stays for rollback, older ones are pruned, and the decay
model reaches the hash the feed builder reads."""

from __future__ import annotations

import pytest

from newsflow.storage.keys import READER_BUCKETS, Keys, reader_bucket
from newsflow.storage.models import MAX_FIELDS_PER_COMMAND, ModelStore, load_learned
from newsflow.storage.ranking import RankingStore, encode_embedding


def test_write_switch_rollback_prune(redis_server):
    client, _ = redis_server
    m = ModelStore(client)
    m.write("decay", "d1", {"tech": "0.2", "world": "0.05"})
    assert m.current() == {} and RankingStore(client).lambda_overrides() == {}
    with pytest.raises(ValueError, match="weights"):
        m.switch({"decay": "d1", "weights": "d1"})  # no weights version: nothing switched
    assert m.current() == {}
    m.write("weights", "d1", {"_learned": "0"})
    assert m.switch({"decay": "d1", "weights": "d1"}) == {"decay": "d1", "weights": "d1"}
    assert RankingStore(client).lambda_overrides() == {"tech": 0.2, "world": 0.05}
    m.write("decay", "d2", {"tech": "0.3"})
    m.write("decay", "d3", {"_empty": "1"})
    m.switch({"decay": "d2"})
    m.switch({"decay": "d2"})  # a rerun of the same version keeps d1 as the rollback target
    assert m.previous() == {"decay": "d1"}
    m.switch({"decay": "d3"})
    assert m.previous() == {"decay": "d2"} and RankingStore(client).lambda_overrides() == {}
    assert m.prune("decay") == ["d1"] and not client.exists(Keys().model("decay", "d1"))
    assert m.rollback(["decay"]) == {"decay": "d2", "weights": "d1"}
    assert RankingStore(client).lambda_overrides() == {"tech": 0.3}
    with pytest.raises(ValueError, match="no previous version of decay"):
        m.rollback(["decay"])
    with pytest.raises(ValueError, match="unknown model"):
        m.write("nope", "d1", {"a": "1"})


def test_write_replaces_a_version_and_load_learned_reads_the_current_one(redis_server):
    client, _ = redis_server
    m = ModelStore(client)
    vec = [0.0] * 128
    vec[3] = 1.0
    m.write("interest", "d1", {"u1": encode_embedding(vec), "u2": encode_embedding(vec)})
    m.write("interest", "d1", {"u1": encode_embedding(vec)})  # a rerun replaces, never merges
    assert list(m.read("interest", "d1")) == [b"u1"] and m.manifest("interest", "d1")["fields"] == 1
    # the rerun removed the bucket only u2 was in
    assert not client.exists(Keys().model_bucket("interest", "d1", reader_bucket("u2")))
    m.write("history", "d1", {"u1": '{"clicks": 7, "recent": ["a", "b"]}'})
    m.write("covisit", "d1", {"a": '{"x": 3, "b": 9}', "b": '{"x": 1}'})
    m.write("cluster", "d1", {"u1": "u0", "c:u0": '{"y": 4, "a": 2}'})
    assert load_learned(client, Keys(), "u1").versions == {}  # nothing switched yet
    m.switch({n: "d1" for n in ("interest", "history", "covisit", "cluster")})
    got = load_learned(client, Keys(), "u1")
    assert got.clicks == 7 and got.interest is not None and float(got.interest[3]) == 1.0
    assert got.covisit == {"x": 4.0}  # b is already read by u1
    assert got.cluster == {"y": 4.0} and got.weights is None
    stranger = load_learned(client, Keys(), "u9")
    assert stranger.interest is None and stranger.clicks == 0 and stranger.covisit == {} and stranger.cluster == {}


def _vec(i: int) -> bytes:
    v = [0.0] * 128
    v[i % 128] = 1.0
    return encode_embedding(v)


def test_a_bucketed_version_spreads_over_buckets_switches_only_when_complete_and_prunes_every_bucket(redis_server):
    client, _ = redis_server
    keys, m = Keys(), ModelStore(client)
    users = [f"u{i}" for i in range(3000)]
    m.write("interest", "d1", {u: _vec(i) for i, u in enumerate(users)})
    stored = sorted(int(k.decode().split("{r")[1].split("}")[0]) for k in client.scan_iter("nf:{r*}:model:interest:d1"))
    assert stored == sorted({reader_bucket(u) for u in users}) == m.manifest("interest", "d1")["buckets"]
    # every field sits in its own bucket, and no bucket holds another's field
    for b in stored[:50]:
        assert {f.decode() for f in client.hkeys(keys.model_bucket("interest", "d1", b))} == {
            u for u in users if reader_bucket(u) == b
        }
    # a version left half written (a writer that died) is refused by the switch
    m.begin("interest", "d2", [reader_bucket("u1")])
    m.write_bucket("interest", "d2", reader_bucket("u1"), {"u1": _vec(5)})
    with pytest.raises(ValueError, match="interest"):
        m.switch({"interest": "d2"})
    m.switch({"interest": "d1"})
    with pytest.raises(ValueError, match="belongs in bucket"):
        m.write_bucket("interest", "d3", (reader_bucket("u1") + 1) % READER_BUCKETS, {"u1": _vec(1)})
    m.write("interest", "d3", {"u1": _vec(3)})
    m.switch({"interest": "d3"})
    assert m.current() == {"interest": "d3"} and m.previous() == {"interest": "d1"}
    assert m.prune("interest") == ["d2"]  # the half-written version goes, its bucket with it
    assert not list(client.scan_iter("nf:{r*}:model:interest:d2")) and m.versions("interest") == ["d1", "d3"]
    m.write("interest", "d4", {"u1": _vec(4)})
    m.switch({"interest": "d4"})
    assert m.prune("interest") == ["d1"] and not list(client.scan_iter("nf:{r*}:model:interest:d1"))
    assert m.read_fields("interest", ["u1", "u2"]) == [_vec(4), None]


def test_a_bucket_write_never_sends_more_than_the_bounded_fields_per_command(redis_server):
    client, _ = redis_server
    m = ModelStore(client)
    client.config_resetstat()
    m.write("history", "d1", {f"u{i}": "{}" for i in range(20_000)})
    stats = client.info("commandstats")
    hset = stats["cmdstat_hset"]
    # every HSET carries <= MAX_FIELDS_PER_COMMAND fields; 20,000 fields in ~4,000 buckets need one each
    assert hset["calls"] >= len(m.manifest("history", "d1")["buckets"])
    assert 20_000 / hset["calls"] <= MAX_FIELDS_PER_COMMAND
    assert m.manifest("history", "d1")["fields"] == 20_000 and len(m.read("history", "d1")) == 20_000


def test_a_reader_sees_the_old_or_the_new_model_never_a_mix(redis_server, monkeypatch):
    client, _ = redis_server
    m = ModelStore(client)
    for night, clicks in (("d1", 1), ("d2", 2)):
        m.write("interest", night, {"u1": _vec(clicks)})
        m.write("history", night, {"u1": f'{{"clicks": {clicks}, "recent": []}}'})
    m.switch({"interest": "d1", "history": "d1"})
    real = ModelStore.pointers

    def pointers_then_switch(self):
        got = real(self)
        monkeypatch.setattr(ModelStore, "pointers", real)
        ModelStore(client).switch({"interest": "d2", "history": "d2"})  # the night switches mid-read
        return got

    monkeypatch.setattr(ModelStore, "pointers", pointers_then_switch)
    seen = load_learned(client, Keys(), "u1")
    assert seen.versions == {"interest": "d1", "history": "d1"} and seen.clicks == 1 and float(seen.interest[1]) == 1.0
    after = load_learned(client, Keys(), "u1")
    assert after.clicks == 2 and float(after.interest[2]) == 1.0


def test_a_served_version_is_rewritten_one_transaction_per_bucket_and_a_new_one_in_pipelines(redis_server):
    client, _ = redis_server
    m = ModelStore(client)
    users = {f"u{i}": _vec(i) for i in range(600)}
    buckets = {reader_bucket(u) for u in users}
    client.config_resetstat()
    m.write("interest", "d1", users)
    assert "cmdstat_multi" not in client.info("commandstats")  # nobody reads d1 yet: plain pipelines
    m.switch({"interest": "d1"})
    client.config_resetstat()
    m.write("interest", "d1", users)  # the rerun of a served night: each bucket replaced atomically
    assert client.info("commandstats")["cmdstat_exec"]["calls"] == len(buckets)
    assert m.read("interest") == {u.encode(): v for u, v in users.items()}
