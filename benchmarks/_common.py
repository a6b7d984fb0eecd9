"""Shared helpers for benchmarks: repeated timing, percentiles, and output.

Every benchmark is run as ``python -m benchmarks.NAME [--json]``. With
``--json`` it prints exactly one JSON line (see :func:`emit`); without it, the
same figures as indented, human-readable JSON. Speed figures are reported as
ratios against a baseline measured in the same run, so they are comparable
across machines.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any


def parse_args(
    description: str, argv: Sequence[str] | None = None, extra: Callable[[argparse.ArgumentParser], None] | None = None
) -> argparse.Namespace:
    """Parses the common ``--json`` flag (plus any options added by ``extra``).

    Args:
      description: help text of the benchmark.
      argv: arguments (default: ``sys.argv[1:]``).
      extra: optional callback that adds benchmark-specific options.

    Returns:
      The parsed namespace; ``args.json`` is True for one-line JSON output.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", action="store_true", help="print exactly one JSON line")
    if extra is not None:
        extra(parser)
    return parser.parse_args(argv)


def time_repeat(fn: Callable[[], Any], repeat: int = 5) -> list[float]:
    """Runs ``fn()`` ``repeat`` times and returns each wall time in seconds.

    Uses ``time.perf_counter``. Callers usually report the median.
    """
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def median(samples: Iterable[float]) -> float:
    """Median of the samples (ValueError if empty)."""
    return statistics.median(list(samples))


def percentiles(samples: Sequence[float], qs: Sequence[float] = (50, 90, 99)) -> dict[str, float]:
    """Percentiles by linear interpolation between closest ranks (numpy's default).

    Args:
      samples: measurements (any unit; the result keeps it).
      qs: percentiles in [0, 100].

    Returns:
      ``{"p50": ..., "p99": ...}`` keyed by ``"p"`` + the percentile
      (``"p99.9"`` for fractional ones).

    Raises:
      ValueError: ``samples`` is empty or a q is outside [0, 100].
    """
    data = sorted(samples)
    if not data:
        raise ValueError("no samples")
    out = {}
    for q in qs:
        if not 0 <= q <= 100:
            raise ValueError(f"percentile must be in [0, 100], got {q}")
        pos = (len(data) - 1) * q / 100.0
        lo = int(pos)
        hi = min(lo + 1, len(data) - 1)
        value = data[lo] + (data[hi] - data[lo]) * (pos - lo)
        out["p" + format(q, "g")] = value
    return out


def environment() -> dict[str, Any]:
    """Machine facts to print next to the figures."""
    import os

    import numpy as np

    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }


def emit(result: dict[str, Any], as_json: bool) -> None:
    """Prints the result: one JSON line if ``as_json``, else indented JSON."""
    if as_json:
        sys.stdout.write(json.dumps(result, sort_keys=False, separators=(",", ":")) + "\n")
    else:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    sys.stdout.flush()


def sig(value: float, digits: int = 4) -> float:
    """``value`` rounded to ``digits`` significant digits, for readable JSON."""
    return float(f"{value:.{digits}g}")
