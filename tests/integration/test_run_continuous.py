"""``newsflow run-continuous`` as a real process on an embedded Redis: landing files dropped into an
empty directory are processed within a bounded time, each once, and a restart reprocesses nothing."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading
import time

from newsflow.core.urls import article_id
from newsflow.storage.keys import Keys
from newsflow.storage.stories import RedisStoryStore
from tests.conftest import REPO_ROOT

PAGES = os.path.join(REPO_ROOT, "data", "corpus", "pages.jsonl.gz")
DEADLINE_S = 90.0


def _pages(start: int, n: int) -> list[bytes]:
    """Real corpus pages as landing lines, fetched and published just now (so the wall-clock feed ranks them)."""
    now = time.time()
    out = []
    with gzip.open(PAGES, "rb") as f:
        for i, line in enumerate(f):
            if start <= i < start + n:
                d = json.loads(line)
                d["fetch_time"], d["published_time"] = now, now - 60
                out.append(json.dumps(d).encode() + b"\n")
    return out


def _drop(landing, name: str, lines: list[bytes]) -> list[str]:
    """Commits a landing file as LandingWriter does (temp name, then rename); returns its article ids."""
    data = b"".join(lines)
    tmp = landing / f".{name}.tmp"
    tmp.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    os.replace(tmp, landing / name)
    return [article_id(json.loads(line)["url"]) for line in lines]


class Loop:
    """The command in a subprocess; its JSON lines are collected from stdout."""

    def __init__(self, tmp_path, url: str, extra: list[str] = ()):
        cmd = [
            sys.executable,
            "-m",
            "newsflow.cli",
            "run-continuous",
            "--input-dir",
            str(tmp_path / "landing"),
            "--every",
            "0.5",
            "--now",
            "wall",
            "--redis_url",
            url,
            "--data_dir",
            str(tmp_path / "data"),
            "--model_dir",
            os.path.join(REPO_ROOT, "var", "models"),
            *extra,
        ]
        self.proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.lines: list[dict] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.proc.stdout:
            try:
                self.lines.append(json.loads(raw))
            except ValueError:
                pass

    def runs(self) -> list[dict]:
        return [x for x in self.lines if "files" in x]

    def wait_runs(self, n: int) -> list[dict]:
        end = time.monotonic() + DEADLINE_S
        while len(self.runs()) < n and time.monotonic() < end and self.proc.poll() is None:
            time.sleep(0.2)
        errors = [x for x in self.lines if "error" in x]
        assert len(self.runs()) >= n, f"no run {n} within {DEADLINE_S} s: {self.lines}, errors {errors}"
        return self.runs()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(30)


def _stories(client, ids: list[str]) -> dict[str, str]:
    store = RedisStoryStore(client)
    return {a: s for a in ids if (s := store.assigned_story(a)) is not None}


def _feed_story_ids(client) -> set[str]:
    raw = client.get(Keys().feed("edition", "global"))
    return set() if raw is None else {i["story_id"] for i in json.loads(raw)["stories"]}


def test_new_files_are_processed_once_and_feeds_rebuilt(redis_server, tmp_path):
    client, url = redis_server
    landing = tmp_path / "landing"
    landing.mkdir()
    loop = Loop(tmp_path, url)
    try:
        time.sleep(3)
        assert loop.runs() == [] and loop.proc.poll() is None  # empty directory: nothing to run
        first = _drop(landing, "raw-0001-a-000001.jsonl", _pages(0, 3))
        (landing / ".raw-0002-a-000002.jsonl.tmp").write_bytes(b"{not committed yet")  # in-flight: skipped
        [run1] = loop.wait_runs(1)
        assert run1["files"] == 1 and run1["first"] == "raw-0001-a-000001.jsonl" and run1["job"]["parsed"] == 3
        stories = _stories(client, first)
        assert set(stories) == set(first)  # every article of the file is in a story in Redis
        assert set(stories.values()) <= _feed_story_ids(client)  # ... and in the feed built after the run

        second = _drop(landing, "raw-0003-a-000003.jsonl.gz", _pages(3, 2))
        run1, run2 = loop.wait_runs(2)
        assert run2["files"] == 1 and run2["first"] == "raw-0003-a-000003.jsonl.gz"
        assert run2["job"]["parsed"] == 2  # only the new file
        assert set(_stories(client, second)) == set(second)
        assert set(_stories(client, second).values()) <= _feed_story_ids(client)
    finally:
        loop.stop()
    restarted = Loop(tmp_path, url)
    try:
        time.sleep(6)
        assert restarted.proc.poll() is None and restarted.runs() == []  # nothing reprocessed after a restart
        assert [x for x in restarted.lines if "error" in x] == []
    finally:
        restarted.stop()
