"""Tests for newsflow.core.extraction and .decoding: real pages, feed-only documents, every error type."""

from __future__ import annotations

import calendar
import gzip
import json
import random
from pathlib import Path

import pytest

from newsflow.core.decoding import decode_html
from newsflow.core.extraction import (
    ERROR_TYPES,
    ExtractedContent,
    ExtractionConfig,
    ExtractionError,
    extract_content,
    html_fragment_to_text,
)
from newsflow.schemas.raw import RawDocument
from tests.conftest import SHARED_DATA

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "extraction"

DATA = Path(SHARED_DATA)
FETCH_TIME = float(calendar.timegm((2024, 3, 5, 18, 0, 0)))  # 2024-03-05T18:00:00Z

# The three paragraphs of the hand-written fixture, as written in the file.
P1 = (
    "Nach vier Jahren Bauzeit ist die neue Straßenbrücke über die Elbe am Dienstag für den Verkehr freigegeben "
    "worden. Rund dreihundert Menschen verfolgten die Eröffnung am östlichen Ufer, viele von ihnen kamen mit dem "
    "Fahrrad."
)
P2 = (
    "Die Brücke ist 412 Meter lang und hat neben zwei Fahrspuren einen breiten Geh- und Radweg. Nach Angaben der "
    "Stadtverwaltung kostete der Bau knapp 58 Millionen Euro, etwas mehr als ursprünglich geplant."
)
P3 = (
    "Anwohnerinnen und Anwohner hoffen nun auf weniger Verkehr in der Altstadt. Der Bürgermeister sagte, die Fähre "
    "werde trotzdem weiter fahren, weil sie vor allem bei Ausflüglern beliebt sei."
)


def page(
    body: bytes, content_type: str = "text/html", status: int = 200, url: str = "https://elbtal.example/brücke", **kw
) -> RawDocument:
    return RawDocument(
        url=url,
        source_domain="elbtal.example",
        fetch_time=kw.pop("fetch_time", FETCH_TIME),
        http_status=status,
        content_type=content_type,
        body=body,
        **kw,
    )


def fixture_html() -> str:
    return (FIXTURES / "article_de.html").read_text(encoding="utf-8")


def error_of(fn, *args) -> ExtractionError:
    with pytest.raises(ExtractionError) as info:
        fn(*args)
    return info.value


# ----------------------------------------------------------------------------- real pages


def test_hand_written_fixture_all_fields():
    content = extract_content(page(fixture_html().encode("utf-8"), "text/html; charset=utf-8"))
    assert content.title == "Neue Brücke über die Elbe eröffnet"
    assert content.authors == ("Jana Müller",)
    assert content.site_name == "Elbtal Kurier"
    assert content.publish_time == calendar.timegm((2024, 3, 5, 14, 30, 0))
    assert content.html_language == "de-de"
    for paragraph in (P1, P2, P3):
        assert paragraph in content.text
    for boilerplate in ("Startseite", "Impressum", "Datenschutz"):
        assert boilerplate not in content.text


def test_real_benchmark_page_matches_ground_truth():
    base = DATA / "article-extraction-benchmark"
    if not base.is_dir():
        pytest.skip("shared data not available")
    gt = json.loads((base / "ground-truth.json").read_text(encoding="utf-8"))
    page_id = "04a6711caa7c687592777718866e781e976e0fe684faebe8b3cedcef8cd0ea34"
    body = gzip.open(base / "html" / f"{page_id}.html.gz", "rb").read()
    content = extract_content(page(body, url=gt[page_id]["url"]))
    truth_paragraphs = [p for p in gt[page_id]["articleBody"].split("\n") if p.strip()]
    assert content.title == "Opinion | Republicans Are Following Trump to Nowhere"
    assert content.authors == ("Jamelle Bouie",)
    assert truth_paragraphs[0] in content.text and truth_paragraphs[-1] in content.text
    found = sum(p in content.text for p in truth_paragraphs)
    assert found >= 0.9 * len(truth_paragraphs)


def test_real_fundus_pages_metadata_matches_gold():
    base = DATA / "fundus-news-pages"
    if not base.is_dir():
        pytest.skip("shared data not available")
    gold = {r["id"]: r for r in map(json.loads, (base / "expected.jsonl").read_text(encoding="utf-8").splitlines())}
    presse = gold["at/DiePresse_2025_06_05.html.gz"]
    content = extract_content(
        page(
            gzip.open(base / presse["html_file"], "rb").read(),
            url=presse["url"],
            fetch_time=float(calendar.timegm((2025, 6, 5, 19, 1, 58))),
        )
    )
    assert content.title == presse["expected"]["title"] == "Nennen wir ihn doch Golf von Nordamerika"
    assert list(content.authors) == presse["expected"]["authors"]
    assert content.html_language == "de"
    west = gold["au/WestAustralian_2024_11_26.html.gz"]
    content = extract_content(
        page(
            gzip.open(base / west["html_file"], "rb").read(),
            url=west["url"],
            fetch_time=float(calendar.timegm((2024, 11, 26, 14, 47, 8))),
        )
    )
    # gold publishing_date "2024-11-26 13:27:18+00:00"
    assert content.publish_time == calendar.timegm((2024, 11, 26, 13, 27, 18))
    assert list(content.authors) == west["expected"]["authors"] == ["Dan Jervis-Bardy"]


def test_real_news_homepage_is_not_an_article():
    path = DATA / "newspaper4k-test-pages" / "html" / "cnn_main_site.html.gz"
    if not path.exists():
        pytest.skip("shared data not available")
    err = error_of(extract_content, page(gzip.open(path, "rb").read(), url="https://www.cnn.com/"))
    assert err.error_type == "not_an_article"


# ----------------------------------------------------------------------------- decoding


def test_latin1_bytes_declared_utf8_are_not_mojibake():
    body = fixture_html().encode("cp1252")
    with pytest.raises(UnicodeDecodeError):
        body.decode("utf-8")
    content = extract_content(page(body, "text/html; charset=utf-8"))
    assert content.title == "Neue Brücke über die Elbe eröffnet"
    assert P1 in content.text


def test_utf8_bytes_declared_latin1_are_not_mojibake():
    html = fixture_html().replace('<meta charset="utf-8">', '<meta charset="iso-8859-1">')
    content = extract_content(page(html.encode("utf-8"), "text/html; charset=ISO-8859-1"))
    assert content.title == "Neue Brücke über die Elbe eröffnet"
    assert "BrÃ¼cke" not in content.text and P2 in content.text


def test_undeclared_french_cp1252_is_detected():
    text = (
        "<html><head><title>Café</title></head><body><p>" + "Le président a annoncé mercredi que la réforme "
        "serait présentée à l'Assemblée avant l'été. Les syndicats ont déjà prévu une grève générale. "
        * 3
        + "</p></body></html>"
    )
    decoded, encoding = decode_html(text.encode("cp1252"), "text/html")
    assert decoded == text and encoding == "cp1252"


def test_meta_charset_shift_jis_is_honoured():
    text = (
        '<html><head><meta http-equiv="Content-Type" content="text/html; charset=Shift_JIS"><title>橋</title>'
        "</head><body><p>東京都は水曜日、新しい橋の建設を発表しました。</p></body></html>"
    )
    decoded, encoding = decode_html(text.encode("shift_jis"), "")
    assert decoded == text and encoding == "shift_jis"


def test_utf8_bom_wins():
    decoded, encoding = decode_html(b"\xef\xbb\xbf<html><p>\xc3\xa9t\xc3\xa9</p></html>", "text/html; charset=cp1251")
    assert decoded == "<html><p>été</p></html>" and encoding == "utf-8"


@pytest.mark.parametrize(
    "body",
    [
        b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x10\x00\x00\x00\x10\x08\x06\x00\x00\x00\x1f\xf3\xffa",
        random.Random(7).randbytes(4096),
        b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<< /Type /Catalog >>\nendobj\n",
        gzip.compress(b"<html>ok</html>")[:12] + b"\x00garbage",  # gzip header, corrupt stream
    ],
    ids=["png", "random-bytes", "pdf", "corrupt-gzip"],
)
def test_undecodable_bytes(body):
    assert error_of(extract_content, page(body)).error_type == "undecodable"


@pytest.mark.parametrize("controls, binary", [(5, False), (6, True)])
def test_binary_threshold_counts_characters_not_bytes(controls, binary):
    # 1,000 characters, most of them two or three bytes long in UTF-8: 0.5% is 5 characters (not more: text)
    import newsflow.core.decoding as decoding

    text = ("é€\ud800" * 400)[: 1000 - controls] + "\x01\x7f\x1b\x0b\x00\x08"[:controls]
    assert len(text) == 1000 and sum(c in "\x01\x7f\x1b\x0b\x00\x08" for c in text) == controls
    assert decoding._looks_binary(text) is binary
    assert decoding._looks_binary("\t\n\r\x0c" * 250) is False  # TAB, LF, CR and FF are text
    # only the first 100,000 characters are sampled
    assert decoding._looks_binary("a" * 100_000 + "\x00" * 10_000) is False


def test_gzip_body_is_inflated():
    content = extract_content(page(gzip.compress(fixture_html().encode("utf-8"))))
    assert content.title == "Neue Brücke über die Elbe eröffnet"


# ----------------------------------------------------------------------------- error types


@pytest.mark.parametrize(
    "body",
    [
        b'{"error": "not found", "status": 404}',  # JSON served as text/html
        b"",
        b"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'><title>Budget vote",  # cut in <head>
    ],
    ids=["json", "empty", "truncated-in-head"],
)
def test_broken_html(body):
    assert error_of(extract_content, page(body)).error_type == "broken_html"


def test_non_article_page():
    nav = (
        "<!DOCTYPE html><html lang='en'><head><title>Sections</title></head><body><nav><ul>"
        + "".join(f"<li><a href='/s{i}'>Section {i}</a></li>" for i in range(30))
        + "</ul></nav><footer>Contact · Privacy · Terms</footer></body></html>"
    )
    err = error_of(extract_content, page(nav.encode()))
    assert err.error_type == "not_an_article" and "min_text_chars=200" in err.message


def test_oversized_body_is_refused_before_parsing():
    config = ExtractionConfig(max_body_bytes=1000)
    body = fixture_html().encode("utf-8")
    assert len(body) > 1000
    assert error_of(extract_content, page(body), config).error_type == "too_large"
    bomb = gzip.compress(b"<html><body>" + b"a" * 100_000 + b"</body></html>")
    assert len(bomb) < 1000
    assert error_of(extract_content, page(bomb), config).error_type == "too_large"


@pytest.mark.parametrize("status", [404, 500, 301])
def test_http_error(status):
    err = error_of(extract_content, page(fixture_html().encode(), status=status))
    assert err.error_type == "http_error" and str(status) in err.message


# ----------------------------------------------------------------------------- feed-only and dates


def test_feed_only_document_uses_title_and_stripped_summary():
    raw = RawDocument(
        url="https://news.example/a",
        source_domain="news.example",
        fetch_time=FETCH_TIME,
        title="Bridge opens &amp; traffic flows",
        summary="<p>The <b>new bridge</b> opened on Tuesday.</p>"
        "<p>It cost &euro;58m.<br>Photos: <a href='/x'>here</a></p>"
        "<script>track()</script>",
        published_time=FETCH_TIME - 3600,
        source_name="News Example",
    )
    content = extract_content(raw)
    assert content == ExtractedContent(
        title="Bridge opens & traffic flows",
        text="The new bridge opened on Tuesday.\nIt cost €58m.\nPhotos: here",
        authors=(),
        site_name="News Example",
        publish_time=FETCH_TIME - 3600,
        html_language="",
    )


def test_feed_only_title_without_summary_is_valid():
    raw = RawDocument(url="https://n.example/b", source_domain="n.example", fetch_time=FETCH_TIME, title="Headline")
    assert extract_content(raw).title == "Headline" and extract_content(raw).text == ""


@pytest.mark.parametrize("title,summary", [(None, None), ("", "  "), ("  ", "<p> </p>")])
def test_feed_only_without_title_and_summary_is_missing_fields(title, summary):
    raw = RawDocument(
        url="https://n.example/c", source_domain="n.example", fetch_time=FETCH_TIME, title=title, summary=summary
    )
    assert error_of(extract_content, raw).error_type == "missing_fields"


def test_feed_time_more_than_a_day_in_the_future_is_dropped():
    base = dict(url="https://n.example/d", source_domain="n.example", fetch_time=FETCH_TIME, title="T")
    assert extract_content(RawDocument(**base, published_time=FETCH_TIME + 86_400 + 1)).publish_time is None
    assert extract_content(RawDocument(**base, published_time=FETCH_TIME + 3600)).publish_time == FETCH_TIME + 3600


def test_page_date_in_the_future_is_dropped():
    html = fixture_html().replace("2024-03-05T14:30:00+00:00", "2031-01-01T08:00:00+00:00")
    assert extract_content(page(html.encode())).publish_time is None
    # a date within a day after the fetch (time-zone slack) is kept
    html = fixture_html().replace("2024-03-05T14:30:00+00:00", "2024-03-06T10:00:00+00:00")
    assert extract_content(page(html.encode())).publish_time == calendar.timegm((2024, 3, 6, 10, 0, 0))


def test_day_only_page_date_yields_to_exact_feed_time():
    html = fixture_html().replace("2024-03-05T14:30:00+00:00", "2024-03-05")
    feed_time = float(calendar.timegm((2024, 3, 5, 9, 15, 0)))
    assert extract_content(page(html.encode(), published_time=feed_time)).publish_time == feed_time
    assert extract_content(page(html.encode())).publish_time == calendar.timegm((2024, 3, 5, 0, 0, 0))


def test_html_fragment_to_text():
    assert html_fragment_to_text("a &lt; b and c") == "a < b and c"
    assert html_fragment_to_text("<ul><li>one</li><li>two  three</li></ul>") == "one\ntwo three"
    assert html_fragment_to_text("") == ""


# ----------------------------------------------------------------------------- API contracts


def test_config_validation_names_the_bad_value():
    with pytest.raises(ValueError, match="-1"):
        ExtractionConfig(timeout_s=-1)
    with pytest.raises(ValueError):
        ExtractionConfig(favor_precision=True, favor_recall=True)


def test_extraction_error_types_and_pickling():
    import pickle

    with pytest.raises(ValueError):
        ExtractionError("oops", "x")
    err = pickle.loads(pickle.dumps(ExtractionError("timeout", "slow page")))
    assert err.error_type == "timeout" and err.message == "slow page"
    assert ERROR_TYPES == {
        "http_error",
        "too_large",
        "undecodable",
        "broken_html",
        "not_an_article",
        "timeout",
        "missing_fields",
    }
