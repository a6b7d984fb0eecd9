"""The full-text search index: one SQLite file with an FTS5 table (stdlib ``sqlite3``, no server).

Layout (``<data dir>/search/index.sqlite3`` by default, :func:`default_index_path`):

* ``docs`` — one row per article, keyed by ``article_id``: ``story_id`` (the story it was assigned to; a later
  merge is followed at query time through the story records' ``merged_into``), ``title``, ``lead`` (the first
  :data:`LEAD_CHARS` characters of the text), ``url``, ``domain``, ``outlet`` (registrable domain),
  ``language``, ``topics`` (tab-separated labels, with a tab at each end), ``entities`` (tab-separated display
  texts), ``event_time`` (UTC epoch seconds);
* ``terms`` — FTS5 over the analysed text of each row (:mod:`newsflow.core.search_text`: stemmed in the
  article's language), columns ``title``, ``body`` (lead), ``entities``, ``outlet``, and ``tags``: one token per
  filter value (language, outlet, each topic, the event time's UTC year, month and day, and :data:`HAS_STORY_TAG`
  once the row has a story), so every filter is part of the FTS5 query; same rowid as ``docs``.

A query matches the words in ``title``, ``body``, ``entities`` and ``outlet`` and its filters in ``tags``; it ranks
at most the newest :data:`MAX_CANDIDATES` matching rows (highest rowids, i.e. the last indexed) by where its words
are (:data:`FIELD_WEIGHTS`: a word in the headline counts most), newest first among equals. The candidates come
from one FTS5 query that stops after :data:`MAX_CANDIDATES` rows, and their analysed headlines and entities are
read by rowid from FTS5's own copy (its ``terms_content`` table), so a query of very common words costs the same
at any index size (bm25 would count each word's rows in the whole index on every query), and news search favours
what is recent. A date range matches whole UTC days (:func:`date_tags`).

Two writers fill a row, in either order, each an idempotent upsert on ``article_id``: the article's text
(:meth:`SearchIndex.put_texts`) and its story, topics and entities (:meth:`SearchIndex.put_stories`); after
either, the row's ``terms`` are rebuilt from the whole row. Replaying either leaves the same file.

Concurrency: SQLite allows one writer per file at a time. Writers on one machine (the DirectRunner's worker
threads or processes, ``newsflow search-index --rebuild``) take turns on the file lock, each batch one
transaction, waiting up to ``busy_timeout_s`` (then ``sqlite3.OperationalError``, which a Beam sink raises
so the runner retries the bundle). The file is in WAL mode, so readers (the serving app) never wait for a
writer and see each committed batch. Remote workers (Dataflow, Flink) cannot share a local file: there the
sink is off by default and the index is rebuilt on the serving host from the Parquet history; the production
option for many writers is a search server (OpenSearch or Elasticsearch) fed by the same two upserts from a
queue (documented, not tested here).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from newsflow.core.outlets import outlet as outlet_of
from newsflow.core.search_text import analyze, base_language, query_terms

LEAD_CHARS = 600
"""Characters of an article's text indexed and shown as its lead."""

MAX_HITS = 1000
"""Best-ranked matching articles a query reads before grouping them by story."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS docs(
  rowid INTEGER PRIMARY KEY,
  article_id TEXT NOT NULL UNIQUE,
  story_id TEXT,
  title TEXT NOT NULL DEFAULT '',
  lead TEXT NOT NULL DEFAULT '',
  url TEXT NOT NULL DEFAULT '',
  domain TEXT NOT NULL DEFAULT '',
  outlet TEXT NOT NULL DEFAULT '',
  language TEXT NOT NULL DEFAULT '',
  topics TEXT NOT NULL DEFAULT '',
  entities TEXT NOT NULL DEFAULT '',
  event_time REAL
);
CREATE INDEX IF NOT EXISTS docs_time ON docs(event_time);
CREATE INDEX IF NOT EXISTS docs_language ON docs(language);
CREATE VIRTUAL TABLE IF NOT EXISTS terms USING fts5(
  title, body, entities, outlet, tags, tokenize = 'unicode61 remove_diacritics 2'
);
"""

FIELD_WEIGHTS = (("title", 10.0), ("entities", 4.0))
"""A matching article's score: the sum, over the query's words, of these weights of the fields the word is in
(every match has each word somewhere: in the lead or the outlet when not in these)."""

MAX_CANDIDATES = 1000
"""A query ranks at most the newest this many matching articles (by when they were indexed)."""

_LANGUAGES_TTL_S = 60.0
READER_MMAP_BYTES = 1 << 30
"""A reader maps up to this much of the file (address space, not memory: the OS pages it in and out)."""
READER_CACHE_KIB = 65536
"""SQLite's page cache of one reader connection (one per serving thread), KiB."""


def _tag(kind: str, value: str) -> str:
    """The ``tags`` token of a filter value: ``x`` + kind + 12 hex chars of its SHA-1 (one alphanumeric token)."""
    return "x" + kind + hashlib.sha1(value.encode("utf-8")).hexdigest()[:12]


HAS_STORY_TAG = "xs"


def date_tags(since: float, until: float) -> list[str]:
    """The fewest ``tags`` tokens covering the UTC days from ``since``'s to the one before ``until`` (both UTC
    epoch seconds; a date range matches by whole UTC days): whole years as ``xy2014``, whole months as
    ``xm201403``, other days as ``xd20140310``. Empty when ``until <= since``."""
    if until <= since:
        return []
    day = dt.datetime.fromtimestamp(since, dt.UTC).date()
    last = dt.datetime.fromtimestamp(until - 1e-6, dt.UTC).date()
    out: list[str] = []
    while day <= last:
        year_end = dt.date(day.year, 12, 31)
        next_month = dt.date(day.year + day.month // 12, day.month % 12 + 1, 1)
        if day.month == 1 and day.day == 1 and year_end <= last:
            out.append(f"xy{day:%Y}")
            day = year_end + dt.timedelta(days=1)
        elif day.day == 1 and next_month - dt.timedelta(days=1) <= last:
            out.append(f"xm{day:%Y%m}")
            day = next_month
        else:
            out.append(f"xd{day:%Y%m%d}")
            day += dt.timedelta(days=1)
    return out


def default_index_path(data_dir: str) -> str:
    """``<data_dir>/search/index.sqlite3``."""
    return os.path.join(data_dir, "search", "index.sqlite3")


class TextRow(NamedTuple):
    """What an article says: the article side of a ``docs`` row (module docstring)."""

    article_id: str
    title: str
    lead: str
    url: str
    domain: str
    language: str
    event_time: float


class StoryRow(NamedTuple):
    """What the story step decided: ``story_id``, topic labels and entity display texts of an article."""

    article_id: str
    story_id: str
    topics: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()


class Hit(NamedTuple):
    """One matching article, best first (``score``: minus its field score, :data:`FIELD_WEIGHTS`; lower is better)."""

    article_id: str
    story_id: str
    title: str
    lead: str
    url: str
    domain: str
    outlet: str
    language: str
    event_time: float
    score: float


class Filters(NamedTuple):
    """Search filters; ``None``/empty means any. ``since``/``until`` are UTC epoch seconds, ``[since, until)``,
    matched by whole UTC days (the days of ``since`` through the day before ``until``)."""

    topic: str = ""
    outlet: str = ""
    language: str = ""
    since: float | None = None
    until: float | None = None


class IndexMissing(RuntimeError):
    """There is no index file at the path (nothing indexed yet: run the job or ``newsflow search-index``)."""


def _connect(path: str, busy_timeout_s: float, readonly: bool) -> sqlite3.Connection:
    if readonly:
        if not os.path.exists(path):
            raise IndexMissing(f"no search index at {path}: run `newsflow run` or `newsflow search-index --rebuild`")
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=busy_timeout_s, check_same_thread=False)
        conn.execute(f"PRAGMA mmap_size={READER_MMAP_BYTES}")  # pages read from the OS cache without copies
        conn.execute(f"PRAGMA cache_size=-{READER_CACHE_KIB}")
    else:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.executescript(_SCHEMA)
    return conn


class SearchIndex:
    """A writer (``readonly=False``) or reader of the index file at ``path`` (module docstring).

    A writer holds one connection (use it from one thread); a reader opens one connection per thread, so
    the serving app's worker threads may share one reader.

    Raises:
      IndexMissing: a reader of a path with no file.
      sqlite3.OperationalError: the file is locked past ``busy_timeout_s`` or cannot be opened.
    """

    def __init__(self, path: str, readonly: bool = False, busy_timeout_s: float = 30.0):
        self.path = path
        self.readonly = readonly
        self._timeout = busy_timeout_s
        self._local = threading.local()
        self._conn = None if readonly else _connect(path, busy_timeout_s, False)
        if readonly:
            self._thread_conn()  # fail now when the file is missing

    def _thread_conn(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = _connect(self.path, self._timeout, True)
        return conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- writes ----------------------------------------------------------------------------
    def put_texts(self, rows: Iterable[TextRow]) -> int:
        """Upserts the article side of ``rows`` in one transaction; returns how many."""
        return self._write(
            "INSERT INTO docs(article_id, title, lead, url, domain, outlet, language, event_time) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(article_id) DO UPDATE SET title = excluded.title, "
            "lead = excluded.lead, url = excluded.url, domain = excluded.domain, outlet = excluded.outlet, "
            "language = excluded.language, event_time = excluded.event_time",
            [
                (
                    r.article_id,
                    r.title or "",
                    (r.lead or "")[:LEAD_CHARS],
                    r.url or "",
                    r.domain or "",
                    outlet_of(r.domain or ""),
                    base_language(r.language),
                    float(r.event_time),
                )
                for r in rows
            ],
        )

    def put_stories(self, rows: Iterable[StoryRow]) -> int:
        """Upserts the story side of ``rows`` in one transaction; returns how many."""
        return self._write(
            "INSERT INTO docs(article_id, story_id, topics, entities) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(article_id) DO UPDATE SET story_id = excluded.story_id, topics = excluded.topics, "
            "entities = excluded.entities",
            [
                (r.article_id, r.story_id, _tabbed(str(t).lower() for t in r.topics), "\t".join(r.entities))
                for r in rows
            ],
        )

    def _write(self, sql: str, params: Sequence[tuple]) -> int:
        if not params:
            return 0
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            for p in params:
                conn.execute(sql, p)
                self._reindex(conn, p[0])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return len(params)

    @staticmethod
    def _reindex(conn: sqlite3.Connection, article_id: str) -> None:
        rowid, title, lead, outlet, language, entities, topics, story_id, event_time = conn.execute(
            "SELECT rowid, title, lead, outlet, language, entities, topics, story_id, event_time FROM docs "
            "WHERE article_id = ?",
            (article_id,),
        ).fetchone()
        tags = [_tag("l", language), _tag("o", outlet)] + [_tag("t", t) for t in topics.split("\t") if t]
        if event_time is not None:
            day = dt.datetime.fromtimestamp(event_time, dt.UTC)
            tags += [f"xy{day:%Y}", f"xm{day:%Y%m}", f"xd{day:%Y%m%d}"]
        if story_id:
            tags.append(HAS_STORY_TAG)
        conn.execute("DELETE FROM terms WHERE rowid = ?", (rowid,))
        conn.execute(
            "INSERT INTO terms(rowid, title, body, entities, outlet, tags) VALUES (?, ?, ?, ?, ?, ?)",
            (
                rowid,
                analyze(title, language),
                analyze(lead, language),
                analyze(entities.replace("\t", " "), language),
                " ".join(outlet.replace(".", " ").split()) + " " + outlet.split(".", 1)[0],
                " ".join(tags),
            ),
        )

    def clear(self) -> None:
        """Deletes every row (a rebuild starts from an empty index)."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("DELETE FROM docs")
        conn.execute("DELETE FROM terms")
        conn.execute("COMMIT")

    def optimize(self) -> None:
        """Merges the FTS5 segments into one (after a bulk load; queries read fewer b-trees)."""
        self._conn.execute("INSERT INTO terms(terms) VALUES ('optimize')")

    # -- reads -----------------------------------------------------------------------------
    def count(self) -> int:
        """Rows in ``docs``."""
        return self._thread_conn().execute("SELECT count(*) FROM docs").fetchone()[0]

    def time_bounds(self) -> tuple[float, float]:
        """``(earliest, latest)`` event time of the indexed articles (cached for a minute; ``(0, 0)`` when empty):
        the ends of an open date range."""
        now = time.monotonic()
        cached = getattr(self._local, "bounds", None)
        if cached is None or cached[0] < now:
            lo, hi = self._thread_conn().execute("SELECT min(event_time), max(event_time) FROM docs").fetchone()
            cached = self._local.bounds = (now + _LANGUAGES_TTL_S, (float(lo or 0.0), float(hi or 0.0)))
        return cached[1]

    def languages(self) -> list[str]:
        """The languages of the indexed articles (cached for a minute): the stems a query without a language
        filter tries."""
        now = time.monotonic()
        cached = getattr(self._local, "languages", None)
        if cached is None or cached[0] < now:
            langs = [r[0] for r in self._thread_conn().execute("SELECT DISTINCT language FROM docs") if r[0]]
            cached = self._local.languages = (now + _LANGUAGES_TTL_S, langs)
        return cached[1]

    def search(self, query: str, filters: Filters | None = None, limit: int = MAX_HITS) -> list[Hit]:
        """The best ``limit`` articles with a story that match every word of ``query`` (any of its stems: in
        ``filters.language`` when given, else in every indexed language) and the filters, best first, among the
        newest :data:`MAX_CANDIDATES` matches (module docstring: :data:`FIELD_WEIGHTS`, ties newest first).
        ``Hit.score`` is the negated field score (lower is better)."""
        filters = filters or Filters()
        lang = base_language(filters.language)
        groups = query_terms(query, [lang] if lang else self.languages())
        if not groups:
            return []
        words = [" OR ".join(f'"{t}"' for t in forms) for forms in groups]
        tags = [HAS_STORY_TAG]
        if lang:
            tags.append(_tag("l", lang))
        if filters.outlet:
            tags.append(_tag("o", filters.outlet))
        if filters.topic:
            tags.append(_tag("t", filters.topic.lower()))
        match = (
            "{title body entities outlet} : ("
            + " AND ".join(f"({w})" for w in words)
            + ") AND "
            + " AND ".join(f'tags : "{t}"' for t in tags)
        )
        if filters.since is not None or filters.until is not None:
            lo, hi = self.time_bounds()
            since = lo if filters.since is None else max(float(filters.since), lo)
            until = hi + 1.0 if filters.until is None else min(float(filters.until), hi + 1.0)
            days = date_tags(since, until)
            if not days:
                return []
            match += " AND tags : (" + " OR ".join(f'"{t}"' for t in days) + ")"
        conn = self._thread_conn()
        candidates = [
            r[0]
            for r in conn.execute(
                "SELECT rowid FROM terms WHERE terms MATCH ? ORDER BY rowid DESC LIMIT ?", (match, MAX_CANDIDATES)
            )
        ]
        if not candidates:
            return []
        score = dict.fromkeys(candidates, 0.0)
        marks = ",".join("?" * len(candidates))
        for rowid, title, entities in conn.execute(
            f"SELECT id, c0, c2 FROM terms_content WHERE id IN ({marks})",
            candidates,  # FTS5's copy: title, entities
        ):
            fields = {"title": set(title.split()), "entities": set(entities.split())}
            for forms in groups:
                score[rowid] += sum(w for name, w in FIELD_WEIGHTS if not fields[name].isdisjoint(forms))
        ranked = sorted(candidates, key=lambda r: (-score[r], -r))[: int(limit)]
        rows = {
            r[0]: r[1:]
            for r in conn.execute(
                "SELECT rowid, article_id, story_id, title, lead, url, domain, outlet, language, event_time FROM docs "
                f"WHERE rowid IN ({','.join('?' * len(ranked))})",
                ranked,
            )
        }
        return [Hit(*rows[r], -score[r]) for r in ranked if r in rows]


def _tabbed(values: Iterable[str]) -> str:
    vs = [v for v in values if v]
    return ("\t" + "\t".join(vs) + "\t") if vs else ""
