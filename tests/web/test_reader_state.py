"""Read marks, saved stories, muted words, removed interests, preferred leads and blocks through the JSON API
and the web pages (real embedded Redis, real HTTP on 127.0.0.1): one read-state store that For You, the read
marks and ``/v1/me`` share, reachable only by its reader."""

from __future__ import annotations

import httpx
import lxml.html

from newsflow.serving.tokens import sign_token
from newsflow.storage.feed_page import drop_user_feed
from newsflow.storage.keys import Keys, reader_bucket
from tests.helpers import FRONT_GLOBAL, register_reader
from tests.integration.ranking_data import NOW, STORIES
from tests.web.conftest import SECRET

KEYS = Keys()


def _auth(user: str) -> dict:
    return {"Authorization": "Bearer " + sign_token(user, SECRET, NOW, 3600)}


def _ids(resp) -> list[str]:
    assert resp.status_code == 200, resp.text
    return [s["story_id"] for s in resp.json()["stories"]]


def test_saved_stories_api_is_per_reader(site):
    ann, ben = _auth("ann"), _auth("ben")
    assert site.get("/v1/me/saved").status_code == 401
    assert site.put("/v1/me/saved/s3").status_code == 401
    assert site.get("/v1/me/saved", headers=ann).json() == {
        "user": "ann",
        "count": 0,
        "total": 0,
        "offset": 0,
        "stories": [],
    }
    put = site.put("/v1/me/saved/s3", headers=ann)
    assert put.status_code == 200 and put.json() == {"story_id": "s3", "saved": True, "saved_at": NOW}
    assert put.headers["cache-control"] == "private, no-store"
    assert site.put("/v1/me/saved/s8", headers=ann).json()["story_id"] == "s1"  # s8 was merged into s1
    assert site.put("/v1/me/saved/nope", headers=ann).status_code == 404
    assert site.put("/v1/me/saved/bad id", headers=ann).status_code == 400
    saved = site.get("/v1/me/saved", headers=ann).json()
    # same saved time: newest first, ties by larger story id first
    assert [(s["story_id"], s["title"], s["saved_at"]) for s in saved["stories"]] == [
        ("s3", "Markets rally", NOW),
        ("s1", "Storm hits the coast", NOW),
    ]
    assert _ids(site.get("/v1/me/saved", headers=ann, params={"limit": 1, "offset": 1})) == ["s1"]
    # another reader's token reaches only their own (empty) list, and cannot remove ann's
    assert site.get("/v1/me/saved", headers=ben).json()["stories"] == []
    assert site.delete("/v1/me/saved/s3", headers=ben).json() == {"story_id": "s3", "saved": False, "was_saved": False}
    assert _ids(site.get("/v1/me/saved", headers=ann)) == ["s3", "s1"]
    # saved stories are marked on the reader's lists
    top = site.get("/v1/top", headers=ann).json()["stories"]
    assert {s["story_id"] for s in top if s.get("saved")} == {"s1", "s3"}
    assert site.get("/v1/top").headers["cache-control"].startswith("public")  # the public page is untouched
    assert site.delete("/v1/me/saved/s3", headers=ann).json()["was_saved"] is True
    assert _ids(site.get("/v1/me/saved", headers=ann)) == ["s1"]


def test_a_click_marks_read_and_for_you_repeats_it_only_with_new_developments(site, server):
    cy = _auth("cy")
    before = _ids(site.get("/v1/feed", headers=cy))
    assert "s1" in before and "s3" in before
    ev = site.post("/v1/events", headers=cy, json={"events": [{"type": "click", "story_id": "s1", "surface": "feed"}]})
    assert ev.status_code == 202
    assert site.get("/v1/me/read", headers=cy).json() == {
        "user": "cy",
        "count": 1,
        "read": [{"story_id": "s1", "read_at": NOW, "reports": 1}],
    }
    assert site.get("/v1/me/read", headers=_auth("dee")).json()["read"] == []  # another reader's token
    after = _ids(site.get("/v1/feed", headers=cy))
    assert "s1" not in after and [s for s in before if s != "s1"] == after[: len(before) - 1]
    # the lists mark it read, and hide_read leaves it out
    top = site.get("/v1/top", headers=cy).json()["stories"]
    assert [s["story_id"] for s in top if s.get("read")] == ["s1"]
    assert "s1" not in _ids(site.get("/v1/top", headers=cy, params={"hide_read": "1"}))
    assert "s1" not in _ids(site.get("/v1/topics/world", headers=cy, params={"hide_read": "1"}))
    assert "s1" in _ids(site.get("/v1/topics/world", headers=cy))
    # s1 gets two more independent reports: For You shows it again and says so
    server.hset(KEYS.story("s1"), "independent_count", 3)
    drop_user_feed(server, "cy", KEYS)  # the feed is rebuilt from the stories now
    again = site.get("/v1/feed", headers=cy, params={"limit": 19}).json()["stories"]
    s1 = next(s for s in again if s["story_id"] == "s1")
    assert s1["read"] is True and s1["new_since_read"] == 2
    assert "s1" not in _ids(site.get("/v1/feed", headers=cy, params={"limit": 18, "hide_read": "1"}))
    _signin(site, "cy")  # the same reader on the web: For You says why it is back
    card = _doc(site.get("/for-you")).xpath("//article[@aria-labelledby='t-s1']")[0]
    assert card.get("class") == "card read"
    assert card.xpath(".//ul[@class='why']/li/text()")[0] == "New developments since you read it"
    assert card.xpath(".//span[@class='tag read-tag']/text()") == ["Read, updated"]
    # marking it read again (through the API) takes it out until it changes again; unread brings it back
    put = site.put("/v1/me/read/s1", headers=cy).json()
    assert put == {"story_id": "s1", "read": True, "read_at": NOW, "reports": 3}
    assert "s1" not in _ids(site.get("/v1/feed", headers=cy, params={"limit": 17}))
    assert site.delete("/v1/me/read/s1", headers=cy).json() == {"story_id": "s1", "read": False, "was_read": True}
    assert "s1" in _ids(site.get("/v1/feed", headers=cy, params={"limit": 16}))


def test_web_ui_settings_hold_through_the_api(site):
    """Removed interests, preferred leads, blocks in coverage lists and muted words, set through the API, hold on
    /v1/feed, /v1/top, /v1/topics, /v1/trending and /v1/stories."""
    eve = _auth("eve")
    assert {"s1", "s3"} <= set(_ids(site.get("/v1/feed", headers=eve)))
    # a removed interest drops stories placed by inference (s1 and s2 are world; s3 is stored as world+business)
    site.put("/v1/me/preferences", headers=eve, json={"dismiss_topics": ["world"]})
    feed = _ids(site.get("/v1/feed", headers=eve))
    assert not {"s1", "s2", "s3"} & set(feed) and feed
    # ... unless a follow placed them
    site.put("/v1/me/preferences", headers=eve, json={"follow_sources": ["a.com"]})
    assert "s1" in _ids(site.get("/v1/feed", headers=eve))
    # coverage: the preferred outlet's report leads; a blocked outlet leaves the reports and sources
    cov = site.get("/v1/stories/s1").json()
    assert {r["article"]["source_domain"] for r in cov["reports"]} == {"a.com", "b.com", "e.com"}
    assert "lead" not in cov and cov["coverage"]["articles"] == 5
    site.put("/v1/me/preferences", headers=eve, json={"prefer_sources": ["e.com"]})  # a preference alone
    assert site.get("/v1/stories/s1", headers=eve).json()["lead"]["url"] == "https://e.com/a4"
    site.put("/v1/me/preferences", headers=eve, json={"block_sources": ["b.com"]})
    mine = site.get("/v1/stories/s1", headers=eve)
    assert mine.headers["cache-control"] == "private, no-store"
    mine = mine.json()
    assert mine["lead"]["url"] == "https://e.com/a4"
    assert {r["article"]["source_domain"] for r in mine["reports"]} == {"a.com", "e.com"}
    assert "b.com" not in {s["domain"] for s in mine["sources"]} and mine["coverage"]["articles"] == 4
    # blocking a.com takes its report and the copies of it (wire-copy.com, f.com) out as well
    site.put("/v1/me/preferences", headers=eve, json={"follow_sources": [], "block_sources": ["a.com", "b.com"]})
    mine = site.get("/v1/stories/s1", headers=eve).json()
    assert [s["domain"] for s in mine["sources"]] == ["e.com"] and mine["coverage"]["independent_reports"] == 1


def test_muted_words_hold_on_every_api_surface(site):
    fin = _auth("fin")
    bad = site.put("/v1/me/preferences", headers=fin, json={"mute_words": ["x" * 101]})
    assert bad.status_code == 400 and "muted word" in bad.json()["error"]["message"]
    put = site.put("/v1/me/preferences", headers=fin, json={"mute_words": ["STORM", "Local  Election", "a4"]})
    assert put.json()["mute_words"] == ["a4", "local election", "storm"]
    storm = {sid for sid, v in STORIES.items() if "Storm" in v[0]}  # s1, s2
    assert storm == {"s1", "s2"}
    assert _ids(site.get("/v1/top")) == FRONT_GLOBAL
    muted = storm | {"s5"}  # "Local election called"
    assert _ids(site.get("/v1/top", headers=fin)) == [s for s in FRONT_GLOBAL if s not in muted]
    assert _ids(site.get("/v1/topics/world", headers=fin)) == ["s3"]  # s1, s2 muted
    trending = site.get("/v1/trending", headers=fin).json()
    assert [s["story_id"] for s in trending["stories"]] == ["s3"] and trending["breaking"] == []  # s5 muted
    assert not (storm | {"s5"}) & set(_ids(site.get("/v1/feed", headers=fin)))
    # coverage lists: the muted headline "title a4" is gone, the rest stays
    cov = site.get("/v1/stories/s1", headers=fin).json()
    assert "e.com" not in {r["article"]["source_domain"] for r in cov["reports"]}
    # another reader is not affected
    assert _ids(site.get("/v1/top", headers=_auth("gil"))) == FRONT_GLOBAL


def test_reader_state_lives_in_the_readers_bucket_slot(site, server):
    site.put("/v1/me/saved/s3", headers=_auth("hal"))
    site.post("/v1/events", headers=_auth("hal"), json={"events": [{"type": "click", "story_id": "s1"}]})
    b = reader_bucket("hal")
    assert server.exists(f"nf:{{r{b}}}:reader:hal:saved") and server.exists(f"nf:{{r{b}}}:reader:hal:read")
    assert 0 < server.ttl(f"nf:{{r{b}}}:reader:hal:read") <= 30 * 86400


def _doc(resp) -> lxml.html.HtmlElement:
    assert resp.status_code == 200, resp.text
    return lxml.html.fromstring(resp.text)


def _signin(c: httpx.Client, name: str) -> str:
    """Registers ``name`` on the web (the client keeps the session) and returns the settings page's CSRF token."""
    assert register_reader(c, name).status_code == 303
    return _doc(c.get("/settings")).xpath("//input[@name='csrf']/@value")[0]


def test_web_read_marks_hide_read_saved_page_and_muted_words(site):
    csrf = _signin(site, "ivy")
    assert _doc(site.get("/")).xpath("//article[contains(@class, 'read')]") == []
    site.get("/stories/s3")  # opening the coverage page marks it read
    home = _doc(site.get("/"))
    assert [a.get("aria-labelledby") for a in home.xpath("//article[contains(@class, ' read')]")] == ["t-s3"]
    assert home.xpath("//article[@aria-labelledby='t-s3']//span[@class='tag read-tag']/text()") == ["Read"]
    link = home.xpath("//p[@class='read-switch']/a")[0]
    assert link.text == "Hide read stories" and link.get("href") == "/?hide_read=1"
    hidden = _doc(site.get("/?hide_read=1"))
    assert "t-s3" not in hidden.xpath("//article/@aria-labelledby")
    assert hidden.xpath("//p[@class='read-switch']/a/text()") == ["Show read stories"]
    assert "s3" not in [s["story_id"] for s in site.get("/v1/feed", headers=_auth("ivy")).json()["stories"]]
    # save from a card and from the coverage page; the Saved page lists them
    button = home.xpath("//article[@aria-labelledby='t-s7']//button[@value='save:s7']")
    assert button and button[0].text == "Save"
    saved = site.post("/saved", data={"csrf": csrf, "op": "save:s7", "next": "/"})
    assert saved.status_code == 303 and saved.headers["location"] == "/#save-s7"  # focus back on the button
    story = _doc(site.get("/stories/s6"))
    assert story.xpath("//button[@value='save:s6']")
    site.post("/saved", data={"csrf": csrf, "op": "save:s6", "next": "/stories/s6"})
    saved = _doc(site.get("/saved"))
    assert saved.xpath("//h1/text()") == ["Saved stories"]
    assert saved.xpath("//ol[@class='cards']//article/@aria-labelledby") == ["t-s7", "t-s6"]
    assert [s["story_id"] for s in site.get("/v1/me/saved", headers=_auth("ivy")).json()["stories"]] == ["s7", "s6"]
    site.post("/saved", data={"csrf": csrf, "op": "unsave:s7", "next": "/saved"})
    assert _doc(site.get("/saved")).xpath("//ol[@class='cards']//article/@aria-labelledby") == ["t-s6"]
    assert site.post("/saved", data={"csrf": "forged", "op": "save:s1", "next": "/"}).status_code == 403
    # mute a word on the settings page: its stories leave the pages and the API alike
    site.post("/prefs", data={"csrf": csrf, "action": "mute", "kind": "word", "value": "Phone", "next": "/settings"})
    settings = _doc(site.get("/settings"))
    assert settings.xpath("//section[@aria-labelledby='h-mute_words']//li/span/text()") == ["phone"]
    assert "t-s7" not in _doc(site.get("/")).xpath("//article/@aria-labelledby")  # "New phone launched"
    assert "s7" not in [s["story_id"] for s in site.get("/v1/top", headers=_auth("ivy")).json()["stories"]]
    site.post("/prefs", data={"csrf": csrf, "op": "unmute:word:phone", "next": "/settings"})
    assert "t-s7" in _doc(site.get("/")).xpath("//article/@aria-labelledby")
    # signed out: no read marks, no switch, no save buttons, and /saved asks to sign in
    site.post("/signout", data={"csrf": csrf})
    anon = _doc(site.get("/"))
    assert not anon.xpath("//article[contains(@class, ' read')]") and not anon.xpath("//p[@class='read-switch']")
    assert site.get("/saved").status_code == 303
