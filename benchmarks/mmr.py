"""Benchmark: greedy MMR 500 → 20 with 128-dim embeddings (numpy vs. pure Python).

Run: ``python -m benchmarks.mmr --json`` prints ONE JSON line with the median and p99
latency (ms) of :func:`newsflow.core.ranking.mmr.mmr_select` and of the pure-Python
:func:`newsflow.core.ranking.mmr.mmr_select_reference` on the same random candidate sets
(α = 0.7, source cap 2, 120 source domains), their speed ratio, and whether both
picked the same stories. Target: numpy median < 1 ms.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import numpy as np

from newsflow.core.ranking.mmr import mmr_select, mmr_select_reference, normalize_rows


def _sets(n_sets: int, n: int, d: int, n_sources: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(n_sets):
        # clustered embeddings (stories near topic centroids), like real story vectors
        centroids = rng.normal(size=(25, d))
        emb = centroids[rng.integers(0, 25, n)] + 0.6 * rng.normal(size=(n, d))
        rel = np.sort(rng.random(n))[::-1]
        src = [f"source{rng.integers(0, n_sources)}.example" for _ in range(n)]
        yield rel, normalize_rows(emb), src


def _pct(values, q):
    return float(np.percentile(np.asarray(values) * 1000.0, q))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON line")
    ap.add_argument("--candidates", type=int, default=500)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--sets", type=int, default=50, help="distinct candidate sets")
    ap.add_argument("--repeats", type=int, default=20, help="numpy runs per set")
    ap.add_argument("--reference-sets", type=int, default=5, help="sets also run in pure Python")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    sets = list(_sets(a.sets, a.candidates, a.dim, 120, a.seed))
    for rel, emb, src in sets[:3]:  # warm-up
        mmr_select(rel, emb, src, k=a.k, normalized=True)
    fast, slow, agree = [], [], True
    for rel, emb, src in sets:
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            mmr_select(rel, emb, src, k=a.k, alpha=0.7, normalized=True)
            fast.append(time.perf_counter() - t0)
    for rel, emb, src in sets[: a.reference_sets]:
        rl, el = rel.tolist(), emb.astype(np.float64).tolist()
        t0 = time.perf_counter()
        ref = mmr_select_reference(rl, el, src, k=a.k, alpha=0.7)
        slow.append(time.perf_counter() - t0)
        agree &= ref == mmr_select(rel, emb, src, k=a.k, alpha=0.7, normalized=True)
    out = {
        "benchmark": "mmr",
        "candidates": a.candidates,
        "dim": a.dim,
        "k": a.k,
        "numpy_runs": len(fast),
        "numpy_median_ms": round(_pct(fast, 50), 4),
        "numpy_p99_ms": round(_pct(fast, 99), 4),
        "python_runs": len(slow),
        "python_median_ms": round(_pct(slow, 50), 2),
        "python_p99_ms": round(_pct(slow, 99), 2),
        "speedup_median": round(_pct(slow, 50) / _pct(fast, 50), 1),
        "same_picks": bool(agree),
        "target_median_ms": 1.0,
        "meets_target": _pct(fast, 50) < 1.0,
    }
    if a.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>18}: {v}")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
