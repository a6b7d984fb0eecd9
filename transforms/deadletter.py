"""Dead-letter plumbing shared by the content transforms: tag constant and record builders."""

from __future__ import annotations

import json

from schemas import DeadLetter, RawDocument

DEAD_LETTER_TAG = "dead_letter"
METRICS_NAMESPACE = "newsflow"


def raw_payload(raw: RawDocument) -> bytes:
    """The RawDocument as landing-file JSON bytes (replayable as-is)."""
    return json.dumps(raw.to_json_dict(), ensure_ascii=False, sort_keys=True).encode("utf-8")


def dead_letter(step: str, error_type: str, error: str, payload: bytes, url: str = "") -> DeadLetter:
    """Builds a :class:`schemas.DeadLetter`; ``error`` is truncated to 2,000 characters."""
    return DeadLetter(step=step, error_type=error_type, error=str(error)[:2000], payload=payload, url=url or "")
