"""The Dataflow Flex Template (deploy/dataflow) matches the job it launches; checked statically (no image
can be built here): every metadata parameter is a real flag of the streaming job or the shared settings,
every flag the Pub/Sub job needs is a required parameter, and the Dockerfile runs the job's module on the
Beam SDK image of the installed Beam version."""

from __future__ import annotations

import argparse
import json
import os
import re

import apache_beam

from newsflow.pipelines.launcher import SettingsOptions
from newsflow.pipelines.streaming import NewsflowOptions
from tests.conftest import REPO_ROOT

DEPLOY = os.path.join(REPO_ROOT, "deploy", "dataflow")
# what a Pub/Sub streaming job on Dataflow cannot run without (job_config_from_options and the workers)
REQUIRED = {"pubsub_subscription", "output", "redis_url"}
# sources and local-only settings that a Pub/Sub Flex Template must not offer
# local-only flags: landing files, and the continuous mode's story input log (refused on remote runners)
NOT_OFFERED = {"input", "input_format", "kafka_bootstrap_servers", "kafka_topic", "data_dir", "story_input_log"}


def _job_flags() -> dict[str, argparse.Action]:
    parser = argparse.ArgumentParser(add_help=False)
    NewsflowOptions._add_argparse_args(parser)
    SettingsOptions._add_argparse_args(parser)
    out = {}
    for action in parser._actions:
        for s in action.option_strings:
            if s.startswith("--"):
                out[s[2:]] = action
    return out


def _metadata() -> dict:
    with open(os.path.join(DEPLOY, "metadata.json"), encoding="utf-8") as f:
        return json.load(f)


def test_every_metadata_parameter_is_a_job_flag_and_required_ones_are_required():
    flags = _job_flags()
    params = {p["name"]: p for p in _metadata()["parameters"]}
    unknown = sorted(set(params) - set(flags))
    assert not unknown, f"metadata parameters that are not flags of the job: {unknown}"
    assert all("_" in n or n.isalpha() for n in params)  # Beam's spelling (the launcher passes --name=value)
    missing = sorted(REQUIRED - set(params))
    assert not missing, f"required job flags missing from metadata.json: {missing}"
    assert {n for n, p in params.items() if not p.get("isOptional", False)} == REQUIRED
    assert not (set(params) & NOT_OFFERED)
    for p in params.values():
        assert p["label"] and p["helpText"]
        for rx in p.get("regexes", []):
            re.compile(rx)
    # every optional job flag with a default is offered, so the template exposes the whole job
    offered = {a.dest for n, a in flags.items() if n in params}
    job_dests = {a.dest for a in flags.values()} - {flags[n].dest for n in NOT_OFFERED}
    assert offered == job_dests, sorted(job_dests - offered)
    assert _metadata()["streaming"] is True


def test_metadata_regexes_accept_the_defaults_and_refuse_bad_values():
    params = {p["name"]: p for p in _metadata()["parameters"]}
    flags = _job_flags()
    for name, p in params.items():
        default = flags[name].default
        if default is not None and p.get("regexes"):
            text = str(default)
            assert any(re.match(rx, text) for rx in p["regexes"]), (name, text)
    assert re.match(params["pubsub_subscription"]["regexes"][0], "projects/p/subscriptions/raw-documents")
    assert not re.match(params["pubsub_subscription"]["regexes"][0], "raw-documents")
    assert not re.match(params["max_hamming_distance"]["regexes"][0], "4")


def test_dockerfile_launches_the_streaming_module_on_the_matching_sdk_image():
    with open(os.path.join(DEPLOY, "Dockerfile"), encoding="utf-8") as f:
        text = f.read()
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert froms[-1] == f"apache/beam_python3.11_sdk:{apache_beam.__version__}"
    env = dict(re.findall(r'^ENV\s+(\w+)="?\$\{WORKDIR\}/([^"\s]+)"?', text, re.M))
    assert env["FLEX_TEMPLATE_PYTHON_PY_FILE"] == "pipelines/streaming.py"
    assert env["FLEX_TEMPLATE_PYTHON_SETUP_FILE"] == "setup.py"
    for rel in env.values():
        assert os.path.isfile(os.path.join(REPO_ROOT, rel)), rel
    assert "/opt/google/dataflow/python_template_launcher" in text
    assert 'ENTRYPOINT ["/opt/apache/beam/boot"]' in text
    # every COPY source exists in a checkout (var/models after `make models`)
    for line in re.findall(r"^COPY (?!--from)(.+)$", text, re.M):
        for src in line.split()[:-1]:
            assert os.path.exists(os.path.join(REPO_ROOT, src)) or src.startswith("var/"), src
