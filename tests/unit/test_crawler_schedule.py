"""Adaptive schedule estimator, skip hours and backoff (values computed by hand)."""

import random

from newsflow.crawler.schedule import (
    ScheduleConfig,
    apply_skips,
    backoff_delay,
    next_interval,
    seed_prior,
    stable_unit,
    throttle_delay,
    update_rate,
)
from newsflow.crawler.worker import same_site_links

CFG = ScheduleConfig(jitter=0.0)


def test_seed_prior_from_publish_times_ttl_and_period():
    a, b = seed_prior(CFG, [0.0, 600.0, 1200.0, None, 1800.0])
    assert b == 21600.0 and a / b == 1 / 600.0  # 3 gaps over 1800 s
    a, b = seed_prior(CFG, [], ttl_s=900.0)
    assert a / b == 1 / 900.0
    a, b = seed_prior(CFG, [5.0], update_period_s=7200.0)
    assert a / b == 1 / 7200.0
    a, b = seed_prior(CFG)
    assert a / b == 1 / 3600.0


def test_interval_follows_rate_and_is_bounded():
    rng = random.Random(0)
    assert next_interval(*seed_prior(CFG, [0.0, 600.0]), CFG, rng) == 600.0
    assert next_interval(*seed_prior(CFG, [0.0, 10.0]), CFG, rng) == 120.0  # floor 2 min
    assert next_interval(1.0, 1e9, CFG, rng) == 21600.0  # cap 6 h
    assert next_interval(0.0, 100.0, CFG, rng) == 21600.0
    jit = ScheduleConfig(jitter=0.1)
    vals = [next_interval(*seed_prior(jit, [0.0, 1000.0]), jit, random.Random(s)) for s in range(50)]
    assert min(vals) >= 900.0 and max(vals) <= 1100.0 and len(set(vals)) > 40


def test_update_rate_forgets_old_pace():
    a, b = seed_prior(CFG, [0.0, 3600.0])  # 1 item/hour
    a2, b2 = update_rate(a, b, 12, 3600.0, CFG)  # 12 new in the last hour
    w = 0.5 ** (3600.0 / CFG.half_life_s)
    assert (a2, b2) == (w * 6.0 + 12, w * 21600.0 + 3600.0)
    assert next_interval(a2, b2, CFG, random.Random(0)) < 3600.0 / 2
    # a quiet feed slows down
    a3, b3 = a, b
    for _ in range(20):
        a3, b3 = update_rate(a3, b3, 0, 6 * 3600.0, CFG)
    assert next_interval(a3, b3, CFG, random.Random(0)) == 21600.0


def test_skip_hours_and_days():
    # 2014-03-10 (a Monday) 01:30 UTC
    t = 1394415000.0
    assert apply_skips(t, {1, 2}) == 1394420400.0  # moved to 03:00
    assert apply_skips(t, set(), {"Monday"}) == 1394496000.0  # Tuesday 00:00
    assert apply_skips(t) == t
    assert apply_skips(t, set(range(24))) == t


def test_backoff_grows_is_capped_and_honours_retry_after():
    cfg = ScheduleConfig(backoff_base_s=60.0, backoff_cap_s=3600.0)
    rng = random.Random(1)
    for k in range(1, 12):
        d = min(3600.0, 60.0 * 2 ** (k - 1))
        v = backoff_delay(k, cfg, rng)
        assert d / 2 <= v <= d
    assert backoff_delay(1, cfg, rng, retry_after_s=500.0) == 500.0
    assert backoff_delay(1, cfg, rng, retry_after_s=10**6) == 3600.0  # never parked for good


def test_throttle_delay_starts_at_the_poll_interval_and_doubles_to_a_day():
    assert [throttle_delay(k, 900.0, CFG, 0.5) for k in range(1, 10)] == [
        900.0,
        1800.0,
        3600.0,
        7200.0,
        14400.0,
        28800.0,
        57600.0,
        86400.0,
        86400.0,
    ]
    assert throttle_delay(10_000, 900.0, CFG, 0.5) == 86400.0  # no overflow
    # a usable Retry-After wins when longer, up to the same cap; a shorter one does not shorten the wait
    assert throttle_delay(1, 900.0, CFG, 0.0, retry_after_s=7200.0) == 7200.0
    assert throttle_delay(1, 900.0, CFG, 0.0, retry_after_s=60.0) == 900.0
    assert throttle_delay(1, 900.0, CFG, 0.0, retry_after_s=10**7) == 86400.0


def test_throttle_jitter_is_deterministic_and_only_lengthens():
    jit = ScheduleConfig(jitter=0.1)
    waits = [throttle_delay(1, 900.0, jit, stable_unit(f"feed-{i}|1")) for i in range(200)]
    assert min(waits) >= 900.0 and max(waits) < 990.0 and len(set(waits)) > 150
    assert waits == [throttle_delay(1, 900.0, jit, stable_unit(f"feed-{i}|1")) for i in range(200)]
    assert throttle_delay(20, 900.0, jit, 0.99) == 86400.0  # the cap is a hard maximum
    assert 0.0 <= stable_unit("x") < 1.0 and stable_unit("x") == stable_unit("x") != stable_unit("y")


def test_same_site_links():
    html = (
        b'<a href="/a">1</a><a class=x href="http://s.example/b#c">2</a><a href="https://o.example/c">3</a>'
        b'<a href="/img.jpg">4</a><a href="/a">dup</a><a href="mailto:x@y">5</a>'
    )
    assert same_site_links(html, "http://s.example/page", 10) == ["http://s.example/a", "http://s.example/b"]
    assert same_site_links(html, "http://s.example/page", 1) == ["http://s.example/a"]
