"""newsflow.core.multilingual.stop_words: spaCy's stop-word lists, read without importing spaCy (checked in a
fresh interpreter)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

from newsflow.core.multilingual import LANGUAGES, fold, stop_words


def test_stop_words_are_spacys_lists_read_without_importing_spacy():
    for language in LANGUAGES:
        want = frozenset(fold(w) for w in importlib.import_module(f"spacy.lang.{language}.stop_words").STOP_WORDS)
        assert stop_words(language) == want and len(want) > 300
    assert stop_words("ja") == frozenset()
    code = (
        "import sys; from newsflow.core.multilingual import LANGUAGES, stop_words; "
        "print(sum(len(stop_words(x)) for x in LANGUAGES), sorted(m for m in sys.modules if m.startswith('spacy')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=os.getcwd())
    total = sum(len(stop_words(x)) for x in LANGUAGES)
    assert out.stdout.split(maxsplit=1) == [str(total), "[]\n"]
