"""A nightly model switch of 50,000 synthetic readers records no Redis latency event >= 50 ms, and no key of
the reader-model, event or active-reader families grows past 10 MB at 10M readers.

Real embedded Redis with ``latency-monitor-threshold 50`` (:mod:`benchmarks.model_switch`): three nights
written, switched and pruned, one event per reader appended; a 60 ms script first shows the monitor records
what it should on this server.
"""

from __future__ import annotations

from benchmarks.model_switch import DATES, run
from newsflow.storage.keys import READER_BUCKETS, Keys, reader_bucket

BUCKETED = ("interest", "history", "cluster", "covisit")


def test_a_switch_of_50000_readers_records_no_latency_event_and_keys_stay_small(redis_server):
    client, _ = redis_server
    out = run(client, 50_000)
    assert out["control_event_ms"] >= 50  # the monitor is on and records a slow command here
    assert out["latency_events"] == []
    assert out["pruned"] == {name: [DATES[0]] for name in BUCKETED}
    assert not list(client.scan_iter(match=f"nf:*:model:*:{DATES[0]}", count=10_000))
    buckets = {reader_bucket(f"reader-{i:08d}") for i in range(50_000)}
    assert out["families"]["model:interest"]["keys"] == len(buckets) and len(buckets) <= READER_BUCKETS
    assert max(f["largest_key_bytes"] for f in out["families"].values()) < 1_000_000
    assert out["largest_key_at_10m"]["bytes"] == max(out["largest_key_bytes_at_10m"].values()) < 10_000_000
    assert client.hget(Keys().model_pointers, "current:interest") == DATES[-1].encode()
