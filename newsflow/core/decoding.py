"""Decoding of fetched HTML bytes to text: gzip inflation with a size cap and charset detection.

A fetched page arrives as bytes whose declared charset is often missing or
wrong. :func:`decode_html` picks the encoding (byte-order mark, valid UTF-8,
the ``Content-Type`` charset, ``<meta charset>``, then charset_normalizer
detection) and refuses binary content; :func:`inflate_gzip` inflates a gzip
body that was stored compressed, refusing decompression bombs. Both raise
:class:`DecodeError`, whose ``error_type`` (``"undecodable"`` or
``"too_large"``) :mod:`newsflow.core.extraction` turns into the dead-letter reason.

:func:`strip_control_chars` removes the characters XML 1.0 forbids (C0 controls other than
tab, LF and CR; lone surrogates; U+FFFE and U+FFFF) from any text that is stored, and
:func:`mostly_utf8` reads bytes that are UTF-8 apart from a few corrupt bytes (each replaced
by U+FFFD) instead of re-reading the whole document in a legacy charset.

Pure functions, no Beam; charset_normalizer is imported only when a page needs detection.
"""

from __future__ import annotations

import codecs
import re
import zlib


class DecodeError(Exception):
    """Bytes that cannot become text, with a machine-readable reason.

    Attributes:
      error_type: ``"undecodable"`` (binary content, or bytes no encoding fits, or a
        gzip body that does not inflate) or ``"too_large"`` (a gzip body inflating past its cap).
      message: human-readable detail (``str(error)`` is ``"<error_type>: <message>"``).
    """

    def __init__(self, error_type: str, message: str):
        super().__init__(f"{error_type}: {message}")
        self.error_type = error_type
        self.message = message

    def __reduce__(self):
        return (DecodeError, (self.error_type, self.message))


_CHARSET_RE = re.compile(rb"""charset\s*=\s*["']?\s*([A-Za-z0-9._:\-]+)""", re.I)
_META_RE = re.compile(rb"<meta\b[^>]*>", re.I)
_HEADER_CHARSET_RE = re.compile(r"""charset\s*=\s*["']?\s*([A-Za-z0-9._:\-]+)""", re.I)
# WHATWG Encoding Standard: these labels mean windows-1252 in HTML.
_WINDOWS_1252_LABELS = frozenset(
    {
        "latin1",
        "latin-1",
        "iso-8859-1",
        "iso8859-1",
        "iso_8859-1",
        "l1",
        "ascii",
        "us-ascii",
        "cp819",
        "ibm819",
        "iso-ir-100",
        "x-cp1252",
        "windows-1252",
    }
)
_SEVEN_BIT_ENCODINGS = frozenset({"iso2022_jp", "iso2022_jp_2", "iso2022_kr", "utf_7", "hz"})
_BINARY_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "PNG image"),
    (b"GIF87a", "GIF image"),
    (b"GIF89a", "GIF image"),
    (b"\xff\xd8\xff", "JPEG image"),
    (b"%PDF-", "PDF document"),
    (b"PK\x03\x04", "ZIP archive"),
    (b"RIFF", "RIFF media"),
    (b"\x00\x00\x01\x00", "ICO image"),
)
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_CONTROL_BYTES = bytes([*range(0x00, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F])
_NOT_CONTROL_BYTES = bytes(b for b in range(256) if b not in _CONTROL_BYTES)


def _normalize_charset(label: str) -> str | None:
    """Python codec name for a charset label, or None when Python does not know it."""
    label = label.strip().strip("\"'").lower()
    if not label:
        return None
    if label in _WINDOWS_1252_LABELS:
        return "cp1252"
    try:
        return codecs.lookup(label).name
    except LookupError:
        return None


def _meta_charsets(head: bytes) -> list[str]:
    """Charsets declared by ``<meta charset>`` / ``<meta http-equiv content>`` in ``head``."""
    out = []
    for tag in _META_RE.findall(head):
        m = _CHARSET_RE.search(tag)
        if m:
            name = _normalize_charset(m.group(1).decode("ascii", "ignore"))
            if name and name not in out:
                out.append(name)
    return out


_XML_ILLEGAL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def strip_control_chars(text: str) -> str:
    """``text`` without the characters XML 1.0 forbids (Extensible Markup Language 1.0, section 2.2 "Char").

    Removed: C0 controls U+0000-U+001F except tab, LF and CR; lone surrogates U+D800-U+DFFF;
    the noncharacters U+FFFE and U+FFFF. Everything else (including C1 controls and U+FFFD)
    is kept. Example: ``"Closed for cleaning\x01 until Friday."`` -> ``"Closed for cleaning until Friday."``.

    Args:
      text: any ``str`` ("" and ``None`` come back unchanged).
    """
    if not text:
        return text
    return _XML_ILLEGAL_RE.sub("", text)


def mostly_utf8(body: bytes) -> str | None:
    """Decodes ``body`` as UTF-8 when it clearly is UTF-8 with a few stray bytes, else ``None``.

    A page in a single-byte charset has almost no valid multi-byte UTF-8
    sequences, so >= 10 valid non-ASCII characters per invalid byte run means the
    page is UTF-8 with some corrupt bytes (common when templates mix encodings).
    Each invalid byte run becomes U+FFFD (Python's ``errors="replace"``).

    Args:
      body: bytes, ``bytes``.

    Returns:
      The text (valid UTF-8 decodes as is), or ``None`` when the bytes are not mostly UTF-8.
    """
    text = body.decode("utf-8", errors="replace")
    bad = text.count("\ufffd")
    if bad == 0:
        return text
    good = sum(1 for ch in text if ord(ch) > 0x7F) - bad
    return text if good >= 10 * bad else None


def _looks_binary(text: str) -> bool:
    """True when more than 0.5% of the first 100,000 characters are C0 control characters (not TAB, LF, CR, FF)
    or DEL.

    Counted on the sample's UTF-8 bytes, which hold each of these characters as one byte of the same value
    and no such byte inside a multi-byte sequence: ``bytes.translate`` deletes every other byte, ~3x faster
    than a regular expression over the text (0.2 against 0.65 ms on a bundled page).
    """
    sample = text[:100_000]
    if not sample:
        return False
    controls = sample.encode("utf-8", "surrogatepass").translate(None, _NOT_CONTROL_BYTES)
    return len(controls) > 0.005 * len(sample)


def decode_html(body: bytes, content_type: str = "") -> tuple[str, str]:
    """Decodes an HTML response body to text, avoiding mojibake from wrong declarations.

    Order: byte-order mark; valid UTF-8 (a non-ASCII byte sequence that is valid
    UTF-8 is almost never meant as anything else, so this overrides a wrong
    ``latin-1`` declaration; 7-bit encodings such as ISO-2022-JP are honoured when
    declared); the ``Content-Type`` charset; ``<meta charset>`` / ``http-equiv``
    in the first 4 KiB; UTF-8 with a few stray bytes; charset_normalizer
    detection. Declared charsets are decoded strictly, so a wrong declaration
    that does not fit the bytes (latin-1 bytes declared UTF-8) falls through to
    the next step. Labels ``latin1``/``iso-8859-1``/``ascii`` mean windows-1252,
    as in the WHATWG Encoding Standard.

    Args:
      body: raw response bytes (not compressed).
      content_type: the ``Content-Type`` header value, may be "".

    Returns:
      ``(text, encoding)``: the decoded ``str`` and the Python codec name used.

    Raises:
      DecodeError: ``"undecodable"`` for binary content (images, PDFs, NUL
        bytes, >0.5% control characters) or bytes no encoding fits.
    """
    head = body[:4096]
    for magic, what in _BINARY_MAGIC:
        if head.startswith(magic):
            raise DecodeError("undecodable", f"body is a {what}, not text")
    for bom, enc in _BOMS:
        if head.startswith(bom):
            try:
                return body[len(bom) :].decode(enc), enc
            except UnicodeDecodeError as e:
                raise DecodeError("undecodable", f"body starts with a {enc} BOM but does not decode: {e}") from None
    declared: list[str] = []
    m = _HEADER_CHARSET_RE.search(content_type or "")
    if m:
        name = _normalize_charset(m.group(1))
        if name:
            declared.append(name)
    for name in _meta_charsets(head):
        if name not in declared:
            declared.append(name)
    wide = [d for d in declared if d.startswith(("utf-16", "utf-32", "utf_16", "utf_32"))]
    if b"\x00" in head and not wide:
        raise DecodeError("undecodable", "body contains NUL bytes and declares no UTF-16/32 charset (binary data)")

    def _accept(text: str, enc: str) -> tuple[str, str]:
        if _looks_binary(text):
            raise DecodeError("undecodable", f"decoded text ({enc}) is mostly control characters (binary data)")
        return text, enc

    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        if text.isascii():
            for enc in declared:
                if enc in _SEVEN_BIT_ENCODINGS:
                    try:
                        return _accept(body.decode(enc), enc)
                    except UnicodeDecodeError:
                        pass
        return _accept(text, "utf-8")
    for enc in declared:
        if enc == "utf-8":
            continue
        try:
            return _accept(body.decode(enc), enc)
        except (UnicodeDecodeError, LookupError):
            continue
    text = mostly_utf8(body)
    if text is not None:
        return _accept(text, "utf-8")
    from charset_normalizer import from_bytes  # imported lazily: only needed for undeclared non-UTF-8 pages

    matches = from_bytes(body[:200_000])
    best = matches.best()
    if best is not None and best.encoding:
        enc = best.encoding
        # Detection confuses the single-byte Latin code pages (French cp1252 text comes
        # back as cp1257 with "ą" for "à"). windows-1252 is by far the most used legacy
        # web encoding, so it wins whenever the detector finds it (nearly) as clean.
        if enc != "cp1252" and not best.multi_byte_usage:
            cp1252 = [m for m in matches if m.encoding == "cp1252"]
            if "cp1252" in best.could_be_from_charset or (cp1252 and cp1252[0].chaos <= best.chaos + 0.05):
                enc = "cp1252"
        try:
            return _accept(body.decode(enc), enc)
        except (UnicodeDecodeError, LookupError):
            text = body.decode(enc, errors="replace")
            if text.count("\ufffd") <= 0.001 * len(text):
                return _accept(text, enc)
    raise DecodeError(
        "undecodable",
        f"bytes fit neither UTF-8, the declared charset(s) {declared or 'none'}, nor a detected encoding",
    )


def inflate_gzip(body: bytes, limit: int) -> bytes:
    """Inflates a gzip body, refusing output over ``limit`` bytes (decompression bombs).

    Args:
      body: bytes starting with the gzip magic ``1f 8b``.
      limit: the most inflated bytes accepted.

    Returns:
      The inflated bytes (only the first gzip member is read).

    Raises:
      DecodeError: ``"undecodable"`` when the bytes do not inflate, ``"too_large"``
        when the output would pass ``limit``.
    """
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise DecodeError("undecodable", f"body has a gzip header but does not inflate: {e}") from None
    if len(out) > limit:
        raise DecodeError("too_large", f"gzip body inflates past max_body_bytes={limit}")
    return out
