"""URL aliases of articles in Redis: every other URL an article was reached by resolves to its id.

The identity rules (which URL an article is known by, which spellings are one URL) are in
:mod:`newsflow.core.urls` ("Article identity"). Spellings that :func:`newsflow.core.urls.article_id`
already folds together (``http``/``https``, ``www.``/``m.``/``amp.`` hosts, trailing slash,
AMP paths) need no alias. An alias is for a URL whose id differs from the article's: the
pre-redirect URL, or a fetched URL whose page declares another same-site canonical URL.

A re-slugged permalink (rule 5, revisions) is recognised later, by the pipeline, and kept in
``rev`` of ``Keys.article_record``; :func:`resolve_article_id` follows both.

Key (:meth:`newsflow.storage.keys.Keys.url_alias`): ``P:alias:{article_id(alias URL)}`` -> STRING
article id, written ``NX`` so the first article an alias was resolved to keeps it (an issued
id never changes), with a TTL.

Usage::

    record_aliases(redis, keys, article_id(canonical), [feed_link, fetched_url], ttl_s=30 * 86400)
    resolve_article_id(redis, keys, "https://m.example.com/old-link")  # -> the article's id
"""

from __future__ import annotations

from collections.abc import Iterable

from newsflow.core.urls import article_id
from newsflow.storage.keys import Keys


def _text(v) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def record_aliases(redis, keys: Keys, target_id: str, urls: Iterable[str], ttl_s: float) -> int:
    """Stores each URL of ``urls`` whose own id differs from ``target_id`` as an alias of it.

    Args:
      redis: a redis-py client.
      keys: the key layout.
      target_id: the article id (32 hex) the aliases resolve to.
      urls: alias URLs (absolute http(s)); URLs that cannot be canonicalized are skipped.
      ttl_s: seconds each alias key lives (at least 1).

    Returns:
      How many aliases were newly stored (an alias already pointing somewhere is kept as is).
    """
    ids = []
    for url in urls:
        try:
            aid = article_id(url)
        except ValueError:
            continue
        if aid != target_id and aid not in ids:
            ids.append(aid)
    if not ids:
        return 0
    pipe = redis.pipeline(transaction=False)
    for aid in ids:
        pipe.set(keys.url_alias(aid), target_id, nx=True, ex=max(1, int(ttl_s)))
    return sum(1 for ok in pipe.execute() if ok)


def resolve_article_id(redis, keys: Keys, url: str) -> str:
    """The id of the article ``url`` belongs to.

    ``article_id(url)``, then its alias target if it is an alias (``Keys.url_alias``), then the article
    that id is a revision of if the pipeline found one (``rev`` of ``Keys.article_record``, rule 5 of "Article
    identity" in :mod:`newsflow.core.urls`). Two reads.

    Raises:
      ValueError: ``url`` cannot be canonicalized (:func:`newsflow.core.urls.canonicalize_url`).
    """
    aid = article_id(url)
    target = redis.get(keys.url_alias(aid))
    aid = _text(target) if target else aid
    revised = redis.hget(keys.article_record(aid), "rev")
    return _text(revised) if revised else aid
