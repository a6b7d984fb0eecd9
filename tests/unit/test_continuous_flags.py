"""Flags of the story input log: run-continuous sets ``--story_input_log`` itself, and the job refuses it with
``--streaming`` (the log re-clusters bounded runs; streaming releases on timers)."""

from __future__ import annotations

import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from newsflow.cli.main import main
from newsflow.pipelines.streaming import job_config_from_options
from newsflow.runtime.settings import Settings


def test_run_continuous_refuses_a_story_input_log_flag(tmp_path, capsys):
    rc = main(["run-continuous", "--data-dir", str(tmp_path), "--story_input_log", str(tmp_path / "x")])
    assert rc == 2
    assert "run-continuous chooses the job's --story_input_log itself" in capsys.readouterr().err


def test_the_job_refuses_a_story_input_log_when_streaming(tmp_path):
    opts = PipelineOptions(
        ["--pubsub_subscription", "projects/p/subscriptions/s", "--streaming", "--story_input_log", str(tmp_path)]
    )
    settings = Settings(redis_url="redis://127.0.0.1:1/0", key_prefix="nf", data_dir=str(tmp_path))
    with pytest.raises(ValueError, match="--story_input_log is a local directory for bounded runs"):
        job_config_from_options(opts, settings)


def test_the_story_input_log_reaches_the_story_step(tmp_path):
    landing = tmp_path / "in.jsonl"
    landing.write_text("{}\n")
    opts = PipelineOptions(
        ["--input", str(landing), "--story_input_log", str(tmp_path / "log"), "--trending_window_s", "7200"]
    )
    settings = Settings(redis_url="redis://127.0.0.1:1/0", key_prefix="nf", data_dir=str(tmp_path))
    config = job_config_from_options(opts, settings)
    assert config.stories.input_log == str(tmp_path / "log") and config.stories.ordering == "sort"
    # the trending window reaches the story step too: each run re-sends one window of context to trending
    assert config.stories.trend_window_s == config.trending.window_seconds == 7200
