"""The package that Dataflow's ``--setup_file`` ships to workers runs the job on its own.

Builds the sdist the way Beam's stager does (``python -m build --no-isolation --sdist``), installs it
with ``--no-deps`` into a fresh virtualenv that sees the dependencies of this environment but not the
checkout, and runs the streaming job from a temp directory: the sources table, the training data and
the trained models must come from the installed package (a worker has no checkout).
"""

from __future__ import annotations

import gzip
import json
import os
import site
import subprocess
import sys

from newsflow.storage.keys import Keys
from newsflow.storage.parquet import read_dataset
from newsflow.storage.story_index import live_story_count
from tests.conftest import REPO_ROOT

N_HEADLINES = 20


def _run(cmd, cwd, env, timeout=300) -> str:
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"{cmd} exited {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}"
    )
    return proc.stdout


def test_the_shipped_package_runs_the_job_outside_the_checkout(tmp_path, redis_server):
    client, redis_url = redis_server
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NEWSFLOW_MODEL_DIR", "PYTHONHOME")}
    env["NEWSFLOW_DATA_DIR"] = str(tmp_path / "state")
    dist, venv, work = tmp_path / "dist", tmp_path / "venv", tmp_path / "work"
    work.mkdir()
    _run([sys.executable, "-m", "build", "--no-isolation", "--sdist", "--outdir", str(dist), REPO_ROOT], REPO_ROOT, env)
    (sdist,) = dist.glob("newsflow-*.tar.gz")
    # no pip or setuptools of its own: the build tools are this environment's (the pinned setuptools builds
    # wheels itself; ensurepip's older one needs the wheel package's bdist_wheel, which wheel>=0.46 dropped)
    _run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], str(work), env)
    py = str(venv / "bin" / "python")
    # "system" site-packages of a venv made from a venv is the base interpreter's: add this environment's
    # site-packages by a .pth line (its own .pth files, the editable install of the checkout among them,
    # are not processed that way)
    venv_site = _run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], str(work), env).strip()
    with open(os.path.join(venv_site, "zz_newsflow_test_deps.pth"), "w") as f:
        f.write("\n".join(site.getsitepackages()) + "\n")
    _run(
        [
            py,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--ignore-installed",
            str(sdist),
        ],
        str(work),
        env,
    )

    where = json.loads(
        _run(
            [
                py,
                "-I",
                "-c",
                (
                    "import json, sys, newsflow, newsflow.pipelines.streaming\n"
                    "from newsflow.core.resources import default_model_dir, data_path\n"
                    "from newsflow.core.sources import DEFAULT_SOURCES_PATH\n"
                    "print(json.dumps({'newsflow': newsflow.__file__,"
                    " 'pipelines': newsflow.pipelines.streaming.__file__,"
                    " 'sources': DEFAULT_SOURCES_PATH, 'topics': data_path('topics'), 'models': default_model_dir(),"
                    " 'sys_path': sys.path}))"
                ),
            ],
            str(work),
            env,
        )
    )
    assert not any(os.path.abspath(p or ".") == REPO_ROOT for p in where["sys_path"]), where["sys_path"]
    for key in ("newsflow", "pipelines", "sources", "topics", "models"):
        assert where[key].startswith(venv_site), (key, where[key])
    assert where["models"].endswith(os.path.join("newsflow", "_models"))
    assert sorted(os.listdir(where["models"])) == ["embedding-v1.npz"]

    lines = []
    with gzip.open(os.path.join(REPO_ROOT, "data", "corpus", "headlines.jsonl.gz"), "rb") as f:
        for ln in f:
            lines.append(ln.rstrip(b"\n"))
            if len(lines) == N_HEADLINES:
                break
    landing = work / "landing.jsonl"
    landing.write_bytes(b"\n".join(lines) + b"\n")
    out = work / "out"
    stdout = _run(
        [
            py,
            "-I",
            "-m",
            "newsflow.pipelines.streaming",
            "--input",
            str(landing),
            "--output",
            str(out),
            "--runner",
            "DirectRunner",
            "--redis_url",
            redis_url,
        ],
        str(work),
        env,
    )
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["state"] == "DONE" and summary["dead_lettered"] == 0, summary
    assert summary["extracted"] == N_HEADLINES and summary["stories_assigned"] == N_HEADLINES, summary
    articles = read_dataset(str(out), "articles").to_pylist()
    assert len(articles) == N_HEADLINES
    assert all(a["cluster_id"] for a in articles)
    assert live_story_count(client, Keys()) > 0
