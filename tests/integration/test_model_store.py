"""Versioned nightly models on a real Redis: a version is invisible until the switch, the switch moves
every pointer at once, the previous version stays for rollback, older ones are pruned, and the decay
model reaches the hash the feed builder reads."""

from __future__ import annotations

import pytest

from newsflow.storage.keys import Keys
from newsflow.storage.models import ModelStore, load_learned
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
    assert client.hkeys(Keys().model("interest", "d1")) == [b"u1"]
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
