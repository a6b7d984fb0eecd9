"""The shared job launcher: flags, settings, runner choice, dry runs, summaries on every runner."""

from __future__ import annotations

import json
import socket

import apache_beam as beam
import pytest
from apache_beam.metrics import Metrics
from apache_beam.options.pipeline_options import PipelineOptions

from newsflow.pipelines import launcher
from newsflow.pipelines.launcher import JobSpec, launch, parse_bool_flag, should_wait, summary


class _ToyOptions(PipelineOptions):
    @classmethod
    def _add_argparse_args(cls, parser):
        parser.add_argument("--toy_n", type=int, default=3, help="elements to count")


def _toy_config(options, settings):
    n = options.view_as(_ToyOptions).toy_n
    if n < 0:
        raise ValueError(f"--toy_n must be >= 0, got {n}")
    return {"n": n, "settings": settings}


def _toy_build(pipeline, config):
    counter = Metrics.counter("toy", "counted")

    def count(x):
        counter.inc()
        return x

    return pipeline | "Numbers" >> beam.Create(list(range(config["n"]))) | "Count" >> beam.Map(count)


TOY = JobSpec(
    name="toy",
    options_class=_ToyOptions,
    config_from_options=_toy_config,
    build=_toy_build,
    counters=("counted", "never_incremented"),
    needs_redis=False,
)
TOY_REDIS = JobSpec(
    name="toy",
    options_class=_ToyOptions,
    config_from_options=_toy_config,
    build=_toy_build,
    counters=("counted",),
    needs_redis=True,
)


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "value,expected",
    [
        ("true", True),
        ("false", False),
        ("1", True),
        ("0", False),
        (True, True),
        (False, False),
        (None, False),
        ("No", False),
    ],
)
def test_parse_bool_flag(value, expected):
    assert parse_bool_flag(value, "dry_run") is expected


def test_parse_bool_flag_refuses_other_words():
    with pytest.raises(ValueError, match="--dry_run must be true or false, got 'maybe'"):
        parse_bool_flag("maybe", "dry_run")


def test_local_batch_run_counts_and_summarizes():
    launched = launch(TOY, ["--runner", "DirectRunner", "--toy_n", "5"], environ={})
    s = summary(launched)
    assert s["state"] == "DONE" and s["metrics"] == "available" and s["dry_run"] is False
    assert s["counted"] == 5 and s["never_incremented"] == 0 and s["runner"] == "DirectRunner"
    assert s["transforms"] >= 2


def test_unknown_flag_is_refused_with_its_name():
    with pytest.raises(ValueError, match="--no_such_flag"):
        launch(TOY, ["--no_such_flag", "1"], environ={})


def test_job_validation_error_is_a_value_error():
    with pytest.raises(ValueError, match="--toy_n must be >= 0, got -1"):
        launch(TOY, ["--toy_n", "-1"], environ={})


def test_dry_run_contacts_no_redis_and_reports_no_counts():
    url = f"redis://127.0.0.1:{_unused_port()}/0"  # nothing listens there
    launched = launch(TOY_REDIS, ["--redis_url", url, "--dry_run", "true", "--toy_n", "4"], environ={})
    s = summary(launched)
    assert s["state"] == "DRY_RUN" and s["dry_run"] is True and s["metrics"] == "unavailable"
    assert "counted" not in s
    assert launched.settings.redis_url == url


def test_unreachable_redis_is_a_launch_error():
    url = f"redis://127.0.0.1:{_unused_port()}/0"
    with pytest.raises(ValueError, match="cannot reach Redis at redis://127.0.0.1"):
        launch(TOY_REDIS, ["--redis_url", url, "--dry_run", "false"], environ={})


def test_settings_flags_reach_the_job_in_both_spellings(tmp_path):
    seen = {}

    def hook(pipeline, config):
        seen.update(config)

    launch(TOY, ["--key-prefix", "alt", "--data_dir", str(tmp_path), "--dry_run", "1"], environ={}, build_hook=hook)
    assert seen["settings"].key_prefix == "alt" and seen["settings"].data_dir == str(tmp_path)


def test_summary_survives_a_runner_without_metrics():
    class NoMetrics:
        state = "RUNNING"

        def metrics(self):
            raise NotImplementedError("no metrics on this runner")

    launched = launcher.LaunchResult(
        spec=TOY,
        settings=None,
        runner="DataflowRunner",
        dry_run=True,
        result=NoMetrics(),
        state="RUNNING",
        job_id="2026-12-01_00_00_00-123",
    )
    s = json.loads(launcher.summary_line(launched))
    assert s == {
        "job": "toy",
        "runner": "DataflowRunner",
        "state": "RUNNING",
        "dry_run": True,
        "transforms": 0,
        "job_id": "2026-12-01_00_00_00-123",
        "metrics": "unavailable",
    }


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["--runner", "DirectRunner", "--streaming"], True),
        (["--runner", "DataflowRunner"], True),
        (["--runner", "DataflowRunner", "--streaming"], False),
        (["--runner", "FlinkRunner", "--streaming"], False),
        (["--runner", "PortableRunner"], True),
    ],
)
def test_streaming_jobs_on_remote_runners_do_not_block(argv, expected):
    assert should_wait(PipelineOptions(argv)) is expected


def test_portable_runner_runs_the_same_job_and_summarizes():
    launched = launch(
        TOY,
        ["--runner", "PortableRunner", "--job_endpoint", "embed", "--environment_type", "LOOPBACK", "--toy_n", "7"],
        environ={},
    )
    s = summary(launched)
    assert s["runner"] == "PortableRunner" and s["state"] == "DONE" and s["counted"] == 7


def test_cli_main_prints_help_and_errors(capsys):
    assert launcher.main(TOY, ["--help"], prog="toy") == 0
    out = capsys.readouterr().out
    assert "--toy_n" in out and "--key_prefix" in out and "--redis-url" in out
    assert launcher.main(TOY, ["--toy_n", "-2"], prog="toy") == 2
    assert "error: --toy_n must be >= 0, got -2" in capsys.readouterr().err


def _output_config(options, settings):
    from types import SimpleNamespace

    from newsflow.pipelines.launcher import SettingsOptions

    return SimpleNamespace(n=1, output=options.view_as(SettingsOptions).output)


TOY_OUTPUT = JobSpec(
    name="toy",
    options_class=_ToyOptions,
    config_from_options=_output_config,
    build=lambda pipeline, config: pipeline | beam.Create([1]),
    counters=(),
    needs_redis=False,
)


def test_unwritable_local_output_fails_before_the_job_runs(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    built = []
    for bad in (str(blocker / "out"), "/proc/newsflow-nope/out"):
        with pytest.raises(ValueError, match="cannot write --output"):
            launch(TOY_OUTPUT, ["--output", bad], environ={}, build_hook=lambda p, c: built.append(c))
    assert built == []  # refused before the pipeline was built
    # a writable one is created and left without the probe file; gs:// is the workers' business
    good = tmp_path / "new" / "out"
    assert launch(TOY_OUTPUT, ["--output", str(good)], environ={}).state == "DONE"
    assert good.is_dir() and list(good.iterdir()) == []
    assert launch(TOY_OUTPUT, ["--output", "gs://bucket/x", "--dry_run", "true"], environ={}).state == "DRY_RUN"
