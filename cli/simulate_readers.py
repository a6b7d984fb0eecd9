"""``newsflow simulate-readers``: synthetic readers read the bundled corpus through the real HTTP API, the
nightly jobs learn from their events between days, and personalized CTR@10 is compared with ``/v1/top``.

Setup: the streaming job over the bundled corpus (``newsflow demo --fresh`` into ``--data-dir``, default a
temporary directory), then the serving app on 127.0.0.1 (uvicorn in a thread) with its clocks set to the
simulated time. Day ``d`` starts at the corpus' replay clock + ``d`` days (stories age as days pass).

Readers (seeded, ``--seed``): each has a hidden taste that never reaches the product, only its events do:
a topic preference (Dirichlet(0.3) over the corpus' topics; affinity = preference / its largest) and
two liked outlets. A story shown at 0-based position ``p`` is clicked with probability
``(1 + p)^-0.8 · (0.02 + 0.45 · affinity(topic) + 0.25 · liked(outlet))`` (position-biased examination
times attractiveness); a click is followed by a dwell event of ``10 + 110 · affinity`` seconds.

Each day every reader has ``--sessions`` sessions; in each, the reader opens its For You feed
(``GET /v1/feed?limit=10``) and the top stories as served (``GET /v1/top?limit=10``), clicks as above on
both, and the client posts impressions, clicks and dwell (``POST /v1/events``). After each day
``newsflow nightly`` runs for that date (events to Parquet, the four Beam jobs, model switch) and cached
personal feeds (feed documents and their serving forms, ``Keys.feed_page``) are dropped so the next
day's feed uses the new models.

Output: one JSON line with ``ctr_at_10_personalized`` and ``ctr_at_10_unpersonalized`` (clicks / shown
stories over the last day's sessions: same readers, same day), ``lift`` (their ratio), per-day CTRs and
lifts, event counts and timings. Default: 200 readers, :data:`DEFAULT_DAYS` days (a week), 3 sessions a day.
A day's lift is a ratio of two CTRs over ~6,000 impressions each (~500 clicks), so it moves by about
±0.1 from day to day with the same models; read the per-day series, not one day.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

from newsflow.runtime.settings import Settings, add_settings_arguments

COMMAND = "simulate-readers"
HELP = "synthetic readers with hidden tastes read the corpus through the HTTP API; nightly jobs between days"
DAY = 86400.0
DEFAULT_DAYS = 7
"""A reader's first week. The ranking-weights job trains on the last 3 days of impressions
(:data:`newsflow.jobs.ranking_weights.WEIGHTS_DAYS`), each with the models of the night before, so the first night
whose training days all had models is night 4. Seeds 1-4: the learned fit first beat the hand-set blend's
held-out within-reader AUC at night 4 (night 3 for seed 4); days ranked by the blend had lifts 0.96-1.16,
days 4-6 (learned weights) 1.25-1.71, last day 1.62-1.71."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``newsflow simulate-readers``."""
    add_settings_arguments(parser, redis=False)
    for action in parser._actions:
        if action.dest == "data_dir":
            action.help = (
                "a new or empty directory for the simulation's embedded Redis and Parquet output (refused if it "
                "already holds output/ or redis/; default: a new temporary directory, printed as data_dir)"
            )
    parser.add_argument("--readers", type=int, default=200, help="synthetic readers (default 200)")
    parser.add_argument(
        "--days", type=int, default=DEFAULT_DAYS, help="simulated days; the nightly jobs run after each (default 7)"
    )
    parser.add_argument("--sessions", type=int, default=3, help="sessions per reader per day")
    parser.add_argument("--seed", type=int, default=1, help="seed of the readers' tastes and clicks")
    parser.add_argument("--input", default=None, help="landing files for the corpus (default: the bundled corpus)")


class Reader:
    """A synthetic reader: hidden topic preferences and liked outlets (never sent to the product)."""

    def __init__(self, user_id: str, topics: list[str], outlets: list[str], rng: np.random.Generator):
        self.user_id = user_id
        pref = rng.dirichlet([0.3] * len(topics))
        self.affinity = {t: float(p / pref.max()) for t, p in zip(topics, pref, strict=True)}
        self.liked = set(rng.choice(outlets, size=min(2, len(outlets)), replace=False).tolist())

    def attractiveness(self, story: dict) -> tuple[float, float]:
        """(click attractiveness in [0, 1], topic affinity) of a served story."""
        topics = [str(t).lower() for t in story.get("topics") or []]
        aff = max((self.affinity.get(t, 0.0) for t in topics), default=0.0)
        liked = 1.0 if story.get("domain", "").lower() in self.liked else 0.0
        return min(1.0, 0.02 + 0.45 * aff + 0.25 * liked), aff

    def session(self, stories: list[dict], rng: np.random.Generator, surface: str) -> tuple[list[dict], int]:
        """Events of one look at ``stories`` (top 10) and the number of clicks."""
        events, clicks = [], 0
        for p, s in enumerate(stories[:10]):
            events.append({"type": "impression", "story_id": s["story_id"], "position": p, "surface": surface})
            a, aff = self.attractiveness(s)
            if rng.random() < (1.0 + p) ** -0.8 * a:
                clicks += 1
                events.append({"type": "click", "story_id": s["story_id"], "position": p, "surface": surface})
                dwell = 10.0 + 110.0 * aff
                events.append({"type": "dwell", "story_id": s["story_id"], "dwell_seconds": dwell, "surface": surface})
        return events, clicks


@contextlib.contextmanager
def _serve(app):
    """The app on uvicorn on an ephemeral 127.0.0.1 port, in a thread; yields the base URL."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 20
    while not server.started and time.time() < deadline:
        time.sleep(0.02)
    if not server.started:
        raise RuntimeError("the API did not start")
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)


def simulate(settings: Settings, args: argparse.Namespace, log=print) -> dict:
    """Runs the simulation on the corpus already loaded in ``settings``' Redis; returns the summary."""
    import datetime as dt

    import httpx

    from newsflow.jobs.nightly import run_night
    from newsflow.serving.app import ServingConfig, create_app
    from newsflow.serving.tokens import sign_token
    from newsflow.storage.feed_page import drop_user_feed
    from newsflow.storage.feeds import build_feeds, latest_story_time, replay_clock
    from newsflow.storage.ranking import RankingStore

    client = settings.connect_redis()
    keys = settings.keys
    store = RankingStore(client, keys)
    start = replay_clock(client, keys) or latest_story_time(store)
    if start is None:
        raise RuntimeError("no stories in Redis: the corpus was not loaded")
    stories = store.get_stories(list(store.iter_story_ids()))
    topics = sorted({str(t).lower() for s in stories if s for t in s.topics})
    outlets = sorted({s.domain.lower() for s in stories if s and s.domain})
    rng = np.random.default_rng(args.seed)
    readers = [Reader(f"sim{i:05d}", topics, outlets, rng) for i in range(args.readers)]
    clock = {"now": start}
    secret = secrets.token_bytes(32)
    app = create_app(
        client,
        ServingConfig(
            token_secret=secret,
            snapshot_dir=os.path.join(settings.data_dir, "snapshots"),
            local_cache_seconds=0,
            clock=lambda: clock["now"],
            ranking_clock=lambda: clock["now"],
            keys=keys,
        ),
    )
    output = os.path.join(settings.data_dir, "output")
    per_day, posted, nights = [], 0, []
    with _serve(app) as base:
        for day in range(args.days):
            day_start = start + day * DAY
            clock["now"] = day_start
            build_feeds(client, day_start, keys=keys)  # public feeds and pools as of the day
            shown = {"feed": 0, "top": 0}
            clicked = {"feed": 0, "top": 0}
            # A client per day: a connection kept across the night would meet the server's keep-alive close
            # (uvicorn's 5 s) in a race that resets it.
            with httpx.Client(base_url=base, timeout=60) as http:
                for sess in range(args.sessions):
                    clock["now"] = day_start + 3600.0 * (1 + sess * 20.0 / max(args.sessions, 1))
                    for reader in readers:
                        auth = {"Authorization": "Bearer " + sign_token(reader.user_id, secret, clock["now"], 3600)}
                        events = []
                        for surface, path in (("feed", "/v1/feed"), ("top", "/v1/top")):
                            resp = http.get(path, params={"limit": 10}, headers=auth if surface == "feed" else None)
                            resp.raise_for_status()
                            items = resp.json()["stories"][:10]
                            evs, n = reader.session(items, rng, surface)
                            shown[surface] += len(items)
                            clicked[surface] += n
                            events += evs
                        for i in range(0, len(events), 100):
                            r = http.post("/v1/events", json={"events": events[i : i + 100]}, headers=auth)
                            if r.status_code != 202:
                                raise RuntimeError(f"events refused: {r.status_code} {r.text[:300]}")
                            posted += r.json()["accepted"]
            ctr = {s: (clicked[s] / shown[s] if shown[s] else 0.0) for s in shown}
            cp, ct = round(ctr["feed"], 4), round(ctr["top"], 4)
            lift = round(cp / ct, 4) if ct else None
            per_day.append({"day": day, "ctr_personalized": cp, "ctr_top": ct, "lift": lift})
            date = dt.datetime.fromtimestamp(day_start + 3600.0, tz=dt.UTC).date().isoformat()
            night = run_night(client, settings, date, output)
            nights.append({"date": date, "status": night["status"], "seconds": night["seconds"]})
            if night["status"] != "ok":
                raise RuntimeError(f"nightly run for {date} failed: {night['error']}")
            # feeds and their serving forms: a simulated day passes in less than their 5-minute TTL
            for reader in readers:
                drop_user_feed(client, reader.user_id, keys)
            log(json.dumps({"progress": per_day[-1], "night": nights[-1]}), file=sys.stderr)
    last = per_day[-1]
    return {
        "readers": args.readers,
        "days": args.days,
        "sessions_per_day": args.sessions,
        "seed": args.seed,
        "ctr_at_10_personalized": last["ctr_personalized"],
        "ctr_at_10_unpersonalized": last["ctr_top"],
        "lift": last["lift"],
        "per_day": per_day,
        "events_posted": posted,
        "nights": nights,
        "topics": len(topics),
        "outlets": len(outlets),
    }


def run(args: argparse.Namespace) -> int:
    """Loads the corpus (``newsflow demo --fresh``), simulates, prints one JSON line; 0 on success."""
    from newsflow.runtime.redis_conn import embedded_socket_url

    for name in ("readers", "days", "sessions"):
        if getattr(args, name) < 1:
            print(json.dumps({"error": f"--{name} must be >= 1"}))
            return 2
    if args.seed < 0:
        print(json.dumps({"error": f"--seed must be >= 0, got {args.seed}"}))
        return 2
    given = getattr(args, "data_dir", None)
    if given:
        used = [d for d in ("output", "redis") if os.path.exists(os.path.join(given, d))]
        if used:
            print(
                json.dumps(
                    {
                        "error": f"--data-dir {given} already holds {', '.join(used)}/: the simulation "
                        "replaces both (newsflow demo --fresh); give a new or empty directory"
                    }
                )
            )
            return 2
    t0 = time.monotonic()
    if not given:
        args.data_dir = tempfile.mkdtemp(prefix="newsflow-sim-")
    settings = Settings.resolve(args)
    demo = [sys.executable, "-m", "newsflow.cli", "demo", "--fresh", "--data-dir", settings.data_dir]
    if args.input:
        demo += ["--input", args.input]
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL",)}
    proc = subprocess.run(demo, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        print(json.dumps({"error": "loading the corpus failed", "stderr": proc.stderr[-2000:]}))
        return 1
    loaded = time.monotonic() - t0
    settings = settings.with_redis_url(embedded_socket_url(settings.embedded_redis_path))
    summary = simulate(settings, args)
    summary["seconds"] = {"corpus": round(loaded, 1), "total": round(time.monotonic() - t0, 1)}
    summary["data_dir"] = settings.data_dir
    print(json.dumps(summary), flush=True)
    return 0
