"""WebSub (W3C Recommendation, 2018) subscriber callbacks: verification of intent and signed deliveries.

The push endpoint (:mod:`newsflow.crawler.push`) serves a callback at ``/websub/<id>``
for each configured subscription ``{id: (topic URL, secret)}``:

* ``GET`` answers the hub's verification of intent (section 5.3) or its
  denial notice (5.2): :func:`verify_intent` echoes ``hub.challenge`` for a
  known ``hub.mode=subscribe|unsubscribe`` and the subscribed ``hub.topic``,
  acknowledges ``hub.mode=denied``, else answers 404.
* ``POST`` is a content distribution (sections 7 and 8): the body (RSS/Atom)
  must carry ``X-Hub-Signature: sha256=<hex HMAC(secret, body)>`` (sha1, sha384
  and sha512 are also accepted, as the spec allows; :func:`hub_signature_ok`).
  A delivery with a missing or wrong signature is acknowledged with 202 but
  ignored, as the spec recommends. The feed's entries become feed-only
  RawDocuments (``feed_url`` = the topic) after the same URL and text checks as
  pushed documents (:func:`feed_documents`); the ingestor then deduplicates and
  lands them.

Sending the subscription request to the hub is not part of this module.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import TYPE_CHECKING

from newsflow.core.urls import source_domain
from newsflow.crawler.push_validate import check_push_url, text_problem
from newsflow.schemas import RawDocument

if TYPE_CHECKING:
    from newsflow.crawler.feeds import ParsedFeed
    from newsflow.crawler.push import PushConfig

HUB_HASHES = {"sha1": hashlib.sha1, "sha256": hashlib.sha256, "sha384": hashlib.sha384, "sha512": hashlib.sha512}
"""The ``X-Hub-Signature`` methods accepted, by name."""


def hub_signature_ok(secret: str, header: str, body: bytes) -> bool:
    """True when ``header`` (``X-Hub-Signature``, ``"<method>=<hex HMAC(secret, body)>"``) signs ``body``.

    The method name and hex digest are compared case-insensitively, the digest in
    constant time; an unknown method or a missing header is False.
    """
    method, _, given = header.partition("=")
    digest = HUB_HASHES.get(method.strip().lower())
    expected = hmac.new(secret.encode("utf-8"), body, digest or hashlib.sha256).hexdigest()
    return digest is not None and hmac.compare_digest(given.strip().lower().encode(), expected.encode())


def verify_intent(topic: str, params: Mapping[str, str]) -> tuple[int, str]:
    """Answer to a hub's verification of intent or denial for the subscription to ``topic``.

    Args:
      topic: the subscription's topic URL.
      params: the callback's query parameters (``hub.mode``, ``hub.topic``, ``hub.challenge``).

    Returns:
      ``(200, hub.challenge)`` to confirm, ``(200, "")`` to acknowledge a denial,
      ``(404, reason)`` for another topic or an unknown mode or no challenge.
    """
    mode, given_topic = params.get("hub.mode", ""), params.get("hub.topic", "")
    if given_topic != topic:
        return 404, "topic does not match this subscription"
    if mode == "denied":
        return 200, ""
    challenge = params.get("hub.challenge", "")
    if mode not in ("subscribe", "unsubscribe") or not challenge:
        return 404, "hub.mode must be subscribe or unsubscribe, with a hub.challenge"
    return 200, challenge


def feed_documents(
    feed: ParsedFeed, topic: str, now: float, config: PushConfig
) -> tuple[list[RawDocument], list[dict]]:
    """Feed-only RawDocuments of a delivered feed's entries, and the entries skipped.

    Args:
      feed: the parsed delivery.
      topic: the subscription's topic URL (becomes ``feed_url``).
      now: UTC epoch seconds (becomes ``fetch_time``).
      config: the push endpoint's URL limits and allow-list.

    Returns:
      ``(documents, skipped)``; each skipped entry is ``{"url", "reason"}``: a URL
      :func:`newsflow.crawler.push_validate.check_push_url` refuses, a title or summary
      :func:`newsflow.crawler.push_validate.text_problem` refuses, or neither title nor summary.
    """
    docs, skipped = [], []
    for entry in feed.entries:
        try:
            url = check_push_url(entry.url, config)
        except ValueError as e:
            skipped.append({"url": entry.url, "reason": str(e)})
            continue
        title = (entry.title or "").strip() or None
        summary = (entry.summary or "").strip() or None
        problem = (text_problem("title", title, controls=True) if title else None) or (
            text_problem("summary", summary) if summary else None
        )
        if problem:
            skipped.append({"url": url, "reason": problem})
            continue
        if title is None and summary is None:
            skipped.append({"url": url, "reason": "entry has neither title nor summary"})
            continue
        docs.append(
            RawDocument(
                url=url,
                source_domain=source_domain(url),
                fetch_time=now,
                http_status=0,
                title=title,
                summary=summary,
                published_time=entry.published_time,
                source_name=feed.title or None,
                feed_url=topic,
            )
        )
    return docs, skipped
