"""The ``story_assignments`` dataset on a real Redis and real Parquet files: one row per article with Redis's
story, a merge rewrites only the partitions of the retired story's members, replays give the same bytes,
a torn rewrite heals, a corrupt file stops the write with a clear error, and ``run-continuous`` over many
batches keeps one row per article."""

from __future__ import annotations

import json

import pytest

from newsflow.schemas.story_assignments import DATASET, StoryAssignmentRow, partition_of
from newsflow.storage import story_assignments as sa
from newsflow.storage.keys import Keys
from newsflow.storage.parquet import CorruptPartitionError, partition_files
from tests.helpers import corpus_lines, dataset_bytes, redis_story_of_every_article

KEYS = Keys()
H = 3600.0
T0 = 1_394_400_000.0  # 2014-03-09 21:20 UTC
# article -> (event time, first story, near-duplicate group)
ARTICLES = {
    "a1": (T0 + 60, "s1", "ca1"),
    "a2": (T0 + 120, "s2", "ca2"),
    "a3": (T0 + H + 60, "s1", "ca1"),
    "a4": (T0 + 2 * H + 60, "s2", "ca4"),
    "a5": (T0 + 2 * H + 120, "s3", "ca5"),
    "a6": (T0 + 3 * H + 60, "s3", "ca6"),
}


def _seed(client) -> None:
    """Redis as the story step leaves it: assignments, article event times, groups, member lists."""
    for aid, (t, sid, cid) in ARTICLES.items():
        client.hset(KEYS.story_assign_of(aid), aid, sid)
        client.hset(
            KEYS.article(aid), mapping={"event_time": repr(t), "url": f"https://e.com/{aid}", "cluster_id": cid}
        )
        client.zadd(KEYS.story_articles(sid), {aid: t})
        client.hset(KEYS.story(sid), mapping={"title": sid, "merged_into": ""})


def _merge(client, loser: str, winner: str, by_article: str) -> None:
    """What a merge writes: the loser's hash points at the winner, the winner holds its members, a record."""
    members = client.zrange(KEYS.story_articles(loser), 0, -1, withscores=True)
    client.zadd(KEYS.story_articles(winner), dict(members))
    client.hset(KEYS.story(loser), "merged_into", winner)
    rec = {"from": loser, "into": winner, "time": ARTICLES[by_article][0], "article_id": by_article}
    client.hset(KEYS.story_merges_of(by_article), by_article, json.dumps([rec]))


def _rows(root) -> dict[str, StoryAssignmentRow]:
    rows = sa.read_rows(str(root))
    assert len(rows) == len({r.article_id for r in rows}), "an article has two rows"
    return {r.article_id: r for r in rows}


def test_rows_are_redis_assignments_and_a_merge_rewrites_only_its_members_partitions(redis_server, tmp_path):
    client, _ = redis_server
    root = str(tmp_path / "out")
    _seed(client)
    sa.rewrite(client, KEYS, root, ARTICLES)
    before = dataset_bytes(root)
    # one file per event hour: 4 hours, rows sorted by article id
    assert sorted(p.split("/part-")[0] for p in before) == [
        "date=2014-03-09/hour=21",
        "date=2014-03-09/hour=22",
        "date=2014-03-09/hour=23",
        "date=2014-03-10/hour=00",
    ]
    rows = _rows(root)
    assert {a: r.story_id for a, r in rows.items()} == {a: v[1] for a, v in ARTICLES.items()}
    assert rows["a4"] == StoryAssignmentRow("a4", "s2", "s2", 0, T0 + 2 * H + 60, "ca4")

    # a6's step merges s2 into s1: the retired story's members (a2 in hour 21, a4 in hour 23) move
    _merge(client, "s2", "s1", "a6")
    touched = sa.touched_articles(client, KEYS, own=["a6"], merged=["s2"])
    assert touched == {"a2", "a4", "a6"}
    sa.rewrite(client, KEYS, root, touched)
    after = dataset_bytes(root)
    changed = {p.split("/part-")[0] for p in set(after) ^ set(before)}
    assert changed == {"date=2014-03-09/hour=21", "date=2014-03-09/hour=23"}  # a6's hour held the same rows
    rows = _rows(root)
    assert rows["a2"] == StoryAssignmentRow("a2", "s1", "s2", 1, T0 + 120, "ca2")
    assert {a: r.story_id for a, r in rows.items()} == redis_story_of_every_article(client)

    # a chain: s1 into s3; a replayed a6 finds the merge through the merge records
    _merge(client, "s1", "s3", "a6")
    touched = sa.touched_articles(client, KEYS, own=["a6"], replayed=["a6"])
    assert touched == set(ARTICLES) - {"a5"}  # both merge records of a6's step: s2's and s1's members; a5 stays
    sa.rewrite(client, KEYS, root, touched)
    rows = _rows(root)
    assert {a: r.story_id for a, r in rows.items()} == redis_story_of_every_article(client)
    assert {a: r.story_id for a, r in rows.items()} == dict.fromkeys(ARTICLES, "s3")
    assert (rows["a2"].first_story_id, rows["a2"].merge_count) == ("s2", 2)

    # a replay of the same decisions gives the same files, byte for byte
    settled = dataset_bytes(root)
    sa.rewrite(client, KEYS, root, ARTICLES)
    assert dataset_bytes(root) == settled


def test_rows_outlive_redis_and_a_torn_rewrite_heals(redis_server, tmp_path):
    client, _ = redis_server
    root = str(tmp_path / "out")
    _seed(client)
    sa.rewrite(client, KEYS, root, ARTICLES)
    part = partition_of(ARTICLES["a4"][0])
    (old,) = partition_files(root, DATASET, part)
    old_bytes = (tmp_path / "out" / DATASET / part / old).read_bytes()
    _merge(client, "s2", "s1", "a5")
    sa.rewrite(client, KEYS, root, ["a4"])
    # a crash between the write and the delete: the old file is back beside the new one
    (tmp_path / "out" / DATASET / part / old).write_bytes(old_bytes)
    assert len(partition_files(root, DATASET, part)) == 2
    sa.rewrite(client, KEYS, root, ["a4"])
    (name,) = partition_files(root, DATASET, part)
    assert _rows(root)["a4"].story_id == "s1"
    # Redis lost: rows whose article Redis no longer knows are kept as written
    client.flushall()
    kept = dataset_bytes(root)
    paths = sa.rewrite_partition(client, KEYS, root, part, {"a4": None, "a5": None})
    assert paths.endswith(name)
    assert dataset_bytes(root) == kept


def test_a_corrupt_file_stops_the_rewrite_with_a_clear_error_and_loses_nothing(redis_server, tmp_path):
    client, _ = redis_server
    root = str(tmp_path / "out")
    _seed(client)
    sa.rewrite(client, KEYS, root, ARTICLES)
    part = partition_of(ARTICLES["a1"][0])
    (name,) = partition_files(root, DATASET, part)
    path = tmp_path / "out" / DATASET / part / name
    path.write_bytes(path.read_bytes()[:40])  # truncated
    with pytest.raises(CorruptPartitionError, match=name) as err:
        sa.rewrite(client, KEYS, root, ["a1"])
    assert "move the file aside" in str(err.value)
    assert partition_files(root, DATASET, part) == [name] and len(path.read_bytes()) == 40
    assert not client.keys(KEYS.history_lock(DATASET, "*"))  # the lock was released


def test_run_continuous_rewrites_earlier_batches_rows_when_a_later_batch_merges_their_story(redis_server, tmp_path):
    from newsflow.core.urls import article_id
    from newsflow.pipelines.continuous import ContinuousConfig, FileCursor, run_once

    client, url = redis_server
    landing, out = tmp_path / "landing", str(tmp_path / "out")
    landing.mkdir()
    lines = corpus_lines(20)  # line 18's step merges the story of lines 6, 7, 10, 11 and 12 into another
    batch_of = {}
    for i in range(4):
        (landing / f"batch-{i:02d}.jsonl").write_bytes(b"\n".join(lines[i * 5 : (i + 1) * 5]) + b"\n")
        batch_of.update({article_id(json.loads(ln)["url"]): i for ln in lines[i * 5 : (i + 1) * 5]})
    config = ContinuousConfig(
        input_dir=str(landing),
        cursor_path=str(tmp_path / "cursor.jsonl"),
        job_argv=("--runner", "DirectRunner", "--output", out, "--redis_url", url),
        max_files=1,
        now="latest",
    )
    cursor = FileCursor(config.cursor_path)
    rows_after = []
    while run_once(config, cursor, client, clock=lambda: T0) is not None:
        rows_after.append(_rows(out))
    assert len(rows_after) == 4
    rows = rows_after[-1]
    resolved = redis_story_of_every_article(client)
    assert len(rows) == len(resolved) == 20
    assert {a: r.story_id for a, r in rows.items()} == resolved
    # rows written by an earlier batch's run, moved to another story by the last batch's merge
    moved = [a for a, r in rows.items() if r.merge_count and batch_of[a] < 3]
    assert moved
    for a in moved:
        assert rows_after[batch_of[a]][a].story_id == rows[a].first_story_id != rows[a].story_id
    for p in dataset_bytes(out):
        assert len(partition_files(out, DATASET, p.split("/part-")[0])) == 1


def test_newsflow_run_summary_reports_the_story_keys_and_the_largest_story(redis_server, tmp_path):
    from collections import Counter

    from newsflow.pipelines.launcher import summary
    from newsflow.pipelines.streaming import run
    from tests.helpers import write_headlines

    client, url = redis_server
    landing = write_headlines(tmp_path / "h.jsonl", 60)
    out = summary(run(["--input", landing, "--output", str(tmp_path / "out"), "--redis_url", url], environ={}))
    resolved = redis_story_of_every_article(client)
    assert len(resolved) == 60
    largest = max(Counter(resolved.values()).values())
    assert largest > 1
    assert out["story_keys"] == 1  # the step keys every article to one shard today
    assert out["story_max_key_share"] == 1.0
    assert out["largest_story_share"] == round(largest / 60, 6)
    assert out["parquet_files_story_assignments"] == len(dataset_bytes(str(tmp_path / "out"))) > 0
