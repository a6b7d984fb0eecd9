"""The editor's desk in a real headless Chromium, keyboard only: an editor signs in, adds a publisher by its home
page (a local site on 127.0.0.1, found by the crawl tier's discovery), imports an OPML file, pauses a feed and
disables a reader; axe-core finds no serious or critical violation on the admin pages. Helpers and the browser
are :mod:`tests.web.test_browser`'s, the served desk :mod:`tests.web.test_admin_desk`'s."""

from __future__ import annotations

import os

import pytest

from newsflow.storage.accounts import AccountStore
from newsflow.storage.audit import AuditLog
from newsflow.storage.source_registry import SourceRegistry, crawl_task_id
from tests.helpers import PASSWORD
from tests.web.test_admin_desk import KEYS, OPML, desk, site  # noqa: F401 - fixtures
from tests.web.test_browser import (
    CHROMIUM,
    DESKTOP,
    _axe_serious,
    _enter,
    _tab_to,
    _type_into,
    artifacts_dir,
    browser,  # noqa: F401 - fixture
)

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (make browser installs it)")


def test_an_editor_manages_sources_and_readers_keyboard_only(browser, desk, tmp_path):  # noqa: F811
    base, client, _ = desk
    opml = tmp_path / "subscriptions.opml"
    opml.write_bytes(OPML)
    page = browser.new_context(viewport=DESKTOP).new_page()  # JavaScript on for axe-core; the pages have none
    problems = {}
    page.goto(base + "/signin?next=/admin")
    _type_into(page, {"name": "ed", "password": PASSWORD})
    page.keyboard.press("Enter")
    page.wait_for_url(base + "/admin")
    problems["/admin (empty)"] = _axe_serious(page)

    # add a publisher by its home page
    _type_into(page, {"url": "http://local.example.com/"})
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert "1 added" in page.locator("#h-report + p").inner_text()
    # import an OPML file: the file chooser opens from the keyboard
    for _ in range(100):
        page.keyboard.press("Tab")
        if page.locator("#import-file:focus").count():
            break
    with page.expect_file_chooser() as chooser:
        page.keyboard.press("Space")
    chooser.value.set_files(str(opml))
    page.keyboard.press("Tab")  # the Import button
    _enter(page)
    assert "2 added" in page.locator("#h-report + p").inner_text()
    # pause the local feed
    page.goto(base + "/admin")
    _tab_to(page, "Pause Local News")
    _enter(page)
    assert page.locator("button", has_text="Resume Local News").count() == 1
    problems["/admin"] = _axe_serious(page)
    page.screenshot(path=os.path.join(artifacts_dir(), "admin-desktop.png"), full_page=True)

    # find a reader by name and disable the account
    _tab_to(page, "Readers")
    _enter(page)
    _type_into(page, {"q": "bo"}, field_id="q")  # the readers search, not the header's site search
    with page.expect_navigation():
        page.keyboard.press("Enter")
    _tab_to(page, "Disable bob")
    _enter(page)
    assert page.locator("button", has_text="Enable bob").count() == 1
    problems["/admin/readers"] = _axe_serious(page)
    page.context.close()

    assert {k: v for k, v in problems.items() if v} == {}
    fid = crawl_task_id("feed", "http://local.example.com/rss.xml")
    assert SourceRegistry(client, KEYS).get(fid)["status"] == "paused"
    assert AccountStore(client, KEYS).search("bob")[0]["disabled"] is not None
    actions = [(a["editor"], a["action"]) for a in reversed(AuditLog(client, KEYS).recent())]
    assert actions == [
        ("ed", "sources.add"),
        ("ed", "sources.import"),
        ("ed", "sources.pause"),
        ("ed", "readers.disable"),
    ]
