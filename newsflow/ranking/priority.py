"""Writer for the crawler's priority re-crawl hook (Redis ZSET ``nf:crawl:priority``).

The crawl tier polls ``nf:crawl:priority`` (member: a URL or ``domain:{host}`` to
re-crawl soon; score: the time it was requested, UTC epoch s) and re-fetches members
ahead of their normal schedule. Ranking asks for a re-crawl of the sources covering a
story when that story becomes breaking, so follow-up coverage arrives fast.

Writes are idempotent: re-requesting keeps the earliest request time (``ZADD LT``).
"""

from __future__ import annotations

from typing import Iterable

CRAWL_PRIORITY_KEY = "nf:crawl:priority"


def request_priority_recrawl(client, targets: Iterable[str], now: float) -> int:
    """Asks the crawler to re-crawl ``targets`` ahead of schedule.

    Args:
      client: ``redis.Redis`` client.
      targets: URLs, or ``domain:{host}`` for a whole source.
      now: request time, UTC epoch seconds.

    Returns:
      Number of targets newly added (already-queued ones keep their earlier time).
    """
    members = {t: float(now) for t in targets if t}
    if not members:
        return 0
    return int(client.zadd(CRAWL_PRIORITY_KEY, members, lt=True))
