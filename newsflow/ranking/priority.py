"""Writer for the crawler's priority re-crawl hook (Redis LIST :attr:`newsflow.keys.Keys.crawl_priority`).

Wire format, shared with the crawl tier's frontier (tiers meet only through Redis, and the
crawl tier reads the format defined here): each request is a JSON object
``{"target": str, "reason": str, "time": UTC epoch s}`` RPUSHed onto the list
``Keys.crawl_priority`` (``nf:crawl:priority``); crawl workers LPOP and pull matching tasks forward. ``target`` is a
source domain (``"reuters.com"``: all its feeds), a feed URL or an article URL.

Ranking requests a re-crawl of the sources covering a story when it becomes breaking,
so follow-up coverage arrives fast.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from newsflow.keys import Keys


def request_priority_recrawl(client, targets: Iterable[str], reason: str, now: float, keys: Keys = Keys()) -> int:
    """Asks the crawler to re-crawl ``targets`` ahead of schedule (one pipelined RPUSH).

    Args:
      client: ``redis.Redis`` client.
      targets: source domains, feed URLs or article URLs; empty and repeated ones are skipped.
      reason: short free text, e.g. ``"breaking:story s123"``.
      now: request time, UTC epoch seconds.
      keys: the Redis key layout.

    Returns:
      Number of requests pushed.
    """
    seen, payloads = set(), []
    for t in targets:
        t = str(t).strip()
        if t and t not in seen:
            seen.add(t)
            payloads.append(json.dumps({"target": t, "reason": reason, "time": float(now)}))
    if payloads:
        client.rpush(keys.crawl_priority, *payloads)
    return len(payloads)
