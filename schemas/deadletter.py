"""DeadLetter: a record that a step could not process, with the reason and raw payload."""

from typing import NamedTuple

import pyarrow as pa


class DeadLetter(NamedTuple):
    """A failed input, kept whole so it can be inspected and replayed.

    Attributes:
      step: pipeline step that refused it, e.g. ``"parse"``, ``"extract"``.
      error_type: short machine-readable reason, e.g. ``"not_an_article"``, ``"invalid_json"``.
      error: human-readable message.
      payload: the raw input (a landing-file line, or the RawDocument as JSON), as bytes.
      url: URL of the document when known, else "".
    """

    step: str
    error_type: str
    error: str
    payload: bytes
    url: str = ""


DEAD_LETTER_SCHEMA = pa.schema(
    [
        pa.field("step", pa.string(), nullable=False),
        pa.field("error_type", pa.string(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("payload", pa.binary()),
        pa.field("url", pa.string()),
    ]
)
