"""The read-state store (newsflow.storage.reader_state) on a real three-master Redis Cluster: a reader's marks,
coverage snapshots and saved stories share their reader bucket's slot, readers spread over the masters, and
the read marks are trimmed to the newest MAX_READ."""

from __future__ import annotations

import pytest

from newsflow.runtime.redis_conn import connect
from newsflow.storage import reader_state
from newsflow.storage.keys import Keys
from newsflow.storage.reader_state import ReaderStateStore, ReadMark, SavedFull


def test_read_marks_snapshots_and_saved_on_a_cluster(cluster, monkeypatch):
    url, _ = cluster
    client, keys = connect(url), Keys("rs")
    store = ReaderStateStore(client, keys)
    readers = [f"r{i}" for i in range(40)]
    for i, r in enumerate(readers):
        store.mark_read(r, {"s1": (100.0 + i, 2)}, {"s1": {"t": 100.0 + i, "reports": ["c1"]}})
        store.save(r, "s1", 50.0)
    per_master = [len(client.keys("rs:*:reader:*:read", target_nodes=n)) for n in client.get_primaries()]
    assert sum(per_master) == 40 and min(per_master) > 0
    assert store.read_marks("r7") == {"s1": ReadMark(107.0, 2)} and store.saved("r7") == [("s1", 50.0)]
    assert store.seen_story("r7", "s1") == {"t": 107.0, "reports": ["c1"]}
    assert store.mark_unread("r7", ["s1", "s9"]) == 1 and store.seen_story("r7", "s1") is None
    assert store.read_marks("r7") == {} and store.read_marks("r8") == {"s1": ReadMark(108.0, 2)}
    # saving twice keeps the first time; past the cap a save is refused; unsave answers whether it was saved
    assert store.save("r1", "s1", 99.0) == 50.0 and store.saved("r1") == [("s1", 50.0)]
    monkeypatch.setattr(reader_state, "MAX_SAVED", 2)
    store.save("r1", "s2", 60.0)
    with pytest.raises(SavedFull):
        store.save("r1", "s3", 70.0)
    assert store.saved("r1") == [("s2", 60.0), ("s1", 50.0)] and store.saved("r1", 1, 1) == [("s1", 50.0)]
    assert store.saved_count("r1") == 2 and store.view_state("r1")[1:] == ({"s1": ReadMark(101.0, 2)}, {"s1", "s2"})
    assert store.unsave("r1", "s2") is True and store.unsave("r1", "s2") is False
    # read marks past MAX_READ: the oldest go, with their snapshots
    monkeypatch.setattr(reader_state, "MAX_READ", 3)
    store.mark_read("r2", {f"x{i}": (200.0 + i, 1) for i in range(5)}, {"x0": {"t": 200.0}})
    assert sorted(store.read_marks("r2")) == ["x2", "x3", "x4"] and store.seen_story("r2", "x0") is None
