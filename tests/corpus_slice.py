"""Slices of the bundled corpus (``data/corpus/headlines.jsonl.gz``) written as landing files for tests."""

from __future__ import annotations

import gzip
import os

from tests.conftest import REPO_ROOT

HEADLINES = os.path.join(REPO_ROOT, "data", "corpus", "headlines.jsonl.gz")


def headline_lines(n: int) -> list[bytes]:
    """The first ``n`` landing lines of the bundled headlines (bytes, without newlines)."""
    lines = []
    with gzip.open(HEADLINES, "rb") as f:
        for ln in f:
            lines.append(ln.rstrip(b"\n"))
            if len(lines) == n:
                break
    return lines


def write_lines(path, lines: list[bytes]) -> str:
    """Writes ``lines`` as a JSONL landing file at ``path``; returns the path as ``str``."""
    with open(path, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    return str(path)


def write_headlines(path, n: int) -> str:
    """The first ``n`` bundled headlines as a JSONL landing file at ``path``; returns the path."""
    return write_lines(path, headline_lines(n))
