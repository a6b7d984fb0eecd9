"""Writer for the crawler's priority re-crawl hook (Redis ZSET :attr:`newsflow.storage.keys.Keys.crawl_priority`).

Wire format, shared with the crawl tier's frontier (tiers meet only through Redis, and the
crawl tier reads the format defined here): each request is a ZSET member, the JSON object
``{"reason": str, "target": str}`` (keys sorted, no spaces), scored by the request's event time
(UTC epoch seconds). ``target`` is a source domain (``"reuters.com"``: all its feeds), a feed URL or
an article URL. Crawl workers take the oldest requests first (``ZPOPMIN``) and pull matching tasks
forward.

A ZSET, not a list, so that requests are idempotent: the same request made twice (a retried bundle,
a rerun after a crash, two concurrent runs) is one member, and its score is the earliest time it was
asked for (``ZADD LT``), whatever order the requests arrive in.

Ranking requests a re-crawl of the sources covering a story while it is breaking, so follow-up
coverage arrives fast.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from newsflow.storage.keys import Keys


def priority_member(target: str, reason: str) -> str:
    """The ZSET member of one request: canonical JSON ``{"reason", "target"}`` (``str``)."""
    return json.dumps({"reason": reason, "target": target}, sort_keys=True, separators=(",", ":"))


def request_priority_recrawl(client, targets: Iterable[str], reason: str, now: float, keys: Keys = Keys()) -> int:
    """Asks the crawler to re-crawl ``targets`` ahead of schedule (one ``ZADD LT``).

    Args:
      client: ``redis.Redis`` client.
      targets: source domains, feed URLs or article URLs; empty and repeated ones are skipped.
      reason: short free text, e.g. ``"breaking:story s123"``.
      now: request time, UTC epoch seconds (an event time, so a replay asks at the same time).
      keys: the Redis key layout.

    Returns:
      Number of distinct requests made (already pending ones included).
    """
    members: dict[str, float] = {}
    for t in targets:
        t = str(t).strip()
        if t:
            members[priority_member(t, reason)] = float(now)
    if members:
        # NX is not wanted: an earlier time for a pending request moves it forward (LT adds new members too)
        client.zadd(keys.crawl_priority, members, lt=True)
    return len(members)
