"""Tombstones of deleted readers and the purge of their events from the events dataset.

Deleting an account (:meth:`newsflow.storage.accounts.AccountStore.delete`) records the reader in the
tombstone hash of its event shard, ``P:{s<k>}:readers:deleted`` (reader -> JSON ``{"time", "last_event"}``;
``k =`` :func:`~newsflow.storage.keys.event_shard` of the reader, the slot of that shard's stream):
``last_event`` is the id the shard's stream had last given (:func:`last_event_id`). Events appended up to that
id, whether already flushed to Parquet or still in the stream then, are dropped by :func:`purge_deleted_events`:
``newsflow nightly`` runs it over the jobs' windows right after its flush, so no job reads them, and ``newsflow
retention`` over every partition. Events appended later (a new account of the same name, or an operator token
still in use) are kept. Stream ids come from the Redis server and only grow, so the rule holds whatever clock
stamped the events (``newsflow demo``'s replay clock stands still); a row without a stream id (none is written
so) falls back to its received time against the deletion time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import NamedTuple

from newsflow.storage.keys import EVENT_SHARDS, Keys


class Tombstone(NamedTuple):
    """A deleted reader: ``time`` (UTC epoch s) and ``last_event`` (``(ms, seq)`` of the stream's last id then)."""

    time: float
    last_event: tuple[int, int]


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _stream_id(text: str) -> tuple[int, int] | None:
    """``"<ms>-<seq>"`` (optionally ``"<shard>/"`` first, as event ids are) as ``(ms, seq)``; ``None`` if not."""
    m = re.fullmatch(r"(?:\d+/)?(\d+)-(\d+)", text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def last_event_id(client, keys: Keys, shard: int) -> str:
    """The id event stream ``shard`` last gave (``XINFO STREAM``'s ``last-generated-id``), else its flush cursor,
    else ``"0-0"`` (no event was ever appended)."""
    import redis

    try:
        return _s(client.xinfo_stream(keys.events(shard))["last-generated-id"])
    except redis.ResponseError:  # no stream
        flushed = client.get(keys.events_flushed(shard))
        return _s(flushed) if flushed and _stream_id(_s(flushed)) else "0-0"


def deleted_readers(client, shard: int, keys: Keys = Keys()) -> dict[str, Tombstone]:
    """Tombstones of event shard ``shard``: ``{reader: Tombstone}`` (unreadable entries are skipped)."""
    out = {}
    for user, raw in client.hgetall(keys.deleted_readers(shard)).items():
        try:
            doc = json.loads(raw)
            out[_s(user)] = Tombstone(float(doc["time"]), _stream_id(str(doc["last_event"])) or (0, 0))
        except (ValueError, KeyError, TypeError):
            continue
    return out


def _shard_of_file(name: str) -> int | None:
    m = re.match(r"events-(\d+)-", name)
    return int(m.group(1)) if m and int(m.group(1)) < EVENT_SHARDS else None


def purge_deleted_events(client, events_dir: str, keys: Keys = Keys(), dates: Iterable[str] | None = None) -> int:
    """Drops the events of deleted readers (appended up to their tombstone's stream id) from the events dataset.

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
            ids = table.column("event_id").to_pylist()
            received = table.column("received_time").to_pylist()  # UTC datetimes
            keep = [not _deleted(gone.get(u), e, r) for u, e, r in zip(users, ids, received, strict=True)]
            if all(keep):
                continue
            tmp = f"{d}/.{info.base_name}.tmp"
            pq.write_table(table.filter(keep), tmp, filesystem=filesystem)
            filesystem.move(tmp, info.path)
            removed += keep.count(False)
    return removed


def _deleted(stone: Tombstone | None, event_id: str | None, received) -> bool:
    """Whether an event row belongs to a deleted reader's account: appended up to its tombstone's stream id
    (by received time up to the deletion time when the row has no stream id)."""
    if stone is None:
        return False
    position = _stream_id(event_id or "")
    if position is not None:
        return position <= stone.last_event
    return received is not None and received.timestamp() <= stone.time
