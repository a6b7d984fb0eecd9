"""Search in a real headless Chromium, keyboard only and without JavaScript: the header's search box finds the
storm stories (a merged story's article counted under the story it was merged into), a filter narrows them, and
axe-core finds no serious or critical violation on the search page (browser, helpers: ``test_browser.py``)."""

from __future__ import annotations

import pytest

from newsflow.serving.search import Searcher
from newsflow.storage.search_index import SearchIndex, StoryRow, TextRow
from tests.helpers import populated_app
from tests.integration.asgi_server import serve_in_thread
from tests.integration.ranking_data import NOW, STORIES
from tests.web.test_browser import CHROMIUM, DESKTOP, PHONE, _axe_serious, _card_ids, _enter, _tab_to, browser  # noqa: F401

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH (make browser installs it)")
H = 3600.0


def write_index(path: str) -> None:
    """One article per ranking_data story, and one of s8 (merged into s1), as the streaming job indexes them."""
    index = SearchIndex(path)
    texts = [
        TextRow(f"a-{sid}", title, f"Report on {title.lower()}.", f"https://{dom}/{sid}", dom, langs[0], NOW - age * H)
        for sid, (title, dom, _, age, langs, _, _) in STORIES.items()
    ]
    texts.append(TextRow("a-s8", "Storm surge warning", "", "https://e.com/s8", "e.com", "en", NOW - 2 * H))
    index.put_texts(texts)
    index.put_stories([StoryRow(f"a-{sid}", sid, tuple(v[5]), ()) for sid, v in STORIES.items()])
    index.put_stories([StoryRow("a-s8", "s8", ("world",), ())])
    index.close()


@pytest.fixture(scope="module")
def search_url(server, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("search-web")
    app = populated_app(server, str(tmp / "snap"), b"b" * 32, front_page=True)
    write_index(str(tmp / "index.sqlite3"))
    app.state.api.search = Searcher(str(tmp / "index.sqlite3"))
    with serve_in_thread(app) as port:
        yield f"http://127.0.0.1:{port}"


def test_search_from_the_header_keyboard_only_and_axe_on_the_search_page(browser, search_url):  # noqa: F811
    ctx = browser.new_context(java_script_enabled=False, viewport=PHONE)
    page = ctx.new_page()
    page.goto(search_url + "/")
    for _ in range(40):  # Tab to the header's search box, type, Enter
        page.keyboard.press("Tab")
        if page.locator("#site-q:focus").count():
            break
    else:
        raise AssertionError("Tab never reached the search box")
    page.keyboard.type("storms")
    _enter(page)
    assert page.url.endswith("/search?q=storms")
    assert page.locator("h1").inner_text() == "Search: storms"
    assert sorted(_card_ids(page)) == ["s1", "s2"]  # "Storm ..." titles; s8's article counts for s1
    assert page.locator("article[aria-labelledby='t-s1'] + details summary").inner_text().startswith("2 matching")
    _tab_to(page, "Storm hits the coast")
    _enter(page)
    assert page.url.endswith("/stories/s1")
    page.goto(search_url + "/search?q=storm&since=2023-11-14&until=2023-11-14")
    assert sorted(_card_ids(page)) == ["s1", "s2"]  # NOW is 2023-11-14 22:13 UTC; every story is of that day
    page.goto(search_url + "/search?q=storm&until=2023-11-13")
    assert _card_ids(page) == [] and "No stories match" in page.content()
    ctx.close()
    js = browser.new_context(viewport=DESKTOP)  # axe-core needs JavaScript
    page = js.new_page()
    problems = {}
    for path in ("/search", "/search?q=storm", "/search?q=nothing-matches-this"):
        page.goto(search_url + path)
        problems.update({path: found} if (found := _axe_serious(page)) else {})
    js.close()
    assert problems == {}
