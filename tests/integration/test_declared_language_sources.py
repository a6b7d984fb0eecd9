"""The feed's and the outlet's declared language reach the language step as evidence (issue 11
item 10): RSS ``<language>`` / Atom ``xml:lang`` / JSON Feed ``language`` are landed with the entries,
and the sources registry's (or table's) outlet language fills ``declared_language`` when a page
declares none."""

from __future__ import annotations

from apache_beam.utils import shared

from newsflow.core.extraction import extract_content
from newsflow.core.sources import UNKNOWN_AUTHORITY, SourceTable
from newsflow.crawler.feeds import parse_feed
from newsflow.crawler.frontier import Frontier
from newsflow.crawler.httpserver import HttpServer
from newsflow.crawler.landing import LandingWriter
from newsflow.crawler.worker import CrawlWorker
from newsflow.schemas.raw import RawDocument
from newsflow.storage.keys import Keys
from newsflow.storage.source_registry import SourceRegistry
from newsflow.transforms.content import ContentConfig, _BuildArticleFn, _DetectLanguageFn
from tests.integration.test_crawler_worker import FAST, Site, _redis_server, config, landed, redis, rss, run_worker

__all__ = ["_redis_server", "redis"]  # module-scoped Redis fixtures of the worker tests


def test_feeds_declare_their_language():
    rss_body = rss("a.test", 2).replace(b"<title>a.test news</title>", b"<title>a</title><language>pt-BR</language>")
    assert parse_feed(rss_body, "http://a.test/feed.xml").language == "pt-br"
    atom = (
        b"<?xml version='1.0'?><feed xmlns='http://www.w3.org/2005/Atom' xml:lang='de'><title>t</title>"
        b"<entry><title>x</title><link href='http://a.test/1'/><id>1</id></entry></feed>"
    )
    assert parse_feed(atom, "http://a.test/atom.xml").language == "de"
    json_feed = b'{"version": "https://jsonfeed.org/version/1.1", "title": "t", "language": "fr_FR", "items": []}'
    assert parse_feed(json_feed, "http://a.test/feed.json").language == "fr-fr"
    assert parse_feed(rss("a.test", 1), "http://a.test/feed.xml").language == ""
    bad = rss("a.test", 1).replace(b"<title>a.test news</title>", b"<title>a</title><language>&lt;b&gt;</language>")
    assert parse_feed(bad, "http://a.test/feed.xml").language == ""


def test_crawler_lands_the_feed_language_on_pages_without_content_language(redis, tmp_path):
    body = rss("a.test", 3).replace(b"<title>a.test news</title>", b"<title>a.test news</title><language>de</language>")
    with HttpServer(Site(feeds={"a.test": body, "b.test": rss("b.test", 2)})) as srv:
        fr = Frontier(redis)
        fr.add("http://a.test/feed.xml", "feed", 0.0)
        fr.add("http://b.test/feed.xml", "feed", 0.0)
        w = CrawlWorker(fr, LandingWriter(str(tmp_path / "land")), config(srv.port), schedule=FAST)
        run_worker(w, max_tasks=7)
    docs = landed(tmp_path / "land")
    assert sorted((d.source_domain, d.content_language) for d in docs) == [("a.test", "de")] * 3 + [("b.test", "")] * 2


def _extract(config: ContentConfig, raw: RawDocument):
    """The extract step's outputs for ``raw``: the extracted content built into an Article with its source."""
    fn = _BuildArticleFn(config, shared.Shared())
    fn.setup()
    return list(fn.process((raw, extract_content(raw, config.extraction), 0.0)))


def test_outlet_language_is_the_declared_language_when_the_page_declares_none(tmp_path):
    csv_path = tmp_path / "sources.csv"
    csv_path.write_text("domain,name,tier,authority,language\nbeau.example,Beau,popular,0.6,en\n", encoding="utf-8")
    config = ContentConfig(sources_path=str(csv_path))
    feed_only = RawDocument(
        url="https://beau.example/2014/stacy-weds",
        source_domain="beau.example",
        fetch_time=1.4e9,
        title="Stacy weds techie beau",
    )
    (article,) = _extract(config, feed_only)
    assert article.declared_language == "en"
    detect = _DetectLanguageFn(config, shared.Shared())
    detect.setup()
    (with_outlet,) = list(detect.process(article))
    (without,) = list(detect.process(article._replace(declared_language="")))
    # the headline alone is not English to lid.176 (issue 11: "nl"); the outlet's language decides it
    assert without.language != "en"
    assert with_outlet.language == "en"

    # a page's own <html lang> wins over the outlet's language
    page = feed_only._replace(
        http_status=200,
        content_type="text/html; charset=utf-8",
        body=(
            "<html lang='fr'><head><title>Stacy épouse son fiancé</title></head><body><article>"
            "<h1>Stacy épouse son fiancé</h1>"
            + "".join(
                f"<p>Paragraphe {i} : la cérémonie a réuni {10 + i} invités dans la petite mairie du village, "
                f"selon les témoins interrogés samedi par notre correspondant numéro {i}.</p>"
                for i in range(8)
            )
            + "</article></body></html>"
        ).encode(),
    )
    (article,) = _extract(config, page)
    assert article.declared_language == "fr"


def test_registry_outlet_language_reaches_the_source_table(redis):
    keys = Keys("t")
    base = SourceTable.load()
    registry = SourceRegistry(redis, keys, seed=base)
    registry.seed_outlets(base)
    registry.set_outlet("zeitung.example", language="de")  # a language, no authority
    registry.set_outlet("reuters.com", language="en")
    table = registry.source_table(base=base)
    z = table.lookup("www.zeitung.example")
    assert (z.language, z.authority) == ("de", UNKNOWN_AUTHORITY)
    r = table.lookup("reuters.com")
    assert r.language == "en" and r.authority == base.lookup("reuters.com").authority


def test_shipped_table_languages_are_seeded_and_written(redis, tmp_path):
    base = SourceTable.load()
    assert (base.lookup("spiegel.de").language, base.lookup("www.elpais.com").language) == ("de", "es")
    assert base.lookup("reuters.com").language == "en" and base.lookup("afp.com").language == ""  # multilingual
    registry = SourceRegistry(redis, Keys("s"), seed=base)
    registry.seed_outlets(base)
    assert registry.outlet("lemonde.fr")["language"] == "fr"
    out = tmp_path / "t.csv"
    base.write(str(out))
    again = SourceTable.load(str(out))
    assert [(s.domain, s.language) for s in again.sources()] == [(s.domain, s.language) for s in base.sources()]
