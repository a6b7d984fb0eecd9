"""Pictures in a real headless Chromium (Debian's ``chromium`` through Playwright, as ``test_browser.py``): the
home page with one story carrying stored thumbnails shows them decoded at their declared size, every other card
shows no image at all (no broken-image icon, no empty box), the strict CSP lets the same-origin pictures load (no
CSP console error, no failed request) and axe-core finds no serious or critical violation. Screenshots
(1280x900, 390x844) go to ``$NEWSFLOW_TEST_ARTIFACTS`` (default ``var/test-artifacts/web``)."""

from __future__ import annotations

import io
import os

import pytest
from PIL import Image

from newsflow.core.images import CARD_WIDTH, ICON_SIZE, make_thumbnail
from newsflow.storage.keys import Keys
from newsflow.storage.thumbnails import ThumbnailStore
from tests.integration.asgi_server import serve_in_thread
from tests.web.test_browser import CHROMIUM, DESKTOP, PHONE, _axe_serious, artifacts_dir

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (make browser installs it)"),
]


def _jpeg(size, color) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "JPEG")
    return out.getvalue()


def test_cards_show_decoded_same_origin_pictures_and_nothing_where_there_is_none(server, tmp_path):
    from playwright.sync_api import sync_playwright

    from newsflow.serving.app import ServingConfig, create_app
    from newsflow.storage.feeds import build_feeds
    from tests.helpers import cheap_hasher, populate_ranking
    from tests.integration.ranking_data import NOW

    store = ThumbnailStore(str(tmp_path / "thumbs"))
    lead = make_thumbnail(_jpeg((1600, 900), (30, 90, 160)), (CARD_WIDTH, 2 * CARD_WIDTH))
    icon = make_thumbnail(_jpeg((64, 64), (200, 40, 40)), (ICON_SIZE, ICON_SIZE))
    for t in (lead, icon):
        store.put(t.name, t.data)
    populate_ranking(server, feeds=False)
    server.hset(Keys().story("s1"), mapping={"image": lead.name, "icon": icon.name})
    build_feeds(server, NOW)
    cfg = ServingConfig(
        token_secret=b"p" * 32,
        snapshot_dir=str(tmp_path / "snap"),
        clock=lambda: NOW,
        password_hasher=cheap_hasher(),
        thumbnail_dir=store.root,
    )
    with serve_in_thread(create_app(server, cfg)) as port, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=DESKTOP)
            errors: list[str] = []  # CSP refusals are console errors
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" and "404" not in m.text else None)
            failed: list[str] = []  # the browser's own /favicon.ico request aside (issue 35 item 5)
            page.on("response", lambda r: failed.append(r.url) if r.status >= 400 and "/favicon" not in r.url else None)
            page.goto(f"http://127.0.0.1:{port}/", wait_until="load")
            page.evaluate("() => Promise.all([...document.images].map(i => i.decode()))")
            shown = page.evaluate(
                "() => [...document.images].map(i => ({src: i.getAttribute('src'), complete: i.complete,"
                " w: i.naturalWidth, h: i.naturalHeight, card: i.closest('article')"
                ".querySelector('h3 a').getAttribute('href')}))"
            )
            page.screenshot(path=os.path.join(artifacts_dir(), "pictures-home-desktop.png"), full_page=True)
            axe = _axe_serious(page)
            phone = browser.new_page(viewport=PHONE)
            phone.goto(f"http://127.0.0.1:{port}/", wait_until="load")
            # the card picture scales down to the phone's column and keeps its aspect ratio
            fit = phone.evaluate(
                "() => { const i = document.images[0]; const card = i.closest('article').getBoundingClientRect();"
                " const r = i.getBoundingClientRect(); return [r.width <= card.width, r.height / r.width]; }"
            )
            phone.screenshot(path=os.path.join(artifacts_dir(), "pictures-home-phone.png"))
        finally:
            browser.close()
    assert shown == [
        {"src": f"/img/{lead.name}", "complete": True, "w": lead.width, "h": lead.height, "card": "/stories/s1"},
        {"src": f"/img/{icon.name}", "complete": True, "w": icon.width, "h": icon.height, "card": "/stories/s1"},
    ]
    assert (lead.width, lead.height) == (320, 180)
    assert errors == [] and failed == []
    assert axe == []
    assert fit[0] and abs(fit[1] - lead.height / lead.width) < 0.01
