"""The streaming job reading gs:// landing files and writing gs:// Parquet, against gcp-storage-emulator."""

from __future__ import annotations

import json

import pytest

from newsflow.schemas import RawDocument
from newsflow.storage.parquet import list_files, read_dataset
from tests.helpers import gcs_emulator_on


@pytest.fixture
def gcs_emulator(monkeypatch):
    with gcs_emulator_on(monkeypatch, "newsflow-test") as bucket:
        yield bucket


def test_pipeline_reads_and_writes_gcs(gcs_emulator, redis_server, tmp_path):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    from tests.helpers import run_job

    _, url = redis_server
    bucket = storage.Client(project="test", credentials=AnonymousCredentials()).bucket(gcs_emulator)
    docs = [
        RawDocument(
            url=f"https://wire{i}.example.com/story",
            source_domain=f"wire{i}.example.com",
            fetch_time=1.4e9 + i,
            title="Central bank holds rates steady as inflation cools across the euro area",
            published_time=1.4e9 + i,
        ).to_json_dict()
        for i in range(3)
    ]
    bucket.blob("landing/batch-0001.jsonl").upload_from_string("".join(json.dumps(d) + "\n" for d in docs))
    bucket.blob("landing/batch-0002.jsonl").upload_from_string("{broken\n")

    run_job(tmp_path, url, f"gs://{gcs_emulator}/landing/*.jsonl", output=f"gs://{gcs_emulator}/out")

    root = f"gs://{gcs_emulator}/out"
    articles = read_dataset(root, "articles").to_pylist()
    assert sorted(a["url"] for a in articles) == sorted(d["url"] for d in docs)
    assert len({a["cluster_id"] for a in articles}) == 1  # identical headlines: one near-duplicate group
    assert list_files(root, "clusters")
    (dl,) = read_dataset(root, "deadletters").to_pylist()
    assert (dl["step"], dl["error_type"], dl["payload"]) == ("parse", "invalid_json", b"{broken")
