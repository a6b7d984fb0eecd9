"""Bounded ``Content-Encoding`` decoding: a response body is inflated step by step, never past a byte cap.

A decompression bomb (1 GiB of spaces gzipped to about 1 MB) must be refused
without ever holding more than the cap in memory. :class:`BoundedDecoder`
therefore takes the body as it arrives from the network (still encoded) and
inflates it in steps of at most :data:`STEP_BYTES` (64 KiB) of output: zlib's
``decompressobj.decompress(data, max_length)`` stops after ``max_length``
bytes and keeps the rest of its input in ``unconsumed_tail``, which is fed
again until it is empty. Each step's output goes to the next decoder of the
chain (codings are undone in the reverse of the order they were listed, RFC
9110 section 8.4) and finally to the body, which raises :class:`BodyTooLarge`
as soon as it would exceed the cap. Extra memory beyond the kept body is a few
steps of output plus the decompressors' windows (32 KiB for deflate, at most
:data:`ZSTD_MAX_WINDOW_BYTES` for zstd).

Codings (RFC 9110 section 8.4.1, RFC 8878):

- ``gzip`` / ``x-gzip``: zlib with the gzip wrapper; several concatenated gzip
  members are one body (as ``gzip -d`` reads them); bytes after the last member
  that do not start another member are ignored.
- ``deflate``: zlib-wrapped deflate, or raw deflate when the body does not start
  with a zlib header (some servers send that).
- ``zstd``: when the ``zstandard`` package is installed, with the window limited
  to :data:`ZSTD_MAX_WINDOW_BYTES` (8 MiB, the limit RFC 9659 sets for HTTP).
- ``identity`` and unknown tokens: left as they are (httpx's behaviour).
- ``br``, ``compress`` / ``x-compress`` (and ``zstd`` without ``zstandard``):
  :class:`UnsupportedEncoding`. The crawler advertises only ``gzip, deflate``.

A truncated compressed stream yields what was inflated so far, and
:attr:`BoundedDecoder.complete` says whether every gzip/deflate stream reached its end
(a caller that must not act on part of a file, robots.txt, refuses it); corrupt data
raises :class:`CorruptEncoding`.

Prefix mode (``keep_prefix=True``, used for robots.txt, whose parsing limit RFC 9309
section 2.5 lets a crawler impose): instead of refusing a body past the cap, the
decoder keeps its first ``limit`` decoded bytes, sets :attr:`BoundedDecoder.truncated`
and ignores everything fed after that (nothing more is inflated), so the caller can
stop reading the response.
"""

from __future__ import annotations

import zlib

try:  # optional: only used when a server sends zstd anyway
    import zstandard
except ImportError:  # pragma: no cover - depends on the environment
    zstandard = None

STEP_BYTES = 64 * 1024
"""Most output bytes produced by one inflate step."""

ZSTD_MAX_WINDOW_BYTES = 8 * 1024 * 1024
"""Largest zstd window accepted (RFC 9659 section 3: 8 MiB for the ``zstd`` content coding)."""

_GZIP_MAGIC = b"\x1f\x8b"
_UNSUPPORTED = frozenset({"br", "compress", "x-compress"})


class BodyTooLarge(Exception):
    """The decoded body would exceed the cap."""


class UnsupportedEncoding(Exception):
    """A ``Content-Encoding`` this crawler cannot decode."""


class CorruptEncoding(Exception):
    """The body is not valid data of its declared ``Content-Encoding``."""


class _Sink:
    """The decoded body: chunks kept until ``limit`` bytes; one more byte raises :class:`BodyTooLarge`.

    With ``keep_prefix`` the first ``limit`` bytes stay kept when it raises (the chunk that
    crosses the limit is cut there); otherwise everything kept is dropped.
    """

    def __init__(self, limit: int, keep_prefix: bool = False):
        self.limit = limit
        self.keep_prefix = keep_prefix
        self.size = 0
        self.chunks: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not data:
            return
        if self.size + len(data) > self.limit:
            if self.keep_prefix:
                self.chunks.append(data[: self.limit - self.size])
                self.size = self.limit
            else:
                self.size += len(data)
                self.chunks.clear()
            raise BodyTooLarge(f"body exceeds {self.limit} bytes")
        self.size += len(data)
        self.chunks.append(data)

    def close(self) -> None:
        pass


class _ZlibStage:
    """gzip (multi-member) or deflate (zlib-wrapped or raw), inflated in steps of ``STEP_BYTES``."""

    def __init__(self, gzip: bool, out):
        self._gzip = gzip
        self._out = out
        self._d = None
        self._pending = b""  # start of a stream or member shorter than its 2-byte signature
        self._members = 0
        self._done = False

    def _open(self, head: bytes):
        if self._gzip:
            return zlib.decompressobj(16 + zlib.MAX_WBITS)
        zlib_header = (head[0] & 0x0F) == 8 and (head[0] >> 4) <= 7 and ((head[0] << 8) | head[1]) % 31 == 0
        return zlib.decompressobj(zlib.MAX_WBITS if zlib_header else -zlib.MAX_WBITS)

    def write(self, data: bytes) -> None:
        if self._done or not data:
            return
        if self._pending:
            data, self._pending = self._pending + data, b""
        try:
            while data:
                if self._d is None:
                    if len(data) < 2:
                        self._pending = data
                        return
                    if self._members and data[:2] != _GZIP_MAGIC:
                        self._done = True  # trailing bytes after the last gzip member
                        return
                    self._d = self._open(data)
                    self._members += 1
                while True:
                    out = self._d.decompress(data, STEP_BYTES)
                    data = self._d.unconsumed_tail
                    self._out.write(out)
                    if self._d.eof:
                        data = self._d.unused_data
                        self._d = None
                        if not self._gzip:
                            self._done = True
                            return
                        break
                    if not data and len(out) < STEP_BYTES:
                        return
        except zlib.error as e:
            raise CorruptEncoding(f"{'gzip' if self._gzip else 'deflate'}: {e}") from e

    def close(self) -> None:
        self._out.close()

    @property
    def complete(self) -> bool:
        """No stream or member is open or half-started: every one fed reached its end (an empty body is
        complete: there was nothing to inflate)."""
        return self._d is None and not self._pending and getattr(self._out, "complete", True)


class _ZstdStage:
    """zstd through ``zstandard``'s stream writer, which hands on at most ``STEP_BYTES`` at a time."""

    def __init__(self, out):
        dctx = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW_BYTES)
        self._w = dctx.stream_writer(out, write_size=STEP_BYTES, closefd=False)
        self._out = out

    def write(self, data: bytes) -> None:
        try:
            self._w.write(data)
        except zstandard.ZstdError as e:
            raise CorruptEncoding(f"zstd: {e}") from e

    def close(self) -> None:
        self._out.close()

    @property
    def complete(self) -> bool:
        """Unknown for zstd (the stream writer does not say whether a frame ended): taken as complete."""
        return getattr(self._out, "complete", True)


def content_codings(header: str) -> list[str]:
    """The codings named by a ``Content-Encoding`` value, lower case, in the order applied.

    ``identity`` and empty items are dropped. Example: ``"gzip, X-Zstd"`` -> ``["gzip", "x-zstd"]``.
    """
    return [c for c in (part.strip().lower() for part in (header or "").split(",")) if c and c != "identity"]


class BoundedDecoder:
    """Undoes a response's content codings incrementally, refusing output past ``limit`` bytes.

    Args:
      content_encoding: the ``Content-Encoding`` header value ("" for none).
      limit: largest decoded body accepted, bytes.
      keep_prefix: past ``limit``, keep the first ``limit`` decoded bytes and set
        :attr:`truncated` instead of raising :class:`BodyTooLarge` (module doc, "Prefix mode").

    Raises:
      UnsupportedEncoding: (constructor) a coding that cannot be decoded (see module doc).

    Example:
      >>> d = BoundedDecoder("gzip", limit=10)
      >>> d.feed(gzip.compress(b"hello"))
      >>> d.finish()
      b'hello'
    """

    def __init__(self, content_encoding: str, limit: int, keep_prefix: bool = False):
        self._sink = _Sink(limit, keep_prefix)
        self._truncated = False
        stage = self._sink
        for coding in content_codings(content_encoding):  # the last coding applied is undone first
            if coding in ("gzip", "x-gzip"):
                stage = _ZlibStage(True, stage)
            elif coding == "deflate":
                stage = _ZlibStage(False, stage)
            elif coding == "zstd" and zstandard is not None:
                stage = _ZstdStage(stage)
            elif coding in _UNSUPPORTED or coding == "zstd":
                raise UnsupportedEncoding(f"Content-Encoding {coding!r} is not supported")
        self._head = stage

    def feed(self, data: bytes) -> None:
        """Decodes one piece of the encoded body.

        Raises:
          BodyTooLarge: the decoded body passed the limit (nothing more is inflated); in prefix
            mode this is not raised: :attr:`truncated` is set and later pieces are ignored.
          CorruptEncoding: invalid compressed data.
        """
        if self._truncated:
            return
        try:
            self._head.write(data)
        except BodyTooLarge:
            if not self._sink.keep_prefix:
                raise
            self._truncated = True

    def finish(self) -> bytes:
        """The decoded body (after the last :meth:`feed`)."""
        self._head.close()
        body = b"".join(self._sink.chunks)
        self._sink.chunks = []
        return body

    @property
    def size(self) -> int:
        """Decoded bytes so far (in prefix mode, at most the limit)."""
        return self._sink.size

    @property
    def complete(self) -> bool:
        """False when a gzip or deflate stream fed so far stopped before its end: the body is only the part
        that was inflated. True for an empty body, a body without a compressing coding, and in prefix mode
        once :attr:`truncated` (reading stopped on purpose)."""
        return self._truncated or getattr(self._head, "complete", True)

    @property
    def truncated(self) -> bool:
        """True in prefix mode once the decoded body went past the limit (only its prefix is kept)."""
        return self._truncated
