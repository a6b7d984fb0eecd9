"""Dead-letter plumbing shared by the content transforms: tag constant, record builders, and the re-windowing of
outputs a DoFn emits after a later input (dead letters included)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from apache_beam import pvalue
from apache_beam.utils.windowed_value import WindowedValue

from newsflow.schemas import DeadLetter, RawDocument

DEAD_LETTER_TAG = "dead_letter"
METRICS_NAMESPACE = "newsflow"


def raw_payload(raw: RawDocument) -> bytes:
    """The RawDocument as landing-file JSON bytes (replayable as-is; ASCII-escaped, so even invalid
    Unicode survives)."""
    return json.dumps(raw.to_json_dict(), ensure_ascii=True, sort_keys=True).encode("ascii")


def dead_letter(step: str, error_type: str, error: str, payload: bytes, url: str = "") -> DeadLetter:
    """Builds a :class:`schemas.DeadLetter`; ``error`` is truncated to 2,000 characters and, like
    ``url``, made valid Unicode (lone surrogates replaced), so building a dead letter never fails."""
    return DeadLetter(
        step=step,
        error_type=error_type,
        error=_valid(str(error)[:2000]),
        payload=payload,
        url=_valid((url or "")[:2048]),
    )


def _valid(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


def rewindowed(outputs: Iterable, where: WindowedValue) -> Iterator:
    """``outputs`` of an earlier input (values and ``TaggedOutput`` dead letters), each carrying that input's
    timestamp and windows (``where``, a ``WindowedValue`` of it): for a DoFn that emits an input's outputs
    while processing a later one (work handed to a pool or a child process) or in ``finish_bundle``."""
    for out in outputs:
        if isinstance(out, pvalue.TaggedOutput):
            yield pvalue.TaggedOutput(out.tag, where.with_value(out.value))
        else:
            yield where.with_value(out)
