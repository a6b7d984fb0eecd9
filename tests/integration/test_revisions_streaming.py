"""Issue 10 item 14 through the real streaming job (``newsflow run``, DirectRunner, embedded Redis, Parquet):
a permalink re-slugged after a headline edit is one article with the new title and URL and one report of its
story, whichever version lands first; another outlet's copy is still a syndicated copy."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from newsflow.core.urls import article_id
from newsflow.storage.keys import Keys
from newsflow.storage.parquet import read_dataset
from newsflow.storage.story_index import assignments
from tests.conftest import REPO_ROOT
from tests.helpers import is_nd_key, is_story_key, parquet_rows, redis_state, run_streaming_job, state_difference

PUBLISHED = 1_730_000_000.0
OLD_URL = "https://www.gazette.example.org/city/mayor-opens-library-b2210/"
NEW_URL = "https://www.gazette.example.org/city/mayor-opens-new-central-library-b2210/"
COPY_URL = "https://www.wire-reprints.example.com/2024/10/27/mayor-opens-library"
SUMMARY = (
    "The mayor opened the new central library on Saturday after three years of building work. The library "
    "holds 200,000 books, a children's floor and a rooftop reading garden. Residents queued from early "
    "morning, and the first 500 visitors received a free library card. The city council approved the "
    "project in 2021 with a budget of 40 million euros."
)
KEYS = Keys()


def _doc(url: str, domain: str, title: str, fetched: float) -> bytes:
    d = {
        "body_b64": None,
        "content_language": "",
        "content_type": "",
        "etag": "",
        "feed_url": None,
        "fetch_time": fetched,
        "http_status": 0,
        "last_modified": "",
        "published_time": PUBLISHED,
        "source_domain": domain,
        "source_name": None,
        "summary": SUMMARY,
        "title": title,
        "url": url,
    }
    return json.dumps(d, sort_keys=True).encode()


DOCS = [
    _doc(OLD_URL, "gazette.example.org", "Mayor opens library", PUBLISHED + 600),
    _doc(COPY_URL, "wire-reprints.example.com", "Mayor opens library", PUBLISHED + 900),
    _doc(NEW_URL, "gazette.example.org", "Mayor opens new central library", PUBLISHED + 7200),
]


def _run(landing: str, output: str, redis_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "NEWSFLOW_KEY_PREFIX")}
    cmd = [sys.executable, "-m", "newsflow.cli", "run", "--runner", "DirectRunner", "--input", landing]
    cmd += ["--output", output, "--redis_url", redis_url]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr).decode(errors="replace")[-3000:]


def test_reslugged_permalink_is_one_article_and_one_report_in_either_order(tmp_path, redis_pair):
    snapshots = []
    for n, (client, order) in enumerate(zip(redis_pair, (DOCS, DOCS[::-1]), strict=True)):
        landing = tmp_path / f"in{n}.jsonl"
        landing.write_bytes(b"\n".join(order) + b"\n")
        out = str(tmp_path / f"out{n}")
        _run(str(landing), out, f"unix://{client.socket_file}")
        snapshots.append((client, out, redis_state(client), parquet_rows(out)))

    (c0, out0, redis0, rows0), (_, _, redis1, rows1) = snapshots
    assert redis0 == redis1, state_difference(redis0, redis1)
    assert rows0 == rows1

    old_id, new_id, copy_id = article_id(OLD_URL), article_id(NEW_URL), article_id(COPY_URL)
    # Parquet: one row for the re-slugged article (first-fetched id, new title and URL) and one for the copy
    articles = {r["article_id"]: r for r in read_dataset(out0, "articles").to_pylist()}
    assert set(articles) == {old_id, copy_id}
    assert (articles[old_id]["title"], articles[old_id]["url"]) == ("Mayor opens new central library", NEW_URL)
    # Redis: the new URL's id is a revision of the issued id; the serving hash shows the new version
    assert c0.hget(KEYS.article_record(new_id), "rev").decode() == old_id
    assert c0.hget(KEYS.article(old_id), "title") == b"Mayor opens new central library"
    assert not c0.exists(KEYS.article(new_id))
    # the story: two articles (the gazette's, the reprint), one independent report
    (story_key,) = [k for k in c0.keys(KEYS.story("*")) if c0.type(k) == b"hash" and c0.hexists(k, "article_count")]
    counts = c0.hmget(story_key, "article_count", "independent_count")
    assert counts == [b"2", b"1"]


def test_streaming_mode_newest_version_first_gives_the_stories_and_groups_of_the_bounded_run(tmp_path, redis_pair):
    """The job under TestStream (streaming DirectRunner: stories released on event-time timers): the new URL
    arrives first, the old one and the reprint a processing-time flush later, before the watermark passes
    their (equal) event time. Stories, near-duplicate groups, revisions and serving hashes equal the bounded
    run's."""
    bounded, streamed = redis_pair
    landing = tmp_path / "in.jsonl"
    landing.write_bytes(b"\n".join(DOCS) + b"\n")
    _run(str(landing), str(tmp_path / "bounded"), f"unix://{bounded.socket_file}")

    chunks = [[(DOCS[2], PUBLISHED)], [(DOCS[0], PUBLISHED), (DOCS[1], PUBLISHED)]]
    run_streaming_job(chunks, PUBLISHED + 1, f"unix://{streamed.socket_file}", str(tmp_path / "streamed"))

    def kept(client) -> dict:
        state = redis_state(client)
        return {k: v for k, v in state.items() if is_nd_key(k) or is_story_key(k)}

    a, b = kept(bounded), kept(streamed)
    assert a == b, state_difference(a, b)
    old_id = article_id(OLD_URL)
    assert streamed.hget(KEYS.article(old_id), "url") == NEW_URL.encode()
    assert assignments(streamed, KEYS).keys() == {
        old_id,
        article_id(COPY_URL),
    }
