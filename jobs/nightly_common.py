"""What every nightly batch job shares: its flags, its frozen config, dated Parquet partitions.

Datasets under the Parquet root (``--output``, default ``<data dir>/output``, local or ``gs://``;
the same root the streaming job writes articles and clusters to)::

    events/date=YYYY-MM-DD/events-<first id>-<last id>.parquet   reader events (newsflow.storage.events)
    stories/date=YYYY-MM-DD/part-00000.parquet                   story snapshot (newsflow.jobs.snapshot_stories)
    models/<name>/date=YYYY-MM-DD/part-NNNNN.parquet             each night's model outputs
    quarantine/events/date=YYYY-MM-DD/<file name>                events files that could not be read
    deadletters/step=nightly_events/part-<hash>.parquet          one dead letter per quarantined file

A nightly output partition holds the files of one run: one file, ``part-00000.parquet``, written under
a temp name by :func:`write_partition` (small outputs: stories, decay, weights), or the shards
``part-00000.parquet``, ``part-00001.parquet``, ... that parallel writers stage and :class:`WritePartition`
moves in (the per-reader and per-story models); either way the partition's other files are removed
first, so re-running a date replaces that date's output instead of adding to it. Readers take every
file of a partition.

Faults in the events dataset do not stop a night: :func:`quarantine_unreadable` (run by ``newsflow
nightly`` after its flush) moves an events file that does not read whole (truncated, corrupt, not
Parquet) out of the dataset, with a dead letter naming the file and the reason; and :class:`ReadEvents`
refuses rows dated beyond the API's own future tolerance (counted, see :func:`is_future_event`).

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
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions

from newsflow.core.ranking.article_type import article_type
from newsflow.core.resources import filesystem_and_path
from newsflow.pipelines.launcher import SettingsOptions
from newsflow.runtime.settings import Settings
from newsflow.storage.keys import Keys

PART_NAME = "part-00000.parquet"
NAMESPACE = "newsflow.jobs.nightly_common"
QUARANTINE_STEP = "nightly_events"
"""Dead-letter step of a quarantined events file."""


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


def _partition_end(path: str) -> float | None:
    """End (next midnight UTC, epoch s) of the ``date=YYYY-MM-DD`` partition a file path lies in."""
    for part in reversed(path.replace("\\", "/").split("/")):
        if part.startswith("date="):
            try:
                d = dt.date.fromisoformat(part[5:]) + dt.timedelta(days=1)
            except ValueError:
                return None
            return dt.datetime(d.year, d.month, d.day, tzinfo=dt.UTC).timestamp()
    return None


def is_future_event(event, partition_end: float | None) -> bool:
    """True when ``event`` is dated beyond the API's future tolerance
    (:data:`newsflow.storage.events.MAX_FUTURE_SECONDS`, 300 s): its event time later than its received
    time plus the tolerance (the API's own rule), or its event or received time later than the end of
    the received-date partition its file lies in plus the tolerance (``partition_end``, epoch s;
    ``None`` skips that test). Such rows never came through the API; the nightly jobs refuse them."""
    from newsflow.storage.events import MAX_FUTURE_SECONDS

    if event.event_time > event.received_time + MAX_FUTURE_SECONDS:
        return True
    if partition_end is not None:
        return max(event.event_time, event.received_time) > partition_end + MAX_FUTURE_SECONDS
    return False


class _KeepPlausibleEventsFn(beam.DoFn):
    """``(file path, events row)`` -> :class:`schemas.Event` with a user and a story, not dated in the future
    (:func:`is_future_event`; counted as ``future_events_refused``)."""

    def __init__(self):
        self.refused = Metrics.counter(NAMESPACE, "future_events_refused")

    def process(self, element):
        path, row = element
        event = event_from_row(row)
        if not (event.user_id and event.story_id):
            return
        if is_future_event(event, _partition_end(path)):
            self.refused.inc()
            return
        yield event


class ReadEvents(beam.PTransform):
    """Reads the events Parquet files given -> :class:`schemas.Event`: events without a user or story
    dropped, events dated in the future refused and counted (:class:`_KeepPlausibleEventsFn`)."""

    def __init__(self, files: list[str]):
        super().__init__()
        self.files = files

    def expand(self, pbegin):
        return (
            pbegin
            | "EventFiles" >> beam.Create(self.files)
            | "ReadEventFiles" >> beam.io.ReadAllFromParquet(with_filename=True)
            | "KeepPlausibleEvents" >> beam.ParDo(_KeepPlausibleEventsFn())
        )


def quarantine_unreadable(root: str, dataset: str, dates: list[str]) -> list[dict]:
    """Moves every file of ``dataset`` in ``dates`` that does not read whole out of the dataset.

    Each file is read row group by row group (footer, schema, every page); one that fails (truncated,
    corrupt, not Parquet: ``pyarrow.ArrowInvalid``, ``OSError``) is moved to
    ``<root>/quarantine/<dataset>/date=D/<name>`` and a :class:`schemas.DeadLetter` (step
    :data:`QUARANTINE_STEP`, ``error_type`` ``"unreadable_parquet"``, ``url`` the file's path, ``payload``
    its quarantine path) is written to ``<root>/deadletters/step=nightly_events/part-<hash>.parquet``, so
    the jobs run on the other files, and later nights whose windows cover the file do not trip on it.

    Args:
      root: Parquet root (local path or URL).
      dataset: e.g. ``"events"``.
      dates: partitions to check.

    Returns:
      One ``{"file", "quarantined_to", "error"}`` per file moved (empty when all read).
    """
    import hashlib

    from newsflow.schemas import DEAD_LETTER_SCHEMA
    from newsflow.transforms.deadletter import dead_letter

    moved = []
    for f in partition_files(root, dataset, dates):
        filesystem, path = filesystem_and_path(f)
        try:
            with filesystem.open_input_file(path) as handle:
                parquet = pq.ParquetFile(handle)
                for i in range(parquet.num_row_groups):
                    parquet.read_row_group(i)
        except (pa.ArrowInvalid, OSError) as e:
            error = f"{type(e).__name__}: {e}"
            rel = f[len(root.rstrip("/")) + 1 :]
            target = f"{root.rstrip('/')}/quarantine/{rel}"
            tfs, tpath = filesystem_and_path(target)
            tfs.create_dir(tpath.rsplit("/", 1)[0], recursive=True)
            filesystem.move(path, tpath)
            letter = dead_letter(QUARANTINE_STEP, "unreadable_parquet", error, target.encode(), f)
            table = pa.Table.from_pylist([letter._asdict()], schema=DEAD_LETTER_SCHEMA)
            dl_dir = f"{root.rstrip('/')}/deadletters/step={QUARANTINE_STEP}"
            dfs, dpath = filesystem_and_path(dl_dir)
            dfs.create_dir(dpath, recursive=True)
            name = f"part-{hashlib.sha256(f.encode()).hexdigest()[:16]}.parquet"
            pq.write_table(table, f"{dpath}/{name}", filesystem=dfs)
            moved.append({"file": f, "quarantined_to": target, "error": error})
    return moved


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


class _SwapPartitionFn(beam.DoFn):
    """Moves the staged files of one run into ``<root>/<dataset>/date=<date>`` after removing the partition's
    other files; yields the final paths. Runs once, after every staged file is written (side input)."""

    def __init__(self, root: str, dataset: str, date: str, staging: str):
        self.root, self.dataset, self.date, self.staging = root, dataset, date, staging

    def process(self, _unused, staged):
        from pyarrow import fs as pafs

        d = partition_dir(self.root, self.dataset, self.date)
        filesystem, path = filesystem_and_path(d)
        filesystem.create_dir(path, recursive=True)
        names = {f.replace("\\", "/").rsplit("/", 1)[-1] for f in staged}
        for info in filesystem.get_file_info(pafs.FileSelector(path)):
            if info.type == pafs.FileType.File and info.base_name not in names:
                filesystem.delete_file(info.path)
        for f in sorted(staged):
            name = f.replace("\\", "/").rsplit("/", 1)[-1]
            sfs, spath = filesystem_and_path(f)
            sfs.move(spath, f"{path}/{name}")
            yield f"{d}/{name}"
        sfs, spath = filesystem_and_path(self.staging)
        if sfs.get_file_info(spath).type == pafs.FileType.Directory:
            sfs.delete_dir(spath)


class WritePartition(beam.PTransform):
    """Writes a PCollection of row dicts (``schema``) as the partition ``<root>/<dataset>/date=<date>``,
    replacing its files, by parallel writers.

    Each worker writes its own shard (``beam.io.WriteToParquet`` under ``<root>/<dataset>/_staging-date=<date>``,
    zstd); once all are written, one step removes the partition's older files and moves the shards in
    (``part-00000.parquet``, ``part-00001.parquet``, ...; as many as the runner's bundles). Returns the
    PCollection of the partition's file paths. Readers take every file of a partition
    (:func:`partition_files`), so the number of shards never changes what a night reads.
    """

    def __init__(self, root: str, dataset: str, date: str, schema: pa.Schema):
        super().__init__()
        self.root, self.dataset, self.date, self.schema = root.rstrip("/"), dataset, date, schema

    def expand(self, rows):
        staging = f"{self.root}/{self.dataset}/_staging-date={self.date}"
        if "://" not in staging:
            os.makedirs(staging, exist_ok=True)
        staged = rows | "WriteShards" >> beam.io.WriteToParquet(
            f"{staging}/part",
            self.schema,
            codec="zstd",
            file_name_suffix=".parquet",
            shard_name_template="-SSSSS",
        )
        return (
            rows.pipeline
            | "Once" >> beam.Create([None])
            | "SwapIntoPartition"
            >> beam.ParDo(_SwapPartitionFn(self.root, self.dataset, self.date, staging), beam.pvalue.AsList(staged))
        )


class _BeginModelsFn(beam.DoFn):
    """Marks each bucketed model of the night ``writing`` (every bucket listed); yields ``{name: buckets an
    earlier write of that version left}`` for the commit."""

    def __init__(self, config: NightlyConfig, names: tuple):
        self.config, self.names = config, names

    def process(self, _unused):
        from newsflow.storage.keys import READER_BUCKETS

        models = open_models(self.config)
        yield {n: models.begin(n, self.config.date, range(READER_BUCKETS)) for n in self.names}


class _WriteBucketFn(beam.DoFn):
    """``((name, bucket), [(field, value)])`` -> one MULTI replacing that bucket's hash
    (:meth:`newsflow.storage.models.ModelStore.write_bucket`); yields ``(name, (bucket, fields))``."""

    def __init__(self, config: NightlyConfig):
        self.config = config
        self.buckets = Metrics.counter(NAMESPACE, "model_buckets_written")

    def setup(self):
        self.models = open_models(self.config)

    def process(self, element, _begun):
        (name, bucket), fields = element
        mapping = dict(fields)
        self.models.write_bucket(name, self.config.date, bucket, mapping)
        self.buckets.inc()
        yield name, (bucket, len(mapping))


def _bucket_summary(name: str, values) -> tuple[str, tuple[list, int]]:
    """``(name, [(bucket, fields)])`` -> ``(name, (sorted buckets, total fields))``."""
    values = list(values)
    return name, (sorted(b for b, _ in values), sum(n for _, n in values))


class _CommitModelsFn(beam.DoFn):
    """Marks each bucketed model ``ready`` with the buckets written (unlinking buckets an earlier write left)."""

    def __init__(self, config: NightlyConfig, names: tuple):
        self.config, self.names = config, names

    def process(self, _unused, summary, begun):
        models = open_models(self.config)
        for name in self.names:
            buckets, fields = summary.get(name, ([], 0))
            models.commit(name, self.config.date, fields, buckets, begun.get(name, []))
            yield name


class WriteModelBuckets(beam.PTransform):
    """Writes ``(model name, field, value)`` elements as the night's versions of the bucketed models ``names``
    (:data:`newsflow.storage.models.BUCKETED_MODELS`) in the layout of :mod:`newsflow.storage.models`, by
    parallel writers: one step marks every model ``writing``, then the fields are grouped by
    ``(name, reader_bucket(field))`` and each bucket is replaced in its own MULTI by whichever worker holds
    it, then one step marks the models ``ready`` (a model with no field is ``ready`` with no bucket).
    Returns the PCollection of the committed model names."""

    def __init__(self, config: NightlyConfig, names: tuple):
        super().__init__()
        self.config, self.names = config, tuple(names)

    def expand(self, fields):
        from newsflow.storage.keys import reader_bucket

        begun = (
            fields.pipeline
            | "Start" >> beam.Create([None])
            | "BeginVersions" >> beam.ParDo(_BeginModelsFn(self.config, self.names))
        )
        written = (
            fields
            | "KeyByBucket" >> beam.Map(lambda nfv: ((nfv[0], reader_bucket(nfv[1])), (nfv[1], nfv[2])))
            | "GroupByBucket" >> beam.GroupByKey()
            | "WriteBuckets" >> beam.ParDo(_WriteBucketFn(self.config), beam.pvalue.AsSingleton(begun))
            | "GroupWrittenBuckets" >> beam.GroupByKey()
            | "SummarizeBuckets" >> beam.MapTuple(_bucket_summary)
        )
        return (
            fields.pipeline
            | "End" >> beam.Create([None])
            | "CommitVersions"
            >> beam.ParDo(
                _CommitModelsFn(self.config, self.names), beam.pvalue.AsDict(written), beam.pvalue.AsSingleton(begun)
            )
        )
