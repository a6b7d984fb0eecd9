"""The canonical URL a fetched page declares, read incrementally (the crawler's hot-path form).

:func:`page_declared_canonical` returns exactly what :func:`newsflow.core.extraction.page_canonical_url`
returns (the rule of :func:`newsflow.core.extraction.declared_canonical_url`: the first
``<link rel="canonical" href>`` wins over the first ``<meta property|name="og:url" content>``),
without building the whole page's tree: the decoded text is fed to lxml's HTML pull parser
(the same libxml2 HTML parser) in steps that start at :data:`FIRST_STEP_CHARS` and double up to
:data:`STEP_CHARS`, and reading stops at the first canonical link, which pages put in their
``<head>`` (on the bundled pages the word "canonical" first appears at a median of 3,752
characters). Pages without one are parsed to the end, as before. On the bundled corpus (263 pages)
the results are identical; parsing takes 0.30 ms per page with the doubling steps against 0.65 ms
with fixed 16,384-character steps (each step's parse costs by its length), and the decoding
(:func:`newsflow.core.extraction.decode_html`) about 0.5 ms more.

Inputs the full-document parse refuses give "" here too: empty or whitespace-only text, and
text starting with an XML declaration naming an encoding (lxml refuses such ``str`` input).
"""

from __future__ import annotations

import re

import lxml.etree

from newsflow.core.extraction import declared_canonical_in, decode_html

FIRST_STEP_CHARS = 2048
"""Characters fed to the parser in the first step; each later step doubles, up to :data:`STEP_CHARS`."""
STEP_CHARS = 16384
"""The largest number of characters fed to the parser in one step."""

# lxml's own test for ``str`` input with an encoding declaration (lxml/parser.pxi), which it refuses
_XML_ENCODING_DECL = re.compile(r'^(<\?xml[^>]+)encoding\s*=\s*["\'][^"\']*["\'](\s*\?>|)', re.U)


def page_declared_canonical(body: bytes, content_type: str = "") -> str:
    """The canonical URL an HTML body declares, as written; "" when none or unparsable. Never raises.

    Args:
      body: page bytes as fetched (content codings undone).
      content_type: the response's ``Content-Type`` (its charset is used for decoding).

    Returns:
      The same string as :func:`newsflow.core.extraction.page_canonical_url` (control characters stripped):
      the rule is :func:`newsflow.core.extraction.declared_canonical_in`, which stops pulling elements (and so
      this parser stops reading) at the first canonical link.
    """
    try:
        text, _enc = decode_html(body, content_type)
        if not text or text.isspace() or _XML_ENCODING_DECL.match(text):  # (isspace: no stripped copy)
            return ""
        return declared_canonical_in(_link_and_meta_elements(text))
    except Exception:  # noqa: BLE001 - undecodable or unparsable page: it declares nothing we can read
        return ""


def _link_and_meta_elements(text: str):
    """The ``<link>`` and ``<meta>`` elements of ``text`` in document order, parsed in steps of
    :data:`FIRST_STEP_CHARS` doubling to :data:`STEP_CHARS` characters (lxml's HTML pull parser, start
    events: an element's attributes are complete when it starts)."""
    parser = lxml.etree.HTMLPullParser(events=("start",), tag=("link", "meta"))
    start, step = 0, FIRST_STEP_CHARS
    while start < len(text):
        parser.feed(text[start : start + step])
        start, step = start + step, min(2 * step, STEP_CHARS)
        for _event, el in parser.read_events():
            yield el
    parser.close()
    for _event, el in parser.read_events():
        yield el
