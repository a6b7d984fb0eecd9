"""The robots.txt parsing limit (RFC 9309 section 2.5): the prefix rule and the decoder's prefix mode."""

import gzip
import zlib

import pytest

from newsflow.crawler.inflate import BodyTooLarge, BoundedDecoder
from newsflow.crawler.robots import ROBOTS_MAX_BYTES, RobotsMatcher, parse_prefix


def test_a_body_within_the_limit_is_parsed_whole():
    body = b"User-agent: *\nDisallow: /private"  # last line without an end of line: still whole
    assert parse_prefix(body, limit=len(body)) == body
    assert parse_prefix(b"", truncated=False) == b""


def test_the_line_cut_by_the_limit_is_dropped():
    body = b"User-agent: *\nDisallow: /kept\nDisallow: /news-archive\n"
    cut_at = body.index(b"/news-archive") + len(b"/ne")  # the limit falls inside the third line
    # kept: the first two lines with their end of line (14 + 16 = 30 bytes)
    assert parse_prefix(body, limit=cut_at) == b"User-agent: *\nDisallow: /kept\n"
    # a fetch that kept only the prefix says so; the same rule applies to the prefix alone
    assert parse_prefix(body[:cut_at], truncated=True, limit=cut_at) == b"User-agent: *\nDisallow: /kept\n"
    # without the rule, "Disallow: /ne" would refuse /news/x; with it, /news/x is allowed
    assert not RobotsMatcher(body[:cut_at]).allowed("http://h/news/x", "newsflow-crawler")
    kept = parse_prefix(body[:cut_at], truncated=True, limit=cut_at)
    assert RobotsMatcher(kept).allowed("http://h/news/x", "newsflow-crawler")
    assert not RobotsMatcher(kept).allowed("http://h/kept/y", "newsflow-crawler")


def test_a_limit_right_after_an_end_of_line_keeps_every_line():
    body = b"User-agent: *\nDisallow: /a\nDisallow: /b\n"
    limit = len(b"User-agent: *\nDisallow: /a\n")  # 27: the prefix ends with the second line's LF
    assert parse_prefix(body, limit=limit) == b"User-agent: *\nDisallow: /a\n"
    # a truncated prefix that ends with CR (of a CRLF) ends a line too
    assert parse_prefix(b"Disallow: /a\r\nDisallow: /b", truncated=True, limit=13) == b"Disallow: /a\r"
    # CR alone ends a line (RFC 9309 2.2 EOL)
    assert parse_prefix(b"Disallow: /a\rDisallow: /bcd", truncated=True, limit=20) == b"Disallow: /a\r"


def test_a_prefix_without_an_end_of_line_leaves_nothing():
    assert parse_prefix(b"Disallow: /private", truncated=True, limit=12) == b""
    assert parse_prefix(b"x" * (ROBOTS_MAX_BYTES + 1)) == b""
    assert RobotsMatcher(b"").allowed("http://h/private", "newsflow-crawler")


def test_the_default_limit_is_the_rfc_minimum():
    assert ROBOTS_MAX_BYTES >= 500 * 1024  # RFC 9309 2.5: the parsing limit MUST be at least 500 KiB


@pytest.mark.parametrize("encoding", ["", "gzip"])
def test_the_decoder_keeps_the_first_limit_bytes_in_prefix_mode(encoding):
    data = bytes(range(256)) * 1200  # 307,200 bytes, not one repeated byte: a wrong offset shows
    raw = gzip.compress(data) if encoding else data
    d = BoundedDecoder(encoding, 100_000, keep_prefix=True)
    for i in range(0, len(raw), 7_000):  # as it arrives from the network, in pieces
        d.feed(raw[i : i + 7_000])
    assert d.truncated and d.size == 100_000
    assert d.finish() == data[:100_000]


def test_prefix_mode_is_not_truncated_at_exactly_the_limit_and_plain_mode_still_refuses():
    data = b"a" * 1000
    d = BoundedDecoder("gzip", 1000, keep_prefix=True)
    d.feed(gzip.compress(data))
    assert not d.truncated and d.finish() == data
    d = BoundedDecoder("gzip", 999)
    with pytest.raises(BodyTooLarge):
        d.feed(gzip.compress(data))


def test_prefix_mode_stops_inflating_a_bomb():
    bomb = gzip.compress(b"\0" * 50_000_000)  # about 50 KB of gzip
    d = BoundedDecoder("gzip", 64 * 1024, keep_prefix=True)
    d.feed(bomb)
    d.feed(bomb)  # ignored once truncated
    assert d.truncated and d.size == 64 * 1024
    assert d.finish() == b"\0" * (64 * 1024)


ROBOTS_SMALL = b"User-agent: *\nDisallow: /\nAllow: /public-only-this\n"


@pytest.mark.parametrize(
    ("encoding", "raw", "complete"),
    [
        ("gzip", gzip.compress(ROBOTS_SMALL), True),
        ("gzip", gzip.compress(ROBOTS_SMALL) * 2, True),  # two members, both ended
        ("gzip", gzip.compress(ROBOTS_SMALL)[:-8], False),  # no CRC/size trailer
        ("gzip", gzip.compress(ROBOTS_SMALL)[:20], False),  # stopped inside the deflate data
        ("gzip", gzip.compress(ROBOTS_SMALL)[:1], False),  # half a signature
        ("gzip", b"", True),  # an empty body: nothing to inflate
        ("deflate", zlib.compress(ROBOTS_SMALL), True),
        ("deflate", zlib.compress(ROBOTS_SMALL)[:-3], False),  # no Adler-32
        ("", ROBOTS_SMALL[:30], True),  # no compressing coding: the length is HTTP's business
    ],
)
def test_the_decoder_says_whether_each_compressed_stream_reached_its_end(encoding, raw, complete):
    d = BoundedDecoder(encoding, 10_000, keep_prefix=True)
    d.feed(raw)
    assert d.complete is complete
