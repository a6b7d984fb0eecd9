"""The story input log of continuous local mode: every :class:`StoryArticle` the story step was given.

``newsflow run-continuous`` runs the job as repeated bounded runs over the landing files that arrive.
Story assignment is an ordered computation (:mod:`newsflow.core.stories`: articles in ``(event_time,
article_id)`` order), so a run whose files hold an article older than one an earlier run assigned
cannot simply be appended. The story step therefore keeps the inputs of every run here and, in each
run, clusters the logged inputs together with the new ones from an empty story state
(:class:`newsflow.transforms.stories.AssignStories` with ``StoryTransformConfig.input_log``): the same
sorted sequence, hence the same stories, as one bounded run over all the files.

Layout: a local directory of gzipped JSON-lines files ``inputs-<sha256 of the bytes, 20 hex>.jsonl.gz``,
one per run that brought new articles, each line one :class:`StoryArticle` as a JSON object (its field
names; ``topics`` as ``[label, probability]`` pairs, ``entities`` as ``[key, text, label]`` triples;
floats round-trip exactly). Files are written to a ``.tmp-`` name and renamed, so a reader never sees
a partial file and a crash leaves no torn file; a file is never rewritten. Names starting with ``.``
are skipped.

The log holds the article as the enrichment step made it, before the story step re-reads its
near-duplicate group (:meth:`StoryArticle.with_cluster`), so a replay re-reads groups as Redis holds
them then. One entry per article id: when two records share an id (a re-landed URL), the smallest
``(event_time, title, url, source_domain)`` is kept, the record a bounded run assigns first.

Size: one line per article, about 1.5 KB with a 128-float embedding; it lives under the data
directory, not in Redis. Articles before the retention cutoff are pruned (:meth:`StoryInputLog.prune`).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import uuid
from collections.abc import Iterable

from newsflow.schemas.story import EntityRef, StoryArticle, TopicScore, split_legacy_topics

_PREFIX = "inputs-"
_SUFFIX = ".jsonl.gz"


def article_to_json(a: StoryArticle) -> str:
    """One log line (without newline) for ``a``."""
    d = a._asdict()
    d["topics"] = [[t.label, t.probability] for t in (TopicScore(*t) for t in a.topics)]
    d["types"] = [[t.label, t.probability] for t in (TopicScore(*t) for t in a.types)]
    d["entities"] = [[e.key, e.text, e.label] for e in (EntityRef(*e) for e in a.entities)]
    d["embedding"] = None if a.embedding is None else [float(x) for x in a.embedding]
    return json.dumps(d, separators=(",", ":"), sort_keys=True)


def article_from_json(line: str | bytes) -> StoryArticle:
    """Parses :func:`article_to_json` output.

    Raises:
      ValueError: not a JSON object with the :class:`StoryArticle` fields.
    """
    d = json.loads(line)
    if not isinstance(d, dict):
        raise ValueError(f"a story input line must be a JSON object, got {type(d).__name__}")
    try:
        d["topics"] = tuple(TopicScore(str(label), float(p)) for label, p in d.get("topics") or ())
        d["types"] = tuple(TopicScore(str(label), float(p)) for label, p in d.get("types") or ())
        d["topics"], d["types"] = split_legacy_topics(d["topics"], d["types"])  # lines written before ``types``
        d["entities"] = tuple(EntityRef(str(k), str(t), str(lab)) for k, t, lab in d.get("entities") or ())
        if d.get("embedding") is not None:
            d["embedding"] = tuple(float(x) for x in d["embedding"])
        return StoryArticle(**d)
    except (TypeError, ValueError) as e:
        raise ValueError(f"bad story input line: {e}") from e


def _rank(a: StoryArticle) -> tuple:
    return (float(a.event_time), a.title or "", a.url or "", a.source_domain or "")


def one_per_id(articles: Iterable[StoryArticle]) -> dict[str, StoryArticle]:
    """Article id -> the record with the smallest ``(event_time, title, url, source_domain)`` of that id."""
    out: dict[str, StoryArticle] = {}
    for a in articles:
        cur = out.get(a.article_id)
        if cur is None or _rank(a) < _rank(cur):
            out[a.article_id] = a
    return out


class StoryInputLog:
    """The log in ``directory`` (created on the first :meth:`add`).

    Args:
      directory: local directory of the log files.
    """

    def __init__(self, directory: str):
        self.directory = directory

    def files(self) -> list[str]:
        """Paths of the committed log files, sorted by name (``[]`` when the directory does not exist)."""
        try:
            names = os.listdir(self.directory)
        except FileNotFoundError:
            return []
        return [
            os.path.join(self.directory, n)
            for n in sorted(names)
            if n.startswith(_PREFIX) and n.endswith(_SUFFIX) and not n.startswith(".")
        ]

    def read(self) -> dict[str, StoryArticle]:
        """Every logged article, one per id (see :func:`one_per_id`).

        Raises:
          ValueError: a line that is not a story input (the message names the file and line).
        """

        def lines():
            for path in self.files():
                with gzip.open(path, "rb") as f:
                    for i, line in enumerate(f, 1):
                        if not line.strip():
                            continue
                        try:
                            yield article_from_json(line)
                        except ValueError as e:
                            raise ValueError(f"{path} line {i}: {e}") from e

        return one_per_id(lines())

    def prune(self, before: float) -> int:
        """Drops the articles with an event time before ``before`` (UTC epoch s): each file holding
        some is replaced by one without them (written first, so a crash leaves at worst both, which
        :meth:`read` collapses); returns how many records were dropped."""
        dropped = 0
        for path in self.files():
            with gzip.open(path, "rb") as f:
                arts = [article_from_json(line) for line in f if line.strip()]
            keep = [a for a in arts if float(a.event_time) >= before]
            if len(keep) == len(arts):
                continue
            if self.add(keep) != path:
                os.remove(path)
            dropped += len(arts) - len(keep)
        return dropped

    def add(self, articles: Iterable[StoryArticle]) -> str | None:
        """Appends ``articles`` as one new file (sorted by id; ``gzip`` with mtime 0, so the same
        articles give the same bytes and name); returns its path, or ``None`` when there were none.

        Raises:
          OSError: the directory or file could not be written (nothing is left but a ``.tmp-`` file).
        """
        arts = sorted(one_per_id(articles).values(), key=lambda a: a.article_id)
        if not arts:
            return None
        text = "".join(article_to_json(a) + "\n" for a in arts).encode("utf-8")
        data = gzip.compress(text, mtime=0)
        name = f"{_PREFIX}{hashlib.sha256(data).hexdigest()[:20]}{_SUFFIX}"
        os.makedirs(self.directory, exist_ok=True)
        final = os.path.join(self.directory, name)
        if os.path.exists(final):
            return final
        tmp = os.path.join(self.directory, f".tmp-{uuid.uuid4().hex}")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, final)
        return final
