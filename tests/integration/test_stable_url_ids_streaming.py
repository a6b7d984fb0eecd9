"""Issue 37 item 1 through the real job (DirectRunner, embedded Redis, Parquet): a headline edit changes the
permalink but keeps its numeric id. Poll 1 lists ``/news/ferry-fares-rise-in-spring/a/57312`` (published 07:40
UTC); poll 2 lists ``/news/ferry-operator-confirms-fare-rise/a/57312`` (same id, same publish time, headline and
text rewritten past the near-duplicate threshold) and a new related article ``/a/57329``. Expected: one article
with the newest title and URL under the first id, the other id resolving to it (Redis ``rev``, Parquet
``aliases``), one member of its story; ``/a/57329`` its own article; the same state in any arrival order."""

from __future__ import annotations

import json
import os

from newsflow.core.urls import article_id
from newsflow.storage.aliases import resolve_article_id
from newsflow.storage.keys import Keys
from newsflow.storage.parquet import read_dataset
from newsflow.storage.story_index import assignments
from tests.helpers import parquet_rows, redis_state, run_job, state_difference, utc, write_lines
from tests.integration.test_run_continuous import Loop

OLD_URL = "https://harbour-gazette.example/news/ferry-fares-rise-in-spring/a/57312"
NEW_URL = "https://harbour-gazette.example/news/ferry-operator-confirms-fare-rise/a/57312"
RELATED_URL = "https://harbour-gazette.example/news/island-residents-react-to-fare-rise/a/57329"
PUBLISHED = utc("2026-03-12 07:40:00")
POLL_1, POLL_2 = utc("2026-03-12 07:45:00"), utc("2026-03-12 09:10:00")
OLD_TITLE, NEW_TITLE = "Ferry fares rise in spring", "Ferry operator confirms fare rise"
OLD_TEXT = (
    "Ferry fares between the harbour and the islands will rise in spring, according to a draft timetable seen "
    "by the Gazette. Return tickets for foot passengers would go from 9 to 11 pounds and car fares would climb "
    "by a fifth. The draft also drops the late sailing on Sundays."
)
NEW_TEXT = (
    "Island Ferries has confirmed that ticket prices will go up from April, blaming fuel and crew costs. Its "
    "chief executive told councillors the company had no choice after two years of losses. Season tickets for "
    "islanders are frozen until the autumn, the operator said in a statement on Thursday."
)
RELATED_TEXT = (
    "Residents of the outer islands reacted angrily to the ferry fare rise at a packed meeting in the village "
    "hall. Many said the crossing was their only way to reach the hospital and the secondary school, and asked "
    "the council to subsidise fares for islanders."
)
KEYS = Keys()


def _doc(url: str, title: str, text: str, published: float, fetched: float) -> bytes:
    """A feed item as the crawler lands it (feed-only: title, summary, entry date)."""
    d = {
        "body_b64": None,
        "content_language": "en",
        "content_type": "",
        "etag": "",
        "feed_url": "https://harbour-gazette.example/news/rss",
        "fetch_time": fetched,
        "http_status": 0,
        "last_modified": "",
        "published_time": published,
        "source_domain": "harbour-gazette.example",
        "source_name": "Harbour Gazette",
        "summary": text,
        "title": title,
        "url": url,
    }
    return json.dumps(d, sort_keys=True).encode()


POLLS = [
    _doc(OLD_URL, OLD_TITLE, OLD_TEXT, PUBLISHED, POLL_1),
    _doc(NEW_URL, NEW_TITLE, NEW_TEXT, PUBLISHED, POLL_2),
    _doc(RELATED_URL, "Island residents react to ferry fare rise", RELATED_TEXT, PUBLISHED + 5100, POLL_2),
]


def test_an_edited_permalink_with_the_same_numeric_id_is_one_article_in_any_order(tmp_path, redis_pair):
    runs = []
    for n, (client, order) in enumerate(zip(redis_pair, (POLLS, [POLLS[2], POLLS[1], POLLS[0]]), strict=True)):
        landing = write_lines(tmp_path / f"in{n}.jsonl", order)
        out = str(tmp_path / f"out{n}")
        run_job(tmp_path, f"unix://{client.socket_file}", landing, out)
        runs.append((client, out, redis_state(client), parquet_rows(out)))
    (redis, out, state0, rows0), (_, _, state1, rows1) = runs
    assert state0 == state1, state_difference(state0, state1)
    assert rows0 == rows1

    old_id, new_id, related_id = article_id(OLD_URL), article_id(NEW_URL), article_id(RELATED_URL)
    # the edit rewrote the text past the near-duplicate rule (SimHash within 3 bits, borderline up to 5):
    # the stable id, not text similarity, made them one article
    fps = [int(redis.hget(KEYS.article_record(aid), "fp"), 16) for aid in (old_id, new_id)]
    assert (fps[0] ^ fps[1]).bit_count() > 5

    # Redis: stored under the first-fetched id with the newest title and URL; both URLs resolve to it
    assert redis.hmget(KEYS.article(old_id), "title", "url") == [NEW_TITLE.encode(), NEW_URL.encode()]
    assert not redis.exists(KEYS.article(new_id))
    assert redis.hget(KEYS.article_record(new_id), "rev") == old_id.encode()
    assert resolve_article_id(redis, KEYS, OLD_URL) == resolve_article_id(redis, KEYS, NEW_URL) == old_id
    assert resolve_article_id(redis, KEYS, RELATED_URL) == related_id
    assert redis.hget(KEYS.article(related_id), "url") == RELATED_URL.encode()

    # Parquet: one row per article; the edited one lists the other URL's id as its alias
    rows = {r["article_id"]: r for r in read_dataset(out, "articles").to_pylist()}
    assert set(rows) == {old_id, related_id}
    assert (rows[old_id]["title"], rows[old_id]["url"], rows[old_id]["aliases"]) == (NEW_TITLE, NEW_URL, [new_id])
    assert rows[related_id]["aliases"] == []

    # stories: the related article joins the edited one's story; the edit is one member and one independent
    # report there (three members and three reports if the new URL were a second article)
    story_of = assignments(redis, KEYS)
    assert set(story_of) == {old_id, related_id}
    (sid,) = set(story_of.values())
    assert sorted(m.decode() for m in redis.zrange(KEYS.story_articles(sid), 0, -1)) == sorted([old_id, related_id])
    assert redis.hmget(KEYS.story(sid), "article_count", "independent_count") == [b"2", b"2"]


def test_run_continuous_over_the_two_polls_as_two_runs_gives_one_article(tmp_path, redis_pair):
    """``newsflow run-continuous``: poll 1's landing file is one run, poll 2's the next; the new version arrives in
    a run after its stored id was logged and assigned. The Redis state equals one bounded run over both files."""
    bounded, continuous = redis_pair
    run_job(tmp_path, f"unix://{bounded.socket_file}", write_lines(tmp_path / "all.jsonl", POLLS), str(tmp_path / "b"))
    landing = tmp_path / "landing"
    landing.mkdir()
    loop = Loop(tmp_path, f"unix://{continuous.socket_file}")
    try:
        for k, polled in enumerate((POLLS[:1], POLLS[1:])):
            path = write_lines(tmp_path / f"raw-{k:04d}.jsonl", polled)
            os.replace(path, landing / os.path.basename(path))
            runs = loop.wait_runs(k + 1)
            assert runs[k]["files"] == 1 and runs[k]["job"]["state"] == "DONE", runs[k]
    finally:
        loop.stop()
    old_id, related_id = article_id(OLD_URL), article_id(RELATED_URL)
    assert continuous.hmget(KEYS.article(old_id), "title", "url") == [NEW_TITLE.encode(), NEW_URL.encode()]
    assert assignments(continuous, KEYS).keys() == {old_id, related_id}
    (sid,) = set(assignments(continuous, KEYS).values())
    assert continuous.hmget(KEYS.story(sid), "article_count", "independent_count") == [b"2", b"2"]

    def kept(client) -> dict:
        return {k: v for k, v in redis_state(client).items() if b":{art:" in k or b":{uid:" in k or b":{st:" in k}

    a, b = kept(bounded), kept(continuous)
    assert a == b, state_difference(a, b)
