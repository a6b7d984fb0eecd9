"""Adaptive re-crawl schedules and error backoff for feeds.

Estimator: each feed is modelled as a Poisson process of new items with rate
``r`` (items/second) and the crawler keeps a Gamma(α, β) posterior of ``r``
(conjugate to the Poisson likelihood) with exponential forgetting so it
follows a feed whose pace changes: after a poll that found ``n`` new items
``Δt`` seconds after the previous one,

    w = 0.5 ** (Δt / half_life_s);   α ← w·α + n;   β ← w·β + Δt;   r̂ = α / β.

The prior is seeded from the feed itself: the spacing of the publish times of
its current items ((k−1)/(t_max−t_min)), else its ``<ttl>``, else its
``sy:updatePeriod``/``sy:updateFrequency`` (one item per declared period),
else one item per hour, with a weight of ``prior_weight_s`` seconds of
observation. The next poll comes ``target_new_items / r̂`` seconds later,
clamped to ``[min_interval_s, max_interval_s]`` (2 min to 6 h), multiplied
by a uniform jitter of ±``jitter``, and moved out of the feed's
``<skipHours>``/``<skipDays>``. (Change-rate estimation for re-crawling
follows Cho & Garcia-Molina, "Estimating frequency of change", ACM TOIT 2003.)

Errors back off geometrically with "equal jitter":
``d = min(cap, base·2^(k−1))``, wait ``d/2 + U(0, d/2)``, never longer than
the cap (a failing source keeps being retried, never parked), never shorter
than a ``Retry-After``.

Throttling answers are different: 429 Too Many Requests and 503 Service
Unavailable (:data:`THROTTLE_STATUSES`) ask the crawler to come back later,
so after the ``k``-th consecutive one a feed waits (:func:`throttle_delay`)

    d = min(throttle_cap_s, interval_s · 2^(k−1));   wait = min(throttle_cap_s, d · (1 + jitter·u))

where ``interval_s`` is the feed's current poll interval (``default_interval_s``
when it has none yet) and ``u ∈ [0, 1)`` is a deterministic jitter from the
task id and ``k`` (:func:`stable_unit`; the same on every worker and replay).
A feed polled every 900 s that answers 429 at 12:00 is thus polled again
at 12:15 at the earliest, then after ≥ 30 min, ≥ 1 h ..., never more than
``throttle_cap_s`` (24 h) apart. A usable ``Retry-After`` (delta-seconds or
HTTP-date, RFC 9110 section 10.2.3) wins when it is longer, up to the same cap.
An article page (no poll interval) retries at its ``Retry-After`` when the
answer has one, else like a feed polled every ``min_interval_s``; either way
the whole host is paused (see :mod:`newsflow.crawler.worker`). All times are seconds;
due times are UTC epoch seconds.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class ScheduleConfig:
    """Bounds of the adaptive schedule and the backoff (seconds).

    ``throttle_cap_s`` is the longest wait after a 429/503 (also the cap on a
    ``Retry-After``); see the module doc.
    """

    min_interval_s: float = 120.0
    max_interval_s: float = 6 * 3600.0
    jitter: float = 0.1
    target_new_items: float = 1.0
    prior_weight_s: float = 6 * 3600.0
    half_life_s: float = 2 * 86400.0
    default_interval_s: float = 3600.0
    backoff_base_s: float = 60.0
    backoff_cap_s: float = 6 * 3600.0
    throttle_cap_s: float = 24 * 3600.0


THROTTLE_STATUSES = frozenset({429, 503})
"""HTTP statuses that ask the crawler to slow down (waited out by :func:`throttle_delay`)."""


def seed_prior(
    cfg: ScheduleConfig,
    published_times: Iterable[float | None] = (),
    ttl_s: float | None = None,
    update_period_s: float | None = None,
) -> tuple[float, float]:
    """Prior ``(alpha, beta)`` of the publish rate from a feed's own content and hints.

    Args:
      cfg: schedule settings.
      published_times: publish times (UTC epoch seconds) of the feed's items; ``None``s ignored.
      ttl_s: RSS ``<ttl>`` in seconds.
      update_period_s: ``sy:updatePeriod``/``sy:updateFrequency`` in seconds.

    Returns:
      ``(alpha, beta)`` with ``alpha / beta`` the prior rate in items/second and
      ``beta = cfg.prior_weight_s``.
    """
    times = sorted(t for t in published_times if t is not None)
    interval = None
    if len(times) >= 2 and times[-1] > times[0]:
        interval = (times[-1] - times[0]) / (len(times) - 1)
    elif ttl_s and ttl_s > 0:
        interval = ttl_s
    elif update_period_s and update_period_s > 0:
        interval = update_period_s
    interval = max(1.0, interval or cfg.default_interval_s)
    return cfg.prior_weight_s / interval, cfg.prior_weight_s


def update_rate(
    alpha: float, beta: float, new_items: int, elapsed_s: float, cfg: ScheduleConfig
) -> tuple[float, float]:
    """Posterior ``(alpha, beta)`` after a poll that found ``new_items`` new items ``elapsed_s`` after the last one."""
    elapsed_s = max(0.0, elapsed_s)
    w = 0.5 ** (elapsed_s / cfg.half_life_s)
    return w * alpha + max(0, new_items), w * beta + elapsed_s


def next_interval(alpha: float, beta: float, cfg: ScheduleConfig, rng: random.Random) -> float:
    """Seconds until the next poll: ``target_new_items / (alpha/beta)`` clamped to the bounds, with jitter."""
    rate = alpha / beta if beta > 0 else 0.0
    base = cfg.max_interval_s if rate <= 0 else cfg.target_new_items / rate
    base = min(cfg.max_interval_s, max(cfg.min_interval_s, base))
    jittered = base * (1.0 + rng.uniform(-cfg.jitter, cfg.jitter))
    return min(cfg.max_interval_s, max(cfg.min_interval_s, jittered))


_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def apply_skips(due: float, skip_hours: Iterable[int] = (), skip_days: Iterable[str] = ()) -> float:
    """Moves ``due`` (UTC epoch seconds) to the first following UTC hour not in ``skip_hours``/``skip_days``.

    A feed that skips every hour is left as is (the hint is then meaningless).
    """
    hours, days = set(skip_hours), set(skip_days)
    if not hours and not days:
        return due
    t = dt.datetime.fromtimestamp(due, tz=dt.UTC)
    for _ in range(24 * 8):
        if t.hour not in hours and _DAYS[t.weekday()] not in days:
            return t.timestamp() if t.timestamp() >= due else due
        t = (t + dt.timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    return due


def backoff_delay(failures: int, cfg: ScheduleConfig, rng: random.Random, retry_after_s: float | None = None) -> float:
    """Seconds to wait after the ``failures``-th consecutive failure (1-based), honouring ``Retry-After``."""
    d = min(cfg.backoff_cap_s, cfg.backoff_base_s * (2 ** max(0, failures - 1)))
    wait = d / 2 + rng.uniform(0, d / 2)
    if retry_after_s is not None:
        wait = max(wait, min(retry_after_s, cfg.backoff_cap_s))
    return wait


def stable_unit(key: str) -> float:
    """A number in ``[0, 1)`` fixed by ``key`` (SHA-1): jitter that every worker and replay agrees on."""
    return int(hashlib.sha1(key.encode("utf-8")).hexdigest()[:13], 16) / 16.0**13


def throttle_delay(
    failures: int, interval_s: float, cfg: ScheduleConfig, u: float, retry_after_s: float | None = None
) -> float:
    """Seconds to wait after the ``failures``-th consecutive 429/503 (1-based) of a task polled every ``interval_s``.

    ``min(cap, interval_s · 2^(failures−1))`` stretched by ``1 + jitter·u`` (never
    shortened, so the first retry is never sooner than the next regular poll),
    at most ``cfg.throttle_cap_s``; a longer ``retry_after_s`` wins, up to the cap.

    Args:
      failures: consecutive failures including this one (>= 1).
      interval_s: the task's poll interval in seconds.
      cfg: schedule settings (``jitter``, ``throttle_cap_s``).
      u: jitter draw in ``[0, 1)``, e.g. ``stable_unit(f"{tid}|{failures}")``.
      retry_after_s: the answer's ``Retry-After`` in seconds, ``None`` when missing or unusable.

    Example: ``interval_s=900`` and no jitter give 900, 1800, 3600 ... 86400 s.
    """
    d = min(cfg.throttle_cap_s, max(1.0, interval_s) * 2.0 ** min(max(0, failures - 1), 64))
    wait = min(cfg.throttle_cap_s, d * (1.0 + cfg.jitter * min(max(u, 0.0), 1.0)))
    if retry_after_s is not None:
        wait = max(wait, min(retry_after_s, cfg.throttle_cap_s))
    return wait
