"""Syndicated copies exclude an outlet's own duplicates (issue 11, item 3)."""

from __future__ import annotations

from newsflow.core.syndication import is_syndicated_copy, split_copies
from newsflow.schemas import ArticleRecord


def _rec(aid: str, domain: str) -> ArticleRecord:
    return ArticleRecord(
        aid, "Ferry service resumes", f"https://{domain}/{aid}", domain, "", 1.0, "c1", "s1", 0.5, "en"
    )


def test_own_duplicate_is_not_syndication():
    assert not is_syndicated_copy("king5.com", "www.king5.com")
    assert not is_syndicated_copy("https://www.king5.com/article/news/2", "king5.com")
    assert is_syndicated_copy("kare11.com", "king5.com")
    assert is_syndicated_copy("uk.reuters.com", "apnews.com")
    assert not is_syndicated_copy("uk.reuters.com", "in.reuters.com")  # one outlet
    assert not is_syndicated_copy("", "king5.com")  # unreadable: no evidence


def test_split_copies_of_a_king5_story():
    lead = _rec("a", "www.king5.com")
    copies = [_rec("b", "king5.com"), _rec("c", "kare11.com"), _rec("d", "m.king5.com"), _rec("e", "wusa9.com")]
    got = split_copies(lead.source_domain, copies)
    assert [r.article_id for r in got.syndicated] == ["c", "e"]
    assert [r.article_id for r in got.own_duplicates] == ["b", "d"]
    by_url = split_copies(lead.url, copies, domain_of=lambda r: r.url)
    assert by_url == got
