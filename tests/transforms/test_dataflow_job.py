"""Dataflow submission offline: the dry run's job request, and step labels that ``--update`` can rely on.

``newsflow run --runner DataflowRunner --dry_run true ... --dataflow_job_file JOB.json`` must build the
job request without credentials, GCS or Redis (the network is cut here), and the streaming pipeline's
transform labels must stay unique and equal to the committed list in ``tests/golden/`` (Dataflow maps
the state of a running job to its replacement by these labels).
"""

from __future__ import annotations

import json
import os
import socket
from collections import Counter

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions

from newsflow.pipelines.streaming import build_pipeline, job_config_from_options

GOLDEN = os.path.join(os.path.dirname(os.path.dirname(__file__)), "golden", "streaming_transform_labels.txt")
DATAFLOW_ARGV = [
    "--runner",
    "DataflowRunner",
    "--dry_run",
    "true",
    "--streaming",
    "--project",
    "newsflow-test",
    "--region",
    "europe-west1",
    "--temp_location",
    "gs://newsflow-bucket/tmp",
    "--pubsub_subscription",
    "projects/newsflow-test/subscriptions/raw-documents",
    "--output",
    "gs://newsflow-bucket/out",
]


def _unused_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture
def no_network(monkeypatch):
    """Every name lookup and outbound connection fails, and is recorded."""
    attempts = []

    def refuse(what):
        def fn(*args, **kwargs):
            attempts.append((what, args[:2]))
            raise OSError(f"network disabled in this test: {what}{args[:2]}")

        return fn

    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket.socket, "connect", refuse("connect"))
    return attempts


def test_dataflow_dry_run_writes_the_job_request_offline(tmp_path, no_network, capsys):
    from newsflow.cli.main import main

    job_file = tmp_path / "JOB.json"
    redis_url = f"redis://127.0.0.1:{_unused_port()}/0"  # nothing listens there
    code = main(["run", *DATAFLOW_ARGV, "--redis_url", redis_url, "--dataflow_job_file", str(job_file)])
    assert code == 0, capsys.readouterr().err
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["runner"] == "DataflowRunner" and summary["dry_run"] is True
    assert no_network == []
    request = json.loads(job_file.read_text())
    job = request["job"]
    assert job["type"] == "JOB_TYPE_STREAMING"
    options = job["environment"]["sdkPipelineOptions"]["options"]
    assert options["pubsub_subscription"] == "projects/newsflow-test/subscriptions/raw-documents"
    assert options["redis_url"] == redis_url and options["streaming"] is True
    assert "storage.googleapis.com/newsflow-bucket/tmp/" in job["environment"]["tempStoragePrefix"]
    labels = {t["uniqueName"] for t in request["pipeline"]["components"]["transforms"].values()}
    assert "ReadPubSub" in labels
    for step in (
        "ProcessRawDocuments/ExtractArticles",
        "ProcessRawDocuments/AssignNearDuplicateClusters",
        "BuildStories/EnrichArticles",
        "BuildStories/AssignStoryClusters",
        "ComputeTrendingWindows",
        "WriteArticles",
        "WriteClusterSnapshots",
        "WriteTrends",
        "WriteDeadLetters",
    ):
        assert step in labels, step
    # the read is Dataflow's own Pub/Sub source, not the Python fallback
    urns = {t["spec"]["urn"] for t in request["pipeline"]["components"]["transforms"].values() if "spec" in t}
    assert any("pubsub" in u.lower() for u in urns), sorted(urns)


def test_dataflow_dry_run_refuses_a_bad_temp_location_without_going_online(no_network, capsys):
    from newsflow.cli.main import main

    argv = [a if a != "gs://newsflow-bucket/tmp" else "gs://B/tmp" for a in DATAFLOW_ARGV]
    assert main(["run", *argv, "--redis_url", "redis://127.0.0.1:6399/0"]) == 2
    assert "--temp_location 'gs://B/tmp' is not a valid gs://bucket/path" in capsys.readouterr().err
    assert no_network == []


def streaming_labels() -> list[str]:
    """Full labels of every transform of the streaming job (Pub/Sub source), as built for a dry run."""
    options = PipelineOptions(DATAFLOW_ARGV[2:] + ["--redis_url", "redis://127.0.0.1:6399/0"])
    pipeline = beam.Pipeline(runner="DirectRunner", options=PipelineOptions())
    build_pipeline(pipeline, job_config_from_options(options))
    proto = pipeline.to_runner_api()
    return [t.unique_name for t in proto.components.transforms.values()]


def test_transform_labels_are_unique_and_stable():
    labels = streaming_labels()
    dupes = [k for k, n in Counter(labels).items() if n > 1]
    assert not dupes, dupes
    if os.environ.get("NEWSFLOW_UPDATE_GOLDEN"):
        with open(GOLDEN, "w", encoding="utf-8") as f:
            f.write("".join(label + "\n" for label in sorted(labels)))
    with open(GOLDEN, encoding="utf-8") as f:
        golden = [ln.rstrip("\n") for ln in f if ln.strip()]
    assert sorted(labels) == golden, (
        "transform labels changed: Dataflow --update of a running job matches steps by these labels. If the "
        "change is intended (a new job, or a transform mapping for --update), regenerate the golden file with "
        "NEWSFLOW_UPDATE_GOLDEN=1 and say so in the commit.\n"
        f"added: {sorted(set(labels) - set(golden))}\nremoved: {sorted(set(golden) - set(labels))}"
    )
