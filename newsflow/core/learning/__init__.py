"""The learning core of the nightly loop: pure Python/numpy, no Beam, no Redis.

* :mod:`newsflow.core.learning.decay` — per-topic freshness decay λ (1/hours) by maximum likelihood,
  with position bias, empirical-Bayes shrinkage and confidence intervals;
* :mod:`newsflow.core.learning.collaborative` — co-visitation, session transitions, MinHash user
  clusters (Das et al., WWW 2007) and a session scorer blending them with decayed popularity;
* :mod:`newsflow.core.learning.interests` — per-user 128-dim interest vectors from clicks and dwell;
* :mod:`newsflow.core.learning.weights` — ranking weights by logistic regression, defaults as fallback.

The nightly Beam jobs wrap these functions; the ``newsflow eval personalization`` and
``newsflow eval decay`` commands measure them on a click log.
"""
