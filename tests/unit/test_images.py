"""Where a page's pictures are (og:image, twitter:image, JSON-LD image forms, first figure; icons) and the
Pillow thumbnail's outcomes (resized WebP under a content-addressed name, or a dead-letter reason)."""

from __future__ import annotations

import hashlib
import io
import json

import lxml.html
import pytest
from PIL import Image

from newsflow.core.images import (
    MAX_IMAGE_BYTES,
    ImageError,
    PageImages,
    make_thumbnail,
    page_images,
    page_images_of_body,
    thumbnail_size,
)
from newsflow.schemas import RawDocument, RecordError

PAGE = "https://news.example/world/2026/story.html"


def _images(head: str = "", body: str = "") -> PageImages:
    return page_images(
        lxml.html.document_fromstring(f"<html><head>{head}</head><body>{body}<p>x</p></body></html>"), PAGE
    )


def _ld(obj) -> str:
    return f'<script type="application/ld+json">{json.dumps(obj)}</script>'


@pytest.mark.parametrize(
    ("head", "body", "expected"),
    [
        # og:image wins over twitter:image, JSON-LD and figures; relative references resolve against the page
        (
            '<meta name="twitter:image" content="https://t.example/t.jpg"><meta property="og:image" content="/og.jpg">',
            '<article><figure><img src="fig.jpg"></figure></article>',
            "https://news.example/og.jpg",
        ),
        ('<meta name="twitter:image" content="//cdn.example/t.jpg">', "", "https://cdn.example/t.jpg"),
        # JSON-LD NewsArticle image: a string, an ImageObject, a list (first usable), inside @graph
        (_ld({"@type": "NewsArticle", "image": "https://cdn.example/s.jpg"}), "", "https://cdn.example/s.jpg"),
        (
            _ld({"@type": "NewsArticle", "image": {"@type": "ImageObject", "url": "o.jpg"}}),
            "",
            "https://news.example/world/2026/o.jpg",
        ),
        (
            _ld({"@type": ["Article"], "image": [{"contentUrl": "https://cdn.example/l1.jpg"}, "https://x/l2.jpg"]}),
            "",
            "https://cdn.example/l1.jpg",
        ),
        (
            _ld(
                {
                    "@graph": [
                        {"@type": "WebSite", "image": "https://cdn.example/site.jpg"},
                        {"@type": "NewsArticle", "image": ["data:image/png;base64,AAAA", "/g.jpg"]},
                    ]
                }
            ),
            "",
            "https://news.example/g.jpg",
        ),
        # the first figure image in the article (a lazy one's data-src), not a figure in a sidebar before it
        (
            "",
            '<aside><figure><img src="/ad.jpg"></figure></aside><article><p>t</p>'
            '<figure><img data-src="/lazy.jpg"></figure><figure><img src="/second.jpg"></figure></article>',
            "https://news.example/lazy.jpg",
        ),
        # an og:image on a private or metadata address is skipped for the next candidate
        (
            '<meta property="og:image" content="http://169.254.169.254/latest/x.jpg">'
            '<meta name="twitter:image" content="https://cdn.example/ok.jpg">',
            "",
            "https://cdn.example/ok.jpg",
        ),
        ("", "<article><p>no picture</p></article>", ""),
    ],
)
def test_lead_image_candidates_in_order(head, body, expected):
    assert _images(head, body).image_url == expected


def test_icon_prefers_apple_touch_then_non_svg_icon_then_favicon_ico():
    touch = '<link rel="icon" href="/i.png"><link rel="apple-touch-icon" href="/touch.png">'
    assert _images(touch).icon_url == "https://news.example/touch.png"
    svg = '<link rel="icon" type="image/svg+xml" href="/i.svg"><link rel="shortcut icon" href="/s.ico">'
    assert _images(svg).icon_url == "https://news.example/s.ico"
    assert _images('<link rel="icon" href="/only.svg">').icon_url == "https://news.example/favicon.ico"
    assert _images().icon_url == "https://news.example/favicon.ico"


def test_page_images_of_body_reads_bytes_and_never_raises():
    body = b'<html><head><meta property="og:image" content="/a.png"></head><body><p>x</p></body></html>'
    assert page_images_of_body(body, "text/html; charset=utf-8", PAGE).image_url == "https://news.example/a.png"
    assert page_images_of_body(b"\x00\x01\xff" * 50, "", PAGE) == PageImages()


def _encoded(fmt: str, size, mode="RGB", color=(20, 120, 200)) -> bytes:
    out = io.BytesIO()
    Image.new(mode, size, color).save(out, fmt)
    return out.getvalue()


def test_thumbnail_is_webp_fitting_the_box_under_the_hash_of_its_bytes():
    t = make_thumbnail(_encoded("JPEG", (1000, 400)), (320, 640))
    assert (t.width, t.height) == (320, 128)
    assert t.name == f"{hashlib.sha256(t.data).hexdigest()[:32]}-320x128.webp"
    assert thumbnail_size(t.name) == (320, 128)
    with Image.open(io.BytesIO(t.data)) as im:
        assert im.format == "WEBP" and im.size == (320, 128)
    small = make_thumbnail(_encoded("PNG", (40, 30), "RGBA", (0, 0, 0, 0)), (320, 640))
    assert (small.width, small.height) == (40, 30)  # never enlarged
    with Image.open(io.BytesIO(small.data)) as im:
        assert im.mode == "RGBA"  # transparency kept


def test_thumbnail_refusals_carry_their_reasons():
    bomb = io.BytesIO()
    Image.new("1", (9000, 9000)).save(bomb, "PNG")  # 81 Mpx
    cases = {
        "image_bomb": (bomb.getvalue(), {}),  # past twice the 40 Mpx cap: Pillow's DecompressionBombError
        "image_too_large": (b"\xff" * (MAX_IMAGE_BYTES + 1), {}),
        "not_an_image": (b"<html>hello</html>", {}),
        "unreadable_image": (_encoded("JPEG", (300, 300))[:400], {}),
        "image_too_small": (_encoded("GIF", (1, 1), "L", 0), {"min_side": 16}),
    }
    for reason, (data, kw) in cases.items():
        with pytest.raises(ImageError) as e:
            make_thumbnail(data, (320, 640), **kw)
        assert e.value.error_type == reason, (reason, e.value)
    # between the cap and twice it Pillow only warns: the size check refuses it
    with pytest.raises(ImageError) as e, pytest.warns(Image.DecompressionBombWarning):
        make_thumbnail(bomb.getvalue(), (320, 640), max_pixels=50_000_000)  # 81 Mpx: over the cap, under twice it
    assert e.value.error_type == "image_bomb" and "81000000 pixels" in e.value.message


def test_landing_records_accept_only_thumbnail_names():
    name = "0123456789abcdef0123456789abcdef-320x213.webp"
    base = {"url": PAGE, "source_domain": "news.example", "fetch_time": 1.7e9}
    doc = RawDocument.from_json_dict(base | {"image_thumb": name, "icon_thumb": ""})
    assert (doc.image_thumb, doc.icon_thumb) == (name, None)
    assert RawDocument.from_json_dict(doc.to_json_dict()) == doc
    for bad in ("../../etc/passwd", name.replace(".webp", ".svg"), name.upper(), "0" * 32 + "-0x5.webp"):
        with pytest.raises(RecordError) as e:
            RawDocument.from_json_dict(base | {"image_thumb": bad})
        assert e.value.error_type == "invalid_field"
        assert thumbnail_size(bad) is None


def test_extraction_finds_the_pictures_and_the_story_shows_its_representatives():
    from newsflow.core.articles import build_article
    from newsflow.core.extraction import extract_content
    from newsflow.core.story_state import StoryState

    name = "0123456789abcdef0123456789abcdef-320x213.webp"
    icon = "fedcba9876543210fedcba9876543210-32x32.webp"
    html = (
        '<html><head><title>Storm</title><meta property="og:image" content="/lead.jpg"></head><body><article>'
        f"<h1>Storm</h1><p>{'The storm reached the coast overnight. ' * 20}</p></article></body></html>"
    )
    raw = RawDocument(
        url=PAGE,
        source_domain="news.example",
        fetch_time=1.7e9,
        http_status=200,
        content_type="text/html",
        body=html.encode(),
        image_thumb=name,
        icon_thumb=icon,
    )
    content = extract_content(raw)
    assert (content.image_url, content.icon_url) == (
        "https://news.example/lead.jpg",
        "https://news.example/favicon.ico",
    )
    article = build_article(raw, content, source_authority=0.5)
    assert (article.image_url, article.image_thumb, article.icon_thumb) == (content.image_url, name, icon)

    state = StoryState("s1")
    state.add_member("a1", 10.0, "low.example", "c1", 0.2, "Low", "https://low.example/1")
    assert (state.serving_record()["image"], state.serving_record()["icon"]) == ("", "")
    state.add_member("a2", 11.0, "news.example", "c2", 0.9, "Storm", PAGE, "en", image=name, icon=icon)
    rec = state.serving_record()
    assert (rec["representative_id"], rec["image"], rec["icon"]) == ("a2", name, icon)
    again = StoryState.from_json(state.to_json(), groups=dict(state.groups))
    assert again.serving_record()["image"] == name
