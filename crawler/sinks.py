"""Document sinks: where the crawler and the push endpoint send RawDocuments (files, Pub/Sub, Kafka).

One interface, :class:`DocumentSink` (the ``publish``/``flush`` pair of
:class:`newsflow.crawler.landing.Publisher`), three implementations, and a fan-out:

* :class:`newsflow.crawler.landing.LandingWriter` — landing files (local dir or ``gs://``), buffered;
* :class:`PubSubSink` — a Pub/Sub topic (``google-cloud-pubsub`` ``PublisherClient``);
* :class:`KafkaSink` — a Kafka topic (``confluent-kafka`` ``Producer``, librdkafka);
* :class:`FanOutSink` — every document to each of several sinks.

Wire format: one message per document whose data/value is exactly the landing-file line
without its newline, ``json.dumps(doc.to_json_dict(), ensure_ascii=False)`` in UTF-8
(:func:`newsflow.crawler.landing.encode_record`), so the streaming job's Pub/Sub and Kafka sources feed
the same parse step as landing files. The ordering key (Pub/Sub) / message key (Kafka) is the
document's article identity key (:func:`message_key`, :func:`newsflow.core.urls.identity_key`), so every
copy and spelling of one article URL goes to one partition / ordering stream, in publish order.

Event time and id (the streaming job reads them on every runner, :mod:`newsflow.transforms.io`): each
message carries the earliest time the crawler knows of the document, its feed/sitemap entry date clamped
to the fetch time, else the fetch time (:func:`newsflow.core.articles.event_time`), in integer epoch
milliseconds: the Pub/Sub attribute ``event_time`` (read with ``timestamp_attribute``) and the Kafka
record timestamp (create time; read with the create-time policy). Pub/Sub messages also carry the
attribute ``article_id`` (:func:`message_id`; Dataflow deduplicates redeliveries by it).

Delivery: a message sink's ``publish`` returns only after the broker confirmed every message
(Pub/Sub publish futures resolved; Kafka delivery reports with ``acks=all`` and an idempotent
producer), and raises :class:`PublishError` otherwise, so the caller (crawl worker, push
endpoint) does not mark a document done that was not delivered: it reports the error and
retries (at-least-once; the job is idempotent by article id). Landing files buffer up to
``max_age_s`` seconds, as documented in :mod:`newsflow.crawler.landing`.

On the command line (``newsflow crawl`` and ``newsflow push-server``), next to the landing
files: ``--publish pubsub:projects/P/topics/T`` and ``--publish kafka:HOST:9092[,HOST:9092]/TOPIC``
(repeatable), ``--kafka-config KEY=VALUE`` for librdkafka settings (e.g.
``security.protocol=SASL_SSL``), ``--no-landing`` to publish to the brokers only.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Protocol

from newsflow.core.articles import event_time_ms
from newsflow.core.urls import identity_key
from newsflow.crawler.landing import GZIP_LEVEL, LandingWriter, encode_record
from newsflow.schemas import RawDocument

PUBSUB_MAX_ORDERING_KEY_BYTES = 1024
"""Pub/Sub limit on an ordering key; longer canonical URLs are replaced by their SHA-256 (hex)."""

DEFAULT_TIMEOUT_S = 30.0


class PublishError(RuntimeError):
    """A message sink could not confirm delivery of some documents (the caller retries them)."""


class DocumentSink(Protocol):
    """Where RawDocuments go (the interface of :class:`newsflow.crawler.landing.Publisher`)."""

    def publish(self, docs: Sequence[RawDocument]) -> None:
        """Accepts documents. Message sinks return after delivery is confirmed (else raise
        :class:`PublishError`); file sinks may buffer until :meth:`flush`."""

    def flush(self) -> list[str]:
        """Commits anything buffered; returns the names of committed files (``[]`` for message sinks)."""


def message_key(doc: RawDocument) -> str:
    """Ordering / partition key of a document: the identity key of its URL
    (:func:`newsflow.core.urls.identity_key`: ``http://www.example.com/a/1/`` -> ``https://example.com/a/1``;
    its raw URL when it has none), or the SHA-256 hex of that when it is longer than Pub/Sub's 1 KiB limit."""
    try:
        key = identity_key(doc.url)
    except ValueError:
        key = doc.url
    if len(key.encode("utf-8")) > PUBSUB_MAX_ORDERING_KEY_BYTES:
        key = hashlib.sha256(key.encode("utf-8")).hexdigest()
    return key


def _check(docs: Sequence[RawDocument]) -> None:
    for d in docs:
        if not isinstance(d, RawDocument):
            raise TypeError(f"expected RawDocument, got {type(d).__name__}")


class PubSubSink:
    """Publishes each document as one Pub/Sub message and waits for the server's acknowledgement.

    Args:
      topic: ``projects/P/topics/T``.
      client: a ``google.cloud.pubsub_v1.PublisherClient`` with message ordering enabled (default:
        one built now; ``$PUBSUB_EMULATOR_HOST`` points it at the emulator). Production: give it a
        regional endpoint, as ordering keys are only ordered within a region.
      timeout_s: longest wait for one batch of acknowledgements, seconds.
    """

    name = "pubsub"

    def __init__(self, topic: str, client=None, timeout_s: float = DEFAULT_TIMEOUT_S):
        parts = topic.split("/")
        if len(parts) != 4 or parts[0] != "projects" or parts[2] != "topics" or not parts[1] or not parts[3]:
            raise ValueError(f"Pub/Sub topic must be projects/PROJECT/topics/TOPIC, got {topic!r}")
        self.topic = topic
        self.timeout_s = timeout_s
        if client is None:
            from google.cloud import pubsub_v1

            client = pubsub_v1.PublisherClient(
                publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True)
            )
        self.client = client

    def publish(self, docs: Sequence[RawDocument]) -> None:
        """Publishes ``docs`` (ordering key: :func:`message_key`) and waits for every message id.

        Raises:
          PublishError: a message was not acknowledged within ``timeout_s`` seconds; its ordering
            key is resumed so that the retry can publish it again.
        """
        _check(docs)
        pending = []
        for d in docs:
            key = message_key(d)
            future = self.client.publish(self.topic, encode_record(d), ordering_key=key, **message_attributes(d))
            pending.append((d, key, future))
        failed = []
        for d, key, future in pending:
            try:
                future.result(timeout=self.timeout_s)
            except Exception as e:  # noqa: BLE001 - any failure means "not delivered"; the caller retries
                failed.append(f"{d.url}: {type(e).__name__}: {e}")
                try:
                    self.client.resume_publish(self.topic, key)  # a failed ordering key stays paused until resumed
                except Exception:  # noqa: BLE001,S110 - resuming is best effort; the error is reported below
                    pass
        if failed:
            raise PublishError(f"Pub/Sub {self.topic}: {len(failed)} of {len(docs)} not delivered: {failed[0]}")

    def flush(self) -> list[str]:
        """Nothing is buffered (``publish`` waits), so nothing to commit."""
        return []


class KafkaSink:
    """Produces each document as one Kafka record (key: :func:`message_key`; timestamp: the document's event
    time in ms, :func:`newsflow.core.articles.event_time_ms`) and waits for its delivery report.

    The topic must keep producer timestamps (``message.timestamp.type=CreateTime``, Kafka's default): the
    job reads them with the create-time policy.

    Args:
      bootstrap_servers: ``host:port[,host:port]``.
      topic: topic name.
      config: extra librdkafka settings (e.g. ``{"security.protocol": "SASL_SSL"}`` or, in tests,
        ``{"test.mock.num.brokers": 1}``); they override the defaults ``acks=all``,
        ``enable.idempotence=true``, ``linger.ms=5``.
      timeout_s: longest wait for the delivery reports of one call, seconds.
      producer: an existing ``confluent_kafka.Producer`` (default: one built from the settings).
    """

    name = "kafka"

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        config: dict | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        producer=None,
    ):
        if not bootstrap_servers or not topic:
            raise ValueError(f"Kafka sink needs bootstrap servers and a topic, got {bootstrap_servers!r}, {topic!r}")
        self.topic = topic
        self.timeout_s = timeout_s
        if producer is None:
            from confluent_kafka import Producer

            settings = {
                "bootstrap.servers": bootstrap_servers,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 5,
            }
            settings.update(config or {})
            producer = Producer(settings)
        self.producer = producer
        self._lock = threading.Lock()  # one call waits for its own reports at a time

    def publish(self, docs: Sequence[RawDocument]) -> None:
        """Produces ``docs`` and flushes the producer until every delivery report arrived.

        Raises:
          PublishError: a delivery report carried an error, or reports were missing after
            ``timeout_s`` seconds.
        """
        _check(docs)
        errors: list[str] = []
        delivered = [0]

        def on_delivery(err, msg) -> None:
            if err is not None:
                errors.append(f"{err}")
            else:
                delivered[0] += 1

        with self._lock:
            for d in docs:
                value, key = encode_record(d), message_key(d).encode("utf-8")
                while True:
                    try:
                        self.producer.produce(
                            self.topic, value=value, key=key, timestamp=event_time_ms(d), on_delivery=on_delivery
                        )
                        break
                    except BufferError:  # local queue full: serve delivery reports, then try again
                        self.producer.poll(0.1)
            left = self.producer.flush(self.timeout_s)
        if errors or left or delivered[0] != len(docs):
            detail = errors[0] if errors else f"{left} message(s) still queued after {self.timeout_s:g} s"
            raise PublishError(f"Kafka {self.topic}: {len(docs) - delivered[0]} of {len(docs)} not delivered: {detail}")

    def flush(self) -> list[str]:
        """Nothing is buffered past ``publish``, so nothing to commit."""
        return []


class FanOutSink:
    """Sends every document to each of ``sinks`` in order (e.g. landing files, then Kafka).

    ``publish`` raises the first sink's error after trying all of them, so a retry may repeat a
    document on the sinks that had taken it (at-least-once, deduplicated downstream by article id).
    """

    def __init__(self, sinks: Sequence[DocumentSink]):
        if not sinks:
            raise ValueError("FanOutSink needs at least one sink")
        self.sinks = list(sinks)

    @property
    def committed(self) -> list[str]:
        """Landing files committed so far (by the landing sinks)."""
        return [name for s in self.sinks for name in getattr(s, "committed", [])]

    def publish(self, docs: Sequence[RawDocument]) -> None:
        """Publishes to every sink; raises the first error after trying all of them."""
        first: BaseException | None = None
        for s in self.sinks:
            try:
                s.publish(docs)
            except Exception as e:  # noqa: BLE001 - re-raised below, after the other sinks had their turn
                first = first or e
        if first is not None:
            raise first

    def maybe_flush(self) -> list[str]:
        """Flushes the sinks that buffer by age (landing files)."""
        return [name for s in self.sinks if hasattr(s, "maybe_flush") for name in s.maybe_flush()]

    def flush(self) -> list[str]:
        """Flushes every sink; returns the committed file names."""
        return [name for s in self.sinks for name in s.flush()]


def message_id(doc: RawDocument) -> str:
    """The ``article_id`` attribute of a document's message: :func:`newsflow.core.urls.article_id` of its URL
    (32 hex), or, for a URL that has none, the SHA-256 (first 32 hex) of the URL as given; never empty,
    as Dataflow would take every message with an empty id for one message."""
    from newsflow.core.urls import article_id

    try:
        return article_id(doc.url)
    except ValueError:
        return hashlib.sha256(doc.url.encode("utf-8")).hexdigest()[:32]


def message_attributes(doc: RawDocument) -> dict[str, str]:
    """Pub/Sub attributes of a document's message: ``article_id`` (:func:`message_id`) and ``event_time``
    (:func:`newsflow.core.articles.event_time_ms`, decimal epoch milliseconds, as ``timestamp_attribute`` reads)."""
    return {"article_id": message_id(doc), "event_time": str(event_time_ms(doc))}


def parse_publish_spec(spec: str, kafka_config: dict | None = None) -> DocumentSink:
    """A message sink from ``pubsub:projects/P/topics/T`` or ``kafka:BOOTSTRAP/TOPIC``.

    Raises:
      ValueError: an unknown scheme or a malformed target (the message shows the spec).
    """
    scheme, sep, target = spec.partition(":")
    if not sep or not target:
        raise ValueError(f"--publish must be pubsub:projects/P/topics/T or kafka:HOST:PORT/TOPIC, got {spec!r}")
    if scheme == "pubsub":
        return PubSubSink(target)
    if scheme == "kafka":
        bootstrap, slash, topic = target.rpartition("/")
        if not slash or not bootstrap or not topic:
            raise ValueError(
                f"--publish kafka: needs BOOTSTRAP/TOPIC (e.g. kafka:localhost:9092/raw-documents), got {spec!r}"
            )
        return KafkaSink(bootstrap, topic, kafka_config)
    raise ValueError(f"--publish scheme must be pubsub or kafka, got {scheme!r} in {spec!r}")


def parse_kafka_config(items: Sequence[str]) -> dict:
    """``["KEY=VALUE", ...]`` -> ``{KEY: VALUE}``.

    Raises:
      ValueError: an item without ``=``.
    """
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--kafka-config must be KEY=VALUE, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def add_sink_arguments(parser) -> None:
    """Adds ``--publish``, ``--kafka-config``, ``--no-landing`` and ``--gzip-level`` (shared by ``crawl`` and
    ``push-server``)."""
    parser.add_argument(
        "--publish",
        action="append",
        default=[],
        metavar="SINK",
        help="also publish every document to pubsub:projects/P/topics/T or kafka:HOST:PORT/TOPIC "
        "(repeatable; key = canonical article URL; delivery confirmed before a document "
        "counts as done; default: none)",
    )
    parser.add_argument(
        "--kafka-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="librdkafka producer setting for kafka: sinks, repeatable (default: acks=all, "
        "enable.idempotence=true, linger.ms=5)",
    )
    parser.add_argument(
        "--no-landing", action="store_true", help="publish only to the --publish sinks, write no landing files"
    )
    parser.add_argument(
        "--gzip-level",
        type=int,
        default=GZIP_LEVEL,
        choices=range(1, 10),
        metavar="1..9",
        help="gzip level of .jsonl.gz landing files: 1 fastest .. 9 smallest; 1-3 by ISA-L igzip, 4-9 by zlib "
        "(default: %(default)s)",
    )


def build_sink(args, landing: str, worker_id: str = "") -> tuple[DocumentSink, list[str]]:
    """The sink of a command's parsed arguments and a description of its parts.

    Args:
      args: parsed arguments with ``publish``, ``kafka_config``, ``no_landing``, ``no_gzip`` and
        ``gzip_level`` (optional; default :data:`newsflow.crawler.landing.GZIP_LEVEL`).
      landing: landing directory or ``gs://`` prefix.
      worker_id: put into landing file names.

    Returns:
      ``(sink, ["landing:<dir>", "pubsub:...", ...])``.

    Raises:
      ValueError: a malformed ``--publish``/``--kafka-config``, or ``--no-landing`` without ``--publish``.
    """
    kafka_config = parse_kafka_config(args.kafka_config)
    sinks: list[DocumentSink] = []
    names: list[str] = []
    if args.no_landing and not args.publish:
        raise ValueError("--no-landing needs at least one --publish sink")
    if not args.no_landing:
        sinks.append(
            LandingWriter(
                landing,
                compress=not args.no_gzip,
                worker_id=worker_id,
                gzip_level=getattr(args, "gzip_level", GZIP_LEVEL),
            )
        )
        names.append(f"landing:{landing}")
    for spec in args.publish:
        sinks.append(parse_publish_spec(spec, kafka_config))
        names.append(spec)
    return (sinks[0] if len(sinks) == 1 else FanOutSink(sinks)), names
