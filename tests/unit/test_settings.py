"""Settings resolution: flag > environment variable > default, both flag spellings, prefix validation."""

from __future__ import annotations

import argparse
import os

import pytest

from newsflow.runtime.settings import REPO_ROOT, Settings, add_settings_arguments, validate_key_prefix


def _parse(argv, **kw):
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser, **kw)
    return parser.parse_args(argv)


def test_defaults_with_an_empty_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = Settings.resolve(_parse([], models=True), environ={})
    assert s.data_dir == str(tmp_path / "var")
    assert s.redis_url is None
    assert s.key_prefix == "nf"
    assert s.model_dir == os.path.join(REPO_ROOT, "var", "models")
    assert s.token_secret is None
    assert s.embedded_redis_path == str(tmp_path / "var" / "redis" / "newsflow.rdb")


def test_environment_beats_default_and_flag_beats_environment(tmp_path):
    env = {
        "REDIS_URL": "redis://env:6379/0",
        "NEWSFLOW_DATA_DIR": str(tmp_path / "envdata"),
        "NEWSFLOW_MODEL_DIR": str(tmp_path / "envmodels"),
        "NEWSFLOW_KEY_PREFIX": "envp",
        "NEWSFLOW_TOKEN_SECRET": "x" * 40,
    }
    s = Settings.resolve(_parse([], models=True), environ=env)
    assert (s.redis_url, s.data_dir, s.model_dir, s.key_prefix, s.token_secret) == (
        "redis://env:6379/0",
        str(tmp_path / "envdata"),
        str(tmp_path / "envmodels"),
        "envp",
        b"x" * 40,
    )
    s = Settings.resolve(
        _parse(
            [
                "--redis-url",
                "redis://flag:1/2",
                "--data_dir",
                str(tmp_path / "flagdata"),
                "--model_dir",
                str(tmp_path / "m"),
                "--key-prefix",
                "flagp",
            ],
            models=True,
        ),
        environ=env,
    )
    assert (s.redis_url, s.data_dir, s.model_dir, s.key_prefix) == (
        "redis://flag:1/2",
        str(tmp_path / "flagdata"),
        str(tmp_path / "m"),
        "flagp",
    )


@pytest.mark.parametrize(
    "argv",
    [["--redis_url", "redis://a:1/0", "--key_prefix", "p1"], ["--redis-url", "redis://a:1/0", "--key-prefix", "p1"]],
)
def test_both_flag_spellings(argv):
    s = Settings.resolve(_parse(argv), environ={})
    assert (s.redis_url, s.key_prefix) == ("redis://a:1/0", "p1")


def test_environment_is_read_at_call_time(monkeypatch):
    monkeypatch.setenv("NEWSFLOW_KEY_PREFIX", "late")
    assert Settings.resolve().key_prefix == "late"
    monkeypatch.delenv("NEWSFLOW_KEY_PREFIX")
    assert Settings.resolve(environ={}).key_prefix == "nf"


def test_gs_model_dir_is_kept_as_a_url():
    assert Settings.resolve(model_dir="gs://bucket/models", environ={}).model_dir == "gs://bucket/models"


@pytest.mark.parametrize("bad", ["{nf}", "a:b", "", "x" * 33, "sp ace", "nf*"])
def test_key_prefix_must_be_a_plain_namespace(bad):
    with pytest.raises(ValueError, match="key prefix"):
        validate_key_prefix(bad)
    if bad:
        with pytest.raises(ValueError):
            Settings.resolve(_parse(["--key-prefix", bad]), environ={})


def test_redis_flags_are_optional():
    args = _parse([], redis=False)
    assert not hasattr(args, "redis_url") and not hasattr(args, "key_prefix")


def test_redis_path_flag_moves_the_embedded_server_file(tmp_path):
    s = Settings.resolve(
        _parse(["--redis-path", str(tmp_path / "x.rdb"), "--data-dir", str(tmp_path / "d")]), environ={}
    )
    assert s.embedded_redis_path == str(tmp_path / "x.rdb")
    assert Settings.resolve(_parse(["--data-dir", str(tmp_path / "d")]), environ={}).embedded_redis_path == str(
        tmp_path / "d" / "redis" / "newsflow.rdb"
    )
