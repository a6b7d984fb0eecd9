"""Collaborative signals from click logs, after Das, Datar, Garg & Rajaram, "Google News
Personalization: Scalable Online Collaborative Filtering", WWW 2007.

* :class:`PairCounts` — story co-visitation (unordered pairs of items clicked in the same session,
  or by the same user within ``window_seconds``; each pair counted once per key) or session-order
  transitions (directed ``last click → next click``), optionally time-decayed: a pair formed at
  time ``t`` weighs ``2^(−(now − t)/half_life)`` at query time ``now``.
* :class:`DecayedPopularity` — clicks per item with the same exponential decay, plus each item's
  first-click time (its age proxy when no publish time is known).
* :func:`minhash_user_clusters` — users' click sets clustered with MinHash + LSH (datasketch
  ``MinHash``/``MinHashLSH``): users processed in sorted order join the cluster of the first
  already-inserted user the LSH returns (estimated Jaccard ≥ ``threshold``), else found their own.
  Das et al. concatenate p MinHash values into a cluster id; LSH banding is the same idea with
  a tunable similarity threshold.
* :class:`SessionScorer` — ranks items for a session from its clicks so far at a time ``now``::

      score(a) = w_tr·P_tr(a | last) + w_cv·P_cv(a | session) + w_pop·P_pop(a) + w_cl·P_cl(a | cluster)

  where each ``P`` is a component normalised to sum 1 over items (0 when the component is
  empty): ``P_tr`` decayed transitions from the session's last click; ``P_cv`` decayed
  co-visitation summed over the session's clicks, the k-th most recent weighted
  ``session_decay^k`` (each source row normalised first); ``P_pop`` decayed popularity times the
  learned freshness ``e^(−λ·age_h)`` (age since the item's first click, hours); ``P_cl`` decayed
  clicks of the user's cluster-mates.

Times are UTC epoch seconds, half-lives and ages hours. Items are ints in ``[0, n_items)`` for the
scorer (callers map their ids); :class:`PairCounts` accepts any hashable item. Decayed sums are
stored as ``Σ 2^((t − t_ref)/h)`` and rescaled at query time; ``t_ref`` moves forward (all sums
rescaled) before the exponent could overflow, so results do not depend on when that happens.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

_MAX_EXPONENT = 600.0  # 2^600 ≈ 4e180: rebase before float64 overflows


class _Clock:
    """Exponential-decay bookkeeping shared by the counters (``None`` half-life = no decay)."""

    def __init__(self, half_life_hours: float | None, t_ref: float = 0.0):
        self.rate = 0.0 if not half_life_hours else 1.0 / (3600.0 * float(half_life_hours))
        self.t_ref = float(t_ref)

    def weight(self, t: float) -> float:
        """Stored weight of an event at ``t`` (relative to ``t_ref``)."""
        return 2.0 ** ((t - self.t_ref) * self.rate) if self.rate else 1.0

    def needs_rebase(self, t: float) -> bool:
        return self.rate > 0 and (t - self.t_ref) * self.rate > _MAX_EXPONENT

    def scale(self, now: float) -> float:
        """Factor turning stored sums into values at ``now``."""
        return 2.0 ** (-(now - self.t_ref) * self.rate) if self.rate else 1.0


class PairCounts:
    """Co-visitation (``directed=False``) or transition (``directed=True``) counts.

    Args:
      half_life_hours: decay half-life of a pair's weight; ``None`` = plain counts.
      directed: False — every unordered pair of distinct items clicked under one key counts once
        (both directions stored); True — only consecutive clicks under one key, ``previous → next``.
      window_seconds: undirected only: pair a click only with the key's earlier clicks at most
        this many seconds before it (``None`` = the whole key history, e.g. a session).
    """

    def __init__(
        self,
        half_life_hours: float | None = None,
        directed: bool = False,
        window_seconds: float | None = None,
        t_ref: float = 0.0,
    ):
        self._clock = _Clock(half_life_hours, t_ref)
        self.directed = directed
        self.window = window_seconds
        self._pairs: dict = defaultdict(dict)
        self._row_sum: dict = defaultdict(float)
        self._history: dict = defaultdict(list)  # key -> [(item, t)] in order

    def _bump(self, a, b, w):
        row = self._pairs[a]
        row[b] = row.get(b, 0.0) + w
        self._row_sum[a] += w

    def _rebase(self, t: float) -> None:
        f = self._clock.scale(t)
        for row in self._pairs.values():
            for b in row:
                row[b] *= f
        for a in self._row_sum:
            self._row_sum[a] *= f
        self._clock.t_ref = t

    def add(self, key: Hashable, item: Hashable, t: float) -> None:
        """Records that ``key`` (a session or user id) clicked ``item`` at ``t`` (UTC epoch s).

        Clicks of one key must arrive in time order. A repeated item of the same key forms no new
        undirected pairs; directed transitions ignore a repeat of the previous item.
        """
        if self._clock.needs_rebase(t):
            self._rebase(t)
        w = self._clock.weight(t)
        hist = self._history[key]
        if self.directed:
            if hist and hist[-1][0] != item:
                self._bump(hist[-1][0], item, w)
            hist[:] = [(item, t)]
            return
        if any(i == item for i, _ in hist):
            return
        for other, t_other in hist:
            if self.window is None or t - t_other <= self.window:
                self._bump(item, other, w)
                self._bump(other, item, w)
        hist.append((item, t))
        if self.window is not None:
            hist[:] = [(i, ti) for i, ti in hist if t - ti <= self.window]

    def count(self, a: Hashable, b: Hashable, now: float = 0.0) -> float:
        """Weight of the pair ``a → b`` (for undirected counts, of ``{a, b}``) at ``now``."""
        return self._pairs.get(a, {}).get(b, 0.0) * self._clock.scale(now)

    def neighbors(self, a: Hashable, now: float = 0.0) -> dict:
        """``{b: weight at now}`` for every item paired with ``a``."""
        f = self._clock.scale(now)
        return {b: w * f for b, w in self._pairs.get(a, {}).items()}

    def row(self, a: Hashable) -> tuple[dict, float]:
        """Raw stored row of ``a`` and its sum (same scale, so their ratio is a distribution)."""
        return self._pairs.get(a, {}), self._row_sum.get(a, 0.0)


class DecayedPopularity:
    """Per-item decayed click counts (float64 array) and first-click times.

    Args:
      n_items: items are ints in ``[0, n_items)``.
      half_life_hours: decay half-life; ``None`` = plain counts.
    """

    def __init__(self, n_items: int, half_life_hours: float | None = None, t_ref: float = 0.0):
        self._clock = _Clock(half_life_hours, t_ref)
        self.values = np.zeros(n_items, dtype=np.float64)
        self.first_seen = np.full(n_items, np.inf)

    def add(self, item: int, t: float, weight: float = 1.0) -> None:
        """One click on ``item`` at ``t`` (UTC epoch s)."""
        if self._clock.needs_rebase(t):
            self.values *= self._clock.scale(t)
            self._clock.t_ref = t
        self.values[item] += weight * self._clock.weight(t)
        if t < self.first_seen[item]:
            self.first_seen[item] = t

    def at(self, now: float) -> np.ndarray:
        """Decayed counts at ``now``, shape (n_items,), float64."""
        return self.values * self._clock.scale(now)


def minhash_user_clusters(
    user_items: Mapping[Hashable, Sequence[Hashable]],
    threshold: float = 0.5,
    num_perm: int = 64,
    min_items: int = 2,
    seed: int = 1,
) -> dict:
    """Clusters users by the Jaccard similarity of their click sets (MinHash + LSH).

    Args:
      user_items: user id → items clicked (any order; duplicates ignored).
      threshold: LSH Jaccard threshold in (0, 1).
      num_perm: MinHash permutations.
      min_items: users with fewer distinct items get no cluster.
      seed: MinHash seed (fixed, so clusters are reproducible).

    Returns:
      ``{user: cluster id}``, the cluster id being the smallest (sorted-first) user of the cluster.
      Deterministic for a given input.
    """
    from datasketch import MinHash, MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
    out: dict = {}
    for user in sorted(user_items, key=lambda u: (str(type(u)), u)):
        items = {str(i).encode() for i in user_items[user]}
        if len(items) < min_items:
            continue
        m = MinHash(num_perm=num_perm, seed=seed)
        m.update_batch(list(items))
        hits = lsh.query(m)
        out[user] = min((out[h] for h in hits), key=lambda c: (str(type(c)), c)) if hits else user
        lsh.insert(user, m)
    return out


def minhash_bands(
    items: Sequence[Hashable], threshold: float = 0.5, num_perm: int = 64, min_items: int = 2, seed: int = 1
) -> list[tuple[int, bytes]]:
    """The LSH band keys of one user's click set, as :func:`minhash_user_clusters` buckets it.

    Two users are LSH candidates of each other (``MinHashLSH.query`` returns one for the other) exactly
    when they share a band key, so a keyed job can group users by band key instead of querying one index.

    Args:
      items: the items the user clicked (duplicates ignored).
      threshold, num_perm, min_items, seed: as for :func:`minhash_user_clusters`.

    Returns:
      ``[(band index, band hash bytes)]``, one per LSH band (14 at the defaults); empty when the user has
      fewer than ``min_items`` distinct items.
    """
    from datasketch import MinHash, MinHashLSH

    distinct = {str(i).encode() for i in items}
    if len(distinct) < min_items:
        return []
    m = MinHash(num_perm=num_perm, seed=seed)
    m.update_batch(list(distinct))
    ranges = MinHashLSH(threshold=threshold, num_perm=num_perm).hashranges
    return [(i, m.hashvalues[start:end].tobytes()) for i, (start, end) in enumerate(ranges)]


def descending_min_labels(members: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """One round of :func:`minhash_user_clusters` ' cluster ids over one LSH band bucket.

    :func:`minhash_user_clusters` gives user ``u`` the smallest cluster id among the earlier (sorted-first)
    users it shares a band with, else ``u``: the smallest user reachable from ``u`` by a path of
    ever-earlier users each sharing a band with the one before. Rounds of this function compute it by
    keys: given each member's current label, every member gets the smallest label among itself and the
    members sorted before it.

    Args:
      members: ``[(user, label)]`` of one band bucket (any order; string users).

    Returns:
      ``[(user, new label)]`` in user order.
    """
    out, best = [], None
    for user, label in sorted(members):
        best = label if best is None or label < best else best
        out.append((user, best))
    return out


class ScorerConfig(NamedTuple):
    """Hyper-parameters of :class:`SessionScorer` (hours for half-lives, 1/hours for λ)."""

    w_transition: float = 1.0
    w_covisit: float = 1.0
    w_popularity: float = 0.1
    w_cluster: float = 0.0
    pair_half_life_hours: float | None = 6.0
    popularity_half_life_hours: float | None = 1.0
    freshness_lambda: float = 0.0
    session_decay: float = 0.5


def _normalised(x: np.ndarray) -> np.ndarray:
    s = float(x.sum())
    return x / s if s > 0 else x


class SessionScorer:
    """Online session-based scorer (formula in the module docstring).

    Args:
      n_items: items are ints in ``[0, n_items)``.
      config: the blend and decay settings.
      user_clusters: user → cluster id (from :func:`minhash_user_clusters`); ``None`` = no
        cluster component.
      t_ref: reference time for the decayed sums (any time near the data).
    """

    def __init__(
        self, n_items: int, config: ScorerConfig | None = None, user_clusters: Mapping | None = None, t_ref: float = 0.0
    ):
        config = config or ScorerConfig()
        self.n = int(n_items)
        self.cfg = config
        self.covisit = PairCounts(config.pair_half_life_hours, directed=False, t_ref=t_ref)
        self.transitions = PairCounts(config.pair_half_life_hours, directed=True, t_ref=t_ref)
        self.popularity = DecayedPopularity(self.n, config.popularity_half_life_hours, t_ref)
        self.clusters = dict(user_clusters or {})
        sizes: dict = defaultdict(int)
        for c in self.clusters.values():
            sizes[c] += 1
        # singleton clusters hold only the user's own clicks: no collaborative signal
        self.clusters = {u: c for u, c in self.clusters.items() if sizes[c] > 1}
        self._cluster_clock = _Clock(config.popularity_half_life_hours, t_ref)
        self._cluster_pop: dict = defaultdict(dict)  # cluster -> {item: stored weight}

    def observe(self, session: Hashable, user: Hashable, item: int, t: float) -> None:
        """Ingests one click (sessions' clicks in time order)."""
        self.covisit.add(session, item, t)
        self.transitions.add(session, item, t)
        self.popularity.add(item, t)
        if self.cfg.w_cluster and user in self.clusters:
            clock = self._cluster_clock
            if clock.needs_rebase(t):
                f = clock.scale(t)
                for counts in self._cluster_pop.values():
                    for i in counts:
                        counts[i] *= f
                clock.t_ref = t
            counts = self._cluster_pop[self.clusters[user]]
            counts[item] = counts.get(item, 0.0) + clock.weight(t)

    def _row_dist(self, pairs: PairCounts, item: int) -> tuple[np.ndarray, np.ndarray]:
        row, total = pairs.row(item)
        if not row or total <= 0:
            return np.empty(0, dtype=np.int64), np.empty(0)
        idx = np.fromiter(row.keys(), dtype=np.int64, count=len(row))
        val = np.fromiter(row.values(), dtype=np.float64, count=len(row))
        return idx, val / total

    def components(self, session_items: Sequence[int], now: float, user: Hashable = None) -> dict[str, np.ndarray]:
        """The four normalised components, each float64 of shape (n_items,)."""
        cfg = self.cfg
        tr = np.zeros(self.n)
        cv = np.zeros(self.n)
        if session_items:
            idx, val = self._row_dist(self.transitions, session_items[-1])
            tr[idx] += val
            for k, item in enumerate(reversed(session_items)):
                idx, val = self._row_dist(self.covisit, item)
                cv[idx] += (cfg.session_decay**k) * val
        pop = self.popularity.at(now)
        if cfg.freshness_lambda:
            age_h = np.maximum(now - self.popularity.first_seen, 0.0) / 3600.0
            pop = pop * np.exp(-cfg.freshness_lambda * np.where(np.isfinite(age_h), age_h, 0.0))
        cl = np.zeros(self.n)
        if cfg.w_cluster and user in self.clusters and self.clusters[user] in self._cluster_pop:
            counts = self._cluster_pop[self.clusters[user]]
            cl[np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))] = np.fromiter(
                counts.values(), dtype=np.float64, count=len(counts)
            )
        return {
            "transition": _normalised(tr),
            "covisit": _normalised(cv),
            "popularity": _normalised(pop),
            "cluster": _normalised(cl),
        }

    def scores(self, session_items: Sequence[int], now: float, user: Hashable = None) -> np.ndarray:
        """Blended score per item, float64 of shape (n_items,); the caller excludes the
        session's own items and ranks."""
        c = self.components(session_items, now, user)
        cfg = self.cfg
        return (
            cfg.w_transition * c["transition"]
            + cfg.w_covisit * c["covisit"]
            + cfg.w_popularity * c["popularity"]
            + cfg.w_cluster * c["cluster"]
        )


def rank_items(keys: Sequence[np.ndarray], k: int, exclude: Sequence[int] = ()) -> list[int]:
    """Top ``k`` item indices by ``keys`` (lexicographic, each descending), then index ascending.

    Args:
      keys: arrays of shape (n,), the first the primary key.
      k: how many to return.
      exclude: indices never returned.

    Returns:
      Up to ``k`` indices (fewer only when fewer than ``k`` items remain).
    """
    primary = keys[0]
    n = len(primary)
    m = min(n, k + len(exclude))
    if m <= 0:
        return []
    threshold = np.partition(primary, n - m)[n - m]
    cand = np.flatnonzero(primary >= threshold)
    order = np.lexsort([cand] + [-key[cand] for key in reversed(keys)])
    ex = set(int(e) for e in exclude)
    out = []
    for i in cand[order]:
        if int(i) not in ex:
            out.append(int(i))
            if len(out) == k:
                break
    return out
