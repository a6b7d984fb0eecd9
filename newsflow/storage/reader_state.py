"""The read-state store: what each reader read, the coverage they last saw, and the stories they saved.

One store for every surface that asks "has this reader read it?" (For You, read marks on every list,
``/v1/me/read``, the full-coverage "what changed" note) and "what did they save?" (the Saved page,
``/v1/me/saved``). Its keys are the reader's own, under the reader-bucket hash tag of
:mod:`newsflow.storage.keys` (``P:{r<b>}:reader:<user>:...``), so one reader's keys share one slot and one
pipeline reaches them, while readers spread over all buckets:

==========  =====  ============================================================================================
key         type   holds
==========  =====  ============================================================================================
``:read``   HASH   story id -> ``"<t>:<n>"``: when the reader last read it (UTC epoch s, a click or an opened
                   full-coverage page) and how many independent reports the story had then
``:seen``   HASH   story id -> JSON coverage snapshot of the last full-coverage view
                   (:func:`newsflow.serving.web_view.coverage_snapshot`)
``:saved``  ZSET   story id -> when the reader saved it (UTC epoch s)
==========  =====  ============================================================================================

A story "changed since it was read" when it now has more independent reports than at the read
(:func:`changed_since_read`): a syndicated copy of a report already there is not a new development.
``:read`` and ``:seen`` expire :data:`READ_TTL_SECONDS` after the reader's last read, and ``:read`` keeps the
newest :data:`MAX_READ` marks (older ones are trimmed when it grows past that), so the hash the personal feed
reads in its one round trip stays small. ``:saved`` keeps at most :data:`MAX_SAVED` stories and never expires.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from newsflow.storage.keys import Keys

READ_TTL_SECONDS = 30 * 86400
"""Read marks and coverage snapshots live 30 days after the reader's last read (stories are live ~2 days)."""
MAX_READ = 2000
"""Read marks kept per reader (the newest); the personal feed reads them all in its round trip (~40 KB)."""
MAX_SAVED = 1000
"""Saved stories per reader; saving one more answers :class:`SavedFull`."""


class ReadMark(NamedTuple):
    """One read mark: ``at`` (UTC epoch s) and ``reports``, the story's independent reports then (-1 unknown)."""

    at: float
    reports: int


class SavedFull(ValueError):
    """The reader already saved :data:`MAX_SAVED` stories."""


def _s(v) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def decode_read(raw: Mapping) -> dict[str, ReadMark]:
    """``{story id: ReadMark}`` from an HGETALL of the ``:read`` hash (unreadable entries are skipped)."""
    out = {}
    for k, v in raw.items():
        try:
            t, n = _s(v).split(":", 1)
            out[_s(k)] = ReadMark(float(t), int(n))
        except ValueError:
            continue
    return out


def changed_since_read(mark: ReadMark | None, independent_count) -> int:
    """New independent reports since the read (0 when unread-as-far-as-we-know, unchanged, or unknown)."""
    if mark is None or mark.reports < 0:
        return 0
    try:
        return max(0, int(independent_count or 0) - mark.reports)
    except (TypeError, ValueError):
        return 0


class ReaderStateStore:
    """Read marks, coverage snapshots and saved stories of readers (module docstring).

    Args:
      client: ``redis.Redis`` (``decode_responses=False``), or a cluster client.
      keys: the key layout.
    """

    def __init__(self, client, keys: Keys = Keys()):
        self.client, self.keys = client, keys

    # -- read marks -------------------------------------------------------------------------------
    def mark_read(self, user: str, marks: Mapping[str, tuple[float, int]], snapshots: Mapping | None = None) -> None:
        """Marks stories read: ``{story id: (read time UTC epoch s, independent reports then)}``; with
        ``snapshots`` (``{story id: JSON-able coverage snapshot}``) also stores what the reader saw, in the same
        pipeline (one slot). Both hashes' TTL restarts; past :data:`MAX_READ` marks the oldest are trimmed."""
        if not marks and not snapshots:
            return
        read, seen = self.keys.reader_read(user), self.keys.reader_seen(user)
        pipe = self.client.pipeline(transaction=False)
        if marks:
            pipe.hset(read, mapping={sid: f"{float(t)!r}:{int(n)}" for sid, (t, n) in marks.items()})
            pipe.expire(read, READ_TTL_SECONDS)
            pipe.hlen(read)
        for sid, snap in (snapshots or {}).items():
            pipe.hset(seen, sid, json.dumps(snap, separators=(",", ":"), sort_keys=True))
        if snapshots:
            pipe.expire(seen, READ_TTL_SECONDS)
        out = pipe.execute()
        if marks and out[2] > MAX_READ:
            self._trim(user)

    def _trim(self, user: str) -> None:
        read = self.keys.reader_read(user)
        marks = decode_read(self.client.hgetall(read))
        old = sorted(marks, key=lambda sid: (marks[sid].at, sid))[: max(0, len(marks) - MAX_READ)]
        if old:
            pipe = self.client.pipeline(transaction=False)
            pipe.hdel(read, *old)
            pipe.hdel(self.keys.reader_seen(user), *old)
            pipe.execute()

    def mark_unread(self, user: str, story_ids: Iterable[str]) -> int:
        """Removes read marks (and coverage snapshots); returns how many marks there were."""
        ids = list(story_ids)
        if not ids:
            return 0
        pipe = self.client.pipeline(transaction=False)
        pipe.hdel(self.keys.reader_read(user), *ids)
        pipe.hdel(self.keys.reader_seen(user), *ids)
        return int(pipe.execute()[0])

    def read_marks(self, user: str) -> dict[str, ReadMark]:
        """Every read mark of the reader (one HGETALL)."""
        return decode_read(self.client.hgetall(self.keys.reader_read(user)))

    def seen_story(self, user: str, story_id: str) -> dict | None:
        """What the reader last saw of a story's coverage (the snapshot :meth:`mark_read` stored), or ``None``
        (never seen, or unreadable)."""
        raw = self.client.hget(self.keys.reader_seen(user), story_id)
        try:
            doc = json.loads(raw) if raw is not None else None
        except ValueError:
            return None
        return doc if isinstance(doc, dict) else None

    # -- saved stories ----------------------------------------------------------------------------
    def save(self, user: str, story_id: str, now: float) -> float:
        """Saves a story at ``now`` (UTC epoch s) and returns its saved time (a story saved before keeps its
        first saved time).

        Raises:
          SavedFull: the reader already saved :data:`MAX_SAVED` stories.
        """
        key = self.keys.reader_saved(user)
        pipe = self.client.pipeline(transaction=False)
        pipe.zscore(key, story_id)
        pipe.zcard(key)
        score, n = pipe.execute()
        if score is not None:
            return float(score)
        if n >= MAX_SAVED:
            raise SavedFull(f"at most {MAX_SAVED} saved stories; remove some first")
        self.client.zadd(key, {story_id: float(now)}, nx=True)
        return float(now)

    def saved_count(self, user: str) -> int:
        """How many stories the reader saved."""
        return int(self.client.zcard(self.keys.reader_saved(user)))

    def view_state(self, user: str) -> tuple[dict, dict[str, ReadMark], frozenset[str]]:
        """``(the reader's user hash as HGETALL gives it, read marks, saved story ids)`` in one round trip (a
        non-transactional pipeline: the user hash and the reader's state may live in two slots)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hgetall(self.keys.user(user))
        pipe.hgetall(self.keys.reader_read(user))
        pipe.zrange(self.keys.reader_saved(user), 0, -1)
        h, reads, saved = pipe.execute()
        return h, decode_read(reads), frozenset(_s(x) for x in saved)

    def unsave(self, user: str, story_id: str) -> bool:
        """Removes a saved story; ``True`` when it was saved."""
        return bool(self.client.zrem(self.keys.reader_saved(user), story_id))

    def saved(self, user: str, offset: int = 0, limit: int = MAX_SAVED) -> list[tuple[str, float]]:
        """``[(story id, saved time)]``, newest saved first (ties: larger story id first), from ``offset``."""
        rows = self.client.zrevrange(self.keys.reader_saved(user), offset, offset + limit - 1, withscores=True)
        return [(_s(sid), float(t)) for sid, t in rows]
