"""Tombstones of deleted readers and the purge of their events from the events dataset.

Deleting an account (:meth:`newsflow.storage.accounts.AccountStore.delete`) records the reader in the
tombstone set of its event shard, ``P:{s<k>}:readers:deleted`` (reader -> deletion time, UTC epoch s; ``k =``
:func:`~newsflow.storage.keys.event_shard` of the reader, the slot of that shard's stream). Events received
up to that time, whether already flushed to Parquet or still in the stream then, are dropped by
:func:`purge_deleted_events`: ``newsflow nightly`` runs it over the jobs' windows right after its flush, so no
job reads them, and ``newsflow retention`` over every partition. Events received later (a new account of
the same name, or an operator token still in use) are kept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from newsflow.storage.keys import EVENT_SHARDS, Keys


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def deleted_readers(client, shard: int, keys: Keys = Keys()) -> dict[str, float]:
    """Tombstones of event shard ``shard``: ``{reader: deletion time (UTC epoch s)}``."""
    return {_s(u): float(t) for u, t in client.zrange(keys.deleted_readers(shard), 0, -1, withscores=True)}


def _shard_of_file(name: str) -> int | None:
    m = re.match(r"events-(\d+)-", name)
    return int(m.group(1)) if m and int(m.group(1)) < EVENT_SHARDS else None


def purge_deleted_events(client, events_dir: str, keys: Keys = Keys(), dates: Iterable[str] | None = None) -> int:
    """Drops the events of deleted readers (received up to their deletion time) from the events dataset.

    Each file ``events-<shard>-….parquet`` holds one event shard, so only that shard's tombstones are read;
    a file with a deleted reader's rows is rewritten without them (temp file, then renamed over it).

    Args:
      client: redis-py client.
      events_dir: root of the events dataset (local path or URL), as given to
        :func:`newsflow.storage.events.flush_events`.
      keys: the key layout.
      dates: ``YYYY-MM-DD`` partitions to purge; ``None`` for every partition.

    Returns:
      Rows removed.
    """
    import pyarrow.parquet as pq
    from pyarrow import fs as pafs

    from newsflow.core.resources import filesystem_and_path

    filesystem, root = filesystem_and_path(events_dir.rstrip("/"))
    if dates is None:
        infos = filesystem.get_file_info(pafs.FileSelector(root, allow_not_found=True))
        dirs = sorted(i.path for i in infos if i.type == pafs.FileType.Directory and i.base_name.startswith("date="))
    else:
        dirs = [f"{root}/date={d}" for d in dates]
    tombstones: dict[int, dict[str, float]] = {}
    removed = 0
    for d in dirs:
        for info in filesystem.get_file_info(pafs.FileSelector(d, allow_not_found=True)):
            shard = _shard_of_file(info.base_name) if info.base_name.endswith(".parquet") else None
            if shard is None:
                continue
            if shard not in tombstones:
                tombstones[shard] = deleted_readers(client, shard, keys)
            gone = tombstones[shard]
            if not gone:
                continue
            table = pq.read_table(info.path, filesystem=filesystem)
            users = table.column("user_id").to_pylist()
            received = table.column("received_time").to_pylist()  # UTC datetimes
            keep = [
                not (u in gone and r is not None and r.timestamp() <= gone[u])
                for u, r in zip(users, received, strict=True)
            ]
            if all(keep):
                continue
            tmp = f"{d}/.{info.base_name}.tmp"
            pq.write_table(table.filter(keep), tmp, filesystem=filesystem)
            filesystem.move(tmp, info.path)
            removed += keep.count(False)
    return removed
