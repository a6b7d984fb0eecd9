"""newsflow.crawler.canonical (the incremental canonical-URL read) returns what newsflow.core.extraction returns."""

import os

import pytest

from newsflow.core.extraction import page_canonical_url
from newsflow.crawler.canonical import FIRST_STEP_CHARS, STEP_CHARS, page_declared_canonical
from newsflow.crawler.replay import load_corpus

CORPUS = os.path.join(os.path.dirname(__file__), "..", "..", "data", "corpus")
FILLER = "<p>" + "filler text " * 40 + "</p>"


def page(head: str, body: str = "<p>x</p>") -> bytes:
    return f"<!doctype html><html><head>{head}</head><body>{body}</body></html>".encode()


def straddling(boundary: int) -> bytes:
    """A page whose canonical link tag starts 10 characters before a parser step boundary (cut inside the tag)."""
    head = "<!doctype html><html><head><title>t</title>"
    pad = "<!--" + "x" * (boundary - 10 - len(head) - 7) + "-->"
    text = head + pad + '<link rel="canonical" href="https://a.test/cut"></head><body>x</body></html>'
    assert text.index("<link") == boundary - 10
    return text.encode()


CASES = [
    # (body, content type, the declared URL read by hand)
    (page('<link rel="canonical" href="https://a.test/x">'), "text/html", "https://a.test/x"),
    # og:url first, canonical link later: the link wins
    (
        page('<meta property="og:url" content="https://a.test/og"><link rel="Canonical" href="https://a.test/c">'),
        "text/html",
        "https://a.test/c",
    ),
    (page('<meta name="og:url" content=" https://a.test/og ">'), "text/html", "https://a.test/og"),
    # the canonical link far beyond the first parser step (in the body)
    (page("", FILLER * (3 * STEP_CHARS // len(FILLER)) + '<link rel="canonical" href="/late">'), "", "/late"),
    # the link tag cut by the first step boundary, and by the second (steps double)
    (straddling(FIRST_STEP_CHARS), "", "https://a.test/cut"),
    (straddling(3 * FIRST_STEP_CHARS), "", "https://a.test/cut"),
    # an empty href does not count; the next canonical link does
    (
        page('<link rel="canonical" href=""><link rel="alternate canonical" href="https://a.test/2">'),
        "",
        "https://a.test/2",
    ),
    (page('<link rel="alternate" href="https://a.test/amp">'), "text/html", ""),
    (b"", "text/html", ""),
    (b"   \n ", "text/html", ""),
    # lxml refuses str input with an XML encoding declaration: nothing readable, both ways
    (b'<?xml version="1.0" encoding="utf-8"?><html><head><link rel="canonical" href="/x"></head></html>', "", ""),
    # a declared legacy charset is decoded before parsing
    (
        '<html><head><meta charset="iso-8859-1"><link rel="canonical" href="https://a.test/caf\xe9"></head></html>'.encode(
            "latin-1"
        ),
        "text/html; charset=iso-8859-1",
        "https://a.test/caf\xe9",
    ),
]


@pytest.mark.parametrize("body,ctype,expected", CASES)
def test_crafted_pages(body, ctype, expected):
    assert page_declared_canonical(body, ctype) == expected
    assert page_canonical_url(body, ctype) == expected  # the full-tree reference agrees


def test_same_as_the_full_tree_read_on_the_bundled_pages():
    docs = [d for d in load_corpus(CORPUS) if d.body]
    assert len(docs) > 200
    got = [page_declared_canonical(d.body, d.content_type or "") for d in docs]
    want = [page_canonical_url(d.body, d.content_type or "") for d in docs]
    assert got == want
    assert sum(1 for w in want if w) > len(docs) // 2  # most pages declare one: the comparison is not vacuous
