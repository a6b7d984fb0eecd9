"""Landing RawDocuments for the pipeline: batched JSONL files committed atomically.

Each batch is one ``*.jsonl`` or ``*.jsonl.gz`` file, one
``RawDocument.to_json_dict()`` per line. Readers ignore names starting with
``_`` or ``.``, so:

* local directory: the batch is written to ``.<name>.tmp`` in the same directory,
  fsynced, then ``os.replace``-d to ``<name>`` (atomic on POSIX);
* ``gs://bucket/prefix``: the object is uploaded with ``if_generation_match=0``
  (create-only precondition). A GCS object becomes visible only once its upload
  is complete, so a reader never sees a partial file, and a name is never
  overwritten.

:class:`Publisher` is the interface the crawler writes to; :class:`LandingWriter`
implements it with files; :mod:`newsflow.crawler.sinks` adds Pub/Sub and Kafka sinks with the
same two methods (``publish`` / ``flush``) and a fan-out to several of them.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
import uuid
import zlib
from collections.abc import Sequence
from typing import Protocol

from newsflow.schemas import RawDocument


class Publisher(Protocol):
    """Where crawled documents go (files, Pub/Sub, Kafka)."""

    def publish(self, docs: Sequence[RawDocument]) -> None:
        """Accepts documents; may buffer them."""

    def flush(self) -> list[str]:
        """Commits buffered documents; returns the names of committed files/messages."""


def encode_record(doc: RawDocument) -> bytes:
    """One landing record: ``json.dumps(doc.to_json_dict(), ensure_ascii=False)`` in UTF-8, no newline.

    This is a landing-file line and, as is, a Pub/Sub or Kafka message (:mod:`newsflow.crawler.sinks`).
    The same bytes are built without running the JSON encoder over the body: ``body_b64`` is the
    last key of :meth:`RawDocument.to_json_dict` and base64 text never needs JSON escaping, so it
    is spliced in after the other fields are encoded.
    """
    d = doc.to_json_dict()
    b64 = d.get("body_b64")
    if b64 is None or next(reversed(d)) != "body_b64":
        return json.dumps(d, ensure_ascii=False).encode("utf-8")
    d["body_b64"] = None
    head = json.dumps(d, ensure_ascii=False)  # ends with '"body_b64": null}'
    return b"".join((head[: -len("null}")].encode("utf-8"), b'"', b64.encode("ascii"), b'"}'))


GZIP_LEVEL = 1
"""Default gzip level of landing files (1 = fastest .. 9 = smallest). Landing files are transient (the
job reads each once; Parquet is the history), and compressing them was the crawl worker's largest CPU
cost. Levels 1-3 are compressed by ISA-L's igzip (:func:`gzip_compressor`), 4-9 by zlib. On the 263
bundled pages (79.8 MB of landing records), compressing alone, per page and in all: zlib level 6 (the
earlier default) 8.45 ms and 19.4 MB, zlib level 1 4.05 ms and 23.0 MB, igzip level 1 0.82 ms and 22.8 MB,
igzip level 3 2.19 ms and 21.3 MB. In the 1-connection delays-off crawl of ``benchmarks.crawl`` requests
per CPU second against the same-requests baseline went from 0.311 (zlib 6) to 0.366 (zlib 1) and 0.47
(igzip 1). Pass ``gzip_level`` to :class:`LandingWriter` (``--gzip-level`` on ``newsflow crawl`` and
``push-server``) for smaller files."""


def _check_level(level: int) -> int:
    if isinstance(level, bool) or not isinstance(level, int) or not 1 <= level <= 9:
        raise ValueError(f"gzip level must be an integer 1..9, got {level!r}")
    return level


def gzip_compressor(level: int = GZIP_LEVEL):
    """A streaming compressor (``compress(bytes)``, then ``flush()``) whose output is one gzip member
    (RFC 1952, mtime 0) that any gzip reader (Python's ``gzip``, Beam's ``CompressionTypes.GZIP``)
    decompresses.

    Levels 1-3 use ISA-L's igzip (``isal.isal_zlib``, the python-isal package: ~3.5x faster than zlib's
    level 1 here for slightly smaller output), 4-9 zlib's deflate at that level.

    Raises:
      ValueError: ``level`` outside 1..9.
    """
    _check_level(level)
    if level <= 3:
        from isal import isal_zlib

        return isal_zlib.compressobj(level, isal_zlib.DEFLATED, 16 + isal_zlib.MAX_WBITS)
    return zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)


def encode_batch(docs: Sequence[RawDocument], compress: bool, gzip_level: int = GZIP_LEVEL) -> bytes:
    """JSONL bytes (optionally gzip at ``gzip_level``, 1..9, :func:`gzip_compressor`) of ``docs``, one
    :func:`encode_record` per line, UTF-8.

    Raises:
      ValueError: ``gzip_level`` outside 1..9.
    """
    _check_level(gzip_level)
    text = b"".join(encode_record(d) + b"\n" for d in docs)
    if not compress:
        return text
    z = gzip_compressor(gzip_level)
    return z.compress(text) + z.flush()


class LandingWriter:
    """Buffers RawDocuments and commits them as landing files (local dir or ``gs://``).

    Documents are encoded (and gzip-compressed, a streaming gzip member at ``gzip_level``,
    :func:`gzip_compressor`) as they are published, so :meth:`publish` (which the crawl worker runs off
    its event loop; the compressors release the GIL while compressing) carries the CPU cost and
    :meth:`flush` only writes the finished bytes. Thread-safe.

    Args:
      target: local directory or ``gs://bucket/prefix``.
      compress: write ``.jsonl.gz`` (default) instead of ``.jsonl``.
      gzip_level: zlib level 1..9 of ``.jsonl.gz`` files (default :data:`GZIP_LEVEL`, the fastest).
      max_docs: flush when this many documents are buffered.
      max_age_s: :meth:`maybe_flush` commits a non-empty buffer older than this.
      worker_id: put into file names so workers never collide.
      gcs_client: ``google.cloud.storage.Client`` for ``gs://`` targets (default: one built from env).
      clock: UTC epoch seconds source.

    Raises:
      ValueError: ``gzip_level`` outside 1..9, or a ``gs://`` target without a bucket.
    """

    def __init__(
        self,
        target: str,
        compress: bool = True,
        max_docs: int = 500,
        max_age_s: float = 5.0,
        worker_id: str = "",
        gcs_client=None,
        clock=time.time,
        gzip_level: int = GZIP_LEVEL,
    ):
        self.target = target.rstrip("/")
        self.compress = compress
        self.gzip_level = _check_level(gzip_level)
        self.max_docs = max_docs
        self.max_age_s = max_age_s
        self.worker_id = worker_id or uuid.uuid4().hex[:8]
        self.clock = clock
        self._count = 0  # documents in the open batch
        self._chunks: list[bytes] = []  # their encoded (compressed) bytes so far
        self._zip = None  # the open batch's compressor
        self._first_at: float | None = None
        self._seq = 0
        self._lock = threading.Lock()
        self._bucket = None
        if self.target.startswith("gs://"):
            from google.cloud import storage

            bucket, _, prefix = self.target[5:].partition("/")
            if not bucket:
                raise ValueError(f"gs:// target needs a bucket: {target!r}")
            client = gcs_client or storage.Client()
            self._bucket = client.bucket(bucket)
            self._prefix = prefix.strip("/")
        else:
            os.makedirs(self.target, exist_ok=True)
        self.committed: list[str] = []

    def publish(self, docs: Sequence[RawDocument]) -> None:
        """Encodes and buffers documents; flushes when ``max_docs`` are buffered.

        Raises:
          TypeError: an item is not a RawDocument (nothing of this call is buffered then).
        """
        for d in docs:
            if not isinstance(d, RawDocument):
                raise TypeError(f"expected RawDocument, got {type(d).__name__}")
        lines = [encode_record(d) + b"\n" for d in docs]  # outside the lock: threads encode in parallel
        if not lines:
            return
        with self._lock:
            if not self._count:
                self._first_at = self.clock()
                if self.compress:
                    self._zip = gzip_compressor(self.gzip_level)
            data = b"".join(lines)
            self._chunks.append(self._zip.compress(data) if self.compress else data)
            self._count += len(lines)
            full = self._count >= self.max_docs
        if full:
            self.flush()

    def flush_due(self, wait: bool = False) -> bool:
        """True when :meth:`maybe_flush` would commit now (cheap; no I/O).

        Args:
          wait: read the buffer's state under its lock (waiting for a :meth:`publish` that holds it while
            compressing). By default it is read without the lock: an event loop asking every turn must not
            block on another thread's compression, and a lock it only tried to take would almost never be
            free under steady publishing (no age flush at all). The unlocked read sees each attribute whole;
            a publish or flush between its two reads gives at worst a flush one turn early or late, and
            :meth:`maybe_flush` checks again under the lock.
        """
        if wait:
            with self._lock:
                count, first_at = self._count, self._first_at
        else:
            first_at, count = self._first_at, self._count
        return bool(count) and first_at is not None and self.clock() - first_at >= self.max_age_s

    def maybe_flush(self) -> list[str]:
        """Flushes when the oldest buffered document is older than ``max_age_s``."""
        return self.flush() if self.flush_due(wait=True) else []

    def flush(self) -> list[str]:
        """Commits the buffer as one file; returns ``[name]`` (``[]`` if empty)."""
        with self._lock:
            if not self._count:
                return []
            chunks, zipper = self._chunks, self._zip
            self._count, self._chunks, self._zip, self._first_at = 0, [], None, None
            self._seq += 1
            seq = self._seq
            if zipper is not None:
                chunks.append(zipper.flush())
        ext = ".jsonl.gz" if self.compress else ".jsonl"
        name = f"raw-{int(self.clock() * 1000):013d}-{self.worker_id}-{seq:06d}{ext}"
        data = b"".join(chunks)
        if self._bucket is not None:
            obj = f"{self._prefix}/{name}" if self._prefix else name
            blob = self._bucket.blob(obj)
            blob.upload_from_string(
                data, content_type="application/gzip" if self.compress else "application/jsonl", if_generation_match=0
            )
            full = f"gs://{self._bucket.name}/{obj}"
        else:
            tmp = os.path.join(self.target, f".{name}.tmp")
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            full = os.path.join(self.target, name)
            os.replace(tmp, full)
        self.committed.append(full)
        return [full]


def read_landing_file(path: str) -> list[RawDocument]:
    """Reads one local landing file (``.jsonl`` or ``.jsonl.gz``) back into RawDocuments."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [RawDocument.from_json_dict(json.loads(line)) for line in f if line.strip()]
