"""What every nightly batch job shares: its flags, its frozen config, dated Parquet partitions.

Datasets under the Parquet root (``--output``, default ``<data dir>/output``, local or ``gs://``;
the same root the streaming job writes articles and clusters to)::

    events/date=YYYY-MM-DD/events-<first id>-<last id>.parquet   reader events (newsflow.storage.events)
    stories/date=YYYY-MM-DD/part-00000.parquet                   story snapshot (newsflow.jobs.snapshot_stories)
    models/<name>/date=YYYY-MM-DD/part-00000.parquet             each night's model outputs

A nightly output partition holds exactly one file, ``part-00000.parquet``, written under a temp
name and moved into place after the partition's other files are removed, so re-running a date
replaces that date's output instead of adding to it.

Every nightly job takes the launcher's flags (``--runner``, ``--redis_url``, ``--key_prefix``,
``--data_dir``, Dataflow/Flink flags; see :mod:`newsflow.pipelines.launcher`) plus :class:`NightlyOptions`.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from typing import NamedTuple

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
from apache_beam.options.pipeline_options import PipelineOptions

from newsflow.core.ranking.article_type import article_type
from newsflow.core.resources import filesystem_and_path
from newsflow.pipelines.launcher import SettingsOptions
from newsflow.runtime.settings import Settings
from newsflow.storage.keys import Keys

PART_NAME = "part-00000.parquet"


class NightlyOptions(PipelineOptions):
    """Flags of the nightly jobs."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument(
            "--date",
            default=None,
            help="the night to compute, YYYY-MM-DD (UTC); its outputs are replaced. Default: yesterday (UTC)",
        )
        parser.add_argument(
            "--history_days",
            type=int,
            default=28,
            help="days of events (ending at --date) that interest vectors, co-visitation and clusters use",
        )
        parser.add_argument(
            "--decay_days", type=int, default=7, help="days of events (ending at --date) the decay fit uses"
        )


@dataclass(frozen=True)
class NightlyConfig:
    """One night's job configuration.

    Attributes:
      date: the night, ``YYYY-MM-DD``; also the model version written to Redis.
      output: Parquet root.
      redis_url: Redis URL the workers connect to (``None``: the job writes no Redis).
      key_prefix: Redis key prefix.
      history_days: days of events for interests / co-visitation / clusters.
      decay_days: days of events for the decay fit.
    """

    date: str
    output: str
    redis_url: str | None
    key_prefix: str
    history_days: int = 28
    decay_days: int = 7

    @property
    def now(self) -> float:
        """End of ``date`` (next midnight UTC), epoch seconds: the time models are computed at."""
        d = dt.date.fromisoformat(self.date) + dt.timedelta(days=1)
        return dt.datetime(d.year, d.month, d.day, tzinfo=dt.UTC).timestamp()

    def dates(self, days: int) -> list[str]:
        """The ``days`` dates ending at ``date``, oldest first."""
        end = dt.date.fromisoformat(self.date)
        return [(end - dt.timedelta(days=i)).isoformat() for i in range(days - 1, -1, -1)]


def open_models(config: NightlyConfig):
    """The :class:`newsflow.storage.models.ModelStore` the jobs publish to, or ``None`` when the job writes
    no Redis (no ``redis_url``). Connects through :func:`newsflow.runtime.redis_conn.connect`, so every URL
    the streaming job takes works here too (``redis+cluster://`` included)."""
    if not config.redis_url:
        return None
    from newsflow.runtime.redis_conn import connect
    from newsflow.storage.models import ModelStore

    return ModelStore(connect(config.redis_url), Keys(config.key_prefix))


def parse_date(value: str | None, today: dt.date | None = None) -> str:
    """``value`` checked as ``YYYY-MM-DD``; ``None`` gives the day before ``today`` (default: UTC today).

    Raises:
      ValueError: naming the bad value.
    """
    if value in (None, ""):
        today = today or dt.datetime.now(dt.UTC).date()
        return (today - dt.timedelta(days=1)).isoformat()
    try:
        return dt.date.fromisoformat(str(value)).isoformat()
    except ValueError:
        raise ValueError(f"--date must be YYYY-MM-DD, got {value!r}") from None


def config_from_options(options: PipelineOptions, settings: Settings) -> NightlyConfig:
    """:class:`NightlyConfig` from the flags; ``ValueError`` shows a bad value."""
    o = options.view_as(NightlyOptions)
    for name in ("history_days", "decay_days"):
        value = getattr(o, name)
        if not isinstance(value, int) or not 1 <= value <= 366:
            raise ValueError(f"--{name} must be an integer in [1, 366], got {value!r}")
    return NightlyConfig(
        date=parse_date(o.date),
        output=options.view_as(SettingsOptions).output or os.path.join(settings.data_dir, "output"),
        redis_url=settings.redis_url,
        key_prefix=settings.key_prefix,
        history_days=o.history_days,
        decay_days=o.decay_days,
    )


def partition_dir(root: str, dataset: str, date: str) -> str:
    """``<root>/<dataset>/date=<date>``."""
    return f"{root.rstrip('/')}/{dataset}/date={date}"


def partition_files(root: str, dataset: str, dates: list[str]) -> list[str]:
    """Parquet files of ``dataset`` in the partitions of ``dates`` (missing partitions skipped;
    names starting with ``.`` or ``_`` skipped), as paths or URLs the Beam readers accept."""
    from pyarrow import fs as pafs

    out = []
    for date in dates:
        d = partition_dir(root, dataset, date)
        filesystem, path = filesystem_and_path(d)
        infos = filesystem.get_file_info(pafs.FileSelector(path, allow_not_found=True))
        for info in sorted(infos, key=lambda i: i.path):
            name = info.base_name
            if info.type == pafs.FileType.File and name.endswith(".parquet") and not name.startswith((".", "_")):
                out.append(f"{d}/{name}")
    return out


def read_partitions(root: str, dataset: str, dates: list[str], schema: pa.Schema | None = None) -> pa.Table | None:
    """The rows of ``dataset`` in ``dates`` as one table (``None`` when there are no files)."""
    files = partition_files(root, dataset, dates)
    if not files:
        return None
    tables = []
    for f in files:
        filesystem, path = filesystem_and_path(f)
        tables.append(pq.read_table(path, filesystem=filesystem, schema=schema))
    return pa.concat_tables(tables, promote_options="default") if len(tables) > 1 else tables[0]


def write_partition(root: str, dataset: str, date: str, table: pa.Table) -> str:
    """Replaces the partition ``<root>/<dataset>/date=<date>`` with one file holding ``table``.

    Returns:
      The file's path.
    """
    from pyarrow import fs as pafs

    d = partition_dir(root, dataset, date)
    filesystem, path = filesystem_and_path(d)
    filesystem.create_dir(path, recursive=True)
    tmp = f"{path}/.{PART_NAME}.tmp"
    pq.write_table(table, tmp, filesystem=filesystem, compression="zstd")
    for info in filesystem.get_file_info(pafs.FileSelector(path)):
        if info.type == pafs.FileType.File and info.base_name not in (PART_NAME, f".{PART_NAME}.tmp"):
            filesystem.delete_file(info.path)
    filesystem.move(tmp, f"{path}/{PART_NAME}")
    return f"{d}/{PART_NAME}"


def _epoch(value) -> float | None:
    """A Parquet timestamp (datetime) or number as UTC epoch seconds."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).timestamp()
    return float(value)


def event_from_row(row: dict):
    """A Parquet events row (:data:`newsflow.schemas.event.EVENT_SCHEMA`) as a :class:`schemas.Event`."""
    from newsflow.schemas import Event

    return Event(
        row["user_id"],
        row["type"],
        row["story_id"],
        _epoch(row.get("event_time")) or _epoch(row.get("received_time")) or 0.0,
        _epoch(row.get("received_time")) or 0.0,
        row.get("position"),
        row.get("dwell_seconds"),
        row.get("surface") or "",
        row.get("event_id") or "",
    )


class StoryInfo(NamedTuple):
    """What the nightly jobs need of a story: first-seen time (epoch s), topic labels (lower case,
    most probable first), authority in [0, 1], its 128-dim embedding (tuple of floats, or ``None``)
    and its article type (the snapshot's ``article_type``; derived from its URL and headline by
    :func:`newsflow.core.ranking.article_type.article_type` for snapshots written before the column)."""

    earliest_time: float
    topics: tuple
    authority: float
    embedding: tuple | None
    article_type: str = "news"


class ReadEvents(beam.PTransform):
    """Reads the events Parquet files given -> :class:`schemas.Event` (events without a user or story dropped)."""

    def __init__(self, files: list[str]):
        super().__init__()
        self.files = files

    def expand(self, pbegin):
        return (
            pbegin
            | "EventFiles" >> beam.Create(self.files)
            | "ReadEventFiles" >> beam.io.ReadAllFromParquet()
            | "RowToEvent" >> beam.Map(event_from_row)
            | "KeepKnownEvents" >> beam.Filter(lambda e: bool(e.user_id and e.story_id))
        )


def _story_row(path_row):
    path, row = path_row
    topics = tuple(str(t).lower() for t in (row.get("topics") or []) if str(t).strip())
    emb = row.get("embedding")
    info = StoryInfo(
        _epoch(row.get("earliest_time")) or 0.0,
        topics,
        float(row.get("authority") or 0.0),
        tuple(float(x) for x in emb) if emb is not None else None,
        row.get("article_type") or article_type(row.get("url"), row.get("title")),
    )
    return row["story_id"], (path, info)


class ReadStories(beam.PTransform):
    """Reads story snapshot files -> ``(story id, StoryInfo)``, the newest snapshot of each story
    (files of later dates win: partition paths sort by date)."""

    def __init__(self, files: list[str]):
        super().__init__()
        self.files = files

    def expand(self, pbegin):
        return (
            pbegin
            | "StoryFiles" >> beam.Create(self.files)
            | "ReadStoryFiles" >> beam.io.ReadAllFromParquet(with_filename=True)
            | "KeyByStory" >> beam.Map(_story_row)
            | "NewestSnapshot" >> beam.CombinePerKey(lambda vs: max(vs, key=lambda v: v[0]))
            | "DropPath" >> beam.MapTuple(lambda sid, v: (sid, v[1]))
        )
