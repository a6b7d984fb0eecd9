"""Reader events (impression, click, dwell): validation, Redis stream, Parquet flush.

The API validates each event with :func:`validate_event` and appends it with
:func:`append_events` to the Redis stream ``Keys.events`` (``XADD``, approximate
``MAXLEN`` bound) and marks the user active in ``Keys.active_users`` (keys: :mod:`newsflow.keys`).
A job calls :func:`flush_events` to move the stream into Parquet files for the nightly jobs:
rows are written first, then the cursor ``Keys.events_flushed`` advances, then the written
entries are deleted, so a crash between the two re-writes the same file name (the
file is named by its first and last stream ids) instead of losing events. The cursor and the
deletion are one ordered pipeline, not a transaction: the stream and the cursor are untagged
keys that may live in different Redis Cluster slots.

Event JSON accepted from clients::

    {"type": "impression"|"click"|"dwell", "story_id": str, "time": epoch s (optional),
     "position": int >= 0 (optional), "dwell_seconds": float in (0, 86400] (dwell only),
     "surface": "top"|"topic"|"trending"|"story"|"feed" (optional)}
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from newsflow.keys import Keys
from schemas.event import EVENT_SCHEMA, EVENT_TYPES, SURFACES, Event  # re-exported: the record lives in schemas/

MAX_EVENTS_PER_REQUEST = 100
MAX_PAST_SECONDS = 7 * 86400
MAX_FUTURE_SECONDS = 300
STREAM_MAXLEN = 1_000_000
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


def append_events(client, events: Sequence[Event], keys: Keys = Keys()) -> list[str]:
    """XADDs events to ``Keys.events`` and marks their users active; one pipeline.

    Returns:
      The stream ids assigned, in order.
    """
    pipe = client.pipeline(transaction=False)
    for e in events:
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
        pipe.xadd(keys.events, fields, maxlen=STREAM_MAXLEN, approximate=True)
    latest: dict[str, float] = {}
    for e in events:
        latest[e.user_id] = max(latest.get(e.user_id, 0.0), e.received_time)
    if latest:
        pipe.zadd(keys.active_users, latest, gt=True)
    res = pipe.execute()
    return [r.decode() if isinstance(r, bytes) else str(r) for r in res[: len(events)]]


def _d(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else ("" if v is None else str(v))


def flush_events(client, out_dir: str, max_rows: int = 100_000, keys: Keys = Keys()) -> tuple[int, str | None]:
    """Moves up to ``max_rows`` events from the stream into one Parquet file.

    Args:
      client: ``redis.Redis`` client.
      out_dir: directory for ``events-{first_id}-{last_id}.parquet`` files.
      max_rows: upper bound of rows per call.
      keys: the Redis key layout.

    Returns:
      ``(rows written, file path or None when the stream had nothing new)``.
    """
    import datetime as dt

    cursor = _d(client.get(keys.events_flushed)) or "0-0"
    entries = client.xrange(keys.events, min=f"({cursor}", max="+", count=max_rows)
    if not entries:
        return 0, None
    ts = lambda v: dt.datetime.fromtimestamp(float(v), tz=dt.UTC)  # noqa: E731
    cols: dict[str, list] = {name: [] for name in EVENT_SCHEMA.names}
    for eid, f in entries:
        g = {_d(k): _d(v) for k, v in f.items()}
        cols["event_id"].append(_d(eid))
        cols["user_id"].append(g.get("user_id", ""))
        cols["type"].append(g.get("type", ""))
        cols["story_id"].append(g.get("story_id", ""))
        cols["event_time"].append(ts(g["event_time"]) if g.get("event_time") else None)
        cols["received_time"].append(ts(g["received_time"]) if g.get("received_time") else None)
        cols["position"].append(int(g["position"]) if g.get("position") else None)
        cols["dwell_seconds"].append(float(g["dwell_seconds"]) if g.get("dwell_seconds") else None)
        cols["surface"].append(g.get("surface", ""))
    table = pa.Table.from_arrays([pa.array(cols[f.name], type=f.type) for f in EVENT_SCHEMA], schema=EVENT_SCHEMA)
    first, last = cols["event_id"][0], cols["event_id"][-1]
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"events-{first}-{last}.parquet")
    tmp = path + ".tmp"
    pq.write_table(table, tmp)
    os.replace(tmp, path)
    pipe = client.pipeline(transaction=False)  # cursor first: see the module docstring
    pipe.set(keys.events_flushed, last)
    pipe.xdel(keys.events, *[e[0] for e in entries])
    pipe.execute()
    return len(entries), path
