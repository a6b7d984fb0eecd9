"""read_capped stops reading at the cap: a streamed body larger than the cap is refused after at most
one chunk past it, a declared Content-Length larger than the cap before reading anything."""

import asyncio

import pytest

from newsflow.serving.http_body import BodyTooLarge, read_capped


class FakeRequest:
    def __init__(self, chunks, headers=None):
        self.headers = headers or {}
        self.read = 0
        self._chunks = chunks

    async def stream(self):
        for c in self._chunks:
            self.read += 1
            yield c


def test_a_body_within_the_cap_is_returned_whole():
    req = FakeRequest([b"ab", b"cd"])
    assert asyncio.run(read_capped(req, 4)) == b"abcd" and req.read == 2


def test_a_streamed_body_past_the_cap_stops_at_the_first_chunk_over_it():
    req = FakeRequest([b"x" * 1000] * 10_000)
    with pytest.raises(BodyTooLarge) as e:
        asyncio.run(read_capped(req, 2500))
    assert req.read == 3 and e.value.size == 3000


def test_a_declared_length_past_the_cap_reads_nothing():
    req = FakeRequest([b"x"] * 10, headers={"content-length": "500000000"})
    with pytest.raises(BodyTooLarge):
        asyncio.run(read_capped(req, 1024))
    assert req.read == 0
