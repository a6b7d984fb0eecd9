"""spaCy entities in one long-lived child process, so NER runs beside the rest of the job.

On a local runner the streaming job runs its fused steps in one thread of one process; spaCy NER
(:class:`newsflow.core.entities.EntityExtractor`) is the largest of them (~3-4 ms of CPU per article on
this machine's cores). :class:`EntityProcess` moves it into a child process: the caller submits a
batch and gets a :class:`concurrent.futures.Future` of its entities, and goes on with other work
(topics, embeddings, story clustering of earlier batches) while the child runs the model on the
other core. The child loads every entity model once (the caller's process need not load spaCy at
all) and answers batches strictly in submission order with exactly what
:meth:`EntityExtractor.extract_many` returns in-process (same models, same texts, same batches).

Protocol (the frames of :mod:`newsflow.runtime.sandbox`: 8-byte big-endian length, then a pickle): the child
says ``("ready", pid)`` once its models are loaded, then answers each ``(pairs, languages)`` request
with ``("ok", entities, skipped)`` (``skipped``: language -> documents without a model) or
``("err", message)``. A writer thread in the parent sends the requests (so submitting never blocks on
a child that stops reading) and a reader thread resolves the futures in order. When the child dies or
is closed, every pending and later future fails with :class:`EntityProcessError`; callers fall back to
in-process extraction (the streaming job's enrichment step does and counts it). The child is
``python -c`` importing this module by path (no ``multiprocessing``: the parent's ``__main__`` is
never re-imported) and exits when its stdin closes (parent gone).
"""

from __future__ import annotations

import collections
import logging
import os
import queue
import threading
import weakref
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future

from newsflow.runtime.sandbox import _read_frame_blocking, frame, kill_child, serve_frames, start_child

_LOG = logging.getLogger(__name__)


class EntityProcessError(RuntimeError):
    """The entity child process failed to start, died, or could not handle a batch."""


def _child_main(lead_chars: str) -> None:
    """Loop of the entity child (:func:`newsflow.runtime.sandbox.serve_frames`): load every model, say ready,
    answer batches until stdin closes."""
    from newsflow.core.entities import SUPPORTED_LANGUAGES, EntityExtractor, load_nlp

    extractor = EntityExtractor(lead_chars=int(lead_chars))

    def warm() -> None:
        for language in sorted(SUPPORTED_LANGUAGES):
            load_nlp(language)

    def handle(msg) -> tuple:
        pairs, languages = msg
        before = Counter(extractor.skipped)
        try:
            entities = extractor.extract_many(pairs, languages)
            return ("ok", entities, dict(extractor.skipped - before))
        except Exception as e:  # noqa: BLE001 - reported to the caller, the child goes on
            return ("err", f"{type(e).__name__}: {e}"[:500])

    serve_frames(handle, warm)


class EntityProcess:
    """One child process extracting entities of ``(title, text)`` batches, answered in order.

    Thread-safe, and :meth:`submit` never blocks: requests go to the child's stdin from a writer
    thread, answers come back through a reader thread, so a child that stops reading (stopped, hung,
    swapping) delays only the futures, whose waits callers bound, and :meth:`close` kills it. The
    child starts at construction and loads its models in the background (~5-7 s here); batches
    submitted meanwhile wait in the writer's queue. Only ``text[:lead_chars]`` is sent (what the
    extractor reads).

    Args:
      lead_chars: characters of each text after the title that are analysed (as
        :class:`newsflow.core.entities.EntityExtractor`).

    Not picklable (it owns a process): build it in ``DoFn.setup()`` or use :func:`shared_entity_process`.
    """

    def __init__(self, lead_chars: int):
        self.lead_chars = lead_chars
        self._proc = start_child("newsflow.runtime.entity_process:_child_main", str(int(lead_chars)))
        self._lock = threading.Lock()
        self._pending: collections.deque[Future] = collections.deque()
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()  # framed requests, None = stop
        self._failed: EntityProcessError | None = None
        self._finalizer = weakref.finalize(self, kill_child, self._proc, "entity child")
        self._reader = threading.Thread(target=self._read_loop, name="entities-reader", daemon=True)
        self._writer = threading.Thread(target=self._write_loop, name="entities-writer", daemon=True)
        self._reader.start()
        self._writer.start()

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self._proc.pid

    @property
    def failed(self) -> bool:
        """True once the child is gone: every later :meth:`submit` fails at once."""
        return self._failed is not None

    def submit(self, pairs: Sequence[tuple[str, str]], languages: Sequence[str]) -> Future:
        """Queues one batch (never blocks); returns a Future of ``(entities, skipped)``.

        ``entities`` is the list of :class:`newsflow.core.entities.Entity` lists that
        :meth:`EntityExtractor.extract_many` returns for ``pairs``; ``skipped`` maps each language
        without a model to its number of documents in the batch. The Future raises
        :class:`EntityProcessError` when the child is gone, is closed, or failed on the batch.

        Raises:
          ValueError: ``languages`` has a different length than ``pairs``.
        """
        if len(languages) != len(pairs):
            raise ValueError(f"{len(pairs)} docs but {len(languages)} languages")
        request = ([(t or "", (x or "")[: self.lead_chars]) for t, x in pairs], list(languages))
        data = frame(request)  # pickled outside the lock
        fut: Future = Future()
        with self._lock:  # futures and requests in one order
            if self._failed is not None:
                fut.set_exception(self._failed)
                return fut
            self._pending.append(fut)
            self._outbox.put(data)
        return fut

    def _write_loop(self) -> None:
        fd = self._proc.stdin.fileno()
        while True:
            frame = self._outbox.get()
            if frame is None:
                return
            view = memoryview(frame)
            try:
                while view:
                    view = view[os.write(fd, view) :]
            except OSError as e:  # the child is gone (EPIPE), or killed by close()
                with self._lock:
                    self._fail_locked(EntityProcessError(f"entity child process is gone: {type(e).__name__}"))
                return

    def _fail_locked(self, error: EntityProcessError) -> None:
        if self._failed is None:
            self._failed = error
        while self._pending:
            f = self._pending.popleft()
            if not f.done():
                f.set_exception(self._failed)

    def _read_loop(self) -> None:
        out = self._proc.stdout
        try:
            hello = _read_frame_blocking(out)
            if not (isinstance(hello, tuple) and hello and hello[0] == "ready"):
                raise EntityProcessError(f"entity child process failed to start (got {hello!r})")
            while True:
                msg = _read_frame_blocking(out)
                if msg is None:
                    raise EntityProcessError(f"entity child process exited (code {self._proc.wait()})")
                with self._lock:
                    fut = self._pending.popleft()
                if msg[0] == "ok":
                    fut.set_result((msg[1], msg[2]))
                else:
                    fut.set_exception(EntityProcessError(f"entity child failed on a batch: {msg[1]}"))
        except EntityProcessError as e:
            error = e
        except Exception as e:  # noqa: BLE001 - a broken stream: the child is unusable
            error = EntityProcessError(f"entity child process stream broken: {type(e).__name__}: {e}")
        with self._lock:
            self._fail_locked(error)
        if not self._finalizer.alive:
            return
        _LOG.warning("%s; entities are extracted in-process from now on", error)

    def close(self) -> None:
        """Kills the child and stops both threads; pending and later futures fail. Returns within seconds
        whatever state the child is in."""
        self._finalizer()
        self._outbox.put(None)
        self._writer.join(timeout=10)
        self._reader.join(timeout=10)
        with self._lock:
            self._fail_locked(EntityProcessError("entity child process was closed"))
        for stream in (self._proc.stdin, self._proc.stdout):
            try:
                stream.close()
            except OSError:
                pass


_SHARED: dict[int, EntityProcess] = {}
_SHARED_LOCK = threading.Lock()


def shared_entity_process(lead_chars: int) -> EntityProcess:
    """The process-wide :class:`EntityProcess` for ``lead_chars`` (one child per process, started on
    first use and replaced when it has failed), shared by every pipeline run in the process."""
    with _SHARED_LOCK:
        ep = _SHARED.get(lead_chars)
        if ep is None or ep.failed:
            ep = _SHARED[lead_chars] = EntityProcess(lead_chars)
        return ep


def close_shared_entity_processes() -> None:
    """Stops every process-wide :class:`EntityProcess` (the next :func:`shared_entity_process` starts a
    new one); the children are waited for, so their CPU time shows in ``RUSAGE_CHILDREN``."""
    with _SHARED_LOCK:
        processes = list(_SHARED.values())
        _SHARED.clear()
    for ep in processes:
        ep.close()
