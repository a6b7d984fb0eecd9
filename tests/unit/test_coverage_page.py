"""Full coverage: an outlet's own duplicate is not a syndicated copy, and a free copy leads a paywalled one."""

from schemas import ArticleRecord
from serving.pages import coverage_page


def rec(aid, domain, cid, authority, t, paywalled=False):
    return ArticleRecord(
        aid, f"t {aid}", f"https://{domain}/{aid}", domain, domain, t, cid, "s1", authority, "en", paywalled
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
    }
    by_cluster = {r["cluster_id"]: r for r in page["reports"]}
    king5 = by_cluster["c1"]
    assert king5["article"]["article_id"] == "k1"
    assert [a["article_id"] for a in king5["syndicated_copies"]] == ["w1"]
    assert [a["article_id"] for a in king5["own_duplicates"]] == ["k2"]
    paid = by_cluster["c2"]
    assert paid["article"]["article_id"] == "f1" and paid["article"]["paywalled"] is False
    assert [(a["article_id"], a["paywalled"]) for a in paid["syndicated_copies"]] == [("p1", True)]
