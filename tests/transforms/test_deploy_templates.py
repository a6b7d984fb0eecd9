"""Flex Template metadata accepts every Redis URL form the README documents, and a remote-runner launch
without the workers' model files is refused at submission (dry runs included)."""

from __future__ import annotations

import json
import os
import re

import pytest

from tests.transforms.test_dataflow_job import DATAFLOW_ARGV

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TEMPLATES = ("deploy/dataflow/metadata.json", "deploy/dataflow/nightly-metadata.json")
# a Redis URL as the README writes it: up to whitespace, a backtick, a quote or a backslash
_URL = re.compile(r"(?:rediss?|redis\+cluster|unix)://[^\s`'\"\\]+")


def documented_redis_urls() -> list[str]:
    """Every Redis URL written in README.md (trailing sentence punctuation removed)."""
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        text = f.read()
    return sorted({m.group(0).rstrip(".,;:)") for m in _URL.finditer(text)})


def redis_url_patterns(path: str) -> list[str]:
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        params = json.load(f)["parameters"]
    [param] = [p for p in params if p["name"] == "redis_url"]
    return param["regexes"]


def test_the_readme_documents_plain_and_cluster_urls():
    urls = documented_redis_urls()
    assert any(u.startswith("redis://") for u in urls)
    assert any(u.startswith("redis+cluster://") and "," in u for u in urls), urls


@pytest.mark.parametrize("template", TEMPLATES)
def test_every_documented_redis_url_passes_the_template_patterns(template):
    patterns = redis_url_patterns(template)
    # the README's examples, plus the TLS form the connection code documents (newsflow.runtime.redis_conn)
    for url in [*documented_redis_urls(), "rediss://:secret@redis.example.com:6380/0"]:
        for pattern in patterns:
            assert re.fullmatch(pattern, url), (template, pattern, url)
    for bad in ("http://10.0.0.5:6379", "redis://", "redis://10.0.0.5 :6379", "10.0.0.5:6379"):
        assert not all(re.fullmatch(p, bad) for p in patterns), (template, bad)


# the dry-run flags of test_dataflow_job, through the command line, with a cluster URL
DATAFLOW_DRY_RUN = ["run", *DATAFLOW_ARGV, "--redis_url", "redis+cluster://10.0.0.5:6379,10.0.0.6:6379"]


def test_a_remote_dry_run_without_models_fails_naming_the_file_and_model_dir(tmp_path, capsys):
    from newsflow.cli.main import main

    empty = tmp_path / "models"
    empty.mkdir()
    assert main([*DATAFLOW_DRY_RUN, "--model_dir", str(empty)]) == 2
    err = capsys.readouterr().err
    # the topic classifier ships with the package (data/topics): the model dir holds only the text model
    assert f"model file {empty / 'embedding-v1.npz'} is missing" in err and "--model_dir" in err


def test_check_worker_models_accepts_a_complete_directory_and_skips_buckets_in_a_dry_run(tmp_path):
    from newsflow.pipelines.launcher import check_worker_models
    from newsflow.pipelines.streaming import SPEC

    for name in SPEC.model_files:
        (tmp_path / name).write_bytes(b"x")
    check_worker_models(str(tmp_path), SPEC.model_files, dry_run=True)
    check_worker_models(str(tmp_path), SPEC.model_files, dry_run=False)
    check_worker_models("gs://newsflow-bucket/models", SPEC.model_files, dry_run=True)  # contacts nothing
    os.remove(tmp_path / "embedding-v1.npz")
    with pytest.raises(ValueError, match="embedding-v1.npz is missing.*--model_dir"):
        check_worker_models(str(tmp_path), SPEC.model_files, dry_run=False)
