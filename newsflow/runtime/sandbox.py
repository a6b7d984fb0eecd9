"""Time-limited article extraction in a pool of long-lived child processes.

:class:`ArticleExtractor` is the production entry point of extraction: it runs
:func:`newsflow.core.extraction.extract_content` with a wall-clock limit per document
and turns an overrun into ``ExtractionError("timeout")``.

Why processes: trafilatura cannot be interrupted from another thread and Beam
calls DoFns from worker threads, so ``signal.alarm`` cannot be used. Each
:class:`ArticleExtractor` therefore keeps a small pool of long-lived child
processes (``python -c`` running :func:`_worker_main` of this module, imported
by its module path, not ``multiprocessing``, so the parent's ``__main__`` is
never re-imported).

Protocol: a document is sent to an idle child as a frame (8-byte big-endian
length, then a pickle of ``(tuple(raw), asdict(config))``) over its stdin pipe;
the child answers with one frame, ``("ok", tuple(ExtractedContent))`` or
``("err", error_type, message)``, after a first ``("ready", pid)`` frame at
start. The parent waits on the stdout pipe with ``select`` until ``timeout_s``.
On expiry the child is killed (SIGKILL), a fresh one replaces it on the next
call, and the document fails with ``"timeout"``. Idle children are handed out
through a queue, so several threads can call :meth:`ArticleExtractor.extract`
at once (up to ``workers`` run in parallel; others wait for a free child, and
waiting does not count against the limit). A child exits on its own when its
stdin closes (parent gone).

Feed-only documents and ``ExtractionConfig(isolate=False)`` are extracted in
the calling thread, without a child and without the limit.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import queue
import select
import struct
import subprocess
import sys
import threading
import time
import weakref
from dataclasses import asdict

from newsflow.core.extraction import ExtractedContent, ExtractionConfig, ExtractionError, check_fetch, extract_content
from newsflow.schemas.raw import RawDocument

_LOG = logging.getLogger(__name__)

_HEADER = struct.Struct(">Q")


def frame(obj) -> bytes:
    """One message of the parent/child pipe protocol: an 8-byte big-endian length, then ``obj`` pickled."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


def _write_frame(stream, obj) -> None:
    stream.write(frame(obj))
    stream.flush()


def _read_frame_blocking(stream):
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (n,) = _HEADER.unpack(header)
    data = stream.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


def serve_frames(handle, warm=None) -> None:
    """Loop of a framed child process (this module's protocol): answer each request frame with
    ``handle(request)`` until stdin closes.

    The protocol uses private copies of stdin/stdout; fd 1 is pointed at stderr so stray prints from
    libraries cannot corrupt it. SIGINT is ignored (the parent decides when the child stops).
    ``warm()`` runs before the ``("ready", pid)`` frame (imports, model loading).
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    if warm is not None:
        warm()
    _write_frame(proto_out, ("ready", os.getpid()))
    while True:
        msg = _read_frame_blocking(proto_in)
        if msg is None:
            return
        _write_frame(proto_out, handle(msg))


def start_child(entry: str, *args: str) -> subprocess.Popen:
    """Starts ``python -c`` running ``entry`` (``"package.module:function"``, called with the string
    ``args``) with this process' ``sys.path``; its stdin/stdout are pipes for the frame protocol, its
    stderr is this process' stderr. The parent's ``__main__`` is never re-imported."""
    module, _, func = entry.partition(":")
    code = (
        f"import sys, json; sys.path[:0] = json.loads(sys.argv[1]); from {module} import {func}; {func}(*sys.argv[2:])"
    )
    paths = [p for p in sys.path if p] + [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]
    return subprocess.Popen(
        [sys.executable, "-c", code, json.dumps(paths), *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=None,
        close_fds=True,
    )


def kill_child(proc: subprocess.Popen, what: str, wait_s: float = 10) -> None:
    """SIGKILLs a child started by :func:`start_child` (which also ends a stopped or hung one) and reaps it,
    waiting up to ``wait_s`` seconds; logs an error naming ``what`` if it is still there. Never raises."""
    try:
        proc.kill()
    except OSError:
        pass
    try:
        proc.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL not honoured
        _LOG.error("%s %s did not exit after SIGKILL", what, proc.pid)


def _extract_answer(msg) -> tuple:
    raw_fields, config_dict = msg
    try:
        result = extract_content(RawDocument(*raw_fields), ExtractionConfig(**config_dict))
        return ("ok", tuple(result))
    except ExtractionError as e:
        return ("err", e.error_type, e.message)
    except Exception as e:  # never let the child die on one document
        return ("err", "broken_html", f"extraction failed: {type(e).__name__}: {e}"[:500])


def _warm_extraction() -> None:
    for name in ("trafilatura", "htmldate", "courlan", "charset_normalizer"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    import trafilatura  # noqa: F401  (warm import before announcing readiness)


def _worker_main() -> None:
    """Loop of an extraction child process: read (raw, config) frames, answer each.

    Answers are ``("ok", tuple(ExtractedContent))`` or ``("err", error_type, message)``.
    Exits when stdin is closed (:func:`serve_frames`).
    """
    serve_frames(_extract_answer, _warm_extraction)


class _Worker:
    """One child process and its pipes."""

    def __init__(self, startup_timeout_s: float):
        self.proc = start_child("newsflow.runtime.sandbox:_worker_main")
        self.fd = self.proc.stdout.fileno()
        try:
            hello = self.read(time.monotonic() + startup_timeout_s)
        except TimeoutError:
            self.kill()
            raise RuntimeError(f"extraction child process did not start within {startup_timeout_s} s") from None
        if not (isinstance(hello, tuple) and hello and hello[0] == "ready"):
            self.kill()
            raise RuntimeError(f"extraction child process failed to start (got {hello!r})")

    def read(self, deadline: float):
        """Reads one frame before ``deadline`` (monotonic seconds); None on EOF; raises TimeoutError."""
        header = self._read_exact(_HEADER.size, deadline)
        if header is None:
            return None
        (n,) = _HEADER.unpack(header)
        data = self._read_exact(n, deadline)
        return None if data is None else pickle.loads(data)

    def _read_exact(self, n: int, deadline: float) -> bytes | None:
        chunks = []
        while n > 0:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if not ready:
                raise TimeoutError
            chunk = os.read(self.fd, min(n, 1 << 20))
            if not chunk:
                return None
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def send(self, obj) -> None:
        _write_frame(self.proc.stdin, obj)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        kill_child(self.proc, "extraction child", wait_s=5)
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass

    def close(self) -> None:
        """Closes stdin (the child exits on EOF), then kills it if it lingers."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


def _close_workers(workers: list) -> None:
    for w in list(workers):
        w.close()
    workers.clear()


class ArticleExtractor:
    """Extracts articles from raw documents with a per-document wall-clock limit.

    Thread-safe: up to ``config.workers`` documents are extracted in parallel,
    each in its own child process (see the module docstring for the mechanism).
    Children start lazily on first use; :meth:`close` (or leaving a ``with``
    block, or garbage collection of the extractor) stops them.

    Args:
      config: :class:`ExtractionConfig`.

    Not picklable (it owns processes and pipes): in Beam, build it in
    ``DoFn.setup()`` and close it in ``teardown()``; the children also exit on
    their own when the worker process goes away.

    Example::

        with ArticleExtractor(ExtractionConfig(timeout_s=5.0)) as ex:
            content = ex.extract(raw_document)
    """

    #: Seconds allowed for a child process to start (python + trafilatura import).
    STARTUP_TIMEOUT_S = 60.0

    def __init__(self, config: ExtractionConfig = ExtractionConfig()):
        self.config = config
        self._config_dict = asdict(config)
        self._lock = threading.Lock()
        self._idle: queue.SimpleQueue = queue.SimpleQueue()
        self._all: list[_Worker] = []
        self._started = 0
        self._closed = False
        self._finalizer = weakref.finalize(self, _close_workers, self._all)
        self.timeouts = 0
        self.restarts = 0

    def __enter__(self) -> ArticleExtractor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Stops all child processes. Calling :meth:`extract` afterwards raises RuntimeError."""
        with self._lock:
            self._closed = True
        self._finalizer()

    def _acquire(self) -> _Worker:
        """An idle child, starting one when fewer than ``workers`` are running."""
        while True:
            with self._lock:
                if self._closed:
                    raise RuntimeError("ArticleExtractor is closed")
                start_new = self._started < self.config.workers
                if start_new:
                    self._started += 1
            if start_new:
                try:
                    worker = _Worker(self.STARTUP_TIMEOUT_S)
                except BaseException:
                    with self._lock:
                        self._started -= 1
                    raise
                with self._lock:
                    self._all.append(worker)
                return worker
            try:
                return self._idle.get(timeout=0.05)
            except queue.Empty:
                continue  # a killed child may have freed a slot

    def _replace(self, worker: _Worker) -> None:
        """Kills ``worker``; its slot is refilled by the next :meth:`_acquire`."""
        worker.kill()
        with self._lock:
            if worker in self._all:
                self._all.remove(worker)
            self._started -= 1
            self.restarts += 1

    def extract(self, raw: RawDocument) -> ExtractedContent:
        """Extracts title, main text and metadata from one raw document.

        Args:
          raw: the landed :class:`schemas.RawDocument` (page body or feed-only).

        Returns:
          :class:`ExtractedContent`.

        Raises:
          ExtractionError: with ``error_type`` in :data:`ERROR_TYPES`; ``"timeout"``
            when parsing and extraction took longer than ``config.timeout_s``.
          RuntimeError: the extractor was closed, or a child process could not start.
        """
        check_fetch(raw, self.config)
        if raw.body is None or not self.config.isolate:
            return extract_content(raw, self.config)
        worker = self._acquire()
        try:
            try:
                worker.send((tuple(raw), self._config_dict))
                answer = worker.read(time.monotonic() + self.config.timeout_s)
            except TimeoutError:
                self._replace(worker)
                worker = None
                with self._lock:
                    self.timeouts += 1
                raise ExtractionError(
                    "timeout", f"extraction took longer than timeout_s={self.config.timeout_s} s: {raw.url}"
                ) from None
            except (BrokenPipeError, OSError) as e:
                code = worker.proc.poll()
                self._replace(worker)
                worker = None
                raise ExtractionError(
                    "broken_html", f"extraction child process died (exit code {code}): {type(e).__name__}"
                ) from None
            if answer is None:
                code = worker.proc.wait()
                self._replace(worker)
                worker = None
                raise ExtractionError("broken_html", f"extraction child process died on this page (exit code {code})")
        finally:
            if worker is not None:
                if worker.alive():
                    self._idle.put(worker)
                else:
                    self._replace(worker)
        if answer[0] == "ok":
            fields = list(answer[1])
            fields[2] = tuple(fields[2])  # authors
            return ExtractedContent(*fields)
        raise ExtractionError(answer[1], answer[2])
