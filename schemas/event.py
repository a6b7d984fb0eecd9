"""Event: one reader event (impression, click, dwell) as the API accepts it and Parquet keeps it."""

from typing import NamedTuple, Optional

import pyarrow as pa

from newsflow.schemas._arrow import UTC_TS

EVENT_TYPES = ("impression", "click", "dwell")
SURFACES = ("top", "topic", "trending", "story", "feed")


class Event(NamedTuple):
    """A validated reader event.

    Attributes:
      user_id: opaque reader id from a verified token (never from the request body).
      type: ``"impression"``, ``"click"`` or ``"dwell"`` (:data:`EVENT_TYPES`).
      story_id: the story shown or opened (1-128 chars of ``[A-Za-z0-9_.:-]``).
      event_time: when it happened on the client, UTC epoch seconds.
      received_time: when the API received it, UTC epoch seconds.
      position: 0-based rank of the story on the surface, ``None`` when not sent.
      dwell_seconds: seconds spent on the story, in (0, 86400]; dwell events only, else ``None``.
      surface: where it was shown, one of :data:`SURFACES`, or ``""``.
      event_id: ``"<shard>/<ms>-<seq>"`` (stream shard and Redis stream id) once appended to the event
        streams (:mod:`newsflow.storage.events`), ``""`` before.
    """

    user_id: str
    type: str
    story_id: str
    event_time: float
    received_time: float
    position: Optional[int] = None
    dwell_seconds: Optional[float] = None
    surface: str = ""
    event_id: str = ""


EVENT_SCHEMA = pa.schema(
    [
        pa.field("event_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("story_id", pa.string(), nullable=False),
        pa.field("event_time", UTC_TS),
        pa.field("received_time", UTC_TS),
        pa.field("position", pa.int32()),
        pa.field("dwell_seconds", pa.float32()),
        pa.field("surface", pa.string()),
    ]
)
