"""Retention in Redis: expire near-duplicate groups, stories and their articles before a cutoff (event time).

The ``newsflow retention`` command (:mod:`newsflow.cli.retention`) and the nightly run call :func:`expire`;
the rules (what is expired, how the cutoff moves) are in that command's docstring.
"""

from __future__ import annotations

import math
import time

from newsflow.storage.events import trim_active_readers
from newsflow.storage.groups import RedisGroupStore, StoreConfig
from newsflow.storage.stories import RedisStoryStore

_MOVE_CUTOFF_FORWARD = """
local cur = tonumber(redis.call('GET', KEYS[1]))
-- a stored value that is not a finite number (written before cutoffs were checked) is replaced
if (not cur) or cur ~= cur or cur == math.huge or cur == -math.huge or tonumber(ARGV[1]) > cur then
  redis.call('SET', KEYS[1], ARGV[1])
  return ARGV[1]
end
return redis.call('GET', KEYS[1])
"""
FUTURE_TOLERANCE_S = 86400.0


def expire(client, cutoff: float, keys) -> dict:
    """Records ``cutoff`` (UTC epoch s; moved forward only) and expires everything before the recorded one.

    Returns:
      JSON-ready counts: ``cutoff``, ``groups``, ``articles``, ``stories``, ``merged``, ``merge_records``,
      ``assignments``, ``idle_readers`` (readers whose last event is before the cutoff, removed from the
      active sets in bounded steps), ``seconds``.

    Raises:
      ValueError: ``cutoff`` is not finite, or later than the wall clock plus a day (a mistyped future
        time would expire everything, for good: the cutoff only moves forward).
    """
    if not math.isfinite(cutoff) or cutoff > time.time() + FUTURE_TOLERANCE_S:
        raise ValueError(f"retention cutoff {cutoff!r} is not a finite time before tomorrow (UTC epoch seconds)")
    t0 = time.perf_counter()
    recorded = float(client.register_script(_MOVE_CUTOFF_FORWARD)(keys=[keys.retention_cutoff], args=[repr(cutoff)]))
    groups, articles = RedisGroupStore(client, StoreConfig(prefix=keys.prefix)).expire_before(recorded)
    stories = RedisStoryStore(client, keys=keys).expire_before(recorded)
    idle_readers = trim_active_readers(client, recorded, keys)
    return {
        "cutoff": recorded,
        "groups": groups,
        "articles": articles,
        **stories,
        "idle_readers": idle_readers,
        "seconds": round(time.perf_counter() - t0, 3),
    }
