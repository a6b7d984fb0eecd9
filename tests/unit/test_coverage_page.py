"""Full coverage: an outlet's own duplicate is not a syndicated copy, and a free copy leads a paywalled one."""

from newsflow.schemas import ArticleRecord
from newsflow.serving.pages import coverage_page


def rec(aid, domain, cid, authority, t, paywalled=False, language="en"):
    return ArticleRecord(
        aid, f"t {aid}", f"https://{domain}/{aid}", domain, domain, t, cid, "s1", authority, language, paywalled
    )


def test_own_duplicates_are_not_syndication_and_free_copies_lead():
    arts = [
        rec("k1", "king5.com", "c1", 0.8, 100.0),
        rec("k2", "www.king5.com", "c1", 0.8, 110.0),  # king5's own second URL
        rec("w1", "kare11.com", "c1", 0.6, 120.0),  # another outlet republishing
        rec("p1", "paper.example.com", "c2", 0.95, 50.0, paywalled=True),
        rec("f1", "free.example.org", "c2", 0.5, 60.0),
    ]
    page = coverage_page({"story_id": "s1"}, [], arts)
    assert page["coverage"] == {
        "articles": 5,
        "independent_reports": 2,
        "syndicated_copies": 2,
        "own_duplicates": 1,
        "sources": 5,
        "languages": 1,
    }
    by_cluster = {r["cluster_id"]: r for r in page["reports"]}
    king5 = by_cluster["c1"]
    assert king5["article"]["article_id"] == "k1"
    assert [a["article_id"] for a in king5["syndicated_copies"]] == ["w1"]
    assert [a["article_id"] for a in king5["own_duplicates"]] == ["k2"]
    paid = by_cluster["c2"]
    assert paid["article"]["article_id"] == "f1" and paid["article"]["paywalled"] is False
    assert [(a["article_id"], a["paywalled"]) for a in paid["syndicated_copies"]] == [("p1", True)]


def _multilingual_story():
    return [
        rec("e1", "reuters.com", "c1", 0.9, 100.0),
        rec("e2", "cnbc.com", "c1", 0.7, 105.0),  # a copy of the Reuters report
        rec("e3", "bbc.co.uk", "c2", 0.9, 110.0),
        rec("s1", "elpais.com", "c3", 0.8, 120.0, language="es"),
        rec("s2", "elmundo.es", "c4", 0.7, 130.0, language="es"),
        rec("d1", "spiegel.de", "c5", 0.8, 125.0, language="de"),
        rec("u1", "unknown.example", "c6", 0.5, 140.0, language="und"),
    ]


def test_coverage_groups_reports_by_language():
    page = coverage_page({"story_id": "s1"}, [], _multilingual_story())
    assert page["coverage"]["languages"] == 4
    assert page["by_language"] == [
        {"language": "en", "reports": ["c1", "c2"], "articles": 3, "outlets": ["bbc.co.uk", "cnbc.com", "reuters.com"]},
        {"language": "es", "reports": ["c3", "c4"], "articles": 2, "outlets": ["elmundo.es", "elpais.com"]},
        {"language": "de", "reports": ["c5"], "articles": 1, "outlets": ["spiegel.de"]},
        {"language": "und", "reports": ["c6"], "articles": 1, "outlets": ["unknown.example"]},
    ]


def test_full_coverage_page_and_card_show_languages():
    import lxml.html

    from newsflow.serving.web_view import coverage_context, language_name, templates

    arts = _multilingual_story()
    cov = coverage_page({"story_id": "s1", "url": "https://reuters.com/e1", "title": "t"}, [], arts)
    ctx = coverage_context(cov, arts, None)
    assert [(lang, [r["cluster_id"] for r in rs]) for lang, rs in ctx["others_by_language"]] == [
        ("en", ["c2"]),
        ("es", ["c3", "c4"]),
        ("de", ["c5"]),
        ("und", ["c6"]),
    ]
    doc = lxml.html.fromstring(templates().get_template("story.html").render(**ctx))
    assert [h.text_content() for h in doc.cssselect("h3.language-group")] == [
        "English (1)",
        "Spanish (2)",
        "German (1)",
        "Unknown language (1)",
    ]
    # each grouped report links with its language (none for "und"), the same list item as a one-language page
    report_langs = [a.get("lang") for a in doc.xpath("//ol[@class='reports']/li/a[1]")]
    assert report_langs == ["en", "es", "es", "de", None]
    langs = doc.cssselect("p.languages")[0].text_content()
    assert (
        langs
        == "In 4 languages: English (3 sources), Spanish (2 sources), German (1 source), Unknown language (1 source)"
    )
    # a one-language story keeps the plain list
    one = [a for a in arts if a.language == "en"]
    cov1 = coverage_page({"story_id": "s1", "url": "https://reuters.com/e1"}, [], one)
    assert coverage_context(cov1, one, None)["others_by_language"] == []

    card = templates().from_string('{% from "_macros.html" import card with context %}{{ card(s) }}')
    html = card.render(
        s={
            "story_id": "s1",
            "title": "t",
            "domain": "reuters.com",
            "url": "u",
            "source_count": 6,
            "languages": ["de", "en", "es", "und"],
        }
    )
    assert "in 3 languages: German, English, Spanish" in " ".join(html.split())
    html = card.render(s={"story_id": "s1", "title": "t", "domain": "reuters.com", "url": "u", "languages": ["en"]})
    assert "languages" not in html
    assert language_name("pt-br") == "Portuguese" and language_name("") == "Unknown language"
