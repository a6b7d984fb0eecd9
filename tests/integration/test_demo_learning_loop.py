"""The README's demo flow closes the learning loop on one clock: ``newsflow demo`` -> ``newsflow serve`` ->
simulated readers' events through ``POST /v1/events`` -> ``newsflow nightly --date <replay day>`` gives a
learned λ in ``models/decay`` and in a For You item's ``why``.

The demo replays a slice of the bundled corpus (the first 1,500 headlines) to stay light. Simulated readers
(seeded) open ``/v1/top`` once each and click a story shown at 0-based position ``p`` and ``age`` hours old
(its ``earliest_time`` against the feed's ``generated_at``, the serving clock) with probability
``0.9 · e^(−0.15·age) · (1 + p)^−0.3``; the events carry no ``time``, so the API stamps them on its clock.
The decay job's minimum-data rule (200 clicks, relative SE ≤ 0.25) is unchanged.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
import math
import os
import random
import signal
import socket
import subprocess
import time
import urllib.request

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from newsflow.core.learning.decay import MIN_CLICKS
from newsflow.serving.tokens import sign_token
from tests.conftest import REPO_ROOT, stop_embedded_servers_under

NEWSFLOW = f"{REPO_ROOT}/.venv/bin/newsflow"
HEADLINES = 1500
READERS = 150
TRUE_LAMBDA = 0.15

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _call(base: str, path: str, token: str | None = None, body: dict | None = None) -> dict:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    data = None
    if body is not None:
        headers["Content-Type"] = "application/json"
        data = json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, headers=headers, method="POST" if data else "GET")
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def _wait_for_top(base: str, proc: subprocess.Popen, seconds: float = 120.0) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            top = _call(base, "/v1/top?limit=20")
            if top["stories"]:
                return top
        except OSError:
            pass
        time.sleep(0.2)  # polls for the server's first feed build
    raise AssertionError(f"serve gave no top stories (exit {proc.poll()})")


def test_demo_serve_reader_events_nightly_learn_a_lambda(tmp_path):
    small = tmp_path / "headlines.jsonl.gz"
    with gzip.open(os.path.join(REPO_ROOT, "data", "corpus", "headlines.jsonl.gz"), "rb") as f:
        with gzip.open(small, "wb") as out:
            for i, line in enumerate(f):
                if i >= HEADLINES:
                    break
                out.write(line)
    data_dir = str(tmp_path / "data")
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "NEWSFLOW_TOKEN_SECRET")}
    run = lambda *args: subprocess.run(  # noqa: E731
        [NEWSFLOW, *args, "--data-dir", data_dir], env=env, capture_output=True, text=True, timeout=900
    )
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    serve = None
    try:
        demo = run("demo", "--fresh", "--input", str(small))
        assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-3000:]
        serve = subprocess.Popen(
            [NEWSFLOW, "serve", "--port", str(port), "--data-dir", data_dir],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        top = _wait_for_top(base, serve)
        replay_day = dt.datetime.fromtimestamp(top["generated_at"], tz=dt.UTC).date().isoformat()
        assert replay_day < "2020-01-01"  # the replayed corpus' clock, not the wall clock
        # simulated readers (tokens signed with serve's development secret, as --mint-token does)
        with open(os.path.join(data_dir, "serving", "token_secret"), "rb") as f:
            secret = f.read().strip()
        rng = random.Random(11)
        posted = 0
        for r in range(READERS):
            page = _call(base, "/v1/top?limit=20")
            events = []
            for pos, story in enumerate(page["stories"]):
                events.append({"type": "impression", "story_id": story["story_id"], "position": pos, "surface": "top"})
                age = max(0.0, (page["generated_at"] - story["earliest_time"]) / 3600.0)
                if rng.random() < 0.9 * math.exp(-TRUE_LAMBDA * age) * (1 + pos) ** -0.3:
                    events.append({"type": "click", "story_id": story["story_id"], "position": pos, "surface": "top"})
            token = sign_token(f"sim{r:03d}", secret, time.time(), 3600)
            assert _call(base, "/v1/events", token, {"events": events})["accepted"] == len(events)
            posted += len(events)
        night = run("nightly", "--date", replay_day)
        assert night.returncode == 0, night.stdout[-3000:] + night.stderr[-3000:]
        summary = json.loads(night.stdout.strip().splitlines()[-1])
        assert summary["status"] == "ok" and summary["events_flushed"] == posted
        output = os.path.join(data_dir, "output")
        # the API stamped the events on the serving (replay) clock: all of them are in the replay day's partition
        events = ds.dataset(os.path.join(output, "events"), format="parquet", partitioning="hive").to_table()
        assert events.num_rows == posted and set(events.column("date").to_pylist()) == {replay_day}
        decay = pq.read_table(os.path.join(output, "models", "decay", f"date={replay_day}")).to_pylist()
        learned = {
            r["topic"] if r["article_type"] is None else f"{r['topic']}/{r['article_type']}": r
            for r in decay
            if r["sufficient"] and r["topic"] != "*"
        }
        topics = [g for g in learned if "/" not in g]
        assert topics, decay
        assert all(learned[g]["clicks"] >= MIN_CLICKS for g in learned)
        # a For You item's why carries a learned rate, the one models/decay holds for its group
        token = run("serve", "--mint-token", "checker").stdout.strip()
        feed = _call(base, "/v1/feed?limit=50", token)
        from_model = [s["why"]["decay"] for s in feed["stories"] if s["why"]["decay"]["source"] == "learned"]
        assert from_model, [s["why"]["decay"] for s in feed["stories"]]
        for d in from_model:
            assert d["group"] in learned and d["lambda_per_hour"] == round(learned[d["group"]]["lambda_per_hour"], 4)
        assert feed["stories"][0]["why"]["versions"]["decay"] == replay_day
    finally:
        if serve is not None:
            os.killpg(serve.pid, signal.SIGTERM)
            serve.wait(timeout=30)
        stop_embedded_servers_under(data_dir)
