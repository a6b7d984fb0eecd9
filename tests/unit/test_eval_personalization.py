"""``eval personalization`` / ``eval decay`` on hand-made click logs: the query protocol, the
baselines' values (computed by hand below) and the bad-input convention (exit 2, one stderr line)."""

from __future__ import annotations

import argparse
import gzip

import pytest

from newsflow.cli.evaluation import decay as ev_decay
from newsflow.cli.evaluation import personalization as ev

HEADER = "user_id,session_id,session_start,session_size,click_article_id,click_timestamp\n"
BASE_MS = 1506826800000

# (user, session, article, seconds after BASE). Articles A=1, B=2, C=3, D=4.
TRAIN = [
    (1, 1, 1, 0),
    (1, 1, 3, 10),  # s1: A C
    (2, 2, 2, 20),
    (2, 2, 3, 30),  # s2: B C
    (3, 3, 3, 40),
    (3, 3, 4, 50),  # s3: C D
    (8, 8, 2, 60),
    (8, 8, 4, 70),  # s8: B D
    (9, 9, 2, 80),
    (9, 9, 4, 90),  # s9: B D
    (4, 4, 1, 4000),
    (4, 4, 2, 4010),  # s4: A B
]
TEST = [
    (5, 5, 1, 4100),
    (5, 5, 3, 4200),  # s5: A, then C = query 1 (context [A])
    (7, 7, 4, 4250),  # s7: one click, no query
    (6, 6, 2, 4300),
    (6, 6, 4, 4400),  # s6: B, then D = query 2 (context [B])
    (10, 10, 1, 4500),
    (10, 10, 1, 4600),  # s10: A, then A again = query 3 (excluded: a miss)
]


def _write(path, rows):
    # session_start: the row's own click time (the split takes each session's earliest)
    path.write_text(
        HEADER + "".join(f"{u},{s},{BASE_MS + 1000 * t},2,{a},{BASE_MS + 1000 * t}\n" for u, s, a, t in rows)
    )
    return str(path)


def test_query_protocol_and_baselines_by_hand(tmp_path):
    """Hand computation (all = clicks so far, hour = clicks in [t − 1 h, t)):

    q1 t=4200, context [A], target C. all A3 B4 C3 D3; hour A2 B1.
      popularity (A excluded): B4, C3, D3 (C before D by id) -> C at 2.
      recent: B(1), C(0, all 3), D(0, all 3) -> C at 2.
      covisitation from A: C 1 (s1), B 1 (s4); tie by hour B1 > C0 -> B, C -> C at 2.
    q2 t=4400, context [B], target D. all A3 B5 C4 D4; hour A2 B2 C1 D1.
      popularity: C4/h1, D4/h1 (id) , A3 -> D at 2.
      recent: A2, C1/4, D1/4 (id) -> D at 3.
      covisitation from B: D 2 (s8, s9), C 1 (s2), A 1 (s4) -> D at 1.
    q3 t=4600, context [A], target A: excluded, a miss for every method.
    """
    r = ev.evaluate(_write(tmp_path / "train.csv", TRAIN), _write(tmp_path / "test.csv", TEST))
    assert r["queries"] == 3
    b = r["baselines"]
    assert b["popularity"] == {"hr_at_10": round(2 / 3, 4), "mrr_at_10": round((1 / 2 + 1 / 2) / 3, 4)}
    assert b["recent_popularity"] == {"hr_at_10": round(2 / 3, 4), "mrr_at_10": round((1 / 2 + 1 / 3) / 3, 4)}
    assert b["covisitation"] == {"hr_at_10": round(2 / 3, 4), "mrr_at_10": round((1 / 2 + 1) / 3, 4)}
    assert 0.0 <= r["mrr_at_10"] <= r["hr_at_10"] <= round(2 / 3, 4)  # q3 can never be a hit
    assert set(r) >= {"queries", "hr_at_10", "mrr_at_10", "baselines", "seconds"}


def test_clicks_split_is_first_80_percent_by_time(tmp_path):
    # 10 clicks in shuffled file order: the last 2 by time (one session) form the test part -> 1 query
    rows = [
        (1, 1, 1, 0),
        (1, 1, 2, 10),
        (2, 2, 1, 20),
        (2, 2, 2, 30),
        (3, 3, 1, 40),
        (3, 3, 2, 50),
        (4, 4, 1, 60),
        (4, 4, 2, 70),
        (5, 5, 1, 80),
        (5, 5, 2, 90),
    ]
    r = ev.evaluate(_write(tmp_path / "c.csv", list(reversed(rows))), split="clicks")
    assert r["queries"] == 1 and r["split"] == "clicks"
    assert r["baselines"]["covisitation"] == {"hr_at_10": 1.0, "mrr_at_10": 1.0}


def test_default_split_holds_out_the_last_fifth_of_clock_hours(tmp_path):
    """Ten clock hours hold clicks. Hours 0-8: sessions 2h and 2h+1 click article 1 then 2 (s at 10·s and
    10·s + 5 seconds into the hour). Hour 9: session 18 clicks 1, 2, 3; sessions 19 and 20 click 1 then 2.
    ``hours``: int(0.8 · 10) = 8, so hours 8 and 9 are the test part: queries s16 1, s17 1, s18 2, s19 1, s20 1 = 6.
    ``clicks``: 43 clicks, int(0.8 · 43) = 34 train = hours 0-7 (32) + s16's two; test starts at s17: 5 queries."""
    rows = []
    for h in range(9):
        for s in (2 * h, 2 * h + 1):
            rows += [(s, s, 1, 3600 * h + 10 * s), (s, s, 2, 3600 * h + 10 * s + 5)]
    rows += [(18, 18, 1, 3600 * 9), (18, 18, 2, 3600 * 9 + 5), (18, 18, 3, 3600 * 9 + 9)]
    rows += [(s, s, a, 3600 * 9 + 10 * s + a) for s in (19, 20) for a in (1, 2)]
    path = _write(tmp_path / "c.csv", rows)
    r = ev.evaluate(path)
    assert (r["queries"], r["split"]) == (6, "hours")
    assert ev.evaluate(path, split="clicks")["queries"] == 5
    best = max(b["hr_at_10"] for b in r["baselines"].values())
    assert r["hr_at_10_vs_best_baseline"] == round(r["hr_at_10"] / best, 4)


def _run(mod, **kw) -> int:
    return mod.run(argparse.Namespace(**kw))


@pytest.mark.parametrize(
    "content, problem",
    [
        (None, "file not found"),
        (
            b"a,b\n1,2\n",
            "not a click log: missing columns ['user_id', 'session_id', 'click_article_id', 'click_timestamp'] "
            "(need user_id, session_id, click_article_id, click_timestamp)",
        ),
        (HEADER.encode() + b"1,1,0,2,5,soon\n", "2: click_timestamp must be a number (ms since the epoch), got 'soon'"),
        (HEADER.encode() + b"1,1,no,2,5,1000\n", "2: session_start must be a number (ms since the epoch), got 'no'"),
        (HEADER.encode() + b"1,,0,2,5,1000\n", "2: empty session_id"),
        (HEADER.encode(), "no clicks"),
        (
            HEADER.encode() + b"1,1,1000,2,5,1000\n2,2,3601000,2,6,3601000\n",
            "no test session has two or more clicks: nothing to score",
        ),
        (
            HEADER.encode() + b"1,1,0,2,5,1000\n2,2,0,2,6,2000\n",
            "too few clicks to split into train and test: every session starts in one hour",
        ),
    ],
)
def test_bad_input_exits_2(tmp_path, capsys, content, problem):
    p = tmp_path / "clicks.csv"
    if content is not None:
        p.write_bytes(content)
    assert _run(ev, clicks=str(p), test_clicks=None, tune=False) == 2
    out = capsys.readouterr()
    assert out.out == ""
    sep = "" if problem[0].isdigit() else " "
    assert out.err == f"error: {p}:{sep}{problem}\n"


def test_truncated_gzip_and_decay_bad_input(tmp_path, capsys):
    p = tmp_path / "clicks.csv.gz"
    data = gzip.compress((HEADER + "1,1,0,2,5,1000\n" * 500).encode())
    p.write_bytes(data[: len(data) // 2])
    assert _run(ev, clicks=str(p), test_clicks=None, tune=False) == 2
    assert capsys.readouterr().err.startswith(f"error: {p}: corrupt or truncated gzip data")
    assert _run(ev_decay, clicks=str(tmp_path / "none.csv")) == 2
    assert capsys.readouterr().err == f"error: {tmp_path / 'none.csv'}: file not found\n"


def test_decay_eval_on_hand_made_log(tmp_path):
    """Articles first clicked after the 2 h burn-in, with clicks thinning out with age, learn λ > 0."""
    rows = [(100 + i, 100 + i, 99, 3600 * h) for i, h in enumerate([0, 0.5, 1, 1.5, 2.2, 2.5, 3, 4, 5, 6, 7, 8, 9, 10])]
    n = len(rows)
    for art in range(1, 9):
        start = 3 * 3600 + art * 600
        for k, age in enumerate([0, 0.1, 0.2, 0.4, 0.7, 1.2, 2.5, 4.5]):
            rows.append((n + 10 * art + k, n + 10 * art + k, art, start + age * 3600))
            rows.append((500 + 10 * art + k, 500 + 10 * art + k, 99, start + age * 3600 + 1))
    r = ev_decay.evaluate(_write(tmp_path / "d.csv", rows))
    assert r["lambda_learned_per_hour"] > 0.1
    assert set(r["loglik"]) == {"learned", "fixed_default", "fixed_evergreen", "fixed_breaking"}
