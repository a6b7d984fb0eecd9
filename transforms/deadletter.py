"""Dead-letter plumbing shared by the content transforms: the tag constant and the record builders."""

from __future__ import annotations

import json

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
