"""RedisGroupStore's write cycles (lease, redo journal, fence) against a real embedded Redis: a writer that dies
after its commit is completed by the next one, a writer that lost its lease writes nothing, lookups are a fixed
number of pipelined round trips per batch."""

from __future__ import annotations

import pytest

from newsflow.storage.groups import LeaseLost, RedisGroupStore, StoreConfig
from tests.helpers import art, dump

# a chain (a~b~c, 3 bits apart), an exact copy of b, an earlier copy of a that renames the group, a far one
DOCS = [
    art("a", 0b0, "a.com", 0.5, 40.0),
    art("b", 0b111, "b.com", 0.9, 30.0),
    art("c", 0b111111, "c.com", 0.5, 35.0),
    art("copy", 0b111, "g.com", 0.9, 30.0),
    art("early", 0b1, "e.com", 0.4, 5.0),
    art("far", 0xFFFF_0000_0000, "f.com", 0.5, 50.0),
]


class _Clock:
    """An injected clock (UTC epoch s) the test moves by hand."""

    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


class _DiesWhileApplying(RedisGroupStore):
    """A writer that sends the first ``n`` commands of its write set and then loses its connection."""

    def __init__(self, client, n: int, **kw):
        super().__init__(client, **kw)
        self.n = n

    def _apply(self, ops):
        super()._apply(ops[: self.n])
        raise ConnectionError(f"died after {self.n} of {len(ops)} commands")


def _expected(client) -> dict:
    client.flushall()
    store = RedisGroupStore(client)
    store.assign_batch(DOCS[:3])
    store.assign_batch(DOCS[3:])
    out = dump(client)
    client.flushall()
    return out


@pytest.mark.parametrize("sent", [0, 1, 7, 25])
def test_a_writer_that_dies_after_its_commit_is_completed_by_the_next_one(redis_server, sent):
    client, _ = redis_server
    expected = _expected(client)
    RedisGroupStore(client).assign_batch(DOCS[:3])
    with pytest.raises(ConnectionError):
        _DiesWhileApplying(client, sent).assign_batch(DOCS[3:])
    # part of the write set is in Redis and the journal holds all of it
    assert client.hexists(RedisGroupStore(client).keys.nd_lease, "journal")
    # the next writer (here: the replay of the same batch) completes the journal first, then finds every article
    replay = RedisGroupStore(client).assign_batch(DOCS[3:])
    assert not any(r.new_article for r in replay)
    assert dump(client) == expected
    assert RedisGroupStore(client).cluster_of("a") == "cearly"


def test_a_lease_held_by_a_dead_writer_is_taken_over_after_its_deadline(redis_server):
    client, _ = redis_server
    expected = _expected(client)
    clock = _Clock()
    config = StoreConfig(lease_ttl_ms=5_000, lease_wait_s=0.2)
    RedisGroupStore(client, config, clock).assign_batch(DOCS[:3])
    dead = _DiesWhileApplying(client, 3, config=config, clock=clock)
    dead._release = lambda **kw: None  # dies without freeing the lease
    with pytest.raises(ConnectionError):
        dead.assign_batch(DOCS[3:])
    with pytest.raises(LeaseLost):  # the deadline is ahead: the next writer waits, then gives up
        RedisGroupStore(client, config, clock).assign_batch(DOCS[3:])
    clock.t += 5.001
    RedisGroupStore(client, config, clock).assign_batch(DOCS[3:])
    assert dump(client) == expected


def test_a_writer_whose_lease_was_taken_over_writes_nothing(redis_server):
    client, _ = redis_server
    clock_a, clock_b = _Clock(), _Clock()
    config = StoreConfig(lease_ttl_ms=5_000)
    a = RedisGroupStore(client, config, clock_a)
    b = RedisGroupStore(client, config, clock_b)
    a.assign_batch(DOCS[:3])
    only_b = None

    original = a._cycle

    def stalled_cycle(work):
        def stalled(tx):
            out = work(tx)  # a has read and computed under its lease ...
            clock_b.t += 6.0  # ... and stalls past its deadline: b takes the lease over and writes
            b.assign_batch([DOCS[5]])
            nonlocal only_b
            only_b = dump(client)
            return out

        return original(stalled)

    a._cycle = stalled_cycle
    with pytest.raises(LeaseLost):
        a.assign_batch(DOCS[3:5])
    assert dump(client) == only_b  # a's commit was refused: nothing of its cycle was written
    assert b.cluster_of("far") == "cfar" and b.cluster_of("copy") is None


def test_a_batch_is_a_fixed_number_of_round_trips_whatever_its_size(redis_server):
    client, _ = redis_server
    import random

    rng = random.Random(7)
    fps = [rng.getrandbits(64) for _ in range(200)]  # pairwise > 5 bits apart (checked)
    assert min((x ^ y).bit_count() for i, x in enumerate(fps) for y in fps[:i]) > 5
    store = RedisGroupStore(client)
    store.assign_batch([art(f"s{i}", fps[i], t=100.0 + i) for i in range(50)])
    # 200 articles: 50 near copies of the stored ones (candidates, groups), 150 far from everything
    batch = [art(f"n{i}", fps[i] ^ 0b101, "copy.com", t=500.0 + i) for i in range(50)]
    batch += [art(f"f{i}", fps[i], t=900.0 + i) for i in range(50, 200)]
    before = store.round_trips
    results = store.assign_batch(batch)
    # lease, buckets, candidates' records and articles, their groups, commit, apply, release
    assert store.round_trips - before == 7
    assert [r.cluster_id for r in results[:50]] == [f"cs{i}" for i in range(50)]
    before = store.round_trips
    store.assign_batch([art("lonely", fps[0] ^ 0xFFFF_FFFF)])
    assert store.round_trips - before == 5  # no candidate: no candidate rounds


def test_retention_in_cycles_of_one_group_leaves_what_one_cycle_leaves(redis_server):
    client, _ = redis_server
    kept = art("kept", 0xFFFF_FFFF_0000_0000, "k.com", 0.5, 100.0)
    states = []
    for batch in (1, 50):
        client.flushall()
        store = RedisGroupStore(client)
        store.assign_batch([*DOCS, kept])
        assert store.expire_before(60.0, batch=batch) == (2, 6)  # the chain's group (5 articles) and "far"
        states.append(dump(client))
        assert store.cluster_count() == 1 and len(store) == 1 and store.query(0xFFFF_FFFF_0000_0000) == [("kept", 0)]
        assert store.query(0b111, 3) == []  # their band entries went with them
    assert states[0] == states[1]


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    base=st.integers(min_value=0, max_value=2**64 - 1),
    flips=st.lists(st.integers(min_value=0, max_value=63), min_size=0, max_size=3, unique=True),
)
def test_an_article_within_3_bits_always_joins_its_near_duplicate(redis_server, base, flips):
    """The pigeonhole guarantee through the assignment path: the worker-side filter misses no pair <= 3 bits."""
    client, _ = redis_server
    client.flushdb()
    near = base
    for bit in flips:
        near ^= 1 << bit
    store = RedisGroupStore(client, StoreConfig(borderline_jaccard=None))
    store.assign_batch([art("base", base, "a.com", t=10.0)])
    (r,) = store.assign_batch([art("near", near, "b.com", t=20.0)])
    assert r.cluster_id == "cbase" and store.get_cluster("cbase").article_count == 2
