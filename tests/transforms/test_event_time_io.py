"""The read side of the event-time rule: the built graph's read parameters, and element timestamps
through the job's core under TestStream (messages timestamped as Pub/Sub delivers them with
``timestamp_attribute="event_time"``)."""

from __future__ import annotations

import json

import apache_beam as beam
import pytest
from apache_beam.coders import RowCoder
from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.portability.api import beam_runner_api_pb2, external_transforms_pb2
from apache_beam.testing import test_stream
from apache_beam.testing.util import assert_that, equal_to

from newsflow.crawler.sinks import message_attributes
from newsflow.pipelines.launcher import make_runner
from newsflow.pipelines.streaming import ProcessRawDocuments, build_pipeline, job_config_from_options
from newsflow.schemas import RawDocument
from newsflow.transforms.content import ContentConfig
from newsflow.transforms.groups import GroupConfig
from newsflow.transforms.io import kafka_read_transform

SUBSCRIPTION = "projects/newsflow-test/subscriptions/raw-documents"


def _pubsub_reads(runner: str) -> list:
    argv = [
        "--runner",
        runner,
        "--streaming",
        "--project",
        "newsflow-test",
        "--region",
        "europe-west1",
        "--temp_location",
        "gs://newsflow-bucket/tmp",
        "--pubsub_subscription",
        SUBSCRIPTION,
        "--output",
        "gs://newsflow-bucket/out",
        "--redis_url",
        "redis://127.0.0.1:6399/0",
    ]
    pipeline = beam.Pipeline(runner="DirectRunner", options=PipelineOptions())
    build_pipeline(pipeline, job_config_from_options(PipelineOptions(argv)))
    proto = pipeline.to_runner_api()
    return [
        beam_runner_api_pb2.PubSubReadPayload.FromString(t.spec.payload)
        for t in proto.components.transforms.values()
        if t.spec.urn == "beam:transform:pubsub_read:v1"
    ]


def test_pubsub_read_takes_event_time_from_the_attribute_and_dedups_by_article_id_on_dataflow_only():
    [dataflow] = _pubsub_reads("DataflowRunner")
    assert (dataflow.subscription, dataflow.timestamp_attribute, dataflow.id_attribute) == (
        SUBSCRIPTION,
        "event_time",
        "article_id",
    )
    [direct] = _pubsub_reads("DirectRunner")
    assert (direct.timestamp_attribute, direct.id_attribute) == ("event_time", "")  # the job's own dedup applies


def test_kafka_read_uses_the_create_time_policy():
    read = kafka_read_transform("broker:9092", "raw-documents", "newsflow")
    config = external_transforms_pb2.ExternalConfigurationPayload.FromString(read._payload)
    row = RowCoder(config.schema).decode(config.payload)
    assert row.timestamp_policy == "CreateTime"
    assert list(row.topics) == ["raw-documents"]
    assert dict(row.consumer_config) == {"bootstrap.servers": "broker:9092", "group.id": "newsflow"}


PAGE = (
    "<html><head><title>Council approves new riverside park</title>"
    '<meta property="article:published_time" content="2014-03-09T10:00:00Z"></head><body><article>'
    "<h1>Council approves new riverside park</h1>"
    + "".join(
        f"<p>The city council voted on Tuesday to approve plan number {i} for the riverside park, "
        "which will add walking paths, a playground and flood defences along the old docks.</p>"
        for i in range(8)
    )
    + "</article></body></html>"
).encode()


def test_articles_keep_their_messages_timestamp_whatever_extraction_finds(redis_server):
    """A feed entry (dated 2 h before its fetch), a page whose HTML says it was published two days before
    its fetch, and a message whose timestamp is later than its record says: every article is
    timestamped with its message's event time (never earlier), the page's date is stored, not used."""
    _, url = redis_server
    fetch = 1_394_600_000.0
    feed = RawDocument(
        url="https://a.example.com/mh370",
        source_domain="a.example.com",
        fetch_time=fetch,
        title="Malaysia Airlines flight MH370 search widens to the Andaman Sea",
        published_time=fetch - 7200,
    )
    page = RawDocument(
        url="https://news.example.org/park",
        source_domain="news.example.org",
        fetch_time=fetch + 60,
        http_status=200,
        content_type="text/html",
        body=PAGE,
    )
    later = RawDocument(
        url="https://c.example.com/ecb",
        source_domain="c.example.com",
        fetch_time=fetch,
        title="ECB unlikely to end sterilisation of SMP purchases, traders say",
    )
    messages = []
    for doc, shift_ms in ((feed, 0), (page, 0), (later, 90_000)):  # `later`: its publisher stamped 90 s later
        ms = int(message_attributes(doc)["event_time"]) + shift_ms
        messages.append((json.dumps(doc.to_json_dict()).encode(), ms / 1000))
    stream = test_stream.TestStream().advance_watermark_to(fetch - 10)
    for data, ts in reversed(messages):
        stream = stream.add_elements([beam.window.TimestampedValue(data, ts)])
    stream = stream.advance_watermark_to_infinity()

    opts = PipelineOptions(["--runner", "BundleBasedDirectRunner"])
    opts.view_as(StandardOptions).streaming = True
    with beam.Pipeline(runner=make_runner(opts), options=opts) as p:
        core = p | stream | ProcessRawDocuments(ContentConfig(), GroupConfig(redis_url=url))
        stamped = core["articles"] | beam.Map(
            lambda a, t=beam.DoFn.TimestampParam: (a.url, float(t), a.event_time, a.publish_time)
        )
        assert_that(
            stamped,
            equal_to(
                [
                    (feed.url, fetch - 7200, fetch - 7200, fetch - 7200),
                    (page.url, fetch + 60, fetch + 60, 1_394_359_200.0),  # 2014-03-09T10:00Z stored, not restamped
                    (later.url, fetch + 90, fetch + 90, None),
                ]
            ),
        )
        assert_that(core["dead_letter"], equal_to([]), label="NoDeadLetters")


@pytest.mark.parametrize("published", [None, 1_394_600_000.0 + 5])
def test_an_entry_dated_after_its_fetch_takes_the_fetch_time(published):
    doc = RawDocument(url="https://a.example.com/x", source_domain="a.example.com", fetch_time=1_394_600_000.0)
    assert message_attributes(doc._replace(published_time=published))["event_time"] == "1394600000000"
