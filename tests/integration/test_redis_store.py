"""RedisGroupStore against a real embedded Redis: assignment, representative, merges, replays, concurrency."""

from __future__ import annotations

import multiprocessing as mp

import pytest

from newsflow.storage.groups import RedisGroupStore, StoreConfig
from newsflow.storage.keys import Keys
from tests.helpers import art, dump


def test_band_keys_split_the_fingerprint_from_the_least_significant_bits():
    fp = 0x1234_5678_9ABC_DEF0
    assert Keys().lsh_bands(f"{fp:016x}") == [
        "nf:{lsh:0:def0}:fps",
        "nf:{lsh:1:9abc}:fps",
        "nf:{lsh:2:5678}:fps",
        "nf:{lsh:3:1234}:fps",
    ]
    from newsflow.core.simhash import bands

    assert [f"{b:04x}" for b in bands(fp)] == ["def0", "9abc", "5678", "1234"]


def test_near_duplicates_join_and_far_ones_found_new_clusters(redis_server):
    client, _ = redis_server
    store = RedisGroupStore(client)
    r = store.assign_batch(
        [
            art("a", 0x0, "x.com", 0.5, 100.0),
            art("b", 0b111, "y.com", 0.9, 200.0),  # distance 3 from a: joins
            art("c", 0b1111 << 20, "z.com", 0.5, 50.0),  # distance 4 from a, 7 from b: new cluster
        ]
    )
    assert [(x.cluster_id, x.created) for x in r] == [("ca", True), ("ca", False), ("cc", True)]
    ca = store.get_cluster("ca")
    assert ca.article_count == 2
    assert ca.source_domains == ["x.com", "y.com"]
    assert ca.representative_id == "b"  # higher authority wins
    assert (ca.earliest_time, ca.latest_time) == (100.0, 200.0)
    assert store.cluster_count() == 2


def test_representative_ties_go_to_the_earliest_article(redis_server):
    client, _ = redis_server
    store = RedisGroupStore(client)
    store.assign_batch([art("late", 0x0, t=300.0, authority=0.9), art("early", 0x1, t=100.0, authority=0.9)])
    assert store.get_cluster("cearly").representative_id == "early"


def test_an_article_joins_only_groups_within_the_threshold(redis_server):
    client, _ = redis_server
    store = RedisGroupStore(client)
    # p and q are 6 bits apart: two clusters. n is 1 bit from q and 5 from p: joins q's cluster only.
    store.assign_batch([art("p", 0b000000), art("q", 0b111111)])
    r = store.assign_batch([art("n", 0b011111, t=2000.0)])
    assert r[0].cluster_id == "cq" and r[0].merged == () and store.cluster_count() == 2


def test_bridge_article_merges_two_clusters_under_the_earliest_founder(redis_server):
    client, _ = redis_server
    store = RedisGroupStore(client)
    store.assign_batch([art("q", 0b111111, "q.com", 0.8, t=20.0), art("p", 0b000000, "p.com", t=10.0)])
    assert store.cluster_count() == 2
    # m has bits 0..2 set: distance 3 to p and 3 to q -> one group; p (t=10) is its earliest member
    r = store.assign_batch([art("m", 0b000111, "m.com", t=30.0)])
    assert r[0].cluster_id == "cp" and r[0].merged == ("cq",) and not r[0].created
    assert store.get_cluster("cq") is None  # merged away: deleted, no history kept
    live = store.get_cluster("cp")
    assert live.article_count == 3
    assert live.source_domains == ["m.com", "p.com", "q.com"]
    assert live.representative_id == "q"  # authority 0.8 beats 0.5
    assert (live.earliest_time, live.latest_time) == (10.0, 30.0)
    assert store.cluster_of("q") == "cp"
    assert client.hget(Keys().article("q"), "cluster_id") == b"cp"
    assert store.cluster_count() == 1


def test_an_earlier_copy_arriving_late_renames_the_group(redis_server):
    client, _ = redis_server
    store = RedisGroupStore(client)
    first = store.assign_batch([art("late", 0b0, "x.com", t=300.0)])
    assert first[0].cluster_id == "clate" and first[0].created
    r = store.assign_batch([art("early", 0b1, "y.com", t=100.0)])
    assert r[0].cluster_id == "cearly" and r[0].created and r[0].merged == ("clate",)
    assert store.get_cluster("clate") is None
    assert store.cluster_of("late") == "cearly" and client.hget(Keys().article("late"), "cluster_id") == b"cearly"
    assert client.hget(Keys().cluster("cearly"), "created_by") == b"early"


def test_every_arrival_order_and_batching_leaves_identical_state(redis_server):
    """A chain a~b~c~d (each 3 bits from the next), a far article and an exact copy: every 6th of
    the 720 orders of the six, in batches of 1 or all at once, give the keys and values of time order."""
    import itertools

    client, _ = redis_server
    docs = [
        art("a", 0b0, "a.com", 0.5, 40.0),
        art("b", 0b111, "b.com", 0.9, 10.0),
        art("c", 0b111111, "c.com", 0.5, 30.0),
        art("d", 0b111111111, "d.com", 0.7, 20.0),
        art("far", 0xFFFF_0000_0000, "f.com", 0.5, 5.0),
        art("copy", 0b111, "g.com", 0.9, 10.0),
    ]
    store = RedisGroupStore(client)
    store.assign_batch(sorted(docs, key=lambda x: (x.event_time, x.article_id)))
    expected = dump(client)
    # one group founded by b (earliest of the chain, ties by id: b < copy), the far one alone
    groups = sorted(k.decode() for k in expected if k.endswith(b"}:cluster"))
    assert groups == ["nf:{ndg:cb}:cluster"]  # "far" is a group of one: no keys of its own
    assert RedisGroupStore(client).get_cluster("cfar").article_count == 1
    for i, order in enumerate(itertools.islice(itertools.permutations(docs), 0, None, 6)):
        client.flushall()
        if i % 2:
            store.assign_batch(list(order))
        else:
            for d in order:
                store.assign_batch([d])
        assert dump(client) == expected, [d.article_id for d in order]


def test_replay_leaves_redis_exactly_as_after_one_pass(redis_server):
    client, _ = redis_server
    store = RedisGroupStore(client)
    batch = [art("a", 0x0, "x.com"), art("b", 0x3, "y.com"), art("c", 0xFFFF_0000, "z.com"), art("d", 0x7, "x.com")]
    first = store.assign_batch(batch)
    before = dump(client)
    second = store.assign_batch(batch)
    assert dump(client) == before
    assert [r.cluster_id for r in second] == [r.cluster_id for r in first]
    assert not any(r.new_article for r in second)
    assert store.get_cluster("ca").source_domains == ["x.com", "y.com"]  # no duplicate sources


def test_query_returns_exact_distances(redis_server):
    client, _ = redis_server
    store = RedisGroupStore(client)
    store.add_many([("zero", 0), ("two", 0b11), ("four", 0b1111), ("far", (1 << 64) - 1)])
    assert store.query(0) == [("zero", 0), ("two", 2)]
    assert store.query(0b1) == [("two", 1), ("zero", 1), ("four", 3)]  # ties by id
    assert store.nearest(0b111) == ("four", 1)  # "four" and "two" are both 1 bit away; smaller id wins
    assert store.nearest(1 << 40 | 1 << 50 | 1 << 60 | 1 << 63) is None
    assert len(store) == 4 and "two" in store


def test_invalid_simhash_is_refused(redis_server):
    client, _ = redis_server
    with pytest.raises(ValueError, match="16 hex"):
        RedisGroupStore(client).assign_batch([art("a", 0)._replace(simhash="xyz")])


def test_store_config_rejects_distances_the_band_index_cannot_guarantee():
    with pytest.raises(ValueError, match="0..3"):
        StoreConfig(max_distance=4)


def _worker(url: str, barrier, items):
    import redis

    store = RedisGroupStore(redis.Redis.from_url(url))
    barrier.wait()
    for item in items:
        store.assign_batch([art(*item)])


def test_concurrent_writers_put_near_duplicates_in_one_cluster(redis_server):
    client, url = redis_server
    # 4 processes x 25 articles, every fingerprint within distance 1 of 0 (or 0 itself): one story copied 100 times.
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(4)
    procs = []
    for w in range(4):
        # each copy at its own publish time: one outlet's near-identical texts at the same publish time would be
        # versions of one article (newsflow/core/urls.py, "Article identity" rule 5), not 25 copies
        items = [
            (f"w{w}-{i:02d}", (1 << ((w * 25 + i) % 64)) if i else 0, f"site{w}.com", 0.5, 1000.0 + i)
            for i in range(25)
        ]
        procs.append(ctx.Process(target=_worker, args=(url, barrier, items)))
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    store = RedisGroupStore(client)
    assert store.cluster_count() == 1
    (cluster,) = store.top_clusters(5)
    assert cluster.article_count == 100
    assert cluster.source_domains == ["site0.com", "site1.com", "site2.com", "site3.com"]
    members = {store.cluster_of(f"w{w}-{i:02d}") for w in range(4) for i in range(25)}
    assert members == {cluster.cluster_id}


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_flips = st.lists(st.integers(min_value=0, max_value=63), min_size=0, max_size=3, unique=True)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    base=st.integers(min_value=0, max_value=2**64 - 1),
    flips=_flips,
    others=st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=20),
)
def test_redis_band_index_finds_every_pair_within_distance_3(redis_server, base, flips, others):
    client, _ = redis_server
    client.flushdb()  # one server for all examples: start each from empty
    store = RedisGroupStore(client)
    near = base
    for bit in flips:
        near ^= 1 << bit
    store.add_many([("base", base)] + [(f"o{i}", fp) for i, fp in enumerate(others)])
    found = dict(store.query(near))
    assert found["base"] == len(flips)
    expected = {"base": len(flips)}
    expected.update(
        {f"o{i}": bin(fp ^ near).count("1") for i, fp in enumerate(others) if bin(fp ^ near).count("1") <= 3}
    )
    assert found == expected
