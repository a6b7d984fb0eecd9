"""Extraction across scripts (issue 11, items 8-9): NFC at parse, length thresholds by script."""

from __future__ import annotations

import calendar
import unicodedata

import pytest

from newsflow.core.embedding import tokenize
from newsflow.core.extraction import ExtractionConfig, ExtractionError, extract_content
from newsflow.core.simhash import simhash
from newsflow.schemas.raw import RawDocument

FETCH_TIME = float(calendar.timegm((2024, 3, 5, 18, 0, 0)))
INLINE = ExtractionConfig()

# A 187-character Chinese news brief (title excluded), written for this test.
ZH_BRIEF = (
    "本市新建的公共图书馆于周六正式开放，首日共接待读者约三千余人次。"
    "图书馆位于老城区东侧，总建筑面积一万二千平方米，藏书六十万册，并设有儿童阅览区和自习室。"
    "馆方表示，开放初期每天上午九点至晚上九点对外服务，读者凭身份证即可免费办理借阅证。"
    "市文化局负责人说，新馆将定期举办讲座和展览，希望成为市民学习交流的新去处。"
    "据了解，该项目总投资约三亿元，历时三年建成，周边还将新增公交线路。"
)

FR_TITLE = "Hélène Dupré ouvre la médiathèque de Génève"
FR_PARAS = [
    "La nouvelle médiathèque de Génève a ouvert ses portes samedi matin en présence de Hélène Dupré, "
    "maire de la commune, et de plusieurs centaines d'habitants venus découvrir les lieux.",
    "Le bâtiment, rénové pendant deux ans, propose désormais des espaces de lecture, une ludothèque et "
    "des salles de travail réservables gratuitement par les élèves et les étudiants.",
    "« Nous voulions un lieu ouvert à tous, du matin jusqu'au soir », a déclaré Hélène Dupré devant le public.",
]


def _page(title: str, paragraphs: list[str], lang: str = "en") -> RawDocument:
    body = "".join(f"<p>{p}</p>" for p in paragraphs)
    html = (
        f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"><title>{title}</title></head>'
        f"<body><article><h1>{title}</h1>{body}</article></body></html>"
    )
    return RawDocument(
        url="https://news.example/a/1",
        source_domain="news.example",
        fetch_time=FETCH_TIME,
        http_status=200,
        content_type="text/html; charset=utf-8",
        body=html.encode("utf-8"),
    )


def test_chinese_brief_of_187_chars_is_an_article():
    assert len(ZH_BRIEF) == 187
    got = extract_content(_page("新图书馆开放", [ZH_BRIEF], lang="zh"), INLINE)
    assert got.text == ZH_BRIEF  # trafilatura keeps the <h1>; the repeated headline is page header
    assert len(got.text) < INLINE.min_text_chars  # 194 characters, 554 Latin-letter equivalents
    assert got.title == "新图书馆开放"


def test_english_text_of_187_chars_is_still_not_an_article():
    text = ("Local bakery wins a regional prize for its rye bread. " * 4)[:187].strip()
    assert len(text) >= 180
    with pytest.raises(ExtractionError) as e:
        extract_content(_page("Bakery", [text]), INLINE)
    assert e.value.error_type == "not_an_article"


def test_nfd_page_is_extracted_in_nfc():
    nfd = unicodedata.normalize("NFD", FR_TITLE)
    assert nfd != FR_TITLE
    from_nfd = extract_content(_page(nfd, [unicodedata.normalize("NFD", p) for p in FR_PARAS], lang="fr"), INLINE)
    from_nfc = extract_content(_page(FR_TITLE, FR_PARAS, lang="fr"), INLINE)
    assert from_nfd.title == FR_TITLE
    assert from_nfd.text == from_nfc.text == "\n".join(FR_PARAS)  # the headline line is page header
    assert unicodedata.is_normalized("NFC", from_nfd.text)
    assert tokenize(from_nfd.title) == ["hélène", "dupré", "ouvre", "la", "médiathèque", "génève"]
    assert simhash(from_nfd.title + "\n" + from_nfd.text) == simhash(from_nfc.title + "\n" + from_nfc.text)


def test_nfd_feed_only_document_is_nfc():
    raw = RawDocument(
        url="https://news.example/a/2",
        source_domain="news.example",
        fetch_time=FETCH_TIME,
        title=unicodedata.normalize("NFD", FR_TITLE),
        summary=unicodedata.normalize("NFD", FR_PARAS[0]),
    )
    got = extract_content(raw, INLINE)
    assert got.title == FR_TITLE and got.text == FR_PARAS[0]
