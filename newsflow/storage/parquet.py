"""Parquet history datasets written as content-addressed files (local paths or ``gs://``).

Layout: ``<root>/<dataset>/<partition>/part-<sha256 of the file bytes, 20 hex>.parquet``
where ``partition`` is a Hive-style ``key=value`` path such as ``date=2014-03-10``.

A file's name is the hash of its bytes, and rows are sorted by a stable key before
writing, so writing the same rows twice produces the same file name and content:
replaying an input does not add files or rows. Files are written to a temporary
``.tmp-`` name beside the target and then moved into place, so readers never see a
partial file (readers skip names starting with ``.`` or ``_``).
"""

from __future__ import annotations

import hashlib
import io
import posixpath
import uuid
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from newsflow.core.resources import filesystem_and_path
from newsflow.schemas._arrow import records_to_table


def table_bytes(table: pa.Table) -> bytes:
    """Serializes ``table`` to Parquet bytes (zstd, no page statistics timestamps: deterministic)."""
    buf = io.BytesIO()
    pq.write_table(table, buf, compression="zstd", write_statistics=True, store_schema=True)
    return buf.getvalue()


def write_content_addressed(root: str, dataset: str, partition: str, table: pa.Table) -> str:
    """Writes ``table`` as one content-addressed Parquet file; returns its path.

    If a file with the same name exists it has the same bytes, and nothing is written.

    Args:
      root: dataset root, local directory or ``gs://bucket/prefix``.
      dataset: dataset name, e.g. ``"articles"``.
      partition: relative partition path, e.g. ``"date=2014-03-10"`` ("" for none).
      table: rows to write (caller sorts them by a stable key).

    Raises:
      OSError / pyarrow.ArrowIOError: the filesystem refused the write (transient; retry).
    """
    data = table_bytes(table)
    name = f"part-{hashlib.sha256(data).hexdigest()[:20]}.parquet"
    fs, base = filesystem_and_path(root)
    directory = posixpath.join(base, dataset, partition) if partition else posixpath.join(base, dataset)
    final = posixpath.join(directory, name)
    if fs.get_file_info(final).type == pafs.FileType.File:
        return final if "://" not in root else root.rstrip("/") + final[len(base.rstrip("/")) :]
    fs.create_dir(directory, recursive=True)
    tmp = posixpath.join(directory, f".tmp-{uuid.uuid4().hex}")
    with fs.open_output_stream(tmp) as out:
        out.write(data)
    fs.move(tmp, final)
    return final if "://" not in root else root.rstrip("/") + final[len(base.rstrip("/")) :]


def write_records(
    root: str, dataset: str, partition: str, records: Iterable, schema: pa.Schema, sort_key
) -> str | None:
    """Sorts NamedTuple ``records`` by ``sort_key``, converts them with ``schema`` and writes one file.

    Returns the path written, or ``None`` for no records.
    """
    rows = sorted(records, key=sort_key)
    if not rows:
        return None
    return write_content_addressed(root, dataset, partition, records_to_table(rows, schema))


def open_dataset(root: str, dataset: str) -> pads.Dataset:
    """A whole dataset (all partitions; partition keys become columns), to read as a table or in batches.

    Raises:
      FileNotFoundError: the dataset directory does not exist.
    """
    fs, base = filesystem_and_path(root)
    path = posixpath.join(base, dataset)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        raise FileNotFoundError(f"no dataset at {root}/{dataset}")
    return pads.dataset(
        path,
        filesystem=fs,
        format="parquet",
        partitioning="hive",
        exclude_invalid_files=True,
        ignore_prefixes=[".", "_"],
    )


def read_dataset(root: str, dataset: str) -> pa.Table:
    """Reads a whole dataset (all partitions) as one table; partition keys become columns.

    Raises:
      FileNotFoundError: the dataset directory does not exist.
    """
    return open_dataset(root, dataset).to_table()


def list_files(root: str, dataset: str) -> list[str]:
    """Sorted relative paths of the Parquet files of a dataset ([] when absent)."""
    fs, base = filesystem_and_path(root)
    path = posixpath.join(base, dataset)
    if fs.get_file_info(path).type != pafs.FileType.Directory:
        return []
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True))
    return sorted(
        posixpath.relpath(i.path, path)
        for i in infos
        if i.type == pafs.FileType.File
        and i.path.endswith(".parquet")
        and not posixpath.basename(i.path).startswith((".", "_"))
    )


def partition_files(root: str, dataset: str, partition: str) -> list[str]:
    """Sorted names (``part-....parquet``) of the files directly in one partition ([] when absent)."""
    fs, base = filesystem_and_path(root)
    directory = posixpath.join(base, dataset, partition)
    if fs.get_file_info(directory).type != pafs.FileType.Directory:
        return []
    return sorted(
        posixpath.basename(i.path)
        for i in fs.get_file_info(pafs.FileSelector(directory))
        if i.type == pafs.FileType.File
        and i.path.endswith(".parquet")
        and not posixpath.basename(i.path).startswith((".", "_"))
    )


class CorruptPartitionError(ValueError):
    """An existing Parquet file of a rewritable partition cannot be read; nothing was written or deleted."""


def read_partition_file(root: str, dataset: str, partition: str, name: str, schema: pa.Schema) -> pa.Table:
    """Reads one file of a partition with exactly ``schema``'s columns.

    Raises:
      CorruptPartitionError: the file is not Parquet, is truncated, or lacks a column of ``schema``
        (the message names the file).
    """
    fs, base = filesystem_and_path(root)
    path = posixpath.join(base, dataset, partition, name)
    try:
        with fs.open_input_file(path) as f:
            table = pq.read_table(f)
        return table.select(schema.names).cast(schema)
    except (OSError, KeyError, ValueError, pa.ArrowException) as e:
        raise CorruptPartitionError(
            f"cannot read {root.rstrip('/')}/{dataset}/{partition}/{name}: {type(e).__name__}: {e}. "
            "Its rows would be lost by a rewrite, so nothing was written: move the file aside (a name "
            "starting with '_' hides it) and replay the landing files of that hour to rebuild the partition"
        ) from e


def replace_partition(root: str, dataset: str, partition: str, table: pa.Table, old_names: Iterable[str]) -> str:
    """Writes ``table`` as the partition's content-addressed file, then deletes ``old_names`` (the files the
    caller read and merged into ``table``; a file written meanwhile by someone else is left alone).

    Returns the path written (the same name as an old file when the rows did not change).

    Raises:
      OSError / pyarrow.ArrowIOError: the filesystem refused the write (transient; retry). A crash
        between the write and the deletes leaves both files, which the next rewrite merges.
    """
    path = write_content_addressed(root, dataset, partition, table)
    written = posixpath.basename(path)
    fs, base = filesystem_and_path(root)
    for name in old_names:
        if name != written:
            try:
                fs.delete_file(posixpath.join(base, dataset, partition, name))
            except FileNotFoundError:
                pass
    return path
