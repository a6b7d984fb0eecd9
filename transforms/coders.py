"""Beam coders of the ``schemas`` records, registered in one explicit place.

Call :func:`register_coders` once before building a pipeline: ``newsflow.pipelines.streaming.build_pipeline``
does, and so must every job or test that builds a pipeline from transforms without it. It is
idempotent (safe to call again).

Why explicit, not on import: the coder registry is process-global, and a registration that runs as
a side effect of importing some transform module makes the coder of a PCollection depend on which
modules happen to have been imported (a test importing only ``newsflow.transforms.enrich`` got the pickling
fallback coder for ``Article``, the job got ``RowCoder``). On a remote worker the registry is
rebuilt from imports, so the same hidden dependency decides how state and shuffled data are read
back. One function called at pipeline construction makes the coders the same everywhere and lists
them in one place.

Which coder each record gets:

* ``RowCoder`` (through ``registry.register_row``, which also registers the Beam schema) for
  every record whose fields map onto Beam schema types: ``RawDocument``, ``Article``,
  ``ArticleRecord``, ``NearDuplicateGroup``, ``DeadLetter``, ``Event``, ``TopicScore``, ``EntityRef``,
  ``StoryArticle``, ``StoryAssignment``, ``TrendInput``, ``TrendCount``. These are deterministic
  (checked by :func:`register_coders`), so any of them may be used as a key or held in state.
  Sequences decode as lists, not tuples.
* ``FastPrimitivesCoder`` for ``StoryRecord`` and ``UserProfile``: they hold numpy arrays and
  frozensets, which Beam schemas cannot express. That coder is *not* deterministic: never key by
  these records or keep them in state; key by their ``story_id`` / ``user_id`` instead (a
  stateful DoFn's keys are ``str``/``int``/tuples of them, see STYLE.md).

State specs declare their coders themselves (e.g. ``newsflow.transforms.stories``); those do not rely on
the registry.
"""

from __future__ import annotations

import threading

from apache_beam import coders

from newsflow.schemas import (
    Article,
    ArticleRecord,
    DeadLetter,
    EntityRef,
    Event,
    NearDuplicateGroup,
    RawDocument,
    StoryArticle,
    StoryAssignment,
    StoryRecord,
    TopicScore,
    TrendCount,
    TrendInput,
    UserProfile,
)

# Nested rows first: a record's row schema refers to the schemas of its nested records.
ROW_RECORDS = (
    TopicScore,
    EntityRef,
    RawDocument,
    Article,
    ArticleRecord,
    NearDuplicateGroup,
    DeadLetter,
    Event,
    StoryArticle,
    StoryAssignment,
    TrendInput,
    TrendCount,
)
# Records Beam schemas cannot express (numpy arrays, frozensets): not deterministic, never keys.
NON_ROW_RECORDS = (StoryRecord, UserProfile)

_lock = threading.Lock()
_registered = False


def register_coders() -> None:
    """Registers the coder of every ``schemas`` record in Beam's global coder registry.

    Idempotent: the first call registers, later calls return at once.

    Raises:
      TypeError: a record meant for ``RowCoder`` got a non-deterministic coder (a field type Beam
        schemas cannot express, which Beam would silently pickle).
    """
    global _registered
    with _lock:
        if _registered:
            return
        for record in ROW_RECORDS:
            coders.registry.register_row(record)
            coder = coders.registry.get_coder(record)
            if not coder.is_deterministic():
                raise TypeError(
                    f"{record.__name__} must have a deterministic RowCoder; a field type maps to a "
                    f"pickled 'any' value: {coder!r}"
                )
        for record in NON_ROW_RECORDS:
            coders.registry.register_coder(record, coders.FastPrimitivesCoder)
        _registered = True
