"""Coverage breadth: how widely a story is reported, as a factor of its importance.

A story's score is ``authority × e^(−λ·age_hours) × breadth`` (:mod:`newsflow.core.ranking.decay` gives the
first two factors) with

    breadth = 1 + W_OUTLETS · ln(outlets) + W_VELOCITY · ln(1 + velocity)

* ``outlets`` — independent outlets: distinct outlets that carry an independent report, bounded by the
  story's distinct outlets and by its independent reports (near-duplicate groups), so 40 sites running
  one wire copy count once: ``min(source_count, independent_count)``, at least 1;
* ``velocity`` — new articles in the latest trending window (1 hour, :mod:`newsflow.transforms.trending`).

Sources. Del Corso, Gullì and Romani ("Ranking a Stream of News", WWW 2005) rank a news cluster by the
number and authority of the sources reporting it, decayed by age; Google News ranks "stories covered by
many sources" up (Das et al., WWW 2007 describes its clusters). Counts enter log-scaled: the hundredth
outlet adds less than the second (a story on 133 outlets is not 133 times as important as a single
report). A single report with no recent articles keeps breadth 1, so its score
is the plain decayed authority.

Weights (:data:`W_OUTLETS`, :data:`W_VELOCITY`) are measured on the bundled demo (``newsflow demo``, the
replay clock as ``now``): see their docstrings.
"""

from __future__ import annotations

import numpy as np

W_OUTLETS = 0.6
"""MEASURE"""

W_VELOCITY = 0.3
"""Weight of ``ln(1 + articles in the latest hour)``: a story gaining reports now rises before its outlet
count catches up (a breaking story of 21 articles an hour gets ``1 + 0.3 · ln 22 = 1.93`` from velocity)."""


def independent_outlets(source_count: int, independent_count: int) -> int:
    """Outlets with an independent report: ``min(source_count, independent_count)``, at least 1."""
    return max(1, min(int(source_count), int(independent_count)))


def breadth(
    outlets: np.ndarray, velocity: np.ndarray, w_outlets: float = W_OUTLETS, w_velocity: float = W_VELOCITY
) -> np.ndarray:
    """The coverage-breadth factor (module docstring), vectorized.

    Args:
      outlets: shape (n,), independent outlets per story (values below 1 count as 1).
      velocity: shape (n,), new articles in the latest hour (negative values count as 0).
      w_outlets / w_velocity: the weights (>= 0).

    Returns:
      float64 array (n,), each >= 1.
    """
    o = np.maximum(1.0, np.asarray(outlets, dtype=np.float64))
    v = np.maximum(0.0, np.asarray(velocity, dtype=np.float64))
    return 1.0 + w_outlets * np.log(o) + w_velocity * np.log1p(v)
