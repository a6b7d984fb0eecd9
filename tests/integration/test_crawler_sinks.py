"""Document sinks: the crawler publishes through the real Kafka client to librdkafka's mock cluster
and through google-cloud-pubsub to the Pub/Sub emulator (when the gcloud emulator is installed);
the messages read back are the landing records, and the streaming job's parse step accepts them."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time

import apache_beam as beam
import pytest
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing.util import assert_that, equal_to

from newsflow.core.urls import article_id, identity_key
from newsflow.crawler.frontier import Frontier
from newsflow.crawler.httpserver import HttpServer
from newsflow.crawler.landing import LandingWriter, encode_batch, encode_record
from newsflow.crawler.sinks import FanOutSink, KafkaSink, PublishError, PubSubSink, message_key
from newsflow.crawler.worker import CrawlWorker
from newsflow.schemas import RawDocument
from newsflow.transforms.coders import register_coders
from newsflow.transforms.content import ParseRawDocuments
from newsflow.transforms.deadletter import DEAD_LETTER_TAG
from newsflow.transforms.io import kafka_record_value
from tests.integration.test_crawler_worker import FAST, Site, config, landed, rss, run_worker

confluent_kafka = pytest.importorskip("confluent_kafka")


@pytest.fixture
def redis(redis_server):
    client, _ = redis_server
    return client


@pytest.fixture
def mock_kafka():
    """librdkafka's built-in mock cluster (one broker), kept alive by the client that created it;
    yields its bootstrap address for ordinary producers and consumers."""
    holder = confluent_kafka.Producer({"test.mock.num.brokers": 1})
    brokers = holder.list_topics(timeout=10).brokers
    yield ",".join(f"{b.host}:{b.port}" for b in brokers.values())
    holder.flush(1)


def consume_all(bootstrap: str, topic: str, n: int, timeout_s: float = 20.0) -> list:
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "test", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    out, end = [], time.monotonic() + timeout_s
    try:
        while len(out) < n and time.monotonic() < end:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out.append(msg)
    finally:
        consumer.close()
    return out


def parse_step(payloads: list[bytes], expected: list[RawDocument]) -> None:
    """The streaming job's parse step accepts ``payloads`` as exactly ``expected``, no dead letters."""
    register_coders()
    with beam.Pipeline(runner=FnApiRunner()) as p:
        out = p | beam.Create(payloads) | ParseRawDocuments()
        assert_that(out["main"], equal_to(expected), label="Docs")
        assert_that(out[DEAD_LETTER_TAG], equal_to([]), label="NoDeadLetters")


def test_crawler_publishes_to_kafka_and_landing_files(redis, tmp_path, mock_kafka):
    site = Site(feeds={"a.test": rss("a.test", 3), "b.test": rss("b.test", 2)})
    kafka = KafkaSink(mock_kafka, "raw-documents")
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        for h in ("a.test", "b.test"):
            fr.add(f"http://{h}/feed.xml", "feed", 0.0)
        sink = FanOutSink([LandingWriter(str(tmp_path / "land")), kafka])
        run_worker(CrawlWorker(fr, sink, config(srv.port), schedule=FAST), max_tasks=7)
    docs = landed(tmp_path / "land")
    assert len(docs) == 5
    msgs = consume_all(mock_kafka, "raw-documents", 5)
    got = [RawDocument.from_json_dict(json.loads(m.value())) for m in msgs]
    assert sorted(got) == sorted(docs)
    by_url = {d.url: d for d in docs}
    for m in msgs:
        doc = RawDocument.from_json_dict(json.loads(m.value()))
        assert m.key().decode() == identity_key(doc.url)
        assert m.value() == encode_record(by_url[doc.url])  # byte for byte the landing line
    parse_step([kafka_record_value((m.key(), m.value())) for m in msgs], sorted(docs))


class FlakySink:
    """Refuses the first ``failures`` publishes, as a broker that is down would."""

    def __init__(self, failures: int):
        self.failures = failures
        self.docs: list[RawDocument] = []

    def publish(self, docs):
        if self.failures > 0:
            self.failures -= 1
            raise PublishError("broker unavailable")
        self.docs += docs

    def flush(self):
        return []


def test_failed_publish_is_reported_and_retried_not_marked_done(redis, tmp_path):
    site = Site(feeds={"c.test": rss("c.test", 1)})
    sink = FlakySink(failures=2)
    with HttpServer(site) as srv:
        fr = Frontier(redis)
        fr.add("http://c.test/feed.xml", "feed", 0.0)
        run_worker(CrawlWorker(fr, sink, config(srv.port), schedule=FAST), max_tasks=4, duration_s=20)
        stats = fr.stats()
    assert [d.url for d in sink.docs] == ["http://c.test/news/0"]
    assert int(stats["publish_failed"]) == 2 and int(stats["pages_landed"]) == 1
    assert site.calls[("c.test", "/news/0")] == 3  # fetched again for each retry of the publish


class _Future:
    def __init__(self, error=None):
        self.error = error

    def result(self, timeout=None):
        if self.error:
            raise self.error
        return "1"


class FakePublisher:
    """Records what :class:`PubSubSink` hands to ``PublisherClient.publish`` (no network)."""

    def __init__(self, fail: bool = False):
        self.calls, self.resumed, self.fail = [], [], fail

    def publish(self, topic, data, ordering_key="", **attrs):
        self.calls.append((topic, data, ordering_key, attrs))
        return _Future(RuntimeError("deadline exceeded") if self.fail else None)

    def resume_publish(self, topic, ordering_key):
        self.resumed.append(ordering_key)


def _doc(url="http://Example.com/a/1?utm_source=x", body=b"<html>\xc3\xa9t\xc3\xa9</html>"):
    return RawDocument(
        url=url,
        source_domain="example.com",
        fetch_time=1_700_000_000.0,
        http_status=200,
        content_type="text/html",
        body=body,
        title="Été",
        published_time=1_699_999_000.0,
    )


def test_pubsub_message_is_the_landing_record_keyed_by_article_identity():
    fake = FakePublisher()
    sink = PubSubSink("projects/p/topics/raw", client=fake)
    doc = _doc()
    sink.publish([doc])
    [(topic, data, key, attrs)] = fake.calls
    assert topic == "projects/p/topics/raw" and key == "https://example.com/a/1" == message_key(doc)
    assert message_key(doc._replace(url="http://www.example.com/a/1/")) == key
    assert data == encode_record(doc) and data + b"\n" == encode_batch([doc], compress=False)
    assert attrs["article_id"] and len(attrs["article_id"]) == 32
    parse_step([data], [doc])
    long = _doc(url="http://example.com/" + "x" * 2000)
    assert len(message_key(long)) == 64  # over Pub/Sub's 1 KiB ordering-key limit: its SHA-256


def test_pubsub_failure_raises_and_resumes_the_ordering_key():
    fake = FakePublisher(fail=True)
    with pytest.raises(PublishError, match="1 of 1 not delivered"):
        PubSubSink("projects/p/topics/raw", client=fake).publish([_doc()])
    assert fake.resumed == ["https://example.com/a/1"]
    with pytest.raises(ValueError, match="projects/PROJECT/topics/TOPIC"):
        PubSubSink("raw", client=fake)


def test_messages_carry_the_event_time_rule_and_a_nonempty_article_id():
    """Attribute ``event_time`` (epoch ms) = the feed/sitemap date clamped to the fetch time, else the
    fetch time; ``article_id`` = the URL's article id, never empty."""
    fake = FakePublisher()
    sink = PubSubSink("projects/p/topics/raw", client=fake)
    dated = _doc()  # entry dated 1000 s before its fetch
    future = _doc(url="http://example.com/b")._replace(published_time=1_700_000_000.0 + 7200)  # dated after its fetch
    undated = _doc(url="http://example.com/c")._replace(published_time=None, fetch_time=1_700_000_123.4567)
    odd = _doc(url="not a url")
    sink.publish([dated, future, undated, odd])
    attrs = [a for _, _, _, a in fake.calls]
    assert [a["event_time"] for a in attrs] == ["1699999000000", "1700000000000", "1700000123456", "1699999000000"]
    assert attrs[0]["article_id"] == article_id("http://example.com/a/1") != attrs[1]["article_id"]
    assert len(attrs[3]["article_id"]) == 32  # no article id for that URL: a hash of it, not ""
    assert all(set(a) == {"article_id", "event_time"} for a in attrs)


def test_kafka_records_are_timestamped_with_the_event_time(mock_kafka):
    docs = [_doc(), _doc(url="http://example.com/c")._replace(published_time=None, fetch_time=1_700_000_123.4567)]
    KafkaSink(mock_kafka, "timed").publish(docs)
    msgs = sorted(consume_all(mock_kafka, "timed", 2), key=lambda m: m.timestamp()[1])
    assert [m.timestamp() for m in msgs] == [
        (confluent_kafka.TIMESTAMP_CREATE_TIME, 1_699_999_000_000),
        (confluent_kafka.TIMESTAMP_CREATE_TIME, 1_700_000_123_456),
    ]


EMULATOR = "/usr/lib/google-cloud-sdk/platform/pubsub-emulator/bin/cloud-pubsub-emulator"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def pubsub_emulator(monkeypatch, tmp_path):
    """The gcloud Pub/Sub emulator (Java) on 127.0.0.1; skipped when it is not installed."""
    exe = EMULATOR if os.path.exists(EMULATOR) else shutil.which("cloud-pubsub-emulator")
    if not exe or not shutil.which("java"):
        pytest.skip("Pub/Sub emulator (gcloud component pubsub-emulator + Java) not installed")
    port = _free_port()
    log = open(tmp_path / "emulator.log", "wb")
    proc = subprocess.Popen([exe, "--host=127.0.0.1", f"--port={port}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.3)
        else:
            pytest.skip("Pub/Sub emulator did not start within 60 s")
        monkeypatch.setenv("PUBSUB_EMULATOR_HOST", f"127.0.0.1:{port}")
        yield
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def test_pubsub_through_the_emulator(pubsub_emulator):
    from google.cloud import pubsub_v1

    topic, sub = "projects/local/topics/raw", "projects/local/subscriptions/raw-job"
    pubsub_v1.PublisherClient().create_topic(name=topic)
    subscriber = pubsub_v1.SubscriberClient()
    subscriber.create_subscription(request={"name": sub, "topic": topic, "enable_message_ordering": True})
    docs = [_doc(url=f"http://example.com/a/{i}") for i in range(3)] + [_doc(url="http://example.com/a/0", body=b"v2")]
    sink = PubSubSink(topic)
    sink.publish(docs)
    received = []
    end = time.monotonic() + 30
    while len(received) < len(docs) and time.monotonic() < end:
        resp = subscriber.pull(request={"subscription": sub, "max_messages": 10}, timeout=10)
        received += [m.message for m in resp.received_messages]
        if resp.received_messages:
            subscriber.acknowledge(request={"subscription": sub, "ack_ids": [m.ack_id for m in resp.received_messages]})
    assert sorted(m.data for m in received) == sorted(encode_record(d) for d in docs)
    assert {m.ordering_key for m in received} == {f"https://example.com/a/{i}" for i in range(3)}
    same_key = [m.data for m in received if m.ordering_key == "https://example.com/a/0"]
    assert same_key == [encode_record(docs[0]), encode_record(docs[3])]  # one key: publish order kept
    parse_step([m.data for m in received], docs)
