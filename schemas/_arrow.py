"""Conversion helpers between NamedTuple records and Arrow tables."""

from __future__ import annotations

import datetime as _dt
from typing import Iterable, Sequence

import pyarrow as pa

UTC_TS = pa.timestamp("us", tz="UTC")


def epoch_to_datetime(value: float | None) -> _dt.datetime | None:
    """Converts UTC epoch seconds to an aware ``datetime`` (``None`` passes through)."""
    if value is None:
        return None
    return _dt.datetime.fromtimestamp(float(value), tz=_dt.timezone.utc)


def datetime_to_epoch(value) -> float | None:
    """Converts an Arrow/py ``datetime`` (naive means UTC) to UTC epoch seconds."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.timezone.utc)
    return value.timestamp()


def records_to_table(records: Iterable, schema: pa.Schema) -> pa.Table:
    """Builds an Arrow table from NamedTuple records.

    Fields whose Arrow type is a timestamp are converted from epoch seconds.

    Args:
      records: NamedTuples whose field names equal ``schema.names``.
      schema: the target Arrow schema.

    Returns:
      ``pa.Table`` with exactly ``schema``.
    """
    rows = list(records)
    columns = []
    for field in schema:
        values = [getattr(r, field.name) for r in rows]
        if pa.types.is_timestamp(field.type):
            values = [epoch_to_datetime(v) for v in values]
        columns.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def table_to_records(table: pa.Table, record_type) -> list:
    """Inverse of :func:`records_to_table` for the columns ``record_type`` declares."""
    out = []
    names: Sequence[str] = record_type._fields
    ts_fields = {f.name for f in table.schema if pa.types.is_timestamp(f.type)}
    for row in table.to_pylist():
        kwargs = {}
        for name in names:
            value = row.get(name)
            if name in ts_fields:
                value = datetime_to_epoch(value)
            kwargs[name] = value
        out.append(record_type(**kwargs))
    return out
