"""The crawl benchmark's Redis round-trip counter (``benchmarks.crawl._count_round_trips``) against a real server:
one per command, one per pipeline however many commands it carries, and the frontier's calls as documented."""

from benchmarks.crawl import _count_round_trips
from newsflow.crawler.frontier import Frontier


def test_each_command_and_each_pipeline_is_one_round_trip(redis_server):
    r, _url = redis_server
    r.set("before", 1)  # a connection made before counting starts is replaced
    counter = _count_round_trips(r)
    assert counter == [0]
    r.ping()  # a new connection: its handshake (CLIENT SETINFO ...) counts too, once
    start = counter[0]
    assert start >= 1
    r.ping()
    r.set("a", 1)
    assert counter[0] - start == 2
    pipe = r.pipeline(transaction=False)
    for i in range(5):
        pipe.incr(f"k{i}")
    assert pipe.execute() == [1] * 5
    assert counter[0] - start == 3
    assert r.get("before") == b"1"
    assert counter[0] - start == 4


def test_frontier_add_claim_complete_are_one_round_trip_each(redis_server):
    r, _url = redis_server
    fr = Frontier(r)
    # one cycle first: each script's first run loads it (NOSCRIPT, SCRIPT LOAD, EVALSHA again: 3 round trips)
    fr.add("http://h.example/a", "page", 0.0)
    for task in fr.claim("w", 1.0, 60.0, 1):
        fr.complete(task, "w", 1.0, 0.0, None)
    counter = _count_round_trips(r)
    r.ping()  # the new connection's handshake
    start = counter[0]
    assert fr.add("http://h.example/b", "page", 0.0) is True
    (task,) = fr.claim("w", 1.0, 60.0, 1)
    assert fr.complete(task, "w", 1.0, 0.0, None) is True
    # add and complete: one EVALSHA each (the page add registers no feed); claim: the pipeline that finds the
    # buckets with due hosts, then one EVALSHA (one bucket)
    assert counter[0] - start == 4


def test_frontier_benchmark_patterns_cost_the_round_trips_its_ratios_count(redis_server):
    """The per-call pattern costs one round trip per add and per complete and three per 50 claimed (the pipeline
    that finds the due buckets, redis-py's SCRIPT EXISTS, the pipeline of the buckets' claims: 120 hosts span many
    of the 128 buckets); the batched one two per 50 added (``FEED_ENTRIES``: SCRIPT EXISTS, then the pipeline of
    adds), three per 50 claimed and one per complete; every task is completed."""
    from benchmarks.crawl import FEED_ENTRIES, _batched_s, _per_call_s
    from newsflow.storage.keys import Keys

    r, _url = redis_server
    assert FEED_ENTRIES == 50
    warm = Frontier(r, Keys("warm"))
    _per_call_s(warm, 2, "w")
    _batched_s(warm, 2, "wb")  # every script loaded
    counter = _count_round_trips(r)
    r.ping()
    start = counter[0]
    per_call = Frontier(r, Keys("percall"))
    _per_call_s(per_call, 120, "p")  # 120 tasks on 120 hosts: claims of 50, 50, 20
    assert counter[0] - start == 120 + 3 * 3 + 120
    start = counter[0]
    batched = Frontier(r, Keys("batched"))
    _batched_s(batched, 120, "b")  # add_many of 50, 50, 20
    assert counter[0] - start == 2 * 3 + 3 * 3 + 120
    for fr in (per_call, batched):
        assert fr.pending() == 0  # nothing queued or leased: every task was claimed and completed
