"""The crawl-tier commands as a user runs them: defaults under the data dir, help text, progress, errors.

``crawl`` runs as a real subprocess from an empty working directory against the replay server on
127.0.0.1; its state must land under ``$NEWSFLOW_DATA_DIR`` and nothing in the working directory.
"""

import argparse
import json
import os
import subprocess
import sys

import pytest

from newsflow.cli import crawl, replay_web, sources_status
from newsflow.crawler.replay import ReplayWeb, load_corpus, serve

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "corpus")
needs_corpus = pytest.mark.skipif(
    not os.path.exists(os.path.join(CORPUS, "pages.jsonl.gz")), reason="bundled corpus absent"
)


def _help(module) -> tuple[argparse.ArgumentParser, str]:
    parser = argparse.ArgumentParser(prog=f"newsflow {module.COMMAND}")
    module.add_arguments(parser)
    return parser, " ".join(parser.format_help().split())  # line wrapping depends on the terminal width


@pytest.mark.parametrize("module", [crawl, replay_web, sources_status])
def test_every_option_has_help(module):
    parser, _ = _help(module)
    for action in parser._actions:
        assert action.help, f"{module.COMMAND} {action.option_strings} has no help text"


def test_crawl_help_shows_the_local_recipe_and_defaults():
    _, text = _help(crawl)
    assert "--resolve '*=127.0.0.1:8765' --allow-host 127.0.0.1" in text
    assert "newsflow replay-web --port 8765 --seeds-out seeds.txt" in text
    assert "(default: 16)" in text and "(default: 1.0)" in text and "(default: 5.0)" in text
    assert "<data dir>/landing" in text and "<data dir>/redis/newsflow.rdb" in text
    _, text = _help(replay_web)
    assert "(default: 8765)" in text and os.path.join("data", "corpus") in text


def test_sources_status_without_state_creates_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("NEWSFLOW_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert sources_status.run(argparse.Namespace(redis_path=None, json=False)) == 0
    out, err = capsys.readouterr()
    assert out.strip().splitlines()[-1] == "0 sources"
    assert f"no crawl state at {tmp_path / 'var' / 'redis' / 'newsflow.rdb'}" in err
    assert os.listdir(tmp_path) == []


@needs_corpus
def test_replay_web_finds_the_bundled_corpus_from_any_directory(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    parser, _ = _help(replay_web)
    seeds = tmp_path / "seeds.txt"
    args = parser.parse_args(["--port", "0", "--duration", "0.2", "--seeds-out", str(seeds)])
    assert replay_web.run(args) == 0
    out = json.loads(capsys.readouterr().out)
    hosts = {d.url.split("/")[2].lower() for d in load_corpus(CORPUS)}
    assert out["hosts"] == len(hosts) and out["feeds"] == len(seeds.read_text().split())
    bad = parser.parse_args(["--corpus-dir", str(tmp_path / "nowhere"), "--port", "0"])
    assert replay_web.run(bad) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: cannot load corpus from {tmp_path / 'nowhere'}") and "no pages.jsonl.gz" in err


@needs_corpus
def test_crawl_command_lands_under_the_data_dir_prints_progress_and_reports_safety_refusals(tmp_path):
    docs = load_corpus(CORPUS)
    web = ReplayWeb([d for d in docs if d.body][:6], speed=1.0, start_fraction=1.0, inject_failures=False)
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("\n".join(web.feed_urls() + ["http://metadata.google.internal/computeMetadata/v1/"]) + "\n")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env["NEWSFLOW_DATA_DIR"] = str(tmp_path / "data")
    server = serve(web)
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "newsflow.cli",
                "crawl",
                "--seeds",
                str(seeds),
                "--resolve",
                f"*=127.0.0.1:{server.port}",
                "--allow-host",
                "127.0.0.1",
                "--min-host-delay",
                "0",
                "--idle-exit",
                "1.5",
                "--duration",
                "30",
                "--progress-every",
                "0.3",
            ],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        status = subprocess.run(
            [sys.executable, "-m", "newsflow.cli", "sources", "status", "--json"],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    assert os.listdir(cwd) == []
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    landing = tmp_path / "data" / "landing"
    assert summary["landing"] == str(landing) and summary["seeds_added"] == len(web.feed_urls()) + 1
    assert summary["pages_landed"] == 6 and summary["unsafe_address"] == 1
    assert len([n for n in os.listdir(landing) if n.endswith(".jsonl.gz")]) == summary["files"] >= 1
    progress = [ln for ln in proc.stderr.splitlines() if ln.startswith("crawl: ") and "processed=" in ln]
    assert len(progress) >= 2  # periodic lines plus the final one
    assert progress[-1].split()[2:5] == [f"processed={summary['processed']}", "landed=6", "errors=1"]
    # the refusal is reported as a safety refusal, not as a robots.txt problem
    rows = {r["url"]: r for r in map(json.loads, status.stdout.splitlines())}
    assert status.returncode == 0 and len(rows) == len(web.feed_urls()) + 1
    meta = rows["http://metadata.google.internal/computeMetadata/v1/"]
    assert meta["last_status"] == "unsafe_address" and "robots" not in meta["last_error"]
    assert meta["last_error"].startswith("safety guard refused http://metadata.google.internal/")
    assert all(r["last_status"] == "200" for u, r in rows.items() if u != meta["url"])
