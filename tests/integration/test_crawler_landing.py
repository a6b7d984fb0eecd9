"""Landing files: atomic local commit and gs:// through gcp-storage-emulator."""

import gzip
import json
import os
import socket
import time

import pytest

from newsflow.crawler.landing import LandingWriter, read_landing_file
from newsflow.schemas import RawDocument

DOCS = [
    RawDocument(
        url=f"http://n.example/{i}",
        source_domain="n.example",
        fetch_time=1394470501.0 + i,
        http_status=200,
        content_type="text/html",
        body=f"<p>caf\u00e9 {i}</p>".encode(),
    )
    for i in range(3)
]
FEED_ONLY = RawDocument(
    url="http://n.example/f",
    source_domain="n.example",
    fetch_time=1.0,
    title="S\u00e3o Paulo",
    feed_url="http://n.example/feed.xml",
)


def test_local_landing_batches_atomically(tmp_path):
    t = [100.0]
    w = LandingWriter(str(tmp_path), max_docs=2, max_age_s=5.0, worker_id="w1", clock=lambda: t[0])
    w.publish(DOCS[:2])  # reaches max_docs: committed at once
    names = sorted(os.listdir(tmp_path))
    assert names == ["raw-0000000100000-w1-000001.jsonl.gz"]
    w.publish([DOCS[2], FEED_ONLY])
    w.publish([])
    t[0] = 106.0
    assert w.maybe_flush() == []  # the second batch also reached max_docs and was committed already
    assert sorted(os.listdir(tmp_path))[-1].endswith("-000002.jsonl.gz")
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".")]  # no temp files left
    got = []
    for n in sorted(os.listdir(tmp_path)):
        got += read_landing_file(str(tmp_path / n))
    assert got == DOCS + [FEED_ONLY]
    with gzip.open(tmp_path / sorted(os.listdir(tmp_path))[1], "rt", encoding="utf-8") as f:
        line = f.readlines()[1]
    assert "S\u00e3o Paulo" in line and json.loads(line)["body_b64"] is None  # ensure_ascii=False


def test_age_based_flush_and_plain_jsonl(tmp_path):
    t = [0.0]
    w = LandingWriter(str(tmp_path), compress=False, max_docs=100, max_age_s=2.0, worker_id="w", clock=lambda: t[0])
    w.publish([DOCS[0]])
    t[0] = 1.0
    assert w.maybe_flush() == [] and os.listdir(tmp_path) == []
    t[0] = 2.5
    (path,) = w.maybe_flush()
    assert path.endswith(".jsonl") and read_landing_file(path) == [DOCS[0]]
    with pytest.raises(TypeError):
        w.publish([{"url": "x"}])


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_gcs_landing_against_emulator(monkeypatch):
    emulator = pytest.importorskip("gcp_storage_emulator.server")
    storage = pytest.importorskip("google.cloud.storage")
    from google.auth.credentials import AnonymousCredentials

    port = _free_port()
    server = emulator.create_server("127.0.0.1", port, in_memory=True, default_bucket="landing")
    server.start()
    try:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{port}")
        client = storage.Client(project="test", credentials=AnonymousCredentials())
        w = LandingWriter("gs://landing/raw/", max_docs=10, worker_id="g1", gcs_client=client, clock=lambda: 50.0)
        w.publish(DOCS)
        (name,) = w.flush()
        assert name == "gs://landing/raw/raw-0000000050000-g1-000001.jsonl.gz"
        blobs = [b.name for b in client.list_blobs("landing")]
        assert blobs == ["raw/raw-0000000050000-g1-000001.jsonl.gz"]  # no temp objects
        data = gzip.decompress(client.bucket("landing").blob(blobs[0]).download_as_bytes()).decode("utf-8")
        assert [RawDocument.from_json_dict(json.loads(x)) for x in data.splitlines()] == DOCS
        # (gcp-storage-emulator does not enforce if_generation_match, so the create-only
        # precondition itself is not exercised here)
    finally:
        server.stop()


def test_encode_record_is_json_dumps_of_the_dict_byte_for_byte():
    from newsflow.crawler.landing import encode_record

    odd = RawDocument(
        url='http://n.example/q?a="b"&c=\u00e9',
        source_domain="n.example",
        fetch_time=2.5,
        title='Quote " and \\ back\nslash \u2028',
        body=bytes(range(256)) * 3,  # base64 with "+" and "/"
    )
    for doc in [*DOCS, FEED_ONLY, odd]:
        want = json.dumps(doc.to_json_dict(), ensure_ascii=False).encode("utf-8")
        assert encode_record(doc) == want
        assert RawDocument.from_json_dict(json.loads(encode_record(doc))) == doc


def test_streamed_batches_read_back_and_flush_due(tmp_path):
    t = [10.0]
    w = LandingWriter(str(tmp_path), max_docs=100, max_age_s=5.0, worker_id="s1", clock=lambda: t[0])
    assert not w.flush_due()
    for d in [*DOCS, FEED_ONLY]:  # compressed one publish at a time into one gzip member
        w.publish([d])
    assert os.listdir(tmp_path) == []
    t[0] = 14.9
    assert not w.flush_due()
    t[0] = 15.0
    assert w.flush_due()
    (path,) = w.maybe_flush()
    assert read_landing_file(path) == [*DOCS, FEED_ONLY]
    with gzip.open(path, "rb") as f:  # plain gzip: one JSON record per line
        assert [json.loads(line)["url"] for line in f] == [d.url for d in [*DOCS, FEED_ONLY]]
    assert not w.flush_due() and w.flush() == []
    with pytest.raises(TypeError):
        w.publish([DOCS[0], "not a document"])
    assert w.flush() == []  # nothing of the refused call was buffered


def test_flush_due_does_not_wait_for_a_publish_in_progress(tmp_path):
    """The worker's event loop asks every turn; a publish compressing in another thread holds the buffer's lock,
    and the loop must not block on it, nor be told "not due" for as long as publishing goes on (a tester found
    a try-lock never free under steady publishing: no age flush in 5 s). ``maybe_flush`` reads under the lock."""
    import threading

    t = [10.0]
    w = LandingWriter(str(tmp_path), max_docs=10**9, max_age_s=5.0, worker_id="s2", clock=lambda: t[0])
    w.publish([DOCS[0]])
    t[0] = 20.0
    held, release = threading.Event(), threading.Event()

    def hold():
        with w._lock:  # as publish does while it compresses
            held.set()
            release.wait(5)

    th = threading.Thread(target=hold)
    th.start()
    held.wait(5)
    t0 = time.monotonic()
    assert w.flush_due() is True and time.monotonic() - t0 < 0.5  # answered at once, and right
    threading.Timer(0.2, release.set).start()
    t0 = time.monotonic()
    assert w.flush_due(wait=True) is True and time.monotonic() - t0 >= 0.15  # after the holder let go
    th.join(5)
    (path,) = w.maybe_flush()
    assert read_landing_file(path) == [DOCS[0]]
    # steady publishing from another thread: the loop's question still finds the batch due
    stop, published = threading.Event(), []

    def publish_forever():
        while not stop.is_set():
            w.publish([DOCS[1]])
            published.append(1)

    pub = threading.Thread(target=publish_forever)
    pub.start()
    try:
        while not published:
            time.sleep(0.001)
        t[0] = 30.0  # the open batch is now 10 s old
        answers = []
        for _ in range(50):
            answers.append(w.flush_due())
            time.sleep(0.002)
        assert sum(answers) >= 45
    finally:
        stop.set()
        pub.join(5)
    w.flush()


def test_gzip_level_is_honoured_and_the_records_are_the_same(tmp_path):
    """Every level's file holds the same records (read back by Python's gzip, i.e. zlib); levels 1-3
    come from ISA-L's igzip (gzip header OS byte 255, "unknown"), 4-9 from zlib (OS byte 3, Unix; XFL 2
    = maximum compression at level 9, RFC 1952); level 9 is smaller than level 1 on repetitive pages."""
    import argparse

    from newsflow.crawler.landing import GZIP_LEVEL, encode_batch
    from newsflow.crawler.sinks import add_sink_arguments, build_sink

    pages = [
        RawDocument(
            url=f"http://n.example/p{i}",
            source_domain="n.example",
            fetch_time=1394470501.0 + i,
            http_status=200,
            content_type="text/html",
            body=("<div class='story'>" + " ".join(f"word{j % 97}" for j in range(3000)) + "</div>").encode(),
        )
        for i in range(20)
    ]
    header = {}
    size = {}
    for level in (1, 2, 3, 4, 6, 9):
        w = LandingWriter(str(tmp_path / f"l{level}"), max_docs=10**6, worker_id="z", gzip_level=level)
        w.publish(pages[:7])
        w.publish(pages[7:])  # two compress calls into one member
        (path,) = w.flush()
        assert read_landing_file(path) == pages
        raw = open(path, "rb").read()
        header[level], size[level] = (raw[8], raw[9]), len(raw)
        with gzip.open(path, "rb") as f:
            assert f.read() == encode_batch(pages, compress=False)
        assert gzip.decompress(encode_batch(pages, compress=True, gzip_level=level)) == f_bytes(pages)
    assert GZIP_LEVEL == 1
    assert {lv: os_byte for lv, (_, os_byte) in header.items()} == {1: 255, 2: 255, 3: 255, 4: 3, 6: 3, 9: 3}
    assert header[9][0] == 2
    assert size[9] < size[1]
    for bad in (0, 10, True, 1.5):
        with pytest.raises(ValueError, match="gzip level"):
            LandingWriter(str(tmp_path / "bad"), gzip_level=bad)
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-gzip", action="store_true")
    add_sink_arguments(parser)
    sink, _ = build_sink(parser.parse_args(["--gzip-level", "9"]), str(tmp_path / "cli"))
    assert sink.gzip_level == 9
    assert build_sink(parser.parse_args([]), str(tmp_path / "cli"))[0].gzip_level == GZIP_LEVEL
    with pytest.raises(SystemExit):
        parser.parse_args(["--gzip-level", "0"])


def f_bytes(docs) -> bytes:
    """The uncompressed JSONL of ``docs``, one json.dumps of each dict per line (independent of encode_record)."""
    return b"".join(json.dumps(d.to_json_dict(), ensure_ascii=False).encode("utf-8") + b"\n" for d in docs)
