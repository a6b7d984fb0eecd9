"""Pictures end to end on 127.0.0.1: the crawler's thumbnail step against a local server of pages and
Pillow-made images (a JPEG, a PNG icon, a decompression bomb, a file over 5 MB, a non-image), and the serving
app's ``/img/<name>`` and ``<img>`` markup over the stored files."""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import threading

import httpx
import lxml.html
import pytest
from PIL import Image

from newsflow.core.images import CARD_WIDTH, MAX_IMAGE_BYTES, make_thumbnail
from newsflow.crawler.fetch import Fetcher
from newsflow.crawler.frontier import Frontier
from newsflow.crawler.httpserver import HttpServer, Response
from newsflow.crawler.landing import LandingWriter, read_landing_file
from newsflow.crawler.thumbnails import Thumbnailer
from newsflow.crawler.worker import CrawlWorker
from newsflow.storage.keys import Keys
from newsflow.storage.thumbnails import ThumbnailStore
from tests.helpers import Scripted, crawler_config


def _image(fmt: str, size, color, mode="RGB") -> bytes:
    out = io.BytesIO()
    Image.new(mode, size, color).save(out, fmt)
    return out.getvalue()


def _page(image: str = "", icon: str = "") -> bytes:
    head = (f'<meta property="og:image" content="{image}">' if image else "") + (
        f'<link rel="icon" href="{icon}">' if icon else ""
    )
    return f"<html><head>{head}</head><body><article><p>{'Words. ' * 80}</p></article></body></html>".encode()


def _ok(ctype: str, body: bytes) -> list:
    return [Response(200, {"Content-Type": ctype}, body)]


@pytest.fixture(scope="module")
def images():
    bomb = io.BytesIO()
    Image.new("1", (10_000, 10_000)).save(bomb, "PNG")  # 100 Mpx, over twice the 40 Mpx cap: Pillow refuses it
    big = _image("BMP", (1500, 1200), (10, 20, 30))  # 5.4 MB of pixels, uncompressed
    assert len(big) > MAX_IMAGE_BYTES
    return {
        "lead": _image("JPEG", (1200, 800), (200, 30, 30)),
        "icon": _image("PNG", (180, 180), (0, 0, 255, 128), mode="RGBA"),
        "bomb": bomb.getvalue(),
        "big": big,
        "text": b"<html>not a picture</html>",
    }


@pytest.fixture(scope="module")
def web(images):
    script = {
        ("news.test", "/good"): _ok("text/html", _page("https://cdn.test/lead.jpg", "/icon.png")),
        ("news.test", "/bomb"): _ok("text/html", _page("https://cdn.test/bomb.png")),
        ("news.test", "/big"): _ok("text/html", _page("https://cdn.test/big.bmp")),
        ("news.test", "/text"): _ok("text/html", _page("https://cdn.test/text.jpg")),
        ("news.test", "/bare"): _ok("text/html", _page()),
        ("cdn.test", "/lead.jpg"): _ok("image/jpeg", images["lead"]),
        ("news.test", "/icon.png"): _ok("image/png", images["icon"]),
        ("cdn.test", "/bomb.png"): _ok("image/png", images["bomb"]),
        ("cdn.test", "/big.bmp"): _ok("image/bmp", images["big"]),
        ("cdn.test", "/text.jpg"): _ok("image/jpeg", images["text"]),
    }
    handler = Scripted(script)
    with HttpServer(handler) as srv:
        yield srv, handler


def _step(port: int, root: str):
    letters = []
    fetcher = Fetcher(crawler_config(port))
    step = Thumbnailer(fetcher, ThumbnailStore(root), lambda *a: letters.append(a))
    return step, fetcher, letters


def test_the_step_stores_webp_thumbnails_and_dead_letters_bombs_big_files_and_non_images(web, images, tmp_path):
    srv, handler = web
    step, fetcher, letters = _step(srv.port, str(tmp_path / "thumbs"))

    async def run():
        try:
            out = {}
            for path in ("/good", "/bomb", "/big", "/text", "/bare", "/good"):
                body = (await fetcher.fetch(f"http://news.test{path}")).body
                out.setdefault(path, []).append(await step.page_pictures(body, "text/html", f"http://news.test{path}"))
            return out
        finally:
            await fetcher.aclose()

    out = asyncio.run(run())
    good = out["/good"][0]
    stored = sorted(os.listdir(tmp_path / "thumbs"))
    assert stored == sorted([good.image_thumb, good.icon_thumb])
    for name, source, box in ((good.image_thumb, images["lead"], CARD_WIDTH), (good.icon_thumb, images["icon"], 32)):
        data = (tmp_path / "thumbs" / name).read_bytes()
        assert name.startswith(hashlib.sha256(data).hexdigest()[:32] + "-")
        with Image.open(io.BytesIO(data)) as im, Image.open(io.BytesIO(source)) as src:
            assert im.format == "WEBP" and max(im.size) <= max(box, 32)
            assert name.endswith(f"-{im.width}x{im.height}.webp")
            # aspect kept: 1200x800 -> 320x213, 180x180 -> 32x32
            assert im.size == (box, round(box * src.height / src.width))
    assert out["/good"][1] == good  # same page again: same names, and the icon was not fetched twice
    assert len(handler.seen[("news.test", "/icon.png")]) == 1
    assert [p.image_thumb for k in ("/bomb", "/big", "/text", "/bare") for p in out[k]] == ["", "", "", ""]
    reasons = {url: reason for step_name, reason, _detail, url in letters if step_name == "thumbnail"}
    assert reasons == {
        "https://cdn.test/bomb.png": "image_bomb",
        "https://cdn.test/big.bmp": "image_too_large",
        "https://cdn.test/text.jpg": "not_an_image",
        # the icon-less pages fall back to /favicon.ico, which this server does not have (fetched once)
        "http://news.test/favicon.ico": "image_http_404",
    }
    assert len(handler.seen[("news.test", "/favicon.ico")]) == 1


def test_a_page_whose_pictures_take_too_long_keeps_what_it_has_and_dead_letters_the_rest(images, tmp_path):
    release = threading.Event()

    def slow_icon(_req):
        release.wait(5)  # answers once the step has given up on it
        return Response(200, {"Content-Type": "image/png"}, images["icon"])

    script = {
        ("slow.test", "/p"): _ok("text/html", _page("https://cdn.test/lead.jpg", "/icon.png")),
        ("cdn.test", "/lead.jpg"): _ok("image/jpeg", images["lead"]),
        ("slow.test", "/icon.png"): [slow_icon],
    }
    with HttpServer(Scripted(script)) as srv:
        letters = []
        fetcher = Fetcher(crawler_config(srv.port))
        step = Thumbnailer(fetcher, ThumbnailStore(str(tmp_path / "t")), lambda *a: letters.append(a), budget_s=1.0)

        async def run():
            try:
                body = (await fetcher.fetch("http://slow.test/p")).body
                return await step.page_pictures(body, "text/html", "http://slow.test/p")
            finally:
                release.set()
                await fetcher.aclose()

        got = asyncio.run(run())
    assert got.image_thumb and got.icon_thumb == ""
    assert os.listdir(tmp_path / "t") == [got.image_thumb]
    assert [(r, u) for _s, r, _d, u in letters] == [("image_timeout", "http://slow.test/icon.png")]


def test_a_crawled_page_lands_with_its_thumbnail_names(web, flushed_server, tmp_path):
    srv, _handler = web
    frontier = Frontier(flushed_server)
    frontier.add("http://news.test/good", "page", 0.0)
    writer = LandingWriter(str(tmp_path / "landing"), max_docs=1)
    store = ThumbnailStore(str(tmp_path / "thumbs"))
    worker = CrawlWorker(frontier, writer, crawler_config(srv.port), thumbnails=store)
    asyncio.run(worker.run(max_tasks=1, duration_s=20))
    writer.flush()
    docs = [
        d for n in sorted(os.listdir(tmp_path / "landing")) for d in read_landing_file(str(tmp_path / "landing" / n))
    ]
    assert len(docs) == 1 and docs[0].image_thumb and docs[0].icon_thumb
    assert store.exists(docs[0].image_thumb) and store.exists(docs[0].icon_thumb)
    assert flushed_server.llen(Keys().crawl_deadletter) == 0


def test_pages_show_stored_pictures_same_origin_and_cards_without_one_show_nothing(server, images, tmp_path):
    from newsflow.serving.app import ServingConfig, create_app
    from newsflow.storage.feeds import build_feeds
    from tests.helpers import cheap_hasher, populate_ranking
    from tests.integration.asgi_server import serve_in_thread
    from tests.integration.ranking_data import NOW

    store = ThumbnailStore(str(tmp_path / "thumbs"))
    lead = make_thumbnail(images["lead"], (CARD_WIDTH, 2 * CARD_WIDTH))
    icon = make_thumbnail(images["icon"], (32, 32))
    for t in (lead, icon):
        store.put(t.name, t.data)
    populate_ranking(server, feeds=False)
    keys = Keys()
    server.hset(keys.story("s1"), mapping={"image": lead.name, "icon": icon.name})
    server.hset(keys.article("a1"), mapping={"image": lead.name, "icon": icon.name})  # s1's lead report
    server.hset(keys.article("a3"), mapping={"icon": icon.name})  # an independent report with an icon only
    build_feeds(server, NOW)
    cfg = ServingConfig(
        token_secret=b"k" * 32,
        snapshot_dir=str(tmp_path / "snap"),
        clock=lambda: NOW,
        password_hasher=cheap_hasher(),
        thumbnail_dir=store.root,
    )
    with serve_in_thread(create_app(server, cfg)) as port:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            home = c.get("/")
            doc = lxml.html.fromstring(home.text)
            imgs = doc.xpath("//img")
            # s1's card alone has pictures: its lead image (alt: the headline) and its outlet's icon
            assert [i.get("src") for i in imgs] == [f"/img/{lead.name}", f"/img/{icon.name}"]
            card = doc.xpath("//article[h3/a[@href='/stories/s1']]")[0]
            assert card.xpath(".//img") == imgs
            big, small = imgs
            assert (big.get("width"), big.get("height")) == (str(lead.width), str(lead.height)) == ("320", "213")
            assert big.get("alt") == "Storm hits the coast" and small.get("alt") == "a.com"
            assert all(i.get("loading") == "lazy" for i in imgs)
            assert "img-src 'self'" in home.headers["content-security-policy"]
            for img, thumb in ((big, lead), (small, icon)):
                got = c.get(img.get("src"))
                assert got.status_code == 200 and got.content == thumb.data
                assert got.headers["content-type"] == "image/webp"
                assert got.headers["cache-control"] == "public, max-age=31536000, immutable"
            missing = lead.name.replace(lead.name[:32], "0" * 32)
            for path in (f"/img/{missing}", "/img/..%2F..%2Fetc%2Fpasswd", "/img/%2E%2E", "/img/x.webp"):
                assert c.get(path).status_code == 404, path
            story = lxml.html.fromstring(c.get("/stories/s1").text)
            lead_imgs = story.xpath("//section[@class='lead']//img")
            assert [(i.get("src"), i.get("alt"), i.get("width"), i.get("loading")) for i in lead_imgs] == [
                (f"/img/{lead.name}", "title a1", "320", "lazy")
            ]
            # the coverage list: the outlet icon where a report has one (a3), nothing for the others (a4)
            items = {li.xpath("string(./a[1])"): li.xpath(".//img") for li in story.xpath("//li[a[@rel='noopener']]")}
            assert [(i.get("src"), i.get("alt"), i.get("height")) for i in items["title a3"]] == [
                (f"/img/{icon.name}", "b.com", "32")
            ]
            assert items["title a4"] == []
            api = c.get("/v1/top").json()["stories"]
            by_id = {s["story_id"]: s for s in api}
            assert by_id["s1"]["image"] == lead.name and by_id["s1"]["icon"] == icon.name
            assert all(s["image"] == "" for sid, s in by_id.items() if sid != "s1")


def test_the_job_carries_landed_thumbnail_names_to_the_article_the_story_and_parquet(redis_server, tmp_path):
    import base64
    import json

    import pyarrow.dataset as ds

    from newsflow.core.urls import article_id
    from newsflow.storage.ranking import RankingStore
    from tests.helpers import run_job, write_landing

    client, url = redis_server
    lead, icon = "ab" * 16 + "-320x213.webp", "cd" * 16 + "-32x32.webp"
    texts = {  # two unrelated reports: two stories, each led by its own article
        "with": ("River floods the town", "The river burst its banks overnight and the town centre was flooded. "),
        "without": ("Chess final drawn", "The chess final ended in a draw after six hours of play in Madrid. "),
    }

    def page(path: str, thumbs: dict) -> bytes:
        title, text = texts[path]
        html = (
            f'<html lang="en"><head><title>{title}</title><meta property="og:image" content="/{path}.jpg">'
            f"</head><body><article><h1>{title}</h1><p>{text * 8}</p></article></body></html>"
        )
        doc = {
            "url": f"https://news.example/{path}",
            "source_domain": "news.example",
            "fetch_time": 1.7e9,
            "http_status": 200,
            "content_type": "text/html; charset=utf-8",
            "body_b64": base64.b64encode(html.encode()).decode(),
            **thumbs,
        }
        return json.dumps(doc).encode()

    landing = write_landing(
        tmp_path / "landing.jsonl.gz",
        [page("with", {"image_thumb": lead, "icon_thumb": icon}), page("without", {})],
    )
    run_job(tmp_path, url, landing)
    store = RankingStore(client, Keys())
    with_id, without_id = article_id("https://news.example/with"), article_id("https://news.example/without")
    stories = [s for s in store.get_stories(list(store.iter_story_ids())) if s is not None]
    arts = {a.article_id: a for s in stories for a in store.story_articles(s.story_id)}
    assert (arts[with_id].image, arts[with_id].icon) == (lead, icon)
    assert (arts[without_id].image, arts[without_id].icon) == ("", "")
    # the story led by the article with pictures shows them; the other shows none
    assert [(s.image, s.icon) for s in stories if s.representative_id == without_id] == [("", "")]
    assert [(s.image, s.icon) for s in stories if s.representative_id == with_id] == [(lead, icon)]
    rows = ds.dataset(str(tmp_path / "out" / "articles"), format="parquet").to_table().to_pylist()
    by_id = {r["article_id"]: r for r in rows}
    assert by_id[with_id]["image_url"] == "https://news.example/with.jpg" and by_id[with_id]["image_thumb"] == lead
    assert (
        by_id[without_id]["image_url"] == "https://news.example/without.jpg" and by_id[without_id]["image_thumb"] == ""
    )


def test_the_store_and_the_route_work_on_gs_as_on_a_local_directory(monkeypatch, images):
    from starlette.applications import Starlette

    from newsflow.serving.pictures import picture_routes
    from tests.helpers import gcs_emulator_on
    from tests.integration.asgi_server import serve_in_thread

    thumb = make_thumbnail(images["lead"], (CARD_WIDTH, 2 * CARD_WIDTH))
    with gcs_emulator_on(monkeypatch, "pics") as bucket:
        store = ThumbnailStore(f"gs://{bucket}/thumbs/")
        assert store.get(thumb.name) is None and not store.exists(thumb.name)
        assert store.put(thumb.name, thumb.data) is True
        assert store.put(thumb.name, thumb.data) is False  # content-addressed: written once
        assert store.get(thumb.name) == thumb.data
        with pytest.raises(ValueError):
            store.put("../escape.webp", thumb.data)
        with serve_in_thread(Starlette(routes=picture_routes(store.root))) as port:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
                assert c.get(f"/img/{thumb.name}").content == thumb.data
                assert c.get(f"/img/{'0' * 32}-1x1.webp").status_code == 404


def test_a_revised_article_shows_its_newest_versions_pictures_in_either_order(redis_server):
    from newsflow.storage.groups import RedisGroupStore, StoreConfig
    from tests.helpers import dump
    from tests.integration.test_article_revisions import NEW, OLD

    client, _ = redis_server
    old = OLD._replace(image_thumb="aa" * 16 + "-320x180.webp", icon_thumb="ee" * 16 + "-32x32.webp")
    new = NEW._replace(image_thumb="bb" * 16 + "-320x240.webp", icon_thumb="ee" * 16 + "-32x32.webp")
    for prefix, order in (("one", [old, new]), ("two", [new, old])):
        store = RedisGroupStore(client, StoreConfig(prefix=prefix))
        for a in order:
            store.assign_batch([a])
        h = client.hgetall(Keys(prefix).article(OLD.article_id))  # one article, under the first-fetched id
        assert (h[b"image"], h[b"icon"]) == (new.image_thumb.encode(), new.icon_thumb.encode()), prefix
    state = dump(client)
    assert {k[3:]: v for k, v in state.items() if k.startswith(b"one")} == {
        k[3:]: v for k, v in state.items() if k.startswith(b"two")
    }
