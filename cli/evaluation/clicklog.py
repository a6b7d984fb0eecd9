"""Reading click logs for the ``newsflow eval personalization`` and ``newsflow eval decay`` commands.

Format: CSV (plain or ``.gz``) with a header holding at least ``user_id``, ``session_id``,
``click_article_id`` and ``click_timestamp`` (milliseconds since the epoch, UTC), the layout of the
Globo.com "News Portal User Interactions" log (Moreira et al., 2018). Other columns are ignored.
Ids are kept as strings (sorted numerically when all are integers).

The Globo log is non-commercial: it is only ever read from its path under ``../shared/data``, never
copied into the repository.
"""

from __future__ import annotations

import csv
import gzip
from typing import NamedTuple

import numpy as np

from newsflow.cli.evaluation.inputs import READ_ERRORS, InputError, describe

REQUIRED_COLUMNS = ("user_id", "session_id", "click_article_id", "click_timestamp")


class Clicks(NamedTuple):
    """A click log as arrays, rows in file order.

    Attributes:
      time: float64 (n,), click time, UTC epoch seconds.
      article: list of n article ids (str).
      session: list of n session ids (str).
      user: list of n user ids (str).
      session_start: float64 (n,), the row's ``session_start`` (UTC epoch seconds), NaN where the log has
        no such column.
    """

    time: np.ndarray
    article: list
    session: list
    user: list
    session_start: np.ndarray


def read_clicks(path: str) -> Clicks:
    """Reads a click log (format in the module docstring).

    Raises:
      InputError: ``"<path>: <problem>"`` for a missing/unreadable/truncated file, missing columns,
        a row with an empty id or a timestamp that is not a finite number, or no clicks at all.
    """
    times: list[float] = []
    article: list[str] = []
    session: list[str] = []
    user: list[str] = []
    starts: list[float] = []
    try:
        with (
            gzip.open(path, "rt", encoding="utf-8", newline="")
            if str(path).endswith(".gz")
            else open(path, encoding="utf-8", newline="")
        ) as f:
            reader = csv.DictReader(f)
            missing = [c for c in REQUIRED_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise InputError(
                    f"{path}: not a click log: missing columns {missing} (need {', '.join(REQUIRED_COLUMNS)})"
                )
            has_start = "session_start" in (reader.fieldnames or [])
            for r in reader:
                line = reader.line_num
                for c in ("user_id", "session_id", "click_article_id"):
                    if not (r.get(c) or "").strip():
                        raise InputError(f"{path}:{line}: empty {c}")
                times.append(_epoch_seconds(r, "click_timestamp", path, line))
                starts.append(_epoch_seconds(r, "session_start", path, line) if has_start else float("nan"))
                article.append(r["click_article_id"].strip())
                session.append(r["session_id"].strip())
                user.append(r["user_id"].strip())
    except InputError:
        raise
    except READ_ERRORS as e:
        raise InputError(f"{path}: {describe(e)}") from None
    if not times:
        raise InputError(f"{path}: no clicks")
    return Clicks(np.asarray(times, dtype=np.float64), article, session, user, np.asarray(starts, dtype=np.float64))


def _epoch_seconds(row: dict, column: str, path: str, line: int) -> float:
    """``row[column]`` (ms since the epoch) in seconds; InputError naming the line if it is not a finite number."""
    raw = (row.get(column) or "").strip()
    try:
        t = float(raw) / 1000.0
    except ValueError:
        t = float("nan")
    if not np.isfinite(t):
        raise InputError(f"{path}:{line}: {column} must be a number (ms since the epoch), got {raw[:40]!r}")
    return t


def id_key(v: str) -> tuple:
    """Sort key putting integer ids in numeric order, then other ids as strings."""
    return (0, int(v), "") if v.lstrip("-").isdigit() else (1, 0, v)


def index_ids(values: list) -> tuple[np.ndarray, list]:
    """``(int64 index per value, sorted distinct ids)``; index order = :func:`id_key` order."""
    distinct = sorted(set(values), key=id_key)
    pos = {v: i for i, v in enumerate(distinct)}
    return np.fromiter((pos[v] for v in values), dtype=np.int64, count=len(values)), distinct
