"""Bounded Content-Encoding decoding (newsflow.crawler.inflate): every coding, fed whole or byte by byte."""

import gzip
import os
import tracemalloc
import zlib

import pytest

from newsflow.crawler.inflate import BodyTooLarge, BoundedDecoder, CorruptEncoding, UnsupportedEncoding, content_codings

DATA = os.urandom(1000) + b"a" * 300_000 + os.urandom(5000)


def decode(encoding, blob, limit=10**7, step=None):
    d = BoundedDecoder(encoding, limit)
    for i in range(0, len(blob), step or len(blob) or 1):
        d.feed(blob[i : i + (step or len(blob))])
    return d.finish()


def raw_deflate(data):
    c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


@pytest.mark.parametrize("step", [None, 1, 7, 4096])
def test_codings_round_trip_in_any_piece_size(step):
    assert decode("gzip", gzip.compress(DATA), step=step) == DATA
    assert decode("x-gzip", gzip.compress(DATA) + gzip.compress(b"tail"), step=step) == DATA + b"tail"
    assert decode("gzip", gzip.compress(DATA) + b"\0\0 trailing junk", step=step) == DATA
    assert decode("deflate", zlib.compress(DATA), step=step) == DATA
    assert decode("deflate", raw_deflate(DATA), step=step) == DATA
    assert decode("deflate, gzip", gzip.compress(zlib.compress(DATA)), step=step) == DATA
    assert decode("", DATA, step=step) == DATA
    assert decode("identity, something-odd", DATA, step=step) == DATA
    zstandard = pytest.importorskip("zstandard")
    assert decode("zstd", zstandard.ZstdCompressor().compress(DATA), step=step) == DATA


def test_limit_is_exact_and_bombs_stop_early():
    blob = gzip.compress(DATA)
    assert decode("gzip", blob, limit=len(DATA)) == DATA
    with pytest.raises(BodyTooLarge):
        decode("gzip", blob, limit=len(DATA) - 1)
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024))  # 64 MiB inflated
    double = gzip.compress(bomb)
    tracemalloc.start()
    try:
        for enc, blob in (("gzip", bomb), ("gzip, gzip", double)):
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            with pytest.raises(BodyTooLarge):
                decode(enc, blob, limit=1024 * 1024)
            assert tracemalloc.get_traced_memory()[1] - base < 2 * 1024 * 1024, enc
    finally:
        tracemalloc.stop()


def test_zstd_bomb_and_window_limit():
    zstandard = pytest.importorskip("zstandard")
    bomb = zstandard.ZstdCompressor().compress(b"\0" * (64 * 1024 * 1024))
    with pytest.raises(BodyTooLarge):
        decode("zstd", bomb, limit=1024 * 1024)
    wide = zstandard.ZstdCompressor(compression_params=zstandard.ZstdCompressionParameters(window_log=27))
    with pytest.raises(CorruptEncoding):
        decode("zstd", wide.compress(os.urandom(1 << 20) * 20))  # declares a 128 MiB window


def test_truncated_corrupt_and_unsupported():
    blob = gzip.compress(DATA)
    part = decode("gzip", blob[: len(blob) // 2])
    assert 0 < len(part) < len(DATA) and DATA.startswith(part)
    with pytest.raises(CorruptEncoding):
        decode("gzip", b"\x1f\x8b" + b"x" * 40)
    for enc in ("br", "compress", "gzip, br"):
        with pytest.raises(UnsupportedEncoding):
            BoundedDecoder(enc, 10)
    assert content_codings(" gzip , Identity,, X-Zstd") == ["gzip", "x-zstd"]
