"""The story input log of continuous local mode: every :class:`StoryArticle` the story step assigned, by event time.

``newsflow run-continuous`` runs the job as repeated bounded runs over the landing files that arrive.
Story assignment is an ordered computation (:mod:`newsflow.core.stories`: articles in ``(event_time,
article_id)`` order), so a run whose files hold an article older than one an earlier run assigned
cannot simply be appended. The story step therefore keeps its inputs here and, in each run, rewinds the
story state to the latest checkpoint at or before the run's earliest article
(:mod:`newsflow.storage.story_checkpoints`) and clusters the logged inputs after that checkpoint again
together with the new ones (:mod:`newsflow.transforms.stories_continuous`).

Layout: a local directory of gzipped JSON-lines files ``inputs-b<bucket>-<sha256 of the bytes, 20 hex>.jsonl.gz``,
each holding articles of one event-time bucket (``bucket = floor(order time / bucket_s)``, ``bucket_s``
:data:`BUCKET_S` by default, the same buckets as the checkpoints), one line per article: the
:class:`StoryArticle` as a JSON object (its field names; ``topics`` as ``[label, probability]`` pairs,
``entities`` as ``[key, text, label]`` triples; floats round-trip exactly) plus ``_order``, the article's
order time (its event time; for an article of the late lane, the newest order time logged when it was
assigned, see :mod:`newsflow.transforms.stories_continuous`). Files are written to a ``.tmp-`` name and
renamed, so a reader never sees a partial file and a crash leaves no torn file; a file is never rewritten
in place (:meth:`StoryInputLog.drop` writes the bucket's remaining articles as a new file first). Names
starting with ``.`` and files of other names (an earlier version's ``inputs-<hash>.jsonl.gz``) are skipped.

One entry per article id: the log holds the record the story step assigned (the smallest ``(event_time,
title, url, source_domain)`` of an id, as a bounded run assigns first); the caller drops a replaced one.
Reading the articles after a time reads only the buckets from that time on, so a run costs what its window
holds, not the whole log. ``state.json`` holds what the step needs between runs (:meth:`load_state`).

Size: one line per article, about 1.5 KB with a 128-float embedding; it lives under the data directory,
not in Redis. Buckets before the retention cutoff or the checkpoint horizon are pruned.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
import re
import uuid
from collections.abc import Callable, Iterable

from newsflow.schemas.story import EntityRef, StoryArticle, TopicScore, split_legacy_topics

BUCKET_S = 3600.0
"""Default event-time bucket of the log files and of the checkpoints, seconds."""

_FILE = re.compile(r"^inputs-b(-?\d+)-[0-9a-f]{20}\.jsonl\.gz$")


def article_to_json(a: StoryArticle, order: float | None = None) -> str:
    """One log line (without newline) for ``a``; ``order``: its order time (``None``: its event time)."""
    d = a._asdict()
    d["topics"] = [[t.label, t.probability] for t in (TopicScore(*t) for t in a.topics)]
    d["types"] = [[t.label, t.probability] for t in (TopicScore(*t) for t in a.types)]
    d["entities"] = [[e.key, e.text, e.label] for e in (EntityRef(*e) for e in a.entities)]
    d["embedding"] = None if a.embedding is None else [float(x) for x in a.embedding]
    d["_order"] = float(a.event_time) if order is None else float(order)
    return json.dumps(d, separators=(",", ":"), sort_keys=True)


def entry_from_json(line: str | bytes) -> tuple[float, StoryArticle]:
    """Parses :func:`article_to_json` output: ``(order time, article)``.

    Raises:
      ValueError: not a JSON object with the :class:`StoryArticle` fields.
    """
    d = json.loads(line)
    if not isinstance(d, dict):
        raise ValueError(f"a story input line must be a JSON object, got {type(d).__name__}")
    try:
        order = d.pop("_order", None)
        d["topics"] = tuple(TopicScore(str(label), float(p)) for label, p in d.get("topics") or ())
        d["types"] = tuple(TopicScore(str(label), float(p)) for label, p in d.get("types") or ())
        d["topics"], d["types"] = split_legacy_topics(d["topics"], d["types"])  # lines written before ``types``
        d["entities"] = tuple(EntityRef(str(k), str(t), str(lab)) for k, t, lab in d.get("entities") or ())
        if d.get("embedding") is not None:
            d["embedding"] = tuple(float(x) for x in d["embedding"])
        a = StoryArticle(**d)
        return (float(a.event_time) if order is None else float(order)), a
    except (TypeError, ValueError) as e:
        raise ValueError(f"bad story input line: {e}") from e


def article_from_json(line: str | bytes) -> StoryArticle:
    """The article of a :func:`article_to_json` line (see :func:`entry_from_json`)."""
    return entry_from_json(line)[1]


def record_rank(a: StoryArticle) -> tuple:
    """``(event_time, title, url, source_domain)``: of two records of one id, the smaller is kept."""
    return (float(a.event_time), a.title or "", a.url or "", a.source_domain or "")


def one_per_id(articles: Iterable[StoryArticle]) -> dict[str, StoryArticle]:
    """Article id -> the record with the smallest ``(event_time, title, url, source_domain)`` of that id."""
    out: dict[str, StoryArticle] = {}
    for a in articles:
        cur = out.get(a.article_id)
        if cur is None or record_rank(a) < record_rank(cur):
            out[a.article_id] = a
    return out


def _write_atomic(directory: str, name: str, data: bytes) -> str:
    os.makedirs(directory, exist_ok=True)
    final = os.path.join(directory, name)
    tmp = os.path.join(directory, f".tmp-{uuid.uuid4().hex}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, final)
    return final


class StoryInputLog:
    """The log in ``directory`` (created on the first write).

    Args:
      directory: local directory of the log files.
      bucket_s: event-time bucket of the files, seconds (> 0).
    """

    def __init__(self, directory: str, bucket_s: float = BUCKET_S):
        if not bucket_s > 0:
            raise ValueError(f"bucket_s must be > 0, got {bucket_s}")
        self.directory = directory
        self.bucket_s = float(bucket_s)

    def bucket(self, order: float) -> int:
        """The bucket of an order time (UTC epoch s)."""
        return math.floor(order / self.bucket_s)

    def files(self) -> list[tuple[int, str]]:
        """``(bucket, path)`` of the committed log files, by bucket then name (``[]`` without a directory)."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        found = [(int(m.group(1)), n) for n in names if (m := _FILE.match(n))]
        return [(b, os.path.join(self.directory, n)) for b, n in sorted(found)]

    @staticmethod
    def _entries(path: str) -> list[tuple[float, StoryArticle]]:
        out = []
        with gzip.open(path, "rb") as f:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    out.append(entry_from_json(line))
                except ValueError as e:
                    raise ValueError(f"{path} line {i}: {e}") from e
        return out

    def entries(self, since: float = -math.inf, until: float = math.inf) -> dict[str, tuple[float, StoryArticle]]:
        """Article id -> ``(order time, article)`` of the logged articles with ``since <= order time < until``;
        reads only the buckets that range covers.

        Raises:
          ValueError: a line that is not a story input (the message names the file and line).
        """
        lo = -math.inf if since == -math.inf else self.bucket(since)
        hi = math.inf if until == math.inf else self.bucket(until)
        out: dict[str, tuple[float, StoryArticle]] = {}
        for b, path in self.files():
            if lo <= b <= hi:
                for order, a in self._entries(path):
                    if since <= order < until:
                        cur = out.get(a.article_id)
                        if cur is None or record_rank(a) < record_rank(cur[1]):
                            out[a.article_id] = (order, a)
        return out

    def read(self, since: float = -math.inf) -> dict[str, StoryArticle]:
        """Every logged article with an order time at or after ``since``, one per id (see :func:`one_per_id`)."""
        return {aid: a for aid, (_, a) in self.entries(since).items()}

    def add(self, entries: Iterable[tuple[float, StoryArticle] | StoryArticle]) -> list[str]:
        """Appends articles (each ``(order time, article)`` or an article, ordered at its event time) as one
        new file per bucket (sorted by id; ``gzip`` with mtime 0, so the same articles give the same bytes
        and name); returns the paths written.

        Raises:
          OSError: the directory or a file could not be written (nothing is left but a ``.tmp-`` file).
        """
        by_bucket: dict[int, dict[str, tuple[float, StoryArticle]]] = {}
        for e in entries:
            order, a = (float(e.event_time), e) if isinstance(e, StoryArticle) else e
            cur = by_bucket.setdefault(self.bucket(order), {}).get(a.article_id)
            if cur is None or record_rank(a) < record_rank(cur[1]):
                by_bucket[self.bucket(order)][a.article_id] = (order, a)
        return [self._write_bucket(b, list(arts.values())) for b, arts in sorted(by_bucket.items()) if arts]

    def _write_bucket(self, bucket: int, entries: list[tuple[float, StoryArticle]]) -> str:
        entries = sorted(entries, key=lambda e: e[1].article_id)
        text = "".join(article_to_json(a, order) + "\n" for order, a in entries).encode("utf-8")
        data = gzip.compress(text, mtime=0)
        name = f"inputs-b{bucket}-{hashlib.sha256(data).hexdigest()[:20]}.jsonl.gz"
        final = os.path.join(self.directory, name)
        if os.path.exists(final):
            return final
        return _write_atomic(self.directory, name, data)

    def _rewrite(self, keep: Callable[[float, StoryArticle], bool], buckets: Callable[[int], bool]) -> int:
        """Rewrites each file of the ``buckets`` holding entries ``keep`` refuses without them (the new file
        first, so a crash leaves at worst both, which readers collapse); returns how many entries went."""
        dropped = 0
        for b, path in self.files():
            if not buckets(b):
                continue
            entries = self._entries(path)
            kept = [(o, a) for o, a in entries if keep(o, a)]
            if len(kept) == len(entries):
                continue
            if not kept or self._write_bucket(b, kept) != path:
                os.remove(path)
            dropped += len(entries) - len(kept)
        return dropped

    def prune(self, before: float) -> int:
        """Drops the articles ordered before ``before`` (UTC epoch s; reads only the buckets up to it);
        returns how many records were dropped."""
        if before == -math.inf:
            return 0
        last = self.bucket(before)
        return self._rewrite(lambda o, a: o >= before, lambda b: b <= last)

    def drop(self, replaced: dict[str, float]) -> int:
        """Drops the records of the given ids at the given order times (records an earlier record of the same
        id replaced); returns how many records were dropped."""
        buckets = {self.bucket(o) for o in replaced.values()}
        return self._rewrite(lambda o, a: replaced.get(a.article_id) != o, lambda b: b in buckets)

    def clear(self) -> int:
        """Deletes every log file and the state (a fresh start); returns how many files went."""
        n = 0
        for _, path in self.files():
            os.remove(path)
            n += 1
        try:
            os.remove(os.path.join(self.directory, "state.json"))
        except FileNotFoundError:
            pass
        return n

    # -- state between runs -------------------------------------------------------------------------------
    def load_state(self) -> dict | None:
        """The ``state.json`` the last run saved (:meth:`save_state`), ``None`` when there is none or it is
        not a JSON object (a fresh start)."""
        try:
            with open(os.path.join(self.directory, "state.json"), encoding="utf-8") as f:
                d = json.load(f)
        except (FileNotFoundError, ValueError):
            return None
        return d if isinstance(d, dict) else None

    def save_state(self, state: dict) -> None:
        """Replaces ``state.json`` atomically with ``state`` (JSON-ready)."""
        _write_atomic(self.directory, "state.json", json.dumps(state, sort_keys=True).encode("utf-8"))
