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

from newsflow.extraction import decode_html, strip_control_chars

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
      The same string as :func:`newsflow.extraction.page_canonical_url` (control characters stripped).
    """
    try:
        text, _enc = decode_html(body, content_type)
        if not text.strip() or _XML_ENCODING_DECL.match(text):
            return ""
        parser = lxml.etree.HTMLPullParser(events=("start",), tag=("link", "meta"))
        og = [""]
        for i in range(0, len(text), STEP_CHARS):
            parser.feed(text[i : i + STEP_CHARS])
            found = _scan(parser, og)
            if found:
                return found
        parser.close()
        return _scan(parser, og) or strip_control_chars(og[0])
    except Exception:  # noqa: BLE001 - undecodable or unparsable page: it declares nothing we can read
        return ""


def _scan(parser, og: list[str]) -> str:
    """The first canonical link among the parser's new events ("" if none); keeps the first og:url in ``og[0]``."""
    for _event, el in parser.read_events():
        if el.tag == "link":
            rel = (el.get("rel") or "").lower().split()
            href = (el.get("href") or "").strip()
            if "canonical" in rel and href:
                return strip_control_chars(href)
        elif not og[0] and (el.get("property") or el.get("name") or "").strip().lower() == "og:url":
            og[0] = (el.get("content") or "").strip()
    return ""
