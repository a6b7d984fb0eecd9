"""The ``story_assignments`` Parquet dataset (:mod:`newsflow.schemas.story_assignments`) kept equal to Redis.

Rows are read from Redis, never from what a pipeline element says: an article's first story
(``Keys.story_assign``) resolved through the ``merged_into`` field of each retired story's hash
(``Keys.story``), its event time and its near-duplicate group (``event_time`` and ``cluster_id`` of
``Keys.article``). So a row depends only on the Redis state when it is written, not on
arrival order, bundling or which of two concurrent runs wrote it.

Which articles a run touches: its own articles, plus every member of each story their steps merged
away (:func:`merged_away`, :func:`members`): the only articles whose story a run can change. Each
touched partition is rewritten under a Redis lock (``Keys.history_lock``) by :func:`rewrite_partition`:
its file is read, the touched rows are replaced by their rows read from Redis now, and the result
is written as one content-addressed file; the files read are then deleted. A writer that outlives
its lock deletes only what it read, so rows are never lost, only (until the next rewrite) doubled.

Run by :class:`newsflow.transforms.story_assignments.WriteStoryAssignments`; nothing here imports Beam.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from newsflow.schemas._arrow import records_to_table, table_to_records
from newsflow.schemas.story_assignments import (
    DATASET,
    STORY_ASSIGNMENTS_SCHEMA,
    StoryAssignmentRow,
    partition_of,
)
from newsflow.storage.keys import Keys
from newsflow.storage.parquet import partition_files, read_partition_file, replace_partition
from newsflow.storage.story_index import assigned_stories, merge_records

CHUNK = 1000  # ids per HMGET / pipeline
MAX_MERGE_DEPTH = 10_000  # a merged_into chain longer than this is a cycle (a bug): ValueError


def _s(v) -> str | None:
    return v.decode("utf-8") if isinstance(v, bytes) else v


def _resolve_stories(client, keys: Keys, story_ids: Iterable[str]) -> dict[str, tuple[str, int]]:
    """story id -> (live story it resolves to through ``merged_into``, merges on the way), with one
    pipelined round trip per chain level.

    Raises:
      ValueError: a chain of more than :data:`MAX_MERGE_DEPTH` merges (a cycle).
    """
    nxt: dict[str, str] = {}
    frontier = sorted(set(story_ids))
    depth = 0
    while frontier:
        depth += 1
        if depth > MAX_MERGE_DEPTH:
            raise ValueError(f"story merge chain longer than {MAX_MERGE_DEPTH} from {frontier[:3]} (a cycle?)")
        pipe = client.pipeline(transaction=False)
        for sid in frontier:
            pipe.hget(keys.story(sid), "merged_into")
        found = []
        for sid, into in zip(frontier, pipe.execute(), strict=True):
            into = _s(into)
            nxt[sid] = into or ""
            if into and into not in nxt:
                found.append(into)
        frontier = sorted(set(found))
    out = {}
    for sid in nxt:
        cur, n = sid, 0
        while nxt.get(cur):
            cur, n = nxt[cur], n + 1
            if n > MAX_MERGE_DEPTH:
                raise ValueError(f"story merge chain from {sid} loops")
        out[sid] = (cur, n)
    return out


def current_rows(client, keys: Keys, article_ids: Iterable[str]) -> dict[str, StoryAssignmentRow | None]:
    """article id -> its row as Redis holds it now, ``None`` when Redis has no story assignment or no
    event time for it (dead-lettered by the story step, or expired by retention).

    Round trips: 1 per :data:`CHUNK` ids (pipelined) plus one per merge-chain level.
    """
    ids = sorted(set(article_ids))
    first: dict[str, str] = {}
    times: dict[str, float] = {}
    groups: dict[str, str | None] = {}
    for i in range(0, len(ids), CHUNK):
        part = ids[i : i + CHUNK]
        assigned = assigned_stories(client, keys, part)
        pipe = client.pipeline(transaction=False)
        for aid in part:
            pipe.hmget(keys.article(aid), ["event_time", "cluster_id"])
        res = pipe.execute()
        for j, aid in enumerate(part):
            sid = assigned[aid]
            t, cid = (_s(v) for v in res[j])
            if sid is not None:
                first[aid] = sid
            groups[aid] = cid
            if t:
                times[aid] = float(t)
    resolved = _resolve_stories(client, keys, first.values())
    out: dict[str, StoryAssignmentRow | None] = {}
    for aid in ids:
        if aid not in first or aid not in times:
            out[aid] = None
            continue
        story, n = resolved[first[aid]]
        out[aid] = StoryAssignmentRow(aid, story, first[aid], n, times[aid], groups[aid])
    return out


def merged_away(client, keys: Keys, article_ids: Iterable[str]) -> list[str]:
    """Ids of the stories that the steps of ``article_ids`` merged away, from the merge records
    (``Keys.story_merges``, one pipelined ``HGET`` per article); for replayed articles, whose step result
    says nothing."""
    wanted = set(article_ids)
    if not wanted:
        return []
    return sorted({rec["from"] for rec in merge_records(client, keys, sorted(wanted))})


def members(client, keys: Keys, story_ids: Iterable[str]) -> set[str]:
    """Member article ids of ``story_ids`` (``Keys.story_articles``; a retired story's holds its members
    when it was merged away, those it had absorbed included)."""
    ids = sorted(set(story_ids))
    out: set[str] = set()
    for i in range(0, len(ids), CHUNK):
        pipe = client.pipeline(transaction=False)
        for sid in ids[i : i + CHUNK]:
            pipe.zrange(keys.story_articles(sid), 0, -1)
        for arts in pipe.execute():
            out.update(_s(a) for a in arts)
    return out


def touched_articles(
    client, keys: Keys, own: Iterable[str], merged: Iterable[str] = (), replayed: Iterable[str] = ()
) -> set[str]:
    """The articles whose row a run may have changed: its ``own`` articles, and the members of the stories
    ``merged`` away by their steps and by the steps of the ``replayed`` ones (read from the merge records).
    """
    losers = set(merged)
    replayed = sorted(set(replayed))
    if replayed:
        losers.update(merged_away(client, keys, replayed))
    return set(own) | members(client, keys, losers)


def rewrite_partition(
    client,
    keys: Keys,
    root: str,
    partition: str,
    rows: Mapping[str, StoryAssignmentRow | None],
    lock_ttl_s: float = 120.0,
    lock_wait_s: float = 600.0,
) -> str | None:
    """Rewrites one partition of ``<root>/story_assignments`` with ``rows`` laid over what it holds.

    Args:
      client: Redis client (for the partition lock).
      keys: key names.
      root: dataset root, local directory or ``gs://``.
      partition: ``date=YYYY-MM-DD/hour=HH``.
      rows: touched article id -> its row now (:func:`current_rows`); ``None`` keeps the stored row
        (Redis no longer knows the article) or adds none.
      lock_ttl_s: lock expiry, seconds (a crashed writer's lock frees itself).
      lock_wait_s: longest wait for the lock, seconds.

    Returns:
      The path of the partition's file, or ``None`` when it has no rows.

    Raises:
      CorruptPartitionError: an existing file cannot be read (nothing written or deleted).
      redis.exceptions.LockError: the lock stayed taken for ``lock_wait_s`` (transient; retry).
    """
    with client.lock(keys.history_lock(DATASET, partition), timeout=lock_ttl_s, blocking_timeout=lock_wait_s):
        names = partition_files(root, DATASET, partition)
        merged: dict[str, StoryAssignmentRow] = {}
        for name in names:
            table = read_partition_file(root, DATASET, partition, name, STORY_ASSIGNMENTS_SCHEMA)
            for r in table_to_records(table, StoryAssignmentRow):
                old = merged.get(r.article_id)
                # two files only after a crash between a write and its delete: keep one row, deterministically
                merged[r.article_id] = r if old is None else max(old, r, key=repr)
        for aid, row in rows.items():
            if row is not None:
                if partition_of(row.event_time) != partition:
                    raise ValueError(f"article {aid} at {row.event_time} does not belong to partition {partition}")
                merged[aid] = row
        if not merged:
            return None
        out = [merged[aid] for aid in sorted(merged)]
        return replace_partition(root, DATASET, partition, records_to_table(out, STORY_ASSIGNMENTS_SCHEMA), names)


def rewrite(client, keys: Keys, root: str, article_ids: Iterable[str]) -> list[str]:
    """Reads the rows of ``article_ids`` from Redis and rewrites every partition they fall in, one after
    the other (the Beam sink does the same with partitions in parallel). Returns the paths written."""
    by_partition: dict[str, dict[str, StoryAssignmentRow | None]] = {}
    for aid, row in current_rows(client, keys, article_ids).items():
        if row is not None:
            by_partition.setdefault(partition_of(row.event_time), {})[aid] = row
    paths = [rewrite_partition(client, keys, root, p, rows) for p, rows in sorted(by_partition.items())]
    return [p for p in paths if p]


def read_rows(root: str) -> list[StoryAssignmentRow]:
    """Every row of the dataset (all partitions), sorted by article id ([] when absent)."""
    from newsflow.storage.parquet import read_dataset

    try:
        table = read_dataset(root, DATASET)
    except FileNotFoundError:
        return []
    return sorted(table_to_records(table, StoryAssignmentRow), key=lambda r: r.article_id)
