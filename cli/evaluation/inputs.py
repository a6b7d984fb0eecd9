"""Input errors of the ``newsflow eval`` commands: one convention for every command.

On bad input (a missing or unreadable file, a file in the wrong format, a record without a
required field or with a field of the wrong type, a file with nothing to score) every
``newsflow eval ...`` command prints one line ``error: <file>: <problem>`` to stderr, prints
nothing to stdout and exits with code 2. Tracebacks are never shown for bad input.

Commands raise :class:`InputError` (or let :func:`describe` turn a low-level exception into a
message) and end with :func:`fail`.
"""

from __future__ import annotations

import csv
import gzip
import json
import sys
import zlib
from pathlib import Path
from typing import Any

EXIT_BAD_INPUT = 2

# What a corrupt, truncated or wrongly encoded input file raises while being read or parsed.
READ_ERRORS = (OSError, EOFError, zlib.error, UnicodeDecodeError, csv.Error, ValueError)


class InputError(ValueError):
    """Bad input to an eval command; the message names the file and the problem."""


def describe(exc: BaseException) -> str:
    """A one-line description of a read/parse failure, e.g. ``"EOFError: Compressed file ended ..."``.

    ``OSError`` messages already name their file; the caller adds the file otherwise.
    """
    if isinstance(exc, FileNotFoundError):
        return "file not found"
    if isinstance(exc, IsADirectoryError):
        return "is a directory, expected a file"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text ({exc.reason} at byte {exc.start})"
    if isinstance(exc, (EOFError, zlib.error, gzip.BadGzipFile)):
        return f"corrupt or truncated gzip data ({type(exc).__name__}: {exc})"
    text = str(exc) or type(exc).__name__
    return text if isinstance(exc, (InputError, ValueError)) else f"{type(exc).__name__}: {text}"


def read_json(path: str | Path) -> Any:
    """Parses a JSON file (plain or ``.gz``).

    Raises:
      InputError: ``"<path>: <problem>"`` when the file is missing, unreadable, truncated or not JSON.
    """
    try:
        with (
            gzip.open(path, "rt", encoding="utf-8") if str(path).endswith(".gz") else open(path, encoding="utf-8")
        ) as f:
            return json.load(f)
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply") from None
    except READ_ERRORS as e:
        raise InputError(f"{path}: {describe(e)}") from None


def fail(exc: BaseException | str, path: str | Path | None = None) -> int:
    """Prints ``error: <message>`` to stderr and returns :data:`EXIT_BAD_INPUT` (2).

    Args:
      exc: the error (an :class:`InputError` already names its file) or a message.
      path: file to name in front of the message when the message does not contain it yet.
    """
    message = exc if isinstance(exc, str) else describe(exc)
    if path is not None and str(path) not in message:
        message = f"{path}: {message}"
    print(f"error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT
