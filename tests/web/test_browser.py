"""The reader web UI in a real headless Chromium (Debian's ``chromium``, driven by Playwright through
``executable_path``; nothing is downloaded): a reader registers, follows a topic, blocks a source and
finds it gone from every page, opens full coverage, signs out, is refused a wrong password, signs in and
deletes the account — with JavaScript disabled and with the keyboard only. Screenshots at desktop and
phone widths go to ``$NEWSFLOW_TEST_ARTIFACTS`` (default
``var/test-artifacts/web``); axe-core (the copy bundled in ``axe-playwright-python``, read from disk)
finds no serious or critical violations on any page.

``make test`` installs Chromium when it is missing (``make browser``); without it these tests skip.
"""

from __future__ import annotations

import os
import shutil
import time

import pytest

from newsflow.storage.accounts import AccountStore
from newsflow.storage.keys import Keys
from tests.conftest import REPO_ROOT
from tests.helpers import FRONT_GLOBAL, PASSWORD, cheap_hasher, populated_app
from tests.integration.asgi_server import serve_in_thread
from tests.integration.ranking_data import STORIES

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (make browser installs it)")
KEYS = Keys()
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
A_COM = {sid for sid, v in STORIES.items() if v[1] == "a.com"}  # s1 s2 s5 s7


def artifacts_dir() -> str:
    """Where screenshots go: ``$NEWSFLOW_TEST_ARTIFACTS`` or ``<repo>/var/test-artifacts/web``."""
    path = os.environ.get("NEWSFLOW_TEST_ARTIFACTS") or os.path.join(REPO_ROOT, "var", "test-artifacts", "web")
    os.makedirs(path, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def base_url(server, tmp_path_factory):
    app = populated_app(server, str(tmp_path_factory.mktemp("snap")), b"b" * 32, front_page=True)
    with serve_in_thread(app) as port:
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


def _card_ids(page) -> list[str]:
    return [a.get_attribute("href").rsplit("/", 1)[1] for a in page.locator("ol.cards article h3 a").all()]


def _shown_ids(page) -> set[str]:
    banner = [a.get_attribute("href").rsplit("/", 1)[1] for a in page.locator("section.banner a").all()]
    return set(_card_ids(page)) | set(banner)


def _tab_to(page, name: str, limit: int = 300) -> None:
    """Presses Tab until the focused element's text (white space collapsed) is ``name`` (fails after ``limit``
    presses)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(limit):
        page.keyboard.press("Tab")
        focused = page.locator(":focus")
        try:  # focus may leave the element between the two calls (a busy machine): then press Tab again
            text = focused.first.inner_text(timeout=2000) if focused.count() else ""
        except PlaywrightTimeout:
            continue
        if " ".join(text.split()) == name:
            return
    raise AssertionError(f"Tab never reached {name!r}")


def _enter(page) -> None:
    """Presses Enter on the focused link or button and waits for the page it loads."""
    with page.expect_navigation():
        page.keyboard.press("Enter")


def _axe_serious(page) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        f"{v['id']} ({v['impact']}): {[n['target'] for n in v['nodes']][:3]}"
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def test_reader_journey_keyboard_only_without_javascript(browser, base_url):
    ctx = browser.new_context(java_script_enabled=False, viewport=DESKTOP)
    page = ctx.new_page()
    page.goto(base_url + "/")
    assert page.locator("h1").inner_text() == "Top stories"
    assert _card_ids(page) == FRONT_GLOBAL
    # skip link first, then sign in with the keyboard only
    page.keyboard.press("Tab")
    assert page.locator(":focus").inner_text() == "Skip to content"
    _tab_to(page, "Sign in")
    page.keyboard.press("Enter")
    page.wait_for_url("**/signin?next=*")
    _tab_to(page, "Create one")  # no account yet: register
    page.keyboard.press("Enter")
    page.wait_for_url("**/register?next=*")
    _type_into(page, {"name": "dana", "password": PASSWORD, "password2": PASSWORD})
    page.keyboard.press("Enter")  # submits the form
    page.wait_for_url(base_url + "/")
    assert page.locator(".account a").first.inner_text() == "dana"
    # follow a topic from a card, keyboard only: open the card's "More" disclosure, then its first button
    _tab_to(page, "More on Markets rally")
    page.keyboard.press("Enter")
    _tab_to(page, "Follow business")
    _enter(page)
    assert page.locator("article[aria-labelledby='t-s3'] button", has_text="Unfollow business").count() == 1
    # focus came back to that button (the redirect's #follow-s3), so the next card is a Tab away
    assert page.locator(":focus").get_attribute("id") == "follow-s3"
    # block a source from a later card
    _tab_to(page, "More on New phone launched")
    page.keyboard.press("Enter")
    _tab_to(page, "Block a.com")
    _enter(page)
    for path in ("/", "/?edition=en", "/topics/world", "/topics/tech", "/trending", "/for-you", "/sources/a.com"):
        page.goto(base_url + path)
        shown = _shown_ids(page)
        assert not shown & A_COM, (path, shown)
        assert page.locator("ol.cards a[href^='https://a.com/']").count() == 0, path
    page.goto(base_url + "/")
    assert _card_ids(page) == ["s3", "s6", "s4"]  # FRONT_GLOBAL without a.com's stories
    # For You says why: the followed topic
    page.goto(base_url + "/for-you")
    assert "You follow business" in page.locator("article[aria-labelledby='t-s3'] ul.why").inner_text()
    # open full coverage of a story with the keyboard; its lead is no longer the blocked outlet
    page.goto(base_url + "/stories/s1")
    lead = page.locator("section[aria-labelledby='lead-h'] a").first
    assert lead.get_attribute("href") == "https://b.com/a3"
    assert "5 sources" in page.locator("article.coverage > p.meta").inner_text()
    page.goto(base_url + "/topics/business")
    _tab_to(page, "Markets rally")
    page.keyboard.press("Enter")
    page.wait_for_url("**/stories/s3")
    assert page.locator("h1").inner_text() == "Markets rally"
    # settings show the block; sign out
    page.goto(base_url + "/settings")
    assert page.locator("section[aria-labelledby='h-block_sources'] li a").all_inner_texts() == ["a.com"]
    _tab_to(page, "Sign out")
    page.keyboard.press("Enter")
    page.wait_for_url(base_url + "/")
    assert page.locator(".account a").inner_text() == "Sign in"
    assert _card_ids(page) == FRONT_GLOBAL  # anonymous again: nothing blocked
    # a wrong password is refused and says so; the right one signs in again, blocks intact
    _tab_to(page, "Sign in")
    page.keyboard.press("Enter")
    page.wait_for_url("**/signin?next=*")
    _type_into(page, {"name": "dana", "password": "not my password"})
    _enter(page)
    assert "do not match" in page.locator("[role=alert]").inner_text()
    assert page.locator("#password[aria-invalid=true]").count() == 1
    _type_into(page, {"password": PASSWORD})  # the name is kept in its field
    page.keyboard.press("Enter")
    page.wait_for_url(base_url + "/")
    assert _card_ids(page) == ["s3", "s6", "s4"]
    # delete the account from the account page, keyboard only
    _tab_to(page, "Account")
    page.keyboard.press("Enter")
    page.wait_for_url(base_url + "/account")
    _type_into(page, {"password": PASSWORD}, field_id="delete-password")
    _enter(page)
    assert page.locator("h1").inner_text() == "Account deleted"
    assert page.locator(".account a").inner_text() == "Sign in"
    page.goto(base_url + "/signin")
    _type_into(page, {"name": "dana", "password": PASSWORD})
    _enter(page)
    assert "do not match" in page.locator("[role=alert]").inner_text()  # the account is gone
    ctx.close()


def _type_into(page, values: dict[str, str], field_id: str | None = None, limit: int = 200) -> None:
    """Tabs from the top of the page to each field (by name, or ``field_id`` for the single field given)
    and types its value, keyboard only; a field is cleared first (Ctrl+A, then typing replaces it)."""
    for name, value in values.items():
        selector = f"#{field_id}:focus" if field_id else f"[name='{name}']:focus"
        for _ in range(limit):
            page.keyboard.press("Tab")
            if page.locator(selector).count():
                break
        else:
            raise AssertionError(f"Tab never reached the field {name!r}")
        page.keyboard.press("Control+A")
        page.keyboard.type(value)


PAGES = ("/", "/stories/s1", "/topics", "/topics/world", "/trending", "/sources/a.com", "/signin", "/register")


@pytest.mark.parametrize("viewport_name", ["desktop", "phone"])
def test_screenshots_and_axe_at_desktop_and_phone_widths(browser, base_url, server, viewport_name):
    viewport = DESKTOP if viewport_name == "desktop" else PHONE
    out = artifacts_dir()
    # axe-core is JavaScript, so this context runs it (the pages themselves carry no script and
    # their CSP forbids any); the journey test above proves the pages work without JavaScript
    ctx = browser.new_context(viewport=viewport)
    page = ctx.new_page()
    problems = {}
    for path in PAGES:
        page.goto(base_url + path)
        name = path.strip("/").replace("/", "-") or "home"
        page.screenshot(path=os.path.join(out, f"{name}-{viewport_name}.png"), full_page=True)
        # no horizontal scrolling on a phone
        overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert overflow <= 0, (path, overflow)
        found = _axe_serious(page)
        if found:
            problems[path] = found
    # signed-in pages: an editor (made as an operator does) signs in through the form (no JavaScript needed)
    editor = f"erin-{viewport_name}"
    AccountStore(server, KEYS, cheap_hasher()).create(editor, PASSWORD, time.time(), role="editor")
    page.goto(base_url + "/signin?next=/for-you")
    page.fill("#name", editor)
    page.fill("#password", PASSWORD)
    page.click("form.stack button[type=submit]")
    page.wait_for_url("**/for-you")
    for path in ("/for-you", "/settings", "/", "/saved", "/account", "/admin"):
        page.goto(base_url + path)
        name = "signed-in-" + (path.strip("/") or "home")
        page.screenshot(path=os.path.join(out, f"{name}-{viewport_name}.png"), full_page=True)
        found = _axe_serious(page)
        if found:
            problems[path + " (signed in)"] = found
    # the checker itself sees a serious violation when there is one (an unlabeled form field)
    page.set_content("<html lang='en'><title>t</title><main><h1>x</h1><input name='q'></main></html>")
    control = _axe_serious(page)
    ctx.close()
    assert problems == {}
    assert control and control[0].startswith("label (critical)"), control
    assert os.path.exists(os.path.join(out, f"home-{viewport_name}.png"))


def test_save_read_marks_and_muting_keyboard_only_without_javascript(browser, base_url):
    """Save from the coverage page, find it on the Saved page dimmed as read, hide read stories and mute a word,
    with the keyboard only; then axe-core on the Saved and settings pages as this reader has them."""
    ctx = browser.new_context(java_script_enabled=False, viewport=PHONE)
    page = ctx.new_page()
    page.goto(base_url + "/register?next=/topics/business")
    _type_into(page, {"name": "gwen", "password": PASSWORD, "password2": PASSWORD})
    page.keyboard.press("Enter")
    page.wait_for_url("**/topics/business")
    _tab_to(page, "Markets rally")
    page.keyboard.press("Enter")
    page.wait_for_url("**/stories/s3")  # opening the coverage page marks s3 read
    _tab_to(page, "Save Markets rally")  # the button's text names the story for screen readers
    _enter(page)
    assert page.locator("button[value='unsave:s3']").count() == 1
    _tab_to(page, "Saved")
    _enter(page)
    assert page.locator("h1").inner_text() == "Saved stories" and _card_ids(page) == ["s3"]
    assert page.locator("article[aria-labelledby='t-s3']").get_attribute("class") == "card read"
    _tab_to(page, "Hide read stories")
    _enter(page)
    assert _card_ids(page) == [] and page.url.endswith("/saved?hide_read=1")
    page.goto(base_url + "/settings")
    _type_into(page, {"value": "Phone"})  # the first field named "value" on the page is the muted-word field
    _enter(page)  # submits the form, back to /settings
    assert page.locator("section[aria-labelledby='h-mute_words'] li span").all_inner_texts() == ["phone"]
    page.goto(base_url + "/")
    assert "s7" not in _card_ids(page)  # "New phone launched"
    cookies = ctx.cookies()
    ctx.close()
    # axe-core needs JavaScript: the same reader's pages in a context that runs it
    js = browser.new_context(viewport=DESKTOP)
    js.add_cookies(cookies)
    page = js.new_page()
    problems = {}
    for path in ("/saved", "/settings", "/stories/s3"):
        page.goto(base_url + path)
        problems.update({path: found} if (found := _axe_serious(page)) else {})
    js.close()
    assert problems == {}
