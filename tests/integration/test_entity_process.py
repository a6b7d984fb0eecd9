"""newsflow.runtime.entity_process: spaCy NER in a child process equals NER in this process; a dead child fails
its futures (callers fall back) and the shared child is replaced."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from newsflow.core.entities import EntityExtractor
from newsflow.runtime.entity_process import EntityProcess, EntityProcessError, close_shared_entity_processes
from newsflow.runtime.entity_process import shared_entity_process as shared

DOCS = [
    ("Apple unveils new iPhone in California", "Tim Cook told reporters in Cupertino that Apple " * 40),
    ("Merkel viaja a Estados Unidos", "La canciller Angela Merkel se reunió con Joe Biden en Washington."),
    ("Macron reçoit Olaf Scholz à Paris", "Le président Emmanuel Macron a reçu le chancelier allemand."),
    ("Die EZB erhöht die Zinsen", "Christine Lagarde sagte in Frankfurt, die Inflation sei zu hoch."),
    ("東京で会議", "日本の首相が発表した。"),
    ("", ""),
    ("NATO summit opens in Vilnius", ""),
]
LANGS = ["en", "es", "fr", "de", "ja", "en", "en"]


def test_child_answers_equal_in_process_extraction_in_order():
    ex = EntityExtractor(lead_chars=200)
    ep = EntityProcess(200)
    try:
        batches = [(DOCS[i:] + DOCS[:i], LANGS[i:] + LANGS[:i]) for i in range(len(DOCS))]
        results: dict[int, tuple] = {}

        def submit(ids):  # two threads submitting at once: each future still gets its own batch's answer
            for i in ids:
                results[i] = ep.submit(*batches[i])

        threads = [threading.Thread(target=submit, args=(range(k, len(batches), 2),)) for k in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, (pairs, langs) in enumerate(batches):
            before = sum(ex.skipped.values())
            want = ex.extract_many(pairs, langs)
            got, skipped = results[i].result(timeout=120)
            assert got == want
            assert skipped == {"ja": 1} and sum(ex.skipped.values()) - before == 1
        first = results[0].result()[0]
        assert {e.key for e in first[0]} >= {"ORG:apple", "PERSON:tim cook"}  # the long text is cut at lead_chars
        assert "LOC:germany" not in {e.key for e in first[1]} and first[5] == []
        with pytest.raises(ValueError, match="languages"):
            ep.submit(DOCS, LANGS[:2])
    finally:
        ep.close()


def test_a_dead_child_fails_pending_and_later_futures_and_the_shared_child_is_replaced():
    close_shared_entity_processes()
    ep = shared(1000)
    assert shared(1000) is ep
    assert ep.submit(DOCS[:1], ["en"]).result(timeout=120)[0][0]  # warm: models loaded, answers flowing
    pending = [ep.submit(DOCS, LANGS) for _ in range(3)]
    os.kill(ep.pid, signal.SIGKILL)
    for f in pending:  # each answered before the kill, or failed: never hung, never another batch's answer
        try:
            got, _ = f.result(timeout=60)
            assert got == EntityExtractor(1000).extract_many(DOCS, LANGS)
        except EntityProcessError:
            pass
    ep._reader.join(10)
    assert ep.failed
    with pytest.raises(EntityProcessError):
        ep.submit(DOCS[:1], ["en"]).result(timeout=5)
    fresh = shared(1000)
    assert fresh is not ep and fresh.submit(DOCS[:1], ["en"]).result(timeout=120)[0] == EntityExtractor(
        1000
    ).extract_many(DOCS[:1], ["en"])
    close_shared_entity_processes()
    assert fresh.failed and fresh._proc.poll() is not None  # stopped and waited for


def test_stop_words_are_spacys_lists_read_without_importing_spacy():
    import importlib
    import subprocess
    import sys

    from newsflow.core.multilingual import LANGUAGES, fold, stop_words

    for language in LANGUAGES:
        want = frozenset(fold(w) for w in importlib.import_module(f"spacy.lang.{language}.stop_words").STOP_WORDS)
        assert stop_words(language) == want and len(want) > 300
    assert stop_words("ja") == frozenset()
    code = (
        "import sys; from newsflow.core.multilingual import LANGUAGES, stop_words; "
        "print(sum(len(stop_words(x)) for x in LANGUAGES), sorted(m for m in sys.modules if m.startswith('spacy')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=os.getcwd())
    total = sum(len(stop_words(x)) for x in LANGUAGES)
    assert out.stdout.split(maxsplit=1) == [str(total), "[]\n"]


def test_a_stopped_child_never_blocks_submit_and_close_kills_it():
    """A child that stops reading (SIGSTOP: hung, swapping) leaves submit non-blocking even past the
    pipe buffer (64 KiB), its futures time out for the caller, and close() kills and reaps it."""
    ep = EntityProcess(1000)
    assert ep.submit(DOCS[:1], ["en"]).result(timeout=120)[0][0]
    os.kill(ep.pid, signal.SIGSTOP)
    big = [("Berlin talks " + str(i), "x y z Berlin " * 80) for i in range(64)]  # ~70 KB pickled per batch
    futures = []
    t = threading.Thread(target=lambda: futures.extend(ep.submit(big, ["de"] * 64) for _ in range(8)))
    t.start()
    t.join(30)
    assert not t.is_alive() and len(futures) == 8  # 8 x ~70 KB queued without blocking
    with pytest.raises(TimeoutError):
        futures[0].result(timeout=1)
    closer = threading.Thread(target=ep.close)
    closer.start()
    closer.join(60)
    assert not closer.is_alive() and ep._proc.poll() is not None  # killed and reaped while stopped
    for f in futures:
        with pytest.raises(EntityProcessError):
            f.result(timeout=10)
    with pytest.raises(EntityProcessError):
        ep.submit(DOCS[:1], ["en"]).result(timeout=5)


def test_a_title_longer_than_spacys_limit_is_cut_not_fatal():
    """spaCy refuses texts over 1,000,000 characters; a title is cut at MAX_TITLE_CHARS (as Articles
    are) in this process and in the child, so the batch is not lost."""
    from newsflow.core.articles import MAX_TITLE_CHARS

    huge = "Barack Obama visits Paris " * 60000  # 1.56M characters
    pairs, langs = [(huge, "Angela Merkel spoke in Berlin."), DOCS[0]], ["en", "en"]
    want = EntityExtractor(1000).extract_many([(huge[:MAX_TITLE_CHARS], pairs[0][1]), DOCS[0]], langs)
    assert EntityExtractor(1000).extract_many(pairs, langs) == want
    assert {"PERSON:barack obama", "PERSON:angela merkel"} <= {e.key for e in want[0]}
    ep = EntityProcess(1000)
    try:
        assert ep.submit(pairs, langs).result(timeout=120)[0] == want
    finally:
        ep.close()
