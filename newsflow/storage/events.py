"""Reader events (impression, click, dwell): validation, sharded Redis streams, Parquet flush.

The API validates each event with :func:`validate_event` and appends it with
:func:`append_events` to its reader's stream shard ``Keys.events(k)``, ``k =``
:func:`~newsflow.storage.keys.event_shard` ``(user id)`` of 256 shards (``XADD``; never trimmed
before a flush, refused with :class:`EventBacklogFull` when the shard holds
:data:`MAX_PENDING_EVENTS` unflushed events), and marks the reader active in the shard's
``Keys.active_users(k)`` (keys: :mod:`newsflow.storage.keys`). An event's id is
``"<shard>/<stream id>"`` (unique across shards).
A job calls :func:`flush_events` to move the streams into the events dataset for the nightly jobs,
exactly once: Parquet files partitioned by the UTC date of the received time,
``<events dir>/date=YYYY-MM-DD/events-<shard>-{first id}-{last id}.parquet`` (received, not client
time, so a past date's partition never changes once the day is over). Each shard has its own
cursor key ``Keys.events_flushed(k)`` (same slot as its stream), which makes it exactly once
whatever crashes:

1. pick the range ``(first, last]`` after the cursor and record it in the cursor key
   (``"<cursor> <first> <last>"``, compare-and-set on the one key) before writing anything;
2. write one file per received date of that range, each named by the shard and the range (a temp
   file renamed into place, so a reader never sees half a file);
3. set the cursor to ``last`` (compare-and-set, one key: atomic), then trim the stream up to it.

A crash before 3 leaves the range recorded, and the next call re-reads exactly that range and
rewrites the same file names (a rewrite replaces, never duplicates); a crash after 3 leaves
flushed entries in the stream, which every call trims before reading. One key holds a shard's
cursor, so no transaction is needed. Two flushers at once pick the same range (the compare-and-set
lets one record it; the other then rewrites the same files), so they never split it two ways. Every
command touches at most ``max_rows`` entries of one shard.

:func:`trim_active_readers` (``newsflow retention``) removes readers idle since a cutoff from the
active sets in steps of at most :data:`ACTIVE_TRIM_STEP` members.

Event JSON accepted from clients::

    {"type": "impression"|"click"|"dwell", "story_id": str, "time": epoch s (optional),
     "position": int >= 0 (optional), "dwell_seconds": float in (0, 86400] (dwell only),
     "surface": "top"|"topic"|"trending"|"story"|"feed" (optional)}
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from newsflow.schemas.event import (  # re-exported: the record lives in schemas/
    EVENT_SCHEMA,
    EVENT_TYPES,
    SURFACES,
    Event,
)
from newsflow.storage.keys import EVENT_SHARDS, Keys, event_shard

MAX_EVENTS_PER_REQUEST = 100
MAX_PAST_SECONDS = 7 * 86400
MAX_FUTURE_SECONDS = 300
MAX_PENDING_EVENTS = 8192
"""Unflushed events one stream shard may hold before :func:`append_events` refuses more
(:class:`EventBacklogFull`): an accepted event is never trimmed away before it is flushed, so a full
backlog is answered with 503 until ``newsflow nightly --step flush`` (or ``build-feeds --events-dir``)
moves the streams to Parquet. About 200 bytes of Redis per event: ~1.6 MB per shard, ~420 MB over the
256 shards at the bound."""
ACTIVE_TRIM_STEP = 1000
"""Most members one command of :func:`trim_active_readers` reads or removes."""


class EventBacklogFull(RuntimeError):
    """The events stream holds :data:`MAX_PENDING_EVENTS` unflushed events; nothing was appended."""


_STORY_ID_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}\Z")


def is_valid_story_id(value: Any) -> bool:
    """True for 1–128 chars of ``[A-Za-z0-9_.:-]``."""
    return isinstance(value, str) and bool(_STORY_ID_RE.match(value))


def _finite_number(value: Any, name: str, unit: str) -> float:
    """``value`` as a finite float; ``ValueError`` naming the field for booleans, non-numbers, NaN,
    infinities and integers too large for a float (a 400-digit ``time``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number ({unit}), got {str(value)[:40]!r}")
    try:
        out = float(value)
    except OverflowError:
        raise ValueError(f"{name} must be a number ({unit}), got an integer of {len(str(abs(value)))} digits") from None
    if not math.isfinite(out):
        raise ValueError(f"{name} must be a finite number ({unit}), got {out!r}")
    return out


def validate_event(raw: Any, user_id: str, now: float) -> Event:
    """Validates one client event.

    Args:
      raw: the decoded JSON object.
      user_id: the verified user (from the token, never from the body).
      now: server time, UTC epoch s.

    Returns:
      The :class:`Event`.

    Raises:
      ValueError: with a message naming the bad field and value.
    """
    if not isinstance(raw, Mapping):
        raise ValueError(f"event must be a JSON object, got {type(raw).__name__}")
    unknown = set(raw) - {"type", "story_id", "time", "position", "dwell_seconds", "surface"}
    if unknown:
        raise ValueError(f"unknown field(s): {', '.join(sorted(unknown))}")
    etype = raw.get("type")
    if etype not in EVENT_TYPES:
        raise ValueError(f"type must be one of {', '.join(EVENT_TYPES)}, got {etype!r}")
    sid = raw.get("story_id")
    if not is_valid_story_id(sid):
        raise ValueError(f"story_id must be 1-128 chars of [A-Za-z0-9_.:-], got {sid!r}")
    t = _finite_number(raw.get("time", now), "time", "UTC epoch seconds")
    if not (now - MAX_PAST_SECONDS <= t <= now + MAX_FUTURE_SECONDS):
        raise ValueError(f"time {t!r} is more than 7 days in the past or 5 minutes in the future")
    pos = raw.get("position")
    if pos is not None and (isinstance(pos, bool) or not isinstance(pos, int) or not 0 <= pos <= 10000):
        raise ValueError(f"position must be an integer in [0, 10000], got {pos!r}")
    dwell = raw.get("dwell_seconds")
    if etype == "dwell":
        dwell = _finite_number(dwell, "dwell_seconds", "seconds")
        if not 0 < dwell <= 86400:
            raise ValueError(f"dwell events need dwell_seconds in (0, 86400], got {dwell!r}")
    elif dwell is not None:
        raise ValueError(f"dwell_seconds is only allowed on dwell events (type {etype!r})")
    surface = raw.get("surface", "")
    if surface not in ("",) + SURFACES:
        raise ValueError(f"surface must be one of {', '.join(SURFACES)}, got {surface!r}")
    return Event(user_id, etype, sid, t, float(now), pos, dwell, surface)


def append_events(
    client, events: Sequence[Event], keys: Keys = Keys(), max_pending: int = MAX_PENDING_EVENTS
) -> list[str]:
    """XADDs events to their readers' stream shards and marks the readers active; one pipeline after
    an ``XLEN`` of each shard touched.

    The streams are never trimmed here (only :func:`flush_events` trims, after the Parquet files are
    written), so every event this returns an id for reaches the events dataset. The bound is checked
    per shard before the append, without a lock: concurrent requests can overshoot it by their own events.

    Returns:
      The event ids assigned (``"<shard>/<stream id>"``), in order.

    Raises:
      EventBacklogFull: a shard would hold more than ``max_pending`` unflushed events (none appended).
    """
    shards = [event_shard(e.user_id) for e in events]
    wanted = sorted(set(shards))
    pipe = client.pipeline(transaction=False)
    for k in wanted:
        pipe.xlen(keys.events(k))
    for k, pending in zip(wanted, pipe.execute(), strict=True):
        if int(pending) + shards.count(k) > max_pending:
            raise EventBacklogFull(
                f"{int(pending)} unflushed events in stream shard {k} (limit {max_pending}): "
                "run 'newsflow nightly --step flush' to move them to Parquet"
            )
    pipe = client.pipeline(transaction=False)
    for k, e in zip(shards, events, strict=True):
        fields = {
            "user_id": e.user_id,
            "type": e.type,
            "story_id": e.story_id,
            "event_time": repr(e.event_time),
            "received_time": repr(e.received_time),
            "position": "" if e.position is None else str(e.position),
            "dwell_seconds": "" if e.dwell_seconds is None else repr(e.dwell_seconds),
            "surface": e.surface,
        }
        pipe.xadd(keys.events(k), fields)
    latest: dict[str, float] = {}
    for e in events:
        latest[e.user_id] = max(latest.get(e.user_id, 0.0), e.received_time)
    mark_active(pipe, latest, keys)
    res = pipe.execute()
    return [f"{k}/{_d(r)}" for k, r in zip(shards, res[: len(events)], strict=True)]


def mark_active(pipe, last_seen: Mapping[str, float], keys: Keys = Keys()) -> None:
    """Queues on ``pipe`` the ``ZADD GT`` of each reader's last event time (UTC epoch s) to its shard's
    active set (the caller executes the pipeline)."""
    by_shard: dict[int, dict[str, float]] = {}
    for user, t in last_seen.items():
        by_shard.setdefault(event_shard(user), {})[user] = float(t)
    for k, members in sorted(by_shard.items()):
        pipe.zadd(keys.active_users(k), members, gt=True)


def active_readers(client, since: float, limit: int = 10000, keys: Keys = Keys()) -> list[str]:
    """Readers with an event at or after ``since`` (UTC epoch s), most recent first (ties by id), at
    most ``limit``.

    Reads every shard's most recent members in pages (``ZREVRANGEBYSCORE ... LIMIT``, one pipeline per
    round, each command at most ``2 * limit / 256`` members, at least 16) and stops reading a shard
    once its page ends below the ``limit``-th most recent time found so far, so about ``2 * limit``
    members travel, not ``limit`` per shard.
    """
    page = max(16, 2 * -(-int(limit) // EVENT_SHARDS))
    rows: list[tuple[float, str]] = []
    offset = dict.fromkeys(range(EVENT_SHARDS), 0)
    last: dict[int, float] = {}
    while offset and limit > 0:
        pipe = client.pipeline(transaction=False)
        shards = sorted(offset)
        for k in shards:
            pipe.zrevrangebyscore(
                keys.active_users(k), "+inf", float(since), start=offset[k], num=page, withscores=True
            )
        for k, got in zip(shards, pipe.execute(), strict=True):
            rows.extend((float(t), _d(u)) for u, t in got)
            if len(got) < page:
                del offset[k]
            else:
                offset[k] += page
                last[k] = float(got[-1][1])
        if len(rows) >= limit:
            rows.sort(key=lambda r: (-r[0], r[1]))
            del rows[limit:]
            floor = rows[-1][0]
            for k in [k for k in offset if last[k] < floor]:
                del offset[k]
    rows.sort(key=lambda r: (-r[0], r[1]))
    return [u for _, u in rows[:limit]]


_TRIM_ACTIVE_SCRIPT = """
local idle = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #idle > 0 then redis.call('ZREM', KEYS[1], unpack(idle)) end
return #idle
"""


def trim_active_readers(client, before: float, keys: Keys = Keys(), step: int = ACTIVE_TRIM_STEP) -> int:
    """Removes readers whose last event is before ``before`` (UTC epoch s) from every active set;
    returns how many were removed. Each step is one script call on one key that reads and removes at
    most ``step`` idle members atomically (a reader marked active meanwhile keeps its newer score)."""
    trim = client.register_script(_TRIM_ACTIVE_SCRIPT)
    removed = 0
    for k in range(EVENT_SHARDS):
        while True:
            n = int(trim(keys=[keys.active_users(k)], args=[repr(float(before)), int(step)]))
            removed += n
            if n < step:
                break
    return removed


def pending_events(client, keys: Keys = Keys()) -> list[tuple[str, dict[str, str]]]:
    """Every event still in the streams (unflushed, or flushed and not yet trimmed) as
    ``(event id, fields)``, shard by shard (for operators and tests; reads whole streams)."""
    out = []
    for k in range(EVENT_SHARDS):
        for eid, f in client.xrange(keys.events(k)):
            out.append((f"{k}/{_d(eid)}", {_d(a): _d(b) for a, b in f.items()}))
    return out


def backlog(client, keys: Keys = Keys()) -> int:
    """Entries held by all stream shards (one pipeline of ``XLEN``)."""
    pipe = client.pipeline(transaction=False)
    for k in range(EVENT_SHARDS):
        pipe.xlen(keys.events(k))
    return sum(int(n) for n in pipe.execute())


def _d(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else ("" if v is None else str(v))


def _next_id(stream_id: str) -> str:
    """The smallest stream id after ``stream_id`` (``"<ms>-<seq>"``)."""
    ms, seq = stream_id.split("-")
    return f"{ms}-{int(seq) + 1}"


def read_cursor(client, shard: int, keys: Keys = Keys()) -> tuple[str, tuple[str, str] | None]:
    """The flush cursor of stream shard ``shard``: ``(last flushed stream id, pending (first, last)
    range or None)``.

    The cursor key ``Keys.events_flushed(shard)`` holds ``"<last>"`` or ``"<last> <first> <pending last>"``
    while a range is being written (see the module docstring); absent means ``"0-0"``.
    """
    return _parse_cursor(_d(client.get(keys.events_flushed(shard))))


def _parse_cursor(raw: str) -> tuple[str, tuple[str, str] | None]:
    parts = raw.split()
    if not parts:
        return "0-0", None
    if len(parts) == 3:
        return parts[0], (parts[1], parts[2])
    return parts[0], None


_CAS_SCRIPT = """
local v = redis.call('GET', KEYS[1]) or ''
if v == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end
return 0
"""


def _compare_and_set(client, key: str, expected: str, value: str) -> bool:
    """``SET key value`` only if it still holds ``expected`` (``""``: absent); one key, atomic."""
    return bool(client.eval(_CAS_SCRIPT, 1, key, expected, value))


def _rows_by_date(shard: int, entries) -> dict[str, dict[str, list]]:
    """Stream entries as column lists per UTC date (``YYYY-MM-DD``) of their received time."""
    import datetime as dt

    ts = lambda v: dt.datetime.fromtimestamp(float(v), tz=dt.UTC)  # noqa: E731
    out: dict[str, dict[str, list]] = {}
    for eid, f in entries:
        g = {_d(k): _d(v) for k, v in f.items()}
        received = ts(g["received_time"]) if g.get("received_time") else None
        if received is None:  # written before received_time existed: the stream id's own time
            received = dt.datetime.fromtimestamp(int(_d(eid).split("-")[0]) / 1000.0, tz=dt.UTC)
        cols = out.setdefault(received.strftime("%Y-%m-%d"), {name: [] for name in EVENT_SCHEMA.names})
        cols["event_id"].append(f"{shard}/{_d(eid)}")
        cols["user_id"].append(g.get("user_id", ""))
        cols["type"].append(g.get("type", ""))
        cols["story_id"].append(g.get("story_id", ""))
        cols["event_time"].append(ts(g["event_time"]) if g.get("event_time") else None)
        cols["received_time"].append(received)
        cols["position"].append(int(g["position"]) if g.get("position") else None)
        cols["dwell_seconds"].append(float(g["dwell_seconds"]) if g.get("dwell_seconds") else None)
        cols["surface"].append(g.get("surface", ""))
    return out


def events_partition(out_dir: str, date: str) -> str:
    """Directory of one date's event files: ``<out_dir>/date=YYYY-MM-DD`` (Hive-style partition)."""
    return f"{out_dir.rstrip('/')}/date={date}"


def flush_events(
    client,
    out_dir: str,
    max_rows: int = 100_000,
    keys: Keys = Keys(),
    after_write: Callable[[], None] | None = None,
) -> tuple[int, str | None]:
    """Moves up to ``max_rows`` events from the stream shards into Parquet, exactly once.

    Shards are visited in order (one pipeline of ``GET`` cursor + ``XLEN`` finds those with work); in
    each, the protocol of the module docstring: the range ``(first, last]`` to write is recorded in the
    shard's cursor key before any file is written; every file of the range is named by the shard and
    the range (``<out_dir>/date=D/events-<shard>-{first}-{last}.parquet``, one per received date D),
    so a run after a crash at any point re-reads exactly that range and rewrites the same files
    (replacing, never adding); the cursor then moves to ``last`` (compare-and-set), and entries up to
    the cursor are trimmed from the stream (again on every later call, so a crash before the trim only
    delays it). Callers loop until it returns ``(0, None)``.

    Args:
      client: ``redis.Redis`` client.
      out_dir: root of the events dataset, local path or ``gs://`` URL (written through pyarrow's
        filesystems).
      max_rows: upper bound of rows per call (and of entries one command reads or trims).
      keys: the Redis key layout.
      after_write: called after the files of a range are written and before its cursor moves (tests
        use it to kill the process there).

    Returns:
      ``(rows written, out_dir)``, or ``(0, None)`` when no stream had anything new.
    """
    pipe = client.pipeline(transaction=False)
    for k in range(EVENT_SHARDS):
        pipe.get(keys.events_flushed(k))
        pipe.xlen(keys.events(k))
    state = pipe.execute()
    written = 0
    for k in range(EVENT_SHARDS):
        cursor, length = state[2 * k], int(state[2 * k + 1])
        if length == 0 and _parse_cursor(_d(cursor))[1] is None:
            continue
        if written >= max_rows:
            break
        written += _flush_shard(client, out_dir, k, max_rows - written, keys, after_write)
    return (written, out_dir) if written else (0, None)


def _flush_shard(client, out_dir: str, shard: int, max_rows: int, keys: Keys, after_write) -> int:
    """One range of up to ``max_rows`` entries of one shard to Parquet (module docstring); rows written."""
    from pyarrow import fs as pafs

    stream, cursor_key = keys.events(shard), keys.events_flushed(shard)
    while True:
        raw = _d(client.get(cursor_key))
        cursor, pending = _parse_cursor(raw)
        _trim(client, stream, cursor, max_rows)  # flushed entries left by a crash
        if pending is not None:
            entries = client.xrange(stream, min=pending[0], max=pending[1])
            break
        entries = client.xrange(stream, min=f"({cursor}", max="+", count=max_rows)
        if not entries:
            return 0
        pending = (_d(entries[0][0]), _d(entries[-1][0]))
        if _compare_and_set(client, cursor_key, raw, f"{cursor} {pending[0]} {pending[1]}"):
            break  # else another flusher moved the cursor meanwhile: read it again
    filesystem, root = pafs.FileSystem.from_uri(out_dir) if "://" in out_dir else (pafs.LocalFileSystem(), out_dir)
    name = f"events-{shard}-{pending[0]}-{pending[1]}.parquet"
    for date, cols in sorted(_rows_by_date(shard, entries).items()):
        table = pa.Table.from_arrays([pa.array(cols[f.name], type=f.type) for f in EVENT_SCHEMA], schema=EVENT_SCHEMA)
        directory = events_partition(root, date)
        filesystem.create_dir(directory, recursive=True)
        tmp = f"{directory}/.{name}.tmp"
        pq.write_table(table, tmp, filesystem=filesystem)
        filesystem.move(tmp, f"{directory}/{name}")
    if after_write is not None:
        after_write()
    _compare_and_set(client, cursor_key, f"{cursor} {pending[0]} {pending[1]}", pending[1])
    _trim(client, stream, pending[1], max_rows)
    return len(entries)


def _trim(client, stream: str, cursor: str, step: int) -> None:
    """Trims the entries up to ``cursor`` from ``stream``, at most ``step`` per ``XTRIM``."""
    while True:
        head = client.xrange(stream, min="-", max=cursor, count=step)
        if not head:
            return
        client.xtrim(stream, minid=_next_id(_d(head[-1][0])), approximate=False)
        if len(head) < step:
            return
