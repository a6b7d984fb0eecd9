"""Consent walls, sidebars and paywalls (issue 11, items 5-6): newsflow.core.page_cleaning + extraction."""

from __future__ import annotations

import calendar
import json

import lxml.html
import pytest

from newsflow.core.extraction import ExtractionConfig, extract_content
from newsflow.core.page_cleaning import clean_tree, paywall_declaration
from newsflow.schemas.raw import RawDocument

FETCH_TIME = float(calendar.timegm((2024, 3, 5, 18, 0, 0)))
INLINE = ExtractionConfig()

CONSENT = (
    "We use cookies and similar technologies to personalise content and ads. "
    "Our partners use cookies to measure how you use this site and to show you personalised advertising. "
    "You can change your choices at any time in the privacy settings of this site."
)
PARAS = [
    "The family bakery on Mill Street has won the regional prize for the best rye bread, beating forty other "
    "entries from across the county.",
    "Owner Maria Keller said the recipe came from her grandmother and uses a sourdough starter that is more "
    "than thirty years old.",
    "The judges praised the crust and the even crumb, and said the loaf kept well for several days without "
    "losing its flavour.",
    "The bakery plans to use the prize money to buy a second oven so that it can bake through the night "
    "before the weekend market.",
]
TEASER = (
    "The city council approved a new budget on Tuesday night after a debate that lasted more than six hours. "
    "The plan raises spending on schools and roads by four percent and freezes fees for sports clubs, while the "
    "opposition warned that the reserves would be used up within three years."
)
OFFER = [
    "Keep reading with Daily Courier Premium",
    "Only $1 for your first month, then $9.99 per month. Cancel anytime.",
    "Already subscribed? Sign in",
]


def _raw(html: str, url: str = "https://town.example/news/1") -> RawDocument:
    return RawDocument(
        url=url,
        source_domain="town.example",
        fetch_time=FETCH_TIME,
        http_status=200,
        content_type="text/html; charset=utf-8",
        body=html.encode("utf-8"),
    )


def _doc(body: str, head: str = "") -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>News</title>{head}</head>'
        f"<body>{body}</body></html>"
    )


def _paywall_ld(selector: str = ".body-locked", free=False) -> str:
    ld = {
        "@context": "https://schema.org",
        "@type": "NewsArticle",
        "headline": "Council approves new budget",
        "isAccessibleForFree": free,
        "hasPart": {"@type": "WebPageElement", "isAccessibleForFree": False, "cssSelector": selector},
    }
    return f'<script type="application/ld+json">{json.dumps(ld)}</script>'


def test_consent_wall_and_sidebar_around_an_aside_article():
    body = (
        f'<div class="consent"><p>{CONSENT}</p><button>Accept all</button></div>'
        '<aside class="content-wrap"><h1>Bakery wins prize</h1>'
        + "".join(f"<p>{p}</p>" for p in PARAS)
        + '</aside><aside class="sidebar"><p>Top weekend events</p></aside>'
    )
    got = extract_content(_raw(_doc(body)), INLINE)
    for p in PARAS:
        assert p in got.text
    assert "cookies" not in got.text and "Accept all" not in got.text and "Top weekend events" not in got.text
    assert got.paywalled is False


def _paywalled_page(offer_class: str) -> str:
    offer = "".join(f"<p>{t}</p>" for t in OFFER)
    body = (
        "<article><h1>Council approves new budget</h1>"
        f'<p class="teaser">{TEASER}</p><div class="body-locked"></div>'
        f'<div class="{offer_class}">{offer}</div></article>'
    )
    return _doc(body, _paywall_ld())


@pytest.mark.parametrize("offer_class", ["subscription-offer", "box"])  # named offer box, and an anonymous one
def test_paywalled_article_is_flagged_and_offer_never_extracted(offer_class):
    got = extract_content(_raw(_paywalled_page(offer_class)), INLINE)
    assert got.paywalled is True
    assert TEASER in got.text
    for t in OFFER:
        assert t not in got.text
    assert "Premium" not in got.text and "Sign in" not in got.text


def test_locked_part_named_by_css_selector_is_removed():
    locked = "Subscribers can read the full list of the projects that the council cut from the plan here."
    html = _doc(
        f'<article><h1>Budget</h1><p>{TEASER}</p><section class="body-locked"><p>{locked}</p></section></article>',
        _paywall_ld(),
    )
    got = extract_content(_raw(html), INLINE)
    assert got.paywalled is True and TEASER in got.text and locked not in got.text


def test_paywall_declaration_reading():
    tree = lxml.html.fromstring(_doc("<p>x</p>", _paywall_ld(".a, .b")))
    assert paywall_declaration(tree) == (True, [".a, .b"])
    free = lxml.html.fromstring(_doc("<p>x</p>", _paywall_ld(free=True)))
    assert paywall_declaration(free) == (False, [])
    graph = {"@graph": [{"@type": "WebSite"}, {"@type": "NewsArticle", "isAccessibleForFree": "False"}]}
    tree = lxml.html.fromstring(_doc("<p>x</p>", f'<script type="application/ld+json">{json.dumps(graph)}</script>'))
    assert paywall_declaration(tree) == (True, [])
    broken = lxml.html.fromstring(_doc("<p>x</p>", '<script type="application/ld+json">{"isAccessibleFor</script>'))
    assert paywall_declaration(broken) == (False, [])


def test_wrappers_named_after_sidebars_and_big_blocks_stay():
    article = "".join(f"<p>{p}</p>" for p in PARAS)
    html = _doc(
        f'<div class="content-with-sidebar-wrp"><div class="l-sidebar-fixed">{article}</div></div>'
        '<div class="l-col__sidebar"><p>Most read</p></div>'
        f'<div class="cookie-notice"><h1>Bakery wins prize</h1>{article}</div>'
    )
    tree = lxml.html.fromstring(html)
    result = clean_tree(tree)
    text = tree.text_content()
    assert result.removed == 1  # only the sidebar column
    assert "Most read" not in text and text.count(PARAS[0]) == 2


def test_page_without_paywall_markup_keeps_subscription_wording():
    # Without a paywall declaration, offer wording inside the article is article text.
    para = "The newspaper said its subscription price will rise to $12 per month; readers can sign in to cancel."
    html = _doc(f"<article><h1>Prices</h1><p>{TEASER}</p><p>{para}</p></article>")
    got = extract_content(_raw(html), INLINE)
    assert para in got.text and got.paywalled is False


def test_feed_only_document_has_no_paywall_flag():
    raw = RawDocument(url="https://town.example/f", source_domain="town.example", fetch_time=FETCH_TIME, title="T")
    assert extract_content(raw, INLINE).paywalled is None


MEMBERS_PAGE = """<!doctype html><html lang="en"><head><title>Harbour board approves new ferry terminal</title>
<script type="application/ld+json">{ld}</script></head><body>
<header><nav><a href="/">Home</a> <a href="/news">News</a></nav></header>
<main><article>
<p class="kicker">Members</p>
<h1>Harbour board approves new ferry terminal</h1>
<div class="offer"><p>Subscribe today for unlimited access to local journalism. Get your first month for just one
pound and support the reporters who cover your town.</p><a href="/subscribe">Subscribe</a></div>
<div class="intro"><p>{intro}</p></div>
<div class="locked-content"><p>The chairman said the cost had risen to forty million pounds because of steel prices
and new flood rules.</p><p>Residents who objected said they would consider a legal challenge.</p></div>
</article></main><footer>Harbour Gazette</footer></body></html>"""
INTRO = (
    "The harbour board voted on Monday to approve a new ferry terminal on the north quay, ending a planning "
    "dispute that lasted three years. The terminal will replace the temporary pontoon used since the old "
    "building was demolished in 2021. Construction is expected to begin in the spring and to take eighteen months."
)


def test_members_page_gives_the_free_introduction_only():
    """Issue 37 item 2: schema.org paywall markup (isAccessibleForFree false, hasPart with a cssSelector) names
    the locked section; the kicker and the repeated headline are page header; the offer is not article."""
    ld = {
        "@context": "https://schema.org",
        "@type": "NewsArticle",
        "headline": "Harbour board approves new ferry terminal",
        "isAccessibleForFree": False,
        "hasPart": {"@type": "WebPageElement", "isAccessibleForFree": False, "cssSelector": ".locked-content"},
    }
    page = MEMBERS_PAGE.format(ld=json.dumps(ld), intro=INTRO)
    raw = RawDocument(
        url="https://harbour-gazette.example/news/ferry/a/57312",
        source_domain="harbour-gazette.example",
        fetch_time=FETCH_TIME,
        body=page.encode(),
        content_type="text/html; charset=utf-8",
        http_status=200,
    )
    got = extract_content(raw, INLINE)
    assert (got.title, got.text, got.paywalled) == ("Harbour board approves new ferry terminal", INTRO, True)


def test_header_matter_rule():
    from newsflow.core.extraction import drop_header_matter

    title = "Ferry fares rise in spring"
    assert drop_header_matter("Analysis\nFERRY  fares rise in spring\nBody one.\nBody two.", title) == (
        "Body one.\nBody two."
    )
    assert drop_header_matter("Ferry fares rise in spring\nBody.", title) == "Body."
    # a long first line is article text: a later line equal to the headline stays
    long_first = "The operator said on Monday that fares would rise by a tenth.\nFerry fares rise in spring\nMore."
    assert drop_header_matter(long_first, title) == long_first
    assert drop_header_matter("Ferry fares rise in spring", title) == "Ferry fares rise in spring"  # nothing else
    assert drop_header_matter("Body.", "") == "Body."
