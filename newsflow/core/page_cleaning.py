"""Pre-cleaning of a parsed page before trafilatura: consent walls, sidebars, paywalls.

trafilatura (:mod:`newsflow.core.extraction`) picks the main text of a page well, but three layouts
defeat it, so the lxml tree is cleaned first (trafilatura is not replaced):

1. **Consent walls and sidebars.** An element whose ``class`` or ``id`` names a cookie/consent
   banner (``consent``, ``cookie``, ``gdpr``, ``onetrust``, ``didomi``, ``cmp``...:
   :data:`CONSENT_MARKERS`), a sidebar or a subscription offer box (:data:`END_MARKERS`) is
   removed, unless it holds
   the headline (``<h1>``) or at least half of the page's text (so a wrapper such as
   ``<div class="page has-sidebar">`` stays).
2. **Articles inside** ``<aside>``. trafilatura drops every ``<aside>`` as boilerplate; an
   ``<aside>`` that holds an ``<h1>`` or at least :data:`ASIDE_ARTICLE_CHARS` characters of
   paragraph text is the page's content in misused markup and becomes a ``<div>``.
3. **Paywalls** (schema.org, as Google documents for "subscription and paywalled content"): a
   JSON-LD object with ``isAccessibleForFree: false`` marks the page paywalled; the elements its
   ``hasPart[].cssSelector`` name are the locked part and are removed (so the text is the free
   part only), and so are short blocks that read as an offer (:data:`OFFER_PHRASES`: "keep
   reading", "already subscribed", "per month"... at least two of them).

Run through :func:`clean_tree`; ``python -m benchmarks.extraction`` and ``newsflow eval
extraction`` measure the whole extraction.
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple

CONSENT_MARKERS = re.compile(r"consent|cookie|gdpr|onetrust|didomi|truste|sp_message|(?:^|[-_])cmp(?:$|[-_])", re.I)
"""Searched anywhere in a class name or id: cookie/consent banners (module docstring, step 1)."""

END_MARKERS = frozenset({"sidebar", "sidebars", "subscribe", "subscription", "upsell", "offer", "offers"})
"""A class name or id whose *last* ``-``/``_`` component is one of these is a sidebar or an offer
box (``l-col__sidebar``, ``left-sidebar``); wrappers such as ``content-with-sidebar-wrp`` or
``l-sidebar-fixed`` (which hold the article on two benchmark pages) are not."""

_COMPONENT_SPLIT = re.compile(r"[-_]+")

ASIDE_ARTICLE_CHARS = 400
"""An ``<aside>`` with this much paragraph text (or an ``<h1>``) is content, not a sidebar."""

OFFER_PHRASES = re.compile(
    r"keep reading|continue reading|already (?:a )?subscrib|subscribe now|subscribe to|"
    r"subscription|sign in|log in|premium|per month|/ ?month|a month|free trial|"
    r"cancel anytime|unlock|abonn|abo\b|jetzt lesen|suscr",
    re.I,
)
"""Phrases of a subscription offer; a block with two or more (distinct) is an offer."""

OFFER_MAX_CHARS = 600
"""Blocks longer than this are never treated as an offer by their wording."""

_FALSE = (False, "false", "False", "FALSE", "no", "No")
_TRUE = (True, "true", "True", "TRUE", "yes", "Yes")


class CleanResult(NamedTuple):
    """What :func:`clean_tree` did.

    Attributes:
      paywalled: True when JSON-LD declares ``isAccessibleForFree: false``, False when it
        declares true or nothing.
      removed: number of elements removed (consent, sidebar, offer, locked parts).
    """

    paywalled: bool
    removed: int


def _text_len(el) -> int:
    return len("".join(el.itertext()).strip())


def _markers(el) -> str:
    cls = el.get("class") or ""
    ident = el.get("id") or ""
    return " ".join([cls, ident]).strip()


def _has_marker(el) -> bool:
    for tok in _markers(el).split():
        if CONSENT_MARKERS.search(tok):
            return True
        parts = [p for p in _COMPONENT_SPLIT.split(tok.lower()) if p]
        if parts and parts[-1] in END_MARKERS:
            return True
    return False


def _drop(el) -> None:
    """Removes ``el`` but keeps its tail text (the text after its end tag belongs to the parent)."""
    parent = el.getparent()
    if parent is None:
        return
    tail = el.tail
    if tail and tail.strip():
        prev = el.getprevious()
        if prev is not None:
            prev.tail = (prev.tail or "") + tail
        else:
            parent.text = (parent.text or "") + tail
    parent.remove(el)


def _json_ld_objects(tree):
    """Yields every JSON object found in the page's ``application/ld+json`` scripts (invalid JSON skipped)."""
    for script in tree.iter("script"):
        if (script.get("type") or "").strip().lower() != "application/ld+json":
            continue
        try:
            data = json.loads(script.text or "")
        except (ValueError, RecursionError):
            continue
        stack = [data]
        while stack:
            item = stack.pop()
            if isinstance(item, list):
                stack.extend(item)
            elif isinstance(item, dict):
                yield item
                graph = item.get("@graph")
                if isinstance(graph, (list, dict)):
                    stack.append(graph)


def paywall_declaration(tree) -> tuple[bool, list[str]]:
    """Reads the schema.org paywall markup of a page.

    Args:
      tree: lxml HTML tree.

    Returns:
      ``(paywalled, selectors)``: ``paywalled`` True when an object declares
      ``isAccessibleForFree`` false (bool or the strings "false"/"no"); ``selectors`` the
      ``cssSelector`` values of the ``hasPart`` elements that are not free (a ``hasPart``
      without its own ``isAccessibleForFree`` counts as locked).
    """
    paywalled = False
    selectors: list[str] = []
    for obj in _json_ld_objects(tree):
        if obj.get("isAccessibleForFree") not in _FALSE:
            continue
        paywalled = True
        parts = obj.get("hasPart")
        for part in parts if isinstance(parts, list) else [parts]:
            if not isinstance(part, dict) or part.get("isAccessibleForFree") in _TRUE:
                continue
            sel = part.get("cssSelector")
            for s in sel if isinstance(sel, list) else [sel]:
                if isinstance(s, str) and s.strip():
                    selectors.append(s.strip())
    return paywalled, selectors


def _select(tree, selector: str) -> list:
    from cssselect import GenericTranslator, SelectorError

    try:
        xpath = GenericTranslator().css_to_xpath(selector)
    except (SelectorError, ValueError):
        return []
    try:
        return list(tree.xpath(xpath))
    except Exception:  # noqa: BLE001 - lxml rejects some translated expressions; skip that selector
        return []


def _is_offer(el) -> bool:
    n = _text_len(el)
    if n == 0 or n > OFFER_MAX_CHARS:
        return False
    found = {m.group(0).lower() for m in OFFER_PHRASES.finditer(" ".join(el.itertext()))}
    return len(found) >= 2


def clean_tree(tree) -> CleanResult:
    """Removes consent walls, sidebars, offers and locked paywall parts from ``tree`` (in place).

    Args:
      tree: lxml HTML tree of the whole page (e.g. from ``trafilatura.utils.load_html``).

    Returns:
      :class:`CleanResult`.
    """
    body = tree.find(".//body")
    if body is None:
        return CleanResult(paywalled=False, removed=0)
    paywalled, selectors = paywall_declaration(tree)
    removed = 0
    for sel in selectors:
        for el in _select(tree, sel):
            if el is not body and el.getparent() is not None:
                _drop(el)
                removed += 1
    total = _text_len(body)
    for el in list(body.iter()):
        if not isinstance(el.tag, str) or el is body or el.getparent() is None:
            continue
        if not _has_marker(el):
            continue
        if el.find(".//h1") is not None or (total and _text_len(el) * 2 >= total):
            continue
        _drop(el)
        removed += 1
    if paywalled:
        for el in list(body.iter("div", "section", "aside", "form", "p")):
            if el.getparent() is not None and el.find(".//h1") is None and _is_offer(el):
                _drop(el)
                removed += 1
    for aside in list(body.iter("aside")):
        paragraph_chars = sum(_text_len(p) for p in aside.iter("p"))
        if aside.find(".//h1") is not None or paragraph_chars >= ASIDE_ARTICLE_CHARS:
            aside.tag = "div"
    return CleanResult(paywalled=paywalled, removed=removed)
