"""Conversion helpers between NamedTuple records and Arrow tables."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pyarrow as pa

UTC_TS = pa.timestamp("us", tz="UTC")
EMBEDDING_DIM = 128
# A 128-dim float32 embedding (story centroid, user interest), null when absent. A variable list
# with the length in the field metadata, not ``pa.list_(pa.float32(), 128)``: pyarrow 25 cannot read
# a null fixed-size list back from Parquet ("Expected all lists to be of size=128").
EMBEDDING_TYPE = pa.list_(pa.float32())
_LENGTH = b"length"


def embedding_field(name: str) -> pa.Field:
    """A nullable embedding field whose non-null values must hold :data:`EMBEDDING_DIM` floats."""
    return pa.field(name, EMBEDDING_TYPE, metadata={_LENGTH: str(EMBEDDING_DIM).encode()})


def epoch_to_datetime(value: float | None) -> _dt.datetime | None:
    """Converts UTC epoch seconds to an aware ``datetime`` (``None`` passes through)."""
    if value is None:
        return None
    return _dt.datetime.fromtimestamp(float(value), tz=_dt.UTC)


def datetime_to_epoch(value) -> float | None:
    """Converts an Arrow/py ``datetime`` (naive means UTC) to UTC epoch seconds."""
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=_dt.UTC)
    return value.timestamp()


def _arrow_value(value: Any) -> Any:
    """A record value as pyarrow takes it: sets become sorted lists, arrays (numpy) plain lists."""
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return value.tolist()
    return value


def records_to_table(records: Iterable, schema: pa.Schema) -> pa.Table:
    """Builds an Arrow table from NamedTuple records.

    Fields whose Arrow type is a timestamp are converted from epoch seconds; sets are stored as
    sorted lists and numpy arrays as lists; tuples fill struct fields in order.

    Args:
      records: NamedTuples whose field names equal ``schema.names``.
      schema: the target Arrow schema.

    Returns:
      ``pa.Table`` with exactly ``schema``.

    Raises:
      ValueError: a list field with a ``length`` in its metadata (an embedding) got a different length.
    """
    rows = list(records)
    columns = []
    for field in schema:
        values = [_arrow_value(getattr(r, field.name)) for r in rows]
        if pa.types.is_timestamp(field.type):
            values = [epoch_to_datetime(v) for v in values]
        if field.metadata and _LENGTH in field.metadata:
            n = int(field.metadata[_LENGTH])
            bad = [len(v) for v in values if v is not None and len(v) != n]
            if bad:
                raise ValueError(f"{field.name} must have {n} values, got {bad[0]}")
        columns.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def table_to_records(
    table: pa.Table, record_type, converters: Mapping[str, Callable[[Any], Any]] | None = None
) -> list:
    """Inverse of :func:`records_to_table` for the columns ``record_type`` declares.

    Args:
      table: rows written with the record's schema.
      record_type: the NamedTuple class.
      converters: field name -> function applied to the (non-null) Arrow value, for fields
        whose Python type Arrow does not give back (frozensets, numpy arrays, tuples of pairs).
    """
    converters = converters or {}
    out = []
    names: Sequence[str] = record_type._fields
    ts_fields = {f.name for f in table.schema if pa.types.is_timestamp(f.type)}
    for row in table.to_pylist():
        kwargs = {}
        for name in names:
            value = row.get(name)
            if name in ts_fields:
                value = datetime_to_epoch(value)
            elif value is not None and name in converters:
                value = converters[name](value)
            kwargs[name] = value
        out.append(record_type(**kwargs))
    return out
