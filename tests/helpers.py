"""Helpers shared by several test files; fixtures live in ``tests/conftest.py``, the serving tests' data set in
``tests/integration/ranking_data.py`` and the uvicorn runner in ``tests/integration/asgi_server.py``.

- Beam: an arrival-ordered ``TestStream``, a streaming test pipeline, ``AssignStories`` on it, a tiny
  text model.
- The bundled corpus as landing files, and the whole job on them (batch, or streaming on a ``TestStream``).
- Serving: ``ranking_data`` loaded with trending, breaking and readers; a populated app; a silent "Redis".
- Redis: a feed-only ``Article``; ``dump`` (every key's value, for before/after checks within a run) and
  ``redis_state``/``parquet_rows``/``dataset_bytes``/``state_difference`` (exact snapshots for comparing two
  runs) and ``redis_story_of_every_article``.
- Crawler: a loopback ``CrawlerConfig``, a scripted site, an injected clock and a ``poll`` at a given time.
- GCS: an in-memory emulator.
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import gzip
import math
import os
import socket
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence

from newsflow.crawler.schedule import ScheduleConfig
from newsflow.schemas import Article
from newsflow.storage.parquet import read_dataset
from tests.conftest import REPO_ROOT

# ---- Beam --------------------------------------------------------------------------------------------


def arrival_stream(items: Sequence, batches: Sequence[tuple[Sequence[int], float | None]], end: float):
    """A ``TestStream`` releasing ``items`` in the given order.

    Args:
      items: elements with an ``event_time`` (UTC epoch s), each emitted with that timestamp.
      batches: ``(indexes into items, watermark or None)``: the batch's elements, then, if given, the
        watermark advanced to that time.
      end: the watermark's last finite value (timers due before it fire), then it advances to infinity.
    """
    from apache_beam.testing.test_stream import TestStream
    from apache_beam.transforms.window import TimestampedValue

    stream = TestStream()
    for batch, watermark in batches:
        stream = stream.add_elements([TimestampedValue(items[i], items[i].event_time) for i in batch])
        if watermark is not None:
            stream = stream.advance_watermark_to(watermark)
    return stream.advance_watermark_to(end).advance_watermark_to_infinity()


def streaming_test_pipeline():
    """A ``beam.Pipeline`` on the ``BundleBasedDirectRunner`` in streaming mode (TestStream sources)."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
    from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner

    opts = PipelineOptions(["--runner", "BundleBasedDirectRunner"])
    opts.view_as(StandardOptions).streaming = True
    return beam.Pipeline(runner=BundleBasedDirectRunner(), options=opts)


def run_assign_stories(redis_url: str, items, batches, end: float, stories, model_path: str, check=None) -> None:
    """Runs ``AssignStories`` on ``arrival_stream(items, batches, end)`` in a streaming test pipeline.

    Args:
      redis_url: the stories' Redis.
      stories: the ``StoryConfig``; ``model_path`` the text model (``tiny_text_model``).
      check: called with the composite's outputs inside the pipeline, to add ``assert_that`` checks.
    """
    from newsflow.transforms.stories import AssignStories, StoryTransformConfig

    cfg = StoryTransformConfig(redis_url=redis_url, stories=stories, text_model_path=model_path)
    with streaming_test_pipeline() as p:
        outputs = p | arrival_stream(items, batches, end) | AssignStories(cfg)
        if check is not None:
            check(outputs)


def tiny_text_model(path: str) -> str:
    """Saves a 4-word text model (alpha, beta, delta, gamma: one axis each, idf 1) at ``path``; returns it."""
    import numpy as np

    from newsflow.core.embedding import TextModel

    model = TextModel(["alpha", "beta", "delta", "gamma"], np.ones(4, np.float32), 1.0, np.eye(4, dtype=np.float32))
    model.save(path)
    return path


def run_streaming_job(chunks: Sequence[Sequence[tuple[bytes, float]]], end: float, redis_url: str, output: str):
    """Runs the streaming job (``build_pipeline`` with its Pub/Sub flags) on a ``TestStream`` instead of
    Pub/Sub, storing in ``redis_url`` and writing Parquet under ``output``; the stories step orders by timers.

    Args:
      chunks: landing lines with their event times (UTC epoch s); each chunk is followed by 61 s of
        processing time (one flush of the sinks).
      end: the watermark's last finite value, then it advances to infinity.
    """
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
    from apache_beam.testing.test_stream import TestStream
    from apache_beam.transforms.window import TimestampedValue

    from newsflow.pipelines.launcher import make_runner
    from newsflow.pipelines.streaming import build_pipeline, job_config_from_options

    stream = TestStream()
    for chunk in chunks:
        stream = stream.add_elements([TimestampedValue(line, t) for line, t in chunk]).advance_processing_time(61)
    stream = stream.advance_watermark_to(end).advance_watermark_to_infinity()
    opts = PipelineOptions(
        ["--pubsub_subscription", "projects/p/subscriptions/s", "--redis_url", redis_url, "--output", output]
    )
    opts.view_as(StandardOptions).streaming = True
    config = job_config_from_options(opts)
    assert config.stories.ordering == "timers"
    with beam.Pipeline(runner=make_runner(opts), options=opts) as p:
        build_pipeline(p, config, source=stream)


# ---- the bundled corpus as landing files ------------------------------------------------------------

CORPUS = os.path.join(REPO_ROOT, "data", "corpus")
HEADLINES = os.path.join(CORPUS, "headlines.jsonl.gz")


# Headlines among the first 600 of the bundled corpus that are an earlier version of a later headline there (same
# host, same numeric id, published within a minute: newsflow.core.revisions.stable_url_id): the job stores each
# with its later version as one article. "edges lower" -> "opens lower", a re-slug, two query strings.
CORPUS_EARLIER_VERSIONS = frozenset(
    {
        "http://www.buenosairesherald.com/article/154063/wall-street-edges-lower-after-sps-record-close",
        "http://www.thenation.com/blog/178761/capitalism-will-prevent-cold-war-over-ukraine-crimea",
        "http://www.huffingtonpost.com/2014/03/10/largest-banana-company_n_4933389.html?utm_hp_ref=food&amp;ir=Food",
    }
)


def corpus_lines(n: int, name: str = "headlines.jsonl.gz") -> list[bytes]:
    """The first ``n`` landing lines (bytes, without newlines) of the bundled corpus file ``name``
    (``data/corpus/headlines.jsonl.gz`` or ``pages.jsonl.gz``)."""
    lines = []
    with gzip.open(os.path.join(CORPUS, name), "rb") as f:
        for ln in f:
            if len(lines) == n:
                break
            lines.append(ln.rstrip(b"\n"))
    return lines


def write_lines(path, lines: list[bytes]) -> str:
    """Writes ``lines`` as a JSONL landing file at ``path``; returns the path as ``str``."""
    with open(path, "wb") as f:
        f.write(b"\n".join(lines) + b"\n")
    return str(path)


def write_headlines(path, n: int) -> str:
    """The first ``n`` bundled headlines as a JSONL landing file at ``path``; returns the path."""
    return write_lines(path, corpus_lines(n))


def write_landing(path, lines: list[bytes]) -> str:
    """Writes ``lines`` to a gzipped landing file at ``path`` (one per line); returns the path."""
    with gzip.open(path, "wb") as f:
        for ln in lines:
            f.write(ln + b"\n")
    return str(path)


def corpus_subset(tmp_path, n_pages=12, n_headlines=400) -> str:
    """A gzipped landing file under ``tmp_path`` with the bundled corpus's first ``n_pages`` pages and
    ``n_headlines`` headlines; returns its path."""
    lines = corpus_lines(n_pages, "pages.jsonl.gz") + corpus_lines(n_headlines)
    return write_landing(tmp_path / "subset.jsonl.gz", lines)


# ---- running the job ---------------------------------------------------------------------------------


def run_job(tmp_path, redis_url: str, landing: str, output: str | None = None):
    """Runs the job in batch (DirectRunner) on the ``landing`` file(s), storing in ``redis_url`` and writing
    Parquet under ``output`` (default ``tmp_path/out``); returns the finished ``PipelineResult``."""
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

    from newsflow.pipelines.launcher import make_runner
    from newsflow.pipelines.streaming import build_pipeline, job_config_from_options

    opts = PipelineOptions(
        [
            "--input",
            landing,
            "--output",
            output or str(tmp_path / "out"),
            "--runner",
            "DirectRunner",
            "--redis_url",
            redis_url,
        ]
    )
    config = job_config_from_options(opts)
    assert config.cluster.redis_url == config.stories.redis_url == config.trending.redis_url == redis_url
    p = beam.Pipeline(runner=make_runner(opts), options=opts)
    build_pipeline(p, config)
    result = p.run()
    result.wait_until_finish()
    return result


# ---- serving -----------------------------------------------------------------------------------------

READERS = ["u-block", "u-interest", "u-follow", "u-plain"]


def add_readers(server) -> None:
    """Four readers active a minute before ``ranking_data.NOW``: u-block blocks a.com and sports,
    u-interest has 25 clicks leaning to axis 1, u-follow follows obituaries in the en edition, u-plain has
    no profile."""
    from newsflow.storage.events import mark_active
    from newsflow.storage.keys import Keys
    from newsflow.storage.ranking import encode_embedding
    from tests.integration.ranking_data import NOW, axis

    server.hset("nf:user:u-block", mapping={"block_sources": '["a.com"]', "block_topics": '["sports"]'})
    server.hset("nf:user:u-interest", mapping={"clicks": "25", "interest": encode_embedding(axis(1) * 3)})
    server.hset("nf:user:u-follow", mapping={"follow_topics": '["obituary"]', "edition": "en"})
    pipe = server.pipeline(transaction=False)
    mark_active(pipe, {u: NOW - 60 for u in READERS}, Keys())
    pipe.execute()


def populate_ranking(server, *, trending=None, breaking=False, readers=False, feeds=True):
    """Flushes ``server`` and fills it with ``ranking_data``'s stories; then, as asked: ``trending``
    ``{story id: count}``, s5 breaking since a minute before ``NOW``, the four ``READERS``, and the feeds built
    at ``NOW``. Returns ``server``."""
    from newsflow.storage.feeds import build_feeds
    from tests.integration.ranking_data import NOW, add_trending, populate

    server.flushall()
    populate(server)
    if trending:
        add_trending(server, trending)
    if breaking:
        set_breaking(server, {"s5": (NOW - 60, NOW + 600)})
    if readers:
        add_readers(server)
    if feeds:
        build_feeds(server, NOW)
    return server


# /v1/top (global) over ranking_data with the front page's trending s5 12 > s3 4 > s1 2 and s5 breaking, by hand:
# score × coverage breadth 1 + .3·ln(1 + velocity): s1 .814354·1.329584 = 1.082752, s3 .573112·1.482831 = .849829,
# s7 .769112, s2 .723870, s5 (λ .5) .389400·1.769485 = .689037, s6 .666736, s4 .491238. MMR (α .7) page 1: s1, s3,
# s7 (a.com's cap of 2 reached: s2, s5 wait), s6, s4; page 2: s2 (.7·.66855) then s5 (.7·.63638)
FRONT_GLOBAL = ["s1", "s3", "s7", "s6", "s4", "s2", "s5"]
# the same without trending and breaking (scores as ranking_data's docstring): page 1 s1, s7, s6, s3, s4; page 2 s2, s5
PLAIN_GLOBAL = ["s1", "s7", "s6", "s3", "s4", "s2", "s5"]


def populated_app(server, snapshot_dir: str, secret: bytes, *, local_cache_seconds: float = 0, front_page=False):
    """The serving app over ``server`` flushed and filled with ``ranking_data``'s stories and feeds at its
    ``NOW`` (the app's clock); with ``front_page``, also trending s5 > s3 > s1 and s5 breaking."""
    from newsflow.serving.app import ServingConfig, create_app
    from tests.integration.ranking_data import NOW

    populate_ranking(server, trending={"s5": 12, "s3": 4, "s1": 2} if front_page else None, breaking=front_page)
    cfg = ServingConfig(
        token_secret=secret,
        snapshot_dir=snapshot_dir,
        local_cache_seconds=local_cache_seconds,
        clock=lambda: NOW,
        password_hasher=cheap_hasher(),
    )
    return create_app(server, cfg)


WIDE_STORY = "big"
WIDE_REPORTS = 300
WIDE_OUTLETS = 60
EXTRA_STORIES = 20


def wide_app(server, snapshot_dir: str, secret: bytes):
    """:func:`populated_app` (``front_page``) plus, before the feeds are built: :data:`EXTRA_STORIES` stories
    ``x00..x19`` (one outlet each, ``xNN.com``, topic ``science``, so a home page has more than 15 cards) and
    story :data:`WIDE_STORY` covered by :data:`WIDE_REPORTS` independent reports (one near-duplicate group each,
    ``c-big-<k>``) from :data:`WIDE_OUTLETS` outlets: report ``k`` is at ``o<k % 60>.com``, authority
    ``0.2 + (k * 37 % 100) / 200``, event time ``NOW - 5 h + 60 k``."""
    from newsflow.serving.app import ServingConfig, create_app
    from newsflow.storage.feeds import build_feeds
    from newsflow.storage.keys import Keys
    from tests.integration.ranking_data import NOW, H, story_fields

    keys = Keys()
    populate_ranking(server, trending={"s5": 12, "s3": 4, "s1": 2}, breaking=True, feeds=False)
    pipe = server.pipeline()
    for i in range(EXTRA_STORIES):
        sid = f"x{i:02d}"
        row = (f"Science note {i}", f"x{i:02d}.com", 0.55, 2.0 + i / 10, ["en"], ["science"], 10 + i)
        pipe.hset(keys.story(sid), mapping=story_fields(sid, *row))
        pipe.zadd(keys.story_active_of(sid), {sid: NOW - row[3] * H + 600})
    big = story_fields(WIDE_STORY, "A storm of reports", "o0.com", 0.8, 5.0, ["en"], ["world"], 40, WIDE_OUTLETS)
    pipe.hset(keys.story(WIDE_STORY), mapping=dict(big, url="https://o0.com/big-0", article_count=WIDE_REPORTS))
    pipe.zadd(keys.story_active_of(WIDE_STORY), {WIDE_STORY: NOW - 5 * H + 600})
    for k in range(WIDE_REPORTS):
        aid, dom, t = f"big-{k}", f"o{k % WIDE_OUTLETS}.com", NOW - 5 * H + 60 * k
        pipe.hset(
            keys.article(aid),
            mapping={
                "title": f"Report {k} on the storm",
                "url": f"https://{dom}/{aid}",
                "source_domain": dom,
                "source_name": dom,
                "event_time": repr(t),
                "cluster_id": f"c-big-{k}",
                "story_id": WIDE_STORY,
                "source_authority": repr(0.2 + (k * 37 % 100) / 200),
                "language": "en",
            },
        )
        pipe.zadd(keys.story_articles(WIDE_STORY), {aid: t})
    pipe.execute()
    build_feeds(server, NOW)
    cfg = ServingConfig(
        token_secret=secret, snapshot_dir=snapshot_dir, clock=lambda: NOW, password_hasher=cheap_hasher()
    )
    return create_app(server, cfg)


def cheap_hasher():
    """argon2id at its cheapest parameters (tests sign in many times; production uses RFC 9106's profile)."""
    from argon2 import PasswordHasher, profiles

    return PasswordHasher.from_parameters(profiles.CHEAPEST)


PASSWORD = "correct horse battery"


def web_form_csrf(client, path: str) -> str:
    """The CSRF value of the form posting to ``path`` on the page at ``path`` (sign-in, registration), else of
    the page's first form (a signed-in page: every form carries the session's token); an httpx client against
    the serving app."""
    import lxml.html

    doc = lxml.html.fromstring(client.get(path).text)
    own = doc.xpath(f"//form[@action='{path}']//input[@name='csrf']/@value")
    return (own or doc.xpath("//form[@method='post']//input[@name='csrf']/@value"))[0]


def register_reader(client, name: str, password: str = PASSWORD, next_path: str = "/"):
    """Registers ``name`` through ``/register`` (the client keeps the session cookie); returns the response."""
    csrf = web_form_csrf(client, "/register")
    return client.post(
        "/register", data={"csrf": csrf, "name": name, "password": password, "password2": password, "next": next_path}
    )


def signin_reader(client, name: str, password: str = PASSWORD, next_path: str = "/"):
    """Signs ``name`` in through ``/signin`` (the client keeps the session cookie); returns the response."""
    csrf = web_form_csrf(client, "/signin")
    return client.post("/signin", data={"csrf": csrf, "name": name, "password": password, "next": next_path})


def personal_token(client, name: str = "api") -> str:
    """A personal API token created on the signed-in client's ``/account`` page (the reader's own way)."""
    import lxml.html

    csrf = web_form_csrf(client, "/account")
    page = client.post("/account/tokens", data={"csrf": csrf, "name": name})
    assert page.status_code == 200, page.text
    return lxml.html.fromstring(page.text).xpath("//input[@id='new-token']/@value")[0]


@contextlib.contextmanager
def populated_site(server, snapshot_dir: str, secret: bytes):
    """An httpx client (no redirects followed) of :func:`populated_app` ``front_page=True`` served on 127.0.0.1."""
    import httpx

    from tests.integration.asgi_server import serve_in_thread

    with serve_in_thread(populated_app(server, snapshot_dir, secret, front_page=True)) as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", follow_redirects=False, timeout=10) as c:
            yield c


def article_record(aid: str, domain: str, cid: str, authority: float, t: float, title: str | None = None):
    """An ``ArticleRecord`` of story ``s1`` (English, ``title <aid>`` unless ``title``) at ``https://<domain>/<aid>``."""
    from newsflow.schemas.article import ArticleRecord

    return ArticleRecord(
        article_id=aid,
        title=title or f"title {aid}",
        url=f"https://{domain}/{aid}",
        source_domain=domain,
        source_name=domain,
        event_time=t,
        cluster_id=cid,
        story_id="s1",
        authority=authority,
        language="en",
    )


@contextlib.contextmanager
def silent_server() -> Iterator[int]:
    """A TCP listener on 127.0.0.1 that accepts connections and never answers (a Redis that hangs);
    yields its port and closes it and every accepted connection on exit."""
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)
    accepted: list[socket.socket] = []

    def accept_forever():
        while True:
            try:
                conn, _ = hole.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=accept_forever, daemon=True).start()
    try:
        yield hole.getsockname()[1]
    finally:
        hole.close()
        for conn in accepted:
            conn.close()


# ---- Redis -------------------------------------------------------------------------------------------


def art(
    aid: str,
    fp: int,
    domain: str = "example.com",
    authority: float = 0.5,
    t: float = 1000.0,
    lang: str = "en",
    title: str | None = None,
) -> Article:
    """A feed-only ``Article`` with id ``aid`` at ``https://{domain}/{aid}`` whose SimHash is ``fp``; its
    publish, fetch and event times are ``t`` (UTC epoch s)."""
    return Article(
        article_id=aid,
        url=f"https://{domain}/{aid}",
        canonical_url=f"https://{domain}/{aid}",
        source_domain=domain,
        source_name=domain,
        title=title or f"title {aid}",
        text="",
        authors=[],
        site_name="",
        publish_time=t,
        fetch_time=t,
        event_time=t,
        language=lang,
        language_confidence=0.9,
        simhash=f"{fp:016x}",
        word_count=0,
        feed_only=True,
        source_authority=authority,
    )


def _band_buckets_as_sets(out: dict, wrap=lambda v: v) -> dict:
    """Replaces each LSH band bucket's two strings (``Keys.lsh_band``/``lsh_band_ids``: entries in arrival order)
    by its sorted ``(id, fingerprint)`` entries under the ids key: a bucket is a set, its byte order is not state."""
    for key in [k for k in out if b":{lsh:" in k and k.endswith(b"}:ids")]:
        fps_key = key[: -len(b"ids")] + b"fps"
        raw_fps, raw_ids = out.pop(fps_key, None), out[key]
        fps = raw_fps[-1] if isinstance(raw_fps, tuple) else raw_fps
        ids = raw_ids[-1] if isinstance(raw_ids, tuple) else raw_ids
        entries = sorted(
            zip(ids.split(b"\n")[:-1], (fps[i : i + 8] for i in range(0, len(fps or b""), 8)), strict=True)
        )
        out[key] = wrap(entries)
    return out


def dump(client) -> dict:
    """Every key with its type and full value, for exact before/after comparisons (band buckets as sets)."""
    out = {}
    for key in sorted(client.keys("*")):
        kind = client.type(key).decode()
        if kind == "hash":
            out[key] = dict(client.hgetall(key))
        elif kind == "set":
            out[key] = sorted(client.smembers(key))
        elif kind == "zset":
            out[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == "string":
            out[key] = client.get(key)
        else:
            out[key] = kind
    return _band_buckets_as_sets(out)


# ---- exact snapshots of a run's output, for "same answer" comparisons -------------------------------

DATASETS = ("articles", "clusters", "deadletters", "trends", "story_assignments")


def redis_state(client) -> dict:
    """Every key with its type and full value (hashes and sets sorted, lists in order, zsets with scores, LSH
    band buckets as sorted entries).

    ``client`` may be a ``RedisCluster``: keys are then listed on every primary.
    """
    out = {}
    if hasattr(client, "get_primaries"):
        all_keys = client.keys("*", target_nodes=client.PRIMARIES)
    else:
        all_keys = client.keys("*")
    for key in sorted(all_keys):
        kind = client.type(key).decode()
        if kind == "hash":
            out[key] = (kind, sorted(client.hgetall(key).items()))
        elif kind == "set":
            out[key] = (kind, sorted(client.smembers(key)))
        elif kind == "zset":
            out[key] = (kind, client.zrange(key, 0, -1, withscores=True))
        elif kind == "list":
            out[key] = (kind, client.lrange(key, 0, -1))
        elif kind == "string":
            out[key] = (kind, client.get(key))
        else:
            out[key] = (kind, client.dump(key))
    return _band_buckets_as_sets(out, lambda v: ("string", v))


def parquet_rows(root: str) -> dict:
    """Dataset name -> sorted list of rows (each a repr of its sorted items); duplicates are kept."""
    out = {}
    for dataset in DATASETS:
        try:
            rows = read_dataset(root, dataset).to_pylist()
        except (FileNotFoundError, OSError, ValueError):
            rows = []
        out[dataset] = sorted(repr(sorted(r.items())) for r in rows)
    return out


def dataset_bytes(root: str, dataset: str = "story_assignments") -> dict[str, bytes]:
    """Relative path -> bytes of every Parquet file of a dataset (for byte-for-byte comparisons of two runs)."""
    from newsflow.storage.parquet import list_files

    out = {}
    for rel in list_files(root, dataset):
        with open(os.path.join(root, dataset, rel), "rb") as f:
            out[rel] = f.read()
    return out


def redis_story_of_every_article(client, prefix: str = "nf") -> dict[str, str]:
    """Article id -> its story as Redis answers it: ``Keys.story_assign`` resolved one merge at a time
    through :meth:`RedisStoryStore.resolve` (the store's own rule, independent of the Parquet writer)."""
    from newsflow.storage.keys import Keys
    from newsflow.storage.stories import RedisStoryStore
    from newsflow.storage.story_index import assignments

    keys = Keys(prefix)
    store = RedisStoryStore(client, keys=keys)
    out = {}
    for aid, sid in assignments(client, keys).items():
        out[aid] = store.resolve(sid)
    return out


def state_difference(a: dict, b: dict, limit: int = 8) -> list[str]:
    """Human-readable differences between two :func:`redis_state` snapshots (at most ``limit``)."""
    diff = []
    for key in sorted(set(a) | set(b)):
        if a.get(key) != b.get(key):
            diff.append(f"{key!r}: {str(a.get(key))[:200]} != {str(b.get(key))[:200]}")
            if len(diff) >= limit:
                break
    return diff


# ---- commands ----------------------------------------------------------------------------------------


def run_env(url: str, data_dir: str) -> dict:
    """This process's environment for a ``newsflow`` command on Redis ``url`` with data under ``data_dir``
    and the key prefix ``nf``."""
    env = dict(os.environ)
    env.update(REDIS_URL=url, NEWSFLOW_DATA_DIR=data_dir, NEWSFLOW_KEY_PREFIX="nf")
    return env


# ---- crawler -----------------------------------------------------------------------------------------


NO_JITTER = ScheduleConfig(jitter=0.0)  # poll times exactly as the adaptive schedule computes them


def utc(text: str) -> float:
    """UTC epoch seconds of ``"2024-10-08 12:00:00"``."""
    return float(calendar.timegm(time.strptime(text, "%Y-%m-%d %H:%M:%S")))


class Clock:
    """Injected UTC clock (epoch s), moved by the test: ``clock.t = ...``."""

    def __init__(self, t: float):
        self.t = t

    def __call__(self) -> float:
        return self.t


def crawler_config(port: int, **overrides):
    """A ``CrawlerConfig`` that sends every host to the test server on 127.0.0.1:``port``, with no delay
    between requests to a host, a 3 s request timeout, 5 s leases and 2 fetch coroutines unless
    ``overrides`` say otherwise."""
    from newsflow.crawler.config import CrawlerConfig

    settings = dict(
        allow_hosts=("127.0.0.1",),
        resolve={"*": f"127.0.0.1:{port}"},
        min_host_delay_s=0.0,
        total_timeout_s=3.0,
        lease_s=5.0,
        concurrency=2,
    )
    settings.update(overrides)
    return CrawlerConfig(**settings)


class Scripted:
    """An ``HttpServer`` handler answering ``(host, path)`` from a list of responses, one per request (the
    last one repeats; a callable answer is called with the request); 404 for any other path. ``seen`` maps
    ``(host, path)`` to ``[(monotonic arrival s, request headers)]``."""

    def __init__(self, script, default=None):
        self.script = script
        self.seen = defaultdict(list)
        self.lock = threading.Lock()

    def __call__(self, req):
        from newsflow.crawler.httpserver import Response

        key = (req.host.split(":")[0], req.path.split("?")[0])
        with self.lock:
            self.seen[key].append((time.monotonic(), req.headers))
            n = len(self.seen[key])
        answers = self.script.get(key)
        if answers is None:
            return Response(404, {"Content-Type": "text/plain"}, b"not here")
        answer = answers[min(n, len(answers)) - 1]
        return answer(req) if callable(answer) else answer


def poll(worker, clock: Clock, at: float, tasks: int = 1, duration_s: float = 3.0):
    """Runs the crawl ``worker`` at UTC time ``at`` (epoch s) until it handled ``tasks`` more tasks or
    ``duration_s`` (wall seconds) passed; returns what ``worker.run`` returns."""
    clock.t = at
    return asyncio.run(worker.run(max_tasks=worker.processed + tasks, duration_s=duration_s))


# ---- GCS ---------------------------------------------------------------------------------------------


@contextlib.contextmanager
def gcs_emulator_on(monkeypatch, bucket: str) -> Iterator[str]:
    """An in-memory GCS emulator on 127.0.0.1 holding ``bucket``, with ``STORAGE_EMULATOR_HOST`` pointing
    at it; yields the bucket name."""
    from gcp_storage_emulator.server import create_server

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=bucket)
    server.start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
    try:
        yield bucket
    finally:
        server.stop()


# ---- the near-duplicate index's keys (newsflow.storage.keys, near-duplicate section) -------------------------

ND_TAGS = (b":{lsh:", b":{art:", b":{uid:", b":{ndg:", b":{ndx:", b":nd:")


def is_nd_key(key: bytes) -> bool:
    """Whether ``key`` belongs to the near-duplicate index (band buckets, articles, stable-id sets, groups, group
    indexes, lease)."""
    return any(t in key for t in ND_TAGS)


def is_story_key(key: bytes, prefix: str = "nf") -> bool:
    """Whether ``key`` is a story key (per-story keys, assignment buckets, index shards; not the writer lease)."""
    from newsflow.storage.keys import Keys

    return key.startswith(tuple(p.rstrip("*").encode() for p in Keys(prefix).story_patterns))


def _scan(client, pattern: str) -> list[bytes]:
    if hasattr(client, "get_primaries"):
        return list(client.keys(pattern, target_nodes=client.PRIMARIES))
    return list(client.scan_iter(match=pattern, count=1000))


def nd_articles(client, keys) -> dict[str, str]:
    """Stored article id -> its near-duplicate group id, from every article serving hash with a ``cluster_id``."""
    out = {}
    for key in _scan(client, keys.article("*")):
        cid = client.hget(key, "cluster_id")
        if cid:
            out[key.decode()[len(keys.article("")) - len("}:article") : -len("}:article")]] = cid.decode()
    return out


def nd_revisions(client, keys) -> dict[str, str]:
    """Version id -> the article id it is stored under, for every version that is a revision of another."""
    out = {}
    for key in _scan(client, keys.article_record("*")):
        rev = client.hget(key, "rev")
        if rev:
            out[key.decode()[len(keys.article_record("")) - len("}:nd") : -len("}:nd")]] = rev.decode()
    return out


def expected_rewinds(batch_times: list[list[float]], checkpoint_s: float) -> list[int]:
    """Logged articles each continuous run re-clusters (``stories_reclustered``), from the rule of
    :mod:`newsflow.transforms.stories_continuous`: checkpoints at the start of the log and at the start of
    every ``checkpoint_s`` bucket holding a logged article; a run whose earliest article comes after every
    logged one appends, any other rewinds to the latest checkpoint at or before its earliest article and
    re-clusters every logged article from there on. ``batch_times``: the event times of each run's articles
    (all within the late bound), in arrival order."""
    out: list[int] = []
    logged: list[float] = []
    for times in batch_times:
        e = min(times)
        if not logged or e > max(logged):
            out.append(0)
            logged += times
            continue
        starts = [math.floor(t / checkpoint_s) * checkpoint_s for t in logged]
        boundary = max([-math.inf, *(s for s in starts if s <= e)])
        out.append(sum(1 for t in logged if t >= boundary))
        logged += times
    return out


def set_breaking(client, stories: dict, keys=None) -> None:
    """Makes stories breaking as the trending sink leaves them: ``{story_id: (since, expiry)}`` (UTC epoch s)
    becomes one breaking window ending at ``since`` (replacing the story's windows) and the expiry in the
    breaking set, so :meth:`RankingStore.breaking` answers ``since`` while ``expiry`` is ahead."""
    from newsflow.storage.keys import Keys

    keys = keys or Keys()
    pipe = client.pipeline(transaction=False)
    for sid, (since, expiry) in stories.items():
        pipe.delete(keys.breaking_windows(sid))
        pipe.zadd(keys.breaking_windows(sid), {repr(float(since)): float(since)})
        pipe.zadd(keys.breaking, {sid: float(expiry)})
    pipe.execute()


def personal_page_bytes(user: str, edition: str, generated_at: float, ranked: list, limit: int) -> bytes:
    """The ``/v1/feed`` body of a first page worked out independently: ``ranked`` is ``rerank``'s answer for one
    story more than ``limit`` (whether a next page exists; its cursor names the page's last story)."""
    from newsflow.serving.http_cache import json_bytes
    from newsflow.serving.paging import encode_cursor

    items = ranked[:limit]
    nxt = encode_cursor(len(items), items[-1]["story_id"]) if len(ranked) > limit else None
    body = {"user": user, "edition": edition, "generated_at": generated_at, "stale": False, "count": len(items)}
    return json_bytes(dict(body, stories=items, next_cursor=nxt))


def single_server_state(redis_server, landing: str, out) -> dict:
    """:func:`redis_state` of one Redis server after the streaming job (DirectRunner) ran over ``landing`` on it,
    Parquet under ``out``: the reference a cluster run is compared with."""
    from newsflow.pipelines.streaming import run

    single, url = redis_server
    argv = ["--runner", "DirectRunner", "--input", landing, "--redis_url", url, "--output", str(out)]
    assert run(argv, environ={}).state == "DONE"
    return redis_state(single)
