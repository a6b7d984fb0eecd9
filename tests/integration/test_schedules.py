"""The shipped schedules run what they say: the exact command of the cron line and of the systemd
service (only the install directory /opt/newsflow swapped for this checkout, the log path for a temp
file), against a real embedded Redis holding yesterday's events and stories."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest

from newsflow.storage.keys import Keys
from newsflow.storage.models import ModelStore
from tests.conftest import REPO_ROOT
from tests.helpers import run_env
from tests.integration.nightly_data import prepare_night

DEPLOY = os.path.join(REPO_ROOT, "deploy")
INSTALL_DIR = "/opt/newsflow"


def cron_command() -> str:
    """The command of the one schedule line of deploy/cron/newsflow-nightly.cron (minute hour dom mon dow cmd)."""
    with open(os.path.join(DEPLOY, "cron", "newsflow-nightly.cron")) as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.lstrip().startswith("#")]
    schedule = [ln for ln in lines if not re.match(r"^[A-Z_]+=", ln)]
    assert len(schedule) == 1, schedule
    fields = schedule[0].split(None, 5)
    assert fields[:5] == ["15", "2", "*", "*", "*"]
    return fields[5]


def systemd_unit(name: str) -> dict[str, str]:
    out = {}
    with open(os.path.join(DEPLOY, "systemd", name)) as f:
        for ln in f:
            if "=" in ln and not ln.startswith("#"):
                k, v = ln.strip().split("=", 1)
                out[k] = v
    return out


def test_cron_line_runs_the_nightly_loop_and_a_second_run_is_locked_out(redis_server, tmp_path):
    client, url = redis_server
    date = prepare_night(client)
    command = cron_command().replace(INSTALL_DIR, REPO_ROOT).replace("var/nightly.log", str(tmp_path / "n.log"))
    assert command == f"cd {REPO_ROOT} && .venv/bin/newsflow nightly >> {tmp_path / 'n.log'} 2>&1"
    env = run_env(url, str(tmp_path / "data"))
    client.set(Keys().nightly_lock(date), "held-by-the-systemd-timer")
    locked = subprocess.run(["bash", "-c", command], env=env, timeout=600)
    assert locked.returncode == 3
    client.delete(Keys().nightly_lock(date))
    done = subprocess.run(["bash", "-c", command], env=env, timeout=600)
    assert done.returncode == 0
    lines = [json.loads(x) for x in open(tmp_path / "n.log") if x.startswith("{")]
    assert [(x["status"], x["date"]) for x in lines] == [("locked", date), ("ok", date)]
    assert lines[1]["events_flushed"] == 16
    assert ModelStore(client).current()["interest"] == date
    assert os.path.exists(tmp_path / "data" / "output" / "models" / "interest" / f"date={date}" / "part-00000.parquet")


def test_systemd_service_runs_the_nightly_loop(redis_server, tmp_path):
    client, url = redis_server
    date = prepare_night(client)
    service = systemd_unit("newsflow-nightly.service")
    timer = systemd_unit("newsflow-nightly.timer")
    assert timer["Unit"] == "newsflow-nightly.service" and timer["OnCalendar"] == "*-*-* 02:15:00 UTC"
    assert service["Type"] == "oneshot" and service["WorkingDirectory"] == INSTALL_DIR
    argv = service["ExecStart"].replace(INSTALL_DIR, REPO_ROOT).split()
    assert argv == [f"{REPO_ROOT}/.venv/bin/newsflow", "nightly"]
    proc = subprocess.run(
        argv,
        cwd=service["WorkingDirectory"].replace(INSTALL_DIR, REPO_ROOT),
        env=run_env(url, str(tmp_path / "data")),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["status"] == "ok" and summary["date"] == date and summary["events_flushed"] == 16
    assert [j["state"] for j in summary["jobs"]] == ["DONE"] * 4
    assert ModelStore(client).current()["decay"] == date


@pytest.mark.parametrize(
    "bad",
    ["--date 2026-13-01", "--history-days 0", "--lock-ttl=0", "--lock-ttl=-5", "--lock-ttl=nan", "--lock-ttl=1e30"],
)
def test_nightly_rejects_bad_flags(bad, tmp_path):
    proc = subprocess.run(
        [f"{REPO_ROOT}/.venv/bin/newsflow", "nightly", *bad.split()],
        env=run_env("redis://127.0.0.1:1", str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and json.loads(proc.stdout)["status"] == "failed"
    assert "Traceback" not in proc.stderr


def test_cloud_scheduler_flex_template_launch_runs_the_nightly_entry(redis_server, tmp_path):
    """Cloud Scheduler posts deploy/gcp/nightly-launch.json to flexTemplates:launch; the template's
    launcher then runs ``python <FLEX_TEMPLATE_PYTHON_PY_FILE> --<parameter>=<value> ...``. Run that
    command here (DirectRunner, the body's Redis and bucket swapped for test ones)."""
    client, url = redis_server
    date = prepare_night(client)
    with open(os.path.join(DEPLOY, "gcp", "cloud-scheduler-nightly.sh")) as f:
        script = f.read()
    assert '--schedule "15 2 * * *"' in script and '--time-zone "Etc/UTC"' in script
    assert "/flexTemplates:launch" in script and '--message-body-from-file "${here}/nightly-launch.json"' in script
    with open(os.path.join(DEPLOY, "gcp", "nightly-launch.json")) as f:
        body = json.load(f)["launchParameter"]
    with open(os.path.join(DEPLOY, "dataflow", "nightly-metadata.json")) as f:
        metadata = {p["name"]: p for p in json.load(f)["parameters"]}
    assert body["containerSpecGcsPath"].endswith("/newsflow-nightly.json")
    assert {n for n, p in metadata.items() if not p["isOptional"]} <= set(body["parameters"]) <= set(metadata)
    for name, value in body["parameters"].items():
        assert any(re.match(rx, value) for rx in metadata[name]["regexes"]), (name, value)
    with open(os.path.join(DEPLOY, "dataflow", "nightly.Dockerfile")) as f:
        py_file = re.search(r'^ENV FLEX_TEMPLATE_PYTHON_PY_FILE="/template/(\S+)"', f.read(), re.M).group(1)
    assert py_file == "jobs/nightly_template.py"
    params = dict(body["parameters"], redis_url=url, output=str(tmp_path / "out"))
    argv = [f"{REPO_ROOT}/.venv/bin/python", os.path.join(REPO_ROOT, py_file)]
    argv += [f"--{k}={v}" for k, v in params.items()]
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "PYTHONPATH")}
    proc = subprocess.run(argv, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["status"] == "ok" and summary["date"] == date and summary["events_flushed"] == 16
    assert ModelStore(client).current()["weights"] == date
    assert os.path.exists(tmp_path / "out" / "models" / "decay" / f"date={date}" / "part-00000.parquet")
