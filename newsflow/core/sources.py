"""Source (publisher) authority table: ``data/sources.csv`` matched by longest domain suffix.

The table format and the tier rubric are documented in ``data/SOURCES.md``.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass

from newsflow.core.resources import data_path

DEFAULT_SOURCES_PATH = data_path("sources.csv")  # packaged with an installed newsflow, data/ in a checkout
UNKNOWN_AUTHORITY = 0.5


@dataclass(frozen=True)
class Source:
    """One publisher: ``domain`` (lower case), display ``name``, ``tier``, ``authority`` in [0, 1] and
    the ``language`` it publishes in (lower-case tag such as ``"de"`` or ``"pt-br"``, ``""`` unknown;
    the language step takes it as the publisher's declared language when a page declares none)."""

    domain: str
    name: str
    tier: str
    authority: float
    language: str = ""


class SourceTable:
    """Looks up publishers by domain suffix.

    Args:
      sources: mapping of lower-case domain -> :class:`Source`.
    """

    def __init__(self, sources: Mapping[str, Source]):
        self._sources = dict(sources)

    @classmethod
    def load(cls, path: str = DEFAULT_SOURCES_PATH) -> SourceTable:
        """Reads a ``domain,name,tier,authority`` CSV (an optional ``language`` column is read too).

        Raises:
          ValueError: a row has an authority outside [0, 1] or a missing domain.
          OSError: the file cannot be read.
        """
        sources = {}
        with open(path, encoding="utf-8", newline="") as f:
            for lineno, row in enumerate(csv.DictReader(f), start=2):
                domain = (row.get("domain") or "").strip().lower()
                if not domain:
                    raise ValueError(f"{path}:{lineno}: empty domain")
                authority = float(row["authority"])
                if not 0.0 <= authority <= 1.0:
                    raise ValueError(f"{path}:{lineno}: authority {authority} outside [0, 1]")
                sources[domain] = Source(
                    domain,
                    row.get("name", "").strip(),
                    row.get("tier", "").strip(),
                    authority,
                    (row.get("language") or "").strip().lower(),
                )
        return cls(sources)

    def lookup(self, domain: str) -> Source | None:
        """Returns the source whose domain is the longest suffix of ``domain`` (label-aligned), else ``None``."""
        host = (domain or "").strip().lower().rstrip(".")
        if host.startswith("www."):
            host = host[4:]
        while host:
            found = self._sources.get(host)
            if found is not None:
                return found
            _, dot, host = host.partition(".")
            if not dot:
                break
        return None

    def authority(self, domain: str) -> float:
        """Authority in [0, 1] of ``domain``; :data:`UNKNOWN_AUTHORITY` when not listed."""
        found = self.lookup(domain)
        return UNKNOWN_AUTHORITY if found is None else found.authority

    def write(self, path: str) -> int:
        """Writes the table as a ``domain,name,tier,authority,language`` CSV (the :meth:`load` format),
        sorted by domain; returns the number of rows."""
        rows = self.sources()
        with open(path, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["domain", "name", "tier", "authority", "language"])
            for s in rows:
                w.writerow([s.domain, s.name, s.tier, repr(s.authority), s.language])
        return len(rows)

    def sources(self) -> list[Source]:
        """Every row, sorted by domain."""
        return [self._sources[d] for d in sorted(self._sources)]

    def __len__(self) -> int:
        return len(self._sources)
