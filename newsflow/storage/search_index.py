"""The full-text search index: one SQLite file with an FTS5 table (stdlib ``sqlite3``, no server).

Layout (``<data dir>/search/index.sqlite3`` by default, :func:`default_index_path`):

* ``docs`` — one row per article, keyed by ``article_id``: ``story_id`` (the story it was assigned to; a later
  merge is followed at query time through the story records' ``merged_into``), ``title``, ``lead`` (the first
  :data:`LEAD_CHARS` characters of the text), ``url``, ``domain``, ``outlet`` (registrable domain),
  ``language``, ``topics`` (tab-separated labels, with a tab at each end), ``entities`` (tab-separated display
  texts), ``event_time`` (UTC epoch seconds);
* ``terms`` — FTS5 over the analysed text of each row (:mod:`newsflow.core.search_text`: stemmed in the
  article's language), columns ``title``, ``body`` (lead), ``entities``, ``outlet``; same rowid as ``docs``.

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

import os
import sqlite3
import threading
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from newsflow.core.outlets import outlet as outlet_of
from newsflow.core.search_text import SNOWBALL, analyze, base_language, query_expression

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
CREATE VIRTUAL TABLE IF NOT EXISTS terms USING fts5(
  title, body, entities, outlet, tokenize = 'unicode61 remove_diacritics 2'
);
"""

_WEIGHTS = "10.0, 2.0, 4.0, 1.0"  # bm25 weights of title, body, entities, outlet


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
    """One matching article, best first (``score``: FTS5 bm25, lower is better)."""

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
    """Search filters; ``None``/empty means any. ``since``/``until`` are UTC epoch seconds, ``[since, until)``."""

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
        rowid, title, lead, outlet, language, entities = conn.execute(
            "SELECT rowid, title, lead, outlet, language, entities FROM docs WHERE article_id = ?", (article_id,)
        ).fetchone()
        conn.execute("DELETE FROM terms WHERE rowid = ?", (rowid,))
        conn.execute(
            "INSERT INTO terms(rowid, title, body, entities, outlet) VALUES (?, ?, ?, ?, ?)",
            (
                rowid,
                analyze(title, language),
                analyze(lead, language),
                analyze(entities.replace("\t", " "), language),
                " ".join(outlet.replace(".", " ").split()) + " " + outlet.split(".", 1)[0],
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

    def search(self, query: str, filters: Filters | None = None, limit: int = MAX_HITS) -> list[Hit]:
        """The best ``limit`` articles with a story that match every word of ``query`` (any of its stems: in
        ``filters.language`` when given, else in every language) and the filters, best first."""
        filters = filters or Filters()
        lang = base_language(filters.language)
        expr = query_expression(query, [lang] if lang else SNOWBALL)
        if not expr:
            return []
        where = ["terms MATCH ?", "d.story_id IS NOT NULL"]
        params: list = [expr]
        if lang:
            where.append("d.language = ?")
            params.append(lang)
        if filters.outlet:
            where.append("d.outlet = ?")
            params.append(filters.outlet)
        if filters.topic:
            where.append("instr(d.topics, ?) > 0")
            params.append("\t" + filters.topic.lower() + "\t")
        if filters.since is not None:
            where.append("d.event_time >= ?")
            params.append(float(filters.since))
        if filters.until is not None:
            where.append("d.event_time < ?")
            params.append(float(filters.until))
        sql = (
            "SELECT d.article_id, d.story_id, d.title, d.lead, d.url, d.domain, d.outlet, d.language, "
            f"d.event_time, bm25(terms, {_WEIGHTS}) AS score FROM terms JOIN docs d ON d.rowid = terms.rowid "
            f"WHERE {' AND '.join(where)} ORDER BY score, d.event_time DESC, d.article_id LIMIT ?"
        )
        params.append(int(limit))
        return [Hit(*row) for row in self._thread_conn().execute(sql, params)]


def _tabbed(values: Iterable[str]) -> str:
    vs = [v for v in values if v]
    return ("\t" + "\t".join(vs) + "\t") if vs else ""
