"""The default authority rubric of a source (outlet), used when nobody set its authority by hand.

Authority is a prior in [0, 1] (ranking multiplies it into a story's score, see ``DESIGN.md``).
For an outlet with no override it is

    authority = clip(tier_base + ORIGINALITY_WEIGHT * (originality - 0.5), 0, 1)

* ``tier_base`` comes from the editorial tier (table :data:`TIER_AUTHORITY`, the same values as
  ``data/SOURCES.md``): wire 0.95, record 0.90, national 0.75, popular 0.60, low 0.30, and 0.50
  for an outlet without a tier.
* ``originality`` in [0, 1] measures how often the outlet is *first* in the near-duplicate groups
  it appears in rather than a syndicated copy (:func:`originality`): a group founded by the outlet
  counts as a first report, a later member as a copy. It is shrunk towards 0.5 by
  :data:`ORIGINALITY_PRIOR` pseudo-groups, so an outlet seen in few groups stays near its tier
  value; with no groups at all the term is 0.
* Language does not move the score (an outlet is not worth more for writing in one language); it
  is recorded so editions can select outlets.

``ORIGINALITY_WEIGHT`` = 0.2 keeps the originality term inside one tier step (wire 0.95 vs
record 0.90 vs national 0.75): a national paper that always syndicates drops to 0.65, one that is
always first rises to 0.85. The values are editorial choices, documented here and in
``data/SOURCES.md``; the nightly authority job recomputes the term from the near-duplicate groups.
"""

from __future__ import annotations

import math

from newsflow.core.outlets import outlet as outlet_of

TIER_AUTHORITY = {"wire": 0.95, "record": 0.90, "national": 0.75, "popular": 0.60, "low": 0.30}
TIERS = tuple(TIER_AUTHORITY)
UNKNOWN_TIER_AUTHORITY = 0.5
ORIGINALITY_WEIGHT = 0.2
ORIGINALITY_PRIOR = 10.0


def validate_authority(value) -> float:
    """``value`` as a float in [0, 1].

    Raises:
      ValueError: not a number, NaN, or outside [0, 1].
    """
    try:
        a = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"authority must be a number in [0, 1], got {value!r}") from None
    if math.isnan(a) or not 0.0 <= a <= 1.0:
        raise ValueError(f"authority must be a number in [0, 1], got {value!r}")
    return a


def originality(first_reports: int, copies: int, prior: float = ORIGINALITY_PRIOR) -> float:
    """Shrunk share of first reports: ``(first + 0.5 * prior) / (first + copies + prior)``.

    Args:
      first_reports: near-duplicate groups (of two or more articles) the outlet founded.
      copies: later members the outlet contributed to groups another outlet founded.
      prior: pseudo-groups at 0.5 (``ORIGINALITY_PRIOR`` = 10).

    Returns:
      A float in [0, 1]; 0.5 with no evidence.

    Raises:
      ValueError: a negative count or prior.
    """
    if first_reports < 0 or copies < 0 or prior < 0:
        raise ValueError(f"counts and prior must be >= 0, got {first_reports}, {copies}, {prior}")
    total = first_reports + copies + prior
    return 0.5 if total == 0 else (first_reports + 0.5 * prior) / total


def default_authority(tier: str = "", originality_value: float | None = None) -> float:
    """The rubric's authority (module docstring) for ``tier`` and an optional originality.

    Args:
      tier: one of :data:`TIERS`, or ``""``/unknown for the 0.5 base.
      originality_value: :func:`originality` in [0, 1], or ``None`` (no term).

    Returns:
      Authority in [0, 1], rounded to 4 decimals.
    """
    base = TIER_AUTHORITY.get((tier or "").strip().lower(), UNKNOWN_TIER_AUTHORITY)
    if originality_value is not None:
        base += ORIGINALITY_WEIGHT * (float(originality_value) - 0.5)
    return round(min(1.0, max(0.0, base)), 4)


def originality_counts(groups) -> dict[str, tuple[int, int]]:
    """First reports and syndicated copies per outlet, from near-duplicate groups.

    A group counts only when two or more outlets are in it (one outlet republishing itself is not
    syndication). Its founder is the earliest member by ``(event_time, article_id)`` (the order that
    founds a group everywhere in newsflow); the founder's outlet gets one first report, every other
    outlet in the group one copy (once per group).

    Args:
      groups: iterable of groups, each an iterable of ``(event_time: float, article_id: str,
        outlet: str)`` members; members with an empty outlet are ignored.

    Returns:
      ``{outlet: (first_reports, copies)}`` for every outlet seen in a counted group.
    """
    out: dict[str, list[int]] = {}
    for group in groups:
        members = sorted((float(t), str(a), o) for t, a, o in group if o)
        outlets = {o for _, _, o in members}
        if len(outlets) < 2:
            continue
        founder = members[0][2]
        out.setdefault(founder, [0, 0])[0] += 1
        for o in outlets - {founder}:
            out.setdefault(o, [0, 0])[1] += 1
    return {o: (f, c) for o, (f, c) in out.items()}


def read_near_duplicate_groups(client, keys, batch: int = 500):
    """Yields each live near-duplicate group of >= 2 articles as ``[(event_time, article_id, outlet)]``.

    Reads the near-duplicate keys of :mod:`newsflow.storage.keys` (the shards of ``clusters_by_size``, each group's
    ``cluster_articles`` and the ``event_time``/``source_domain`` of its ``article`` hashes) in
    pipelined batches of ``batch`` groups; articles without a time or domain are skipped. Redis
    errors propagate.

    Args:
      client: redis-py client.
      keys: :class:`newsflow.storage.keys.Keys`.
      batch: groups per round trip.
    """

    def s(v):
        return v.decode("utf-8") if isinstance(v, bytes) else v

    pipe = client.pipeline(transaction=False)
    for shard in range(keys.nd_shards):
        pipe.zrangebyscore(keys.clusters_by_size(shard), 2, "+inf")
    cids = sorted(s(c) for ids in pipe.execute() for c in ids)
    for start in range(0, len(cids), batch):
        chunk = cids[start : start + batch]
        pipe = client.pipeline(transaction=False)
        for cid in chunk:
            pipe.smembers(keys.cluster_articles(cid))
        members = [sorted(s(a) for a in m) for m in pipe.execute()]
        pipe = client.pipeline(transaction=False)
        for ids in members:
            for aid in ids:
                pipe.hmget(keys.article(aid), "event_time", "source_domain")
        fields = iter(pipe.execute())
        for ids in members:
            group = []
            for aid in ids:
                t, domain = next(fields)
                if t is not None and domain:
                    group.append((float(s(t)), aid, outlet_of(s(domain))))
            yield group
