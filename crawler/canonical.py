"""The canonical URL a fetched page declares, read incrementally (the crawler's hot-path form).

:func:`page_declared_canonical` returns exactly what :func:`newsflow.extraction.page_canonical_url`
returns (the rule of :func:`newsflow.extraction.declared_canonical_url`: the first
``<link rel="canonical" href>`` wins over the first ``<meta property|name="og:url" content>``),
without building the whole page's tree: the decoded text is fed to lxml's HTML pull parser
(the same libxml2 HTML parser) in 16 KiB steps, and reading stops at the first canonical link,
which pages put in their ``<head>``. Pages without one are parsed to the end, as before. On the
bundled corpus (263 pages) the results are identical and the call takes ~35% of the time
(the decoding, :func:`newsflow.extraction.decode_html`, is the rest).

Inputs the full-document parse refuses give "" here too: empty or whitespace-only text, and
text starting with an XML declaration naming an encoding (lxml refuses such ``str`` input).
"""

from __future__ import annotations

import re

import lxml.etree

from newsflow.extraction import declared_canonical_in, decode_html

STEP_CHARS = 16384
"""Characters fed to the parser per step."""

# lxml's own test for ``str`` input with an encoding declaration (lxml/parser.pxi), which it refuses
_XML_ENCODING_DECL = re.compile(r'^(<\?xml[^>]+)encoding\s*=\s*["\'][^"\']*["\'](\s*\?>|)', re.U)


def page_declared_canonical(body: bytes, content_type: str = "") -> str:
    """The canonical URL an HTML body declares, as written; "" when none or unparsable. Never raises.

    Args:
      body: page bytes as fetched (content codings undone).
      content_type: the response's ``Content-Type`` (its charset is used for decoding).

    Returns:
      The same string as :func:`newsflow.extraction.page_canonical_url` (control characters stripped):
      the rule is :func:`newsflow.extraction.declared_canonical_in`, which stops pulling elements (and so
      this parser stops reading) at the first canonical link.
    """
    try:
        text, _enc = decode_html(body, content_type)
        if not text.strip() or _XML_ENCODING_DECL.match(text):
            return ""
        return declared_canonical_in(_link_and_meta_elements(text))
    except Exception:  # noqa: BLE001 - undecodable or unparsable page: it declares nothing we can read
        return ""


def _link_and_meta_elements(text: str):
    """The ``<link>`` and ``<meta>`` elements of ``text`` in document order, parsed :data:`STEP_CHARS` at a
    time (lxml's HTML pull parser, start events: an element's attributes are complete when it starts)."""
    parser = lxml.etree.HTMLPullParser(events=("start",), tag=("link", "meta"))
    for i in range(0, len(text), STEP_CHARS):
        parser.feed(text[i : i + STEP_CHARS])
        for _event, el in parser.read_events():
            yield el
    parser.close()
    for _event, el in parser.read_events():
        yield el
