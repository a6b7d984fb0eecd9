"""Source lists as files: OPML 1.0/2.0 and CSV, read as a stream of entries and written back.

**OPML** (http://opml.org/spec2.opml; every feed reader exports it). An ``<outline>`` with an
``xmlUrl`` is a feed; its title is ``title``, else ``text``; ``htmlUrl`` is kept. Outlines without
``xmlUrl`` are folders: the path of folder titles above a feed (``News/World``) is its first
category, and the comma-separated, slash-delimited OPML 2.0 ``category`` attribute adds the others
(``/tech,/science/space`` -> ``tech``, ``science/space``). Two newsflow attributes round-trip what
OPML has no word for: ``nfKind="sitemap"`` (a news sitemap) and ``nfStatus="paused"``.

Writing puts each feed in the folder of its first category (``a/b`` -> folder ``a`` > ``b``) and
lists the other categories in ``category``, so reading the file back gives the same categories in
the same order. Categories after the first come from a comma-separated attribute, so on that path
a comma inside one of them splits it (the CSV format keeps commas).

Exporters' mistakes are repaired, each kind counted in one ``("file", FileNote)`` entry: a bare ``&``
(``Smith & Daughters``, ``?a=1&b=2``: not the start of a character reference or of an entity name
ending in ``;``) is read as ``&amp;``, and an HTML named entity XML does not define (``&eacute;``,
``&nbsp;``; the HTML5 list, :data:`html.entities.html5`) as its character. A UTF-8 byte-order mark is
allowed. A feed listed twice (at the top level and in a folder) is one feed with the categories of
both; the registry merges them (:meth:`newsflow.storage.source_registry.SourceRegistry.register`).

Reading is defensive: XML is parsed incrementally by ``defusedxml`` (no DTD entity expansion, no
external entities: a "billion laughs" file is refused with a clear error), each finished outline is
dropped from memory, at most ``max_entries`` feeds are read (the rest of the file is reported as one
``too_many`` error), and a file that stops being well-formed part-way keeps the entries before the
error. Each entry comes out as ``(ref, FeedEntry)`` or ``(ref, FeedError)``; ``ref`` is
``"outline N"`` or ``"line N"``. URLs are checked later, by the registry.

**URL lists** (``.txt``, or a file whose first line is a bare URL): one feed URL per line, ``#``
comments, the ``newsflow crawl --seeds`` format.

**CSV** (UTF-8, header row): ``url`` (also accepted: ``xmlUrl``, ``feed_url``, ``feed``), ``kind``,
``title``, ``categories`` (``|``-separated), ``html_url``, ``status``; the export adds the
outlet's ``outlet``, ``name``, ``tier``, ``authority`` and ``language`` (ignored on import).
"""

from __future__ import annotations

import csv
import html.entities as html_entities
import re
import sys
from collections.abc import Iterable, Iterator
from typing import IO
from xml.etree.ElementTree import ParseError
from xml.sax.saxutils import escape, quoteattr

from defusedxml import DefusedXmlException
from defusedxml.ElementTree import iterparse

from newsflow.core.source_entries import FeedEntry, FeedError, FileNote, clean_categories

MAX_ENTRIES = 200_000
MAX_FOLDER_DEPTH = 16
CSV_FIELDS = (
    "url",
    "kind",
    "title",
    "categories",
    "html_url",
    "status",
    "outlet",
    "name",
    "tier",
    "authority",
    "language",
)
_URL_COLUMNS = ("url", "xmlurl", "feed_url", "feed", "feedurl")
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")

Parsed = tuple[str, "FeedEntry | FeedError | FileNote"]


def detect_format(path: str, head: bytes) -> str:
    """``"opml"``, ``"csv"`` or ``"urls"`` from the file name (``.opml``/``.xml``, ``.csv``, ``.txt``),
    else from the content: ``<`` first is OPML, a first line that is a bare http(s) URL (after ``#``
    comments) is a URL list, anything else CSV."""
    lower = path.lower()
    if lower.endswith((".opml", ".xml")):
        return "opml"
    if lower.endswith((".csv", ".tsv")):
        return "csv"
    if lower.endswith(".txt"):
        return "urls"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"<"):
        return "opml"
    first = next((ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith(b"#")), b"")
    return "urls" if re.match(rb"https?://[^\s,]+\Z", first, re.I) else "csv"


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1].lower() if isinstance(tag, str) else ""


def _attrs(elem) -> dict[str, str]:
    return {_local(k): v for k, v in elem.attrib.items()}


_XML_ENTITIES = frozenset({"amp", "lt", "gt", "quot", "apos"})
_AMPERSAND_RE = re.compile(rb"&(?!#[0-9]+;|#[xX][0-9a-fA-F]+;)([A-Za-z][A-Za-z0-9]{0,31};)?")


class _RepairingReader:
    """A binary reader over an OPML file that repairs bare ``&`` and HTML named entities (module docstring)
    chunk by chunk, in bounded memory, and counts each repair; ``read(n)`` as :meth:`io.RawIOBase.read`."""

    CHUNK = 1 << 16

    def __init__(self, raw: IO[bytes]):
        self.raw = raw
        self.buffer = b""
        self.carry = b""  # a chunk's tail that may be the start of a reference cut by the chunk boundary
        self.eof = False
        self.bare = 0
        self.entities: dict[str, int] = {}

    def _fix(self, m: re.Match) -> bytes:
        name = m.group(1)
        if name is None:
            self.bare += 1
            return b"&amp;"
        word = name[:-1].decode("ascii")
        if word in _XML_ENTITIES:
            return m.group(0)
        char = html_entities.html5.get(word + ";")
        if char is None:
            self.bare += 1  # "&nosuch;" is text, not a reference
            return b"&amp;" + name
        self.entities[word] = self.entities.get(word, 0) + 1
        return "".join(f"&#{ord(c)};" for c in char).encode("ascii")

    def read(self, n: int = -1) -> bytes:
        while (n < 0 or len(self.buffer) < n) and not self.eof:
            chunk = self.raw.read(self.CHUNK)
            self.eof = not chunk
            text, self.carry = self.carry + chunk, b""
            cut = text.rfind(b"&", max(0, len(text) - 40))
            if not self.eof and cut >= 0 and b";" not in text[cut:]:
                text, self.carry = text[:cut], text[cut:]  # "&eac" | "ute;": repair it with the next chunk
            self.buffer += _AMPERSAND_RE.sub(self._fix, text) if b"&" in text else text
        out, self.buffer = (self.buffer, b"") if n < 0 else (self.buffer[:n], self.buffer[n:])
        return out

    def note(self) -> FileNote | None:
        """What was repaired, or ``None``."""
        parts = []
        if self.bare:
            parts.append(f"{self.bare} bare '&' read as '&amp;'")
        for word, count in sorted(self.entities.items()):
            parts.append(f"{count} HTML entity &{word}; read as {html_entities.html5[word + ';']!r}")
        return FileNote("repaired: " + ", ".join(parts)) if parts else None


def read_opml(source: IO[bytes] | str, max_entries: int = MAX_ENTRIES) -> Iterator[Parsed]:
    """Feeds of an OPML file (rules in the module docstring).

    Args:
      source: binary file object or path.
      max_entries: feeds read at most; more give one ``too_many`` error and stop.

    Yields:
      as :func:`_read_opml`, then ``("file", FileNote)`` when the reader repaired the file.
    """
    if isinstance(source, str):
        with open(source, "rb") as fh:
            yield from read_opml(fh, max_entries)
        return
    reader = _RepairingReader(source)
    refused = False
    for ref, item in _read_opml(reader, max_entries):
        refused |= ref == "file"  # the whole file was refused: nothing it says was read, nothing repaired
        yield ref, item
    note = reader.note()
    if note is not None and not refused:
        yield "file", note


def _read_opml(source, max_entries: int = MAX_ENTRIES) -> Iterator[Parsed]:
    """Feeds of an OPML file (rules in the module docstring).

    Args:
      source: binary file object or path.
      max_entries: feeds read at most; more give one ``too_many`` error and stop.

    Yields:
      ``("outline N", FeedEntry)`` per feed outline (N counts every outline from 1), or
      ``(ref, FeedError)``: ``bad_file`` for XML that is not well-formed (entries before the error
      were yielded), forbidden DTD entities or external references, or no ``<opml>`` root;
      ``bad_entry`` for a feed outline whose ``xmlUrl`` is empty; ``too_many`` past ``max_entries``.
    """
    stack: list = []  # (element, folder title or None, is_feed)
    n_outlines = n_feeds = 0
    root_checked = False
    try:
        for event, elem in iterparse(source, events=("start", "end"), forbid_dtd=False, forbid_entities=True):
            tag = _local(elem.tag)
            if event == "start":
                if not root_checked:
                    root_checked = True
                    if tag != "opml":
                        yield "file", FeedError("bad_file", f"not an OPML file: the root element is <{tag}>")
                        return
                if tag != "outline":
                    stack.append((elem, None, False))
                    continue
                n_outlines += 1
                a = _attrs(elem)
                title = (a.get("title") or a.get("text") or "").strip()
                if title and title == a.get("xmlurl", "").strip():
                    title = ""  # a writer (ours among them) that shows the URL when there is no title
                if "xmlurl" not in a:
                    stack.append((elem, title, False))
                    continue
                stack.append((elem, None, True))
                ref = f"outline {n_outlines}"
                url = a.get("xmlurl", "").strip()
                if not url:
                    yield ref, FeedError("bad_entry", f"feed outline {title[:100]!r} has an empty xmlUrl")
                    continue
                n_feeds += 1
                if n_feeds > max_entries:
                    yield (
                        ref,
                        FeedError(
                            "too_many",
                            f"the file has more than {max_entries:,} feeds; feeds from {ref} on were not read",
                        ),
                    )
                    return
                folders = [t for _, t, _ in stack[:-1] if t][:MAX_FOLDER_DEPTH]
                cats = (["/".join(folders)] if folders else []) + a.get("category", "").split(",")
                kind = "sitemap" if a.get("nfkind", "").strip().lower() == "sitemap" else "feed"
                status = "paused" if a.get("nfstatus", "").strip().lower() == "paused" else "active"
                yield (
                    ref,
                    FeedEntry(
                        url=url,
                        kind=kind,
                        title=title,
                        categories=clean_categories(cats),
                        html_url=a.get("htmlurl", "").strip(),
                        status=status,
                    ),
                )
            else:
                if stack:
                    stack.pop()
                if stack:
                    parent = stack[-1][0]
                    # finished: drop it, so a huge file is never held in memory; siblings end in
                    # order, so a finished element is its parent's first remaining child (the parser
                    # may already have appended later siblings)
                    if len(parent) and parent[0] is elem:
                        del parent[0]
                elem.clear()
    except DefusedXmlException as e:
        what = {
            "EntitiesForbidden": "declares XML entities (entity expansion is refused)",
            "DTDForbidden": "has a DTD",
            "ExternalReferenceForbidden": "refers to an external resource",
        }.get(type(e).__name__, "uses a refused XML feature")
        yield "file", FeedError("bad_file", f"the file {what}: {e}; nothing was read from it")
        return
    except ParseError as e:
        line, col = getattr(e, "position", (0, 0))
        yield (
            f"line {line}",
            FeedError("bad_file", f"invalid XML at line {line}, column {col}: {e}; entries before it were read"),
        )
        return
    if not root_checked:
        yield "file", FeedError("bad_file", "empty file")


def _decoded_lines(raw: IO[bytes]) -> Iterator[str]:
    """UTF-8 lines of a binary file, decoded one at a time (a bad byte fails only its own line, after
    the rows before it were read); a leading byte-order mark is dropped."""
    first = True
    for line in raw:
        if first:
            line = line.removeprefix(b"\xef\xbb\xbf")
            first = False
        yield line.decode("utf-8")


def read_csv(source: IO[bytes] | str, max_entries: int = MAX_ENTRIES) -> Iterator[Parsed]:
    """Feeds of a CSV file (columns in the module docstring).

    Yields:
      ``("line N", FeedEntry)`` per data row (N is the physical line of the row's start), or
      ``(ref, FeedError)``: ``bad_file`` (no URL column, undecodable bytes, broken CSV: the rows
      before were yielded), ``bad_entry`` (empty URL, unknown kind or status), ``too_many``.
    """
    raw = open(source, "rb") if isinstance(source, str) else source  # noqa: SIM115 - closed below
    text = _decoded_lines(raw)
    try:
        reader = csv.reader(text)
        try:
            header = next(reader, None)
        except (csv.Error, UnicodeDecodeError) as e:
            yield "line 1", FeedError("bad_file", f"unreadable CSV header: {e}")
            return
        if header is None:
            yield "file", FeedError("bad_file", "empty file")
            return
        cols = [h.strip().lower() for h in header]
        url_col = next((cols.index(c) for c in _URL_COLUMNS if c in cols), None)
        if url_col is None:
            yield "line 1", FeedError("bad_file", f"no url column in the header {header[:12]!r}")
            return

        def col(row: list[str], name: str) -> str:
            return row[cols.index(name)].strip() if name in cols and cols.index(name) < len(row) else ""

        n = 0
        while True:
            line = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                return
            except (csv.Error, UnicodeDecodeError) as e:
                yield (
                    f"line {line}",
                    FeedError("bad_file", f"unreadable CSV at line {line}: {e}; rows before it were read"),
                )
                return
            if not any(c.strip() for c in row):
                continue
            ref = f"line {line}"
            if any("\n" in c or "\r" in c for c in row):
                last = reader.line_num
                yield (
                    f"lines {line}-{last}",
                    FeedError(
                        "bad_entry",
                        f"a quoted field runs from line {line} to line {last} (an unterminated quote?): "
                        "the rows in that span were not imported",
                    ),
                )
                continue
            url = row[url_col].strip() if url_col < len(row) else ""
            if not url:
                yield ref, FeedError("bad_entry", "empty url")
                continue
            n += 1
            if n > max_entries:
                yield (
                    ref,
                    FeedError(
                        "too_many", f"the file has more than {max_entries:,} feeds; rows from {ref} on were not read"
                    ),
                )
                return
            kind = (col(row, "kind") or "feed").lower()
            status = (col(row, "status") or "active").lower()
            if kind not in ("feed", "sitemap") or status not in ("active", "paused"):
                yield (
                    ref,
                    FeedError(
                        "bad_entry",
                        f"kind must be feed or sitemap and status active or paused, got {kind!r}, {status!r}",
                    ),
                )
                continue
            yield (
                ref,
                FeedEntry(
                    url=url,
                    kind=kind,
                    title=col(row, "title"),
                    categories=clean_categories(col(row, "categories").split("|")),
                    html_url=col(row, "html_url"),
                    status="paused" if status == "paused" else "active",
                ),
            )
    finally:
        if isinstance(source, str):
            raw.close()


def read_urls(source: IO[bytes], max_entries: int = MAX_ENTRIES) -> Iterator[Parsed]:
    """Feeds of a plain list of URLs, one per line (the ``newsflow crawl --seeds`` format: blank lines
    and ``#`` comments skipped).

    Yields:
      ``("line N", FeedEntry)`` per URL, or ``(ref, FeedError)``: ``bad_file`` for undecodable bytes
      (lines before were yielded), ``bad_entry`` for a line with spaces, ``too_many``.
    """
    n = 0
    lineno = 0
    try:
        for lineno, line in enumerate(_decoded_lines(source), start=1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            ref = f"line {lineno}"
            if any(c.isspace() for c in text):
                yield ref, FeedError("bad_entry", f"one URL per line, got {text[:200]!r}")
                continue
            n += 1
            if n > max_entries:
                yield (
                    ref,
                    FeedError(
                        "too_many", f"the file has more than {max_entries:,} URLs; lines from {ref} on were not read"
                    ),
                )
                return
            yield ref, FeedEntry(url=text)
    except UnicodeDecodeError as e:
        yield (
            f"line {lineno + 1}",
            FeedError("bad_file", f"line {lineno + 1} is not UTF-8: {e}; lines before it were read"),
        )


def read_file(path: str, fmt: str | None = None, max_entries: int = MAX_ENTRIES) -> Iterator[Parsed]:
    """Entries of an OPML, CSV or URL-list file (``fmt`` ``"opml"``/``"csv"``/``"urls"``, default:
    :func:`detect_format`).

    Raises:
      OSError: the file cannot be opened.
    """
    with open(path, "rb") as f:
        head = f.read(512)
        f.seek(0)
        reader = {"opml": read_opml, "csv": read_csv, "urls": read_urls}[fmt or detect_format(path, head)]
        yield from reader(f, max_entries)


def _x(text: str) -> str:
    return _XML_BAD.sub("", text or "")


def write_opml(feeds: Iterable[dict], out: IO[str] = sys.stdout, title: str = "newsflow sources") -> int:
    """Writes feeds (dicts of :meth:`newsflow.storage.source_registry.SourceRegistry.iter_feeds`) as OPML 2.0.

    Returns:
      Number of feeds written.
    """
    tree: dict = {"feeds": [], "folders": {}}
    for feed in feeds:
        cats = list(feed.get("categories") or [])
        node = tree
        if cats:
            for part in cats[0].split("/"):
                node = node["folders"].setdefault(part, {"feeds": [], "folders": {}})
        node["feeds"].append(feed)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n<opml version="2.0">\n')
    out.write(f"  <head>\n    <title>{escape(_x(title))}</title>\n  </head>\n  <body>\n")
    count = _write_node(tree, out, 2)
    out.write("  </body>\n</opml>\n")
    return count


def _write_node(node: dict, out: IO[str], depth: int) -> int:
    pad = "  " * depth
    count = 0
    for feed in node["feeds"]:
        attrs = {"type": "rss", "text": feed.get("title") or feed["url"], "title": feed.get("title") or ""}
        attrs["xmlUrl"] = feed["url"]
        if feed.get("html_url"):
            attrs["htmlUrl"] = feed["html_url"]
        rest = list(feed.get("categories") or [])[1:]
        if rest:
            attrs["category"] = ",".join("/" + c for c in rest)
        if feed.get("kind") == "sitemap":
            attrs["nfKind"] = "sitemap"
        if feed.get("status") == "paused":
            attrs["nfStatus"] = "paused"
        out.write(pad + "<outline " + " ".join(f"{k}={quoteattr(_x(v))}" for k, v in attrs.items()) + "/>\n")
        count += 1
    for name, child in node["folders"].items():
        out.write(f"{pad}<outline text={quoteattr(_x(name))} title={quoteattr(_x(name))}>\n")
        count += _write_node(child, out, depth + 1)
        out.write(f"{pad}</outline>\n")
    return count


def write_csv(feeds: Iterable[dict], out: IO[str] = sys.stdout) -> int:
    """Writes feeds as CSV with the :data:`CSV_FIELDS` header; returns the number written."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_FIELDS)
    n = 0
    for f in feeds:
        row = dict(f, categories="|".join(f.get("categories") or []))
        row["authority"] = "" if f.get("authority") is None else repr(f["authority"])
        w.writerow(["" if row.get(c) is None else str(row.get(c)) for c in CSV_FIELDS])
        n += 1
    return n
