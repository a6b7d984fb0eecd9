"""Keyboard and layout checks in headless Chromium over ``tests.helpers.wide_app`` (28 stories, one of them
covered by 300 reports): three tab stops per card on the signed-in home; after Follow and Block on card 15 by
keyboard, focus is on that card's control (the next card's after a block hides it), with and without
JavaScript; the 300-report coverage page and its "show more" page at desktop and phone widths (screenshots to
the artifacts directory, no horizontal scrolling, axe-core: no serious or critical violation).
"""

from __future__ import annotations

import os

import pytest

from tests.helpers import PASSWORD, WIDE_STORY, wide_app
from tests.integration.asgi_server import serve_in_thread
from tests.web.test_browser import CHROMIUM, DESKTOP, PHONE, _axe_serious, _card_ids, artifacts_dir, browser  # noqa: F401

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (make browser installs it)")


@pytest.fixture(scope="module")
def wide_url(server, tmp_path_factory):
    app = wide_app(server, str(tmp_path_factory.mktemp("snap")), b"k" * 32)
    with serve_in_thread(app) as port:
        yield f"http://127.0.0.1:{port}"


def _register(page, base: str, name: str) -> None:
    page.goto(base + "/register")
    page.fill("#name", name)
    page.fill("#password", PASSWORD)
    page.fill("#password2", PASSWORD)
    with page.expect_navigation():
        page.keyboard.press("Enter")


FOCUS = "(() => { const e = document.activeElement; const c = e && e.closest('article.card'); "
FOCUS += "return {id: e ? e.id : '', tag: e ? e.tagName : '', text: e ? e.innerText.trim() : '', "
FOCUS += "card: c ? c.getAttribute('aria-labelledby').slice(2) : ''}; })()"


def _tab_until(page, want, limit: int = 400) -> dict:
    for _ in range(limit):
        page.keyboard.press("Tab")
        now = page.evaluate(FOCUS)
        if want(now):
            return now
    raise AssertionError("Tab never reached the element")


def test_three_tab_stops_per_card_and_focus_stays_on_the_card_after_follow_and_block(browser, wide_url):  # noqa: F811
    ctx = browser.new_context(viewport=DESKTOP)  # JavaScript on for document.activeElement; the pages run none
    page = ctx.new_page()
    _register(page, wide_url, "tabby")
    page.goto(wide_url + "/")
    ids = _card_ids(page)
    assert len(ids) == 20
    # every Tab stop from the top of the page to the footer, by card
    stops: dict[str, list[str]] = {}
    for _ in range(200):
        page.keyboard.press("Tab")
        f = page.evaluate(FOCUS)
        if f["tag"] == "BODY":
            break
        if f["card"]:
            stops.setdefault(f["card"], []).append(f["tag"])
    assert list(stops) == ids
    assert {sid: tags for sid, tags in stops.items() if tags != ["A", "A", "SUMMARY"]} == {}
    # card 15: open its "More", press its first button (Follow <topic>) with the keyboard
    card15, card16 = ids[14], ids[15]
    page.goto(wide_url + "/")
    _tab_until(page, lambda f: f["card"] == card15 and f["tag"] == "SUMMARY")
    page.keyboard.press("Enter")
    first = _tab_until(page, lambda f: f["card"] == card15 and f["tag"] == "BUTTON")
    assert first["id"] == f"follow-{card15}" and first["text"].startswith("Follow ")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    now = page.evaluate(FOCUS)
    assert page.url.endswith(f"/#follow-{card15}")
    assert (now["id"], now["card"], now["text"]) == (
        f"follow-{card15}",
        card15,
        "Un" + first["text"][0].lower() + first["text"][1:],
    )
    page.screenshot(path=os.path.join(artifacts_dir(), "card-actions-open-desktop.png"))  # its "More", opened
    # block the card's outlet: the card leaves the page, focus is on the next card's control
    block = _tab_until(page, lambda f: f["card"] == card15 and f["text"].startswith("Block ") and "." in f["text"])
    with page.expect_navigation():
        page.keyboard.press("Enter")
    now = page.evaluate(FOCUS)
    assert card15 not in _card_ids(page) and block["text"]
    assert (now["id"], now["card"]) == (f"follow-{card16}", card16)
    cookies = ctx.cookies()
    ctx.close()
    # without JavaScript the same: the focused element after following card 16's topic
    nojs = browser.new_context(viewport=DESKTOP, java_script_enabled=False)
    nojs.add_cookies(cookies)
    page = nojs.new_page()
    page.goto(wide_url + f"/#follow-{card16}")  # where the block above left the reader
    assert page.locator(":focus").get_attribute("id") == f"follow-{card16}"
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.locator(":focus").get_attribute("id") == f"follow-{card16}"
    nojs.close()


@pytest.mark.parametrize("viewport_name", ["desktop", "phone"])
def test_wide_coverage_and_home_screenshots_and_axe(browser, wide_url, viewport_name):  # noqa: F811
    viewport = DESKTOP if viewport_name == "desktop" else PHONE
    out = artifacts_dir()
    ctx = browser.new_context(viewport=viewport)
    page = ctx.new_page()
    problems, heights = {}, {}
    more = None
    for name, path in (("coverage-300", f"/stories/{WIDE_STORY}"), ("coverage-300-more", None), ("home-28", "/")):
        if path is None:
            path = more
        page.goto(wide_url + path)
        if name == "coverage-300":
            more = f"/stories/{WIDE_STORY}" + page.locator("a[rel=next]").get_attribute("href")
        page.screenshot(path=os.path.join(out, f"{name}-{viewport_name}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
        heights[name] = page.evaluate("document.documentElement.scrollHeight")
        if found := _axe_serious(page):
            problems[name] = found
    _register(page, wide_url, f"axe-{viewport_name}")
    for name, path in (("signed-in-coverage-300", f"/stories/{WIDE_STORY}"), ("signed-in-home-28", "/")):
        page.goto(wide_url + path)
        page.screenshot(path=os.path.join(out, f"{name}-{viewport_name}.png"), full_page=True)
        if found := _axe_serious(page):
            problems[name] = found
    ctx.close()
    assert problems == {}
    # the first coverage page lists 30 reports, not 300: a few screens, not dozens
    assert heights["coverage-300"] < (6000 if viewport_name == "desktop" else 12000), heights
