"""Issue 10, items 12-13 in the pipeline: ExtractArticles gives every spelling and copy of one article the same
id and the page's declared same-site canonical URL (TestPipeline, extraction in its child processes)."""

from __future__ import annotations

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.direct.direct_runner import BundleBasedDirectRunner
from apache_beam.testing.util import assert_that, equal_to

from newsflow.core.urls import article_id
from newsflow.schemas import RawDocument
from newsflow.transforms.content import ContentConfig, ExtractArticles

HARBOUR = "https://www.tribune.example.net/news/harbour-fire-4471"


def _page(url, head, domain="tribune.example.net"):
    para = "<p>" + "Fire crews fought a blaze in a harbour warehouse through the night, the brigade said. " * 5
    body = f"<html><head><title>Harbour fire</title>{head}</head><body><article><h1>Harbour fire</h1>{para}</p>"
    return RawDocument(
        url=url,
        source_domain=domain,
        fetch_time=1728900000.0,
        http_status=200,
        content_type="text/html; charset=utf-8",
        body=(body + para + "</p></article></body></html>").encode(),
    )


def test_extract_articles_applies_the_identity_rules():
    docs = [
        _page("https://m.tribune.example.net/news/harbour-fire-4471", f"<link rel='canonical' href='{HARBOUR}'>"),
        _page(
            "http://tribune.example.net/news/harbour-fire-4471/amp",
            "<link rel='canonical' href='/news/harbour-fire-4471'>",
        ),
        _page("https://tribune.example.net/s/4471", f"<meta property='og:url' content='{HARBOUR}'>"),
        _page("https://travel.example.io/guides/lisbon/", "", domain="travel.example.io"),
        _page("https://wire.example.com/c/4471", f"<link rel='canonical' href='{HARBOUR}'>", domain="wire.example.com"),
    ]
    with beam.Pipeline(
        runner=BundleBasedDirectRunner(), options=PipelineOptions(["--runner", "BundleBasedDirectRunner"])
    ) as p:
        out = p | beam.Create(docs) | ExtractArticles(ContentConfig())
        ids = out["main"] | beam.Map(lambda a: (a.article_id, a.url))
        assert_that(
            ids,
            equal_to(
                [
                    (article_id(HARBOUR), HARBOUR),
                    (article_id(HARBOUR), "http://tribune.example.net/news/harbour-fire-4471"),
                    (article_id(HARBOUR), HARBOUR),
                    (article_id("https://travel.example.io/guides/lisbon"), "https://travel.example.io/guides/lisbon/"),
                    (article_id("https://wire.example.com/c/4471"), "https://wire.example.com/c/4471"),
                ]
            ),
        )
