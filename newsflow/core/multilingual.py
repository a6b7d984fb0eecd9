"""Language-neutral keys for matching one event's reports across English, Spanish, German, French,
Portuguese and Italian.

No package on the registries this project reaches ships a multilingual sentence or word embedding
inside its wheel (LASER, LaBSE, model2vec and sentence-transformers download their weights at run
time, which this project never does), so the cross-language representation is built here from
shipped, permissively licensed data:

* **Transliteration-insensitive keys** (:func:`fold`): NFC, then ``anyascii`` (ISC licence)
  transliteration to ASCII, case folding and dots removed: ``"Berlín"``, ``"BERLIN"`` and
  ``"Berlin"`` are ``"berlin"``; ``"Zürich"`` is ``"zurich"``; ``"U.S."`` is ``"us"``.
* **Place aliases** (:func:`place_aliases`): every country/territory name of the Unicode CLDR
  (shipped in ``babel``; CLDR data is under the Unicode licence, permissive) in the six languages,
  folded, mapped to its folded English name: ``"alemania"``, ``"deutschland"``, ``"allemagne"``,
  ``"germania"``, ``"alemanha"`` -> ``"germany"``; ``"estados unidos"``, ``"vereinigte staaten"``,
  ``"etats-unis"``, ``"stati uniti"`` -> ``"united states"``; plus other languages' abbreviations
  in :data:`EXTRA_ALIASES` (``"EE.UU."`` -> ``"us"`` as English ``"U.S."``).
* **Acronym aliases** (:data:`ACRONYM_ALIASES`, :func:`canonical_org`): international
  organisations and economic terms whose acronym differs by language, to the English acronym:
  ``"OCDE"`` (es/fr/pt), ``"OCSE"`` (it) -> ``"oecd"``; ``"FMI"`` (es/fr/pt/it), ``"IWF"`` (de)
  -> ``"imf"``; ``"BCE"``/``"EZB"`` -> ``"ecb"``; ``"PIB"``/``"BIP"`` -> ``"gdp"``. Per language,
  because a form can be an ordinary word in another one (German ``"UNO"`` is the UN, Italian and
  Spanish ``"uno"`` is "one"). Written by hand from the organisations' own names in each
  language (a fact table, not fitted to any data set).
* **Stop words** per language (:func:`stop_words`): spaCy's lists (MIT licence), folded, so
  ``"el"``, ``"der"``, ``"les"`` do not make two unrelated reports look alike.
* **Cross-language terms** (:func:`cross_language_text`): a non-English headline with its place
  names and acronyms rewritten to their English forms and its numbers written the English way (``"0,3 %"`` ->
  ``"03 percent"`` as English ``"0.3 percent"`` tokenizes, ``"21.000"`` -> ``"21 000"``),
  transliterated; the caller then tokenizes it like English text
  (:func:`newsflow.core.embedding.tokenize`), so names, numbers and places of a Spanish headline land
  on the same terms as an English report of the same event.

What this does not do: translate common words ("elecciones" stays "elecciones"). Matching across
languages therefore rests on names, places, numbers, shared words (cognates spelled alike, brand
and product names) and entity keys (:mod:`newsflow.core.entities`), next to time.
"""

from __future__ import annotations

import functools
import os
import re

from anyascii import anyascii

from newsflow.core.scripts import nfc

LANGUAGES = ("en", "es", "de", "fr", "pt", "it")
"""Languages with entities and cross-language keys (ISO 639-1)."""

# Other languages' abbreviations that CLDR's territory names lack (folded -> the folded English
# abbreviation). English keys stay as they are ("U.S." is "us", "United States" "united states"),
# so English stories match exactly as before.
EXTRA_ALIASES = {
    "eeuu": "us",
    "ee uu": "us",
    "eua": "us",
    "ue": "eu",
}

# Acronyms that differ by language (folded) -> the folded English acronym, per language. Sources:
# the organisations' official names in each language (OECD/OCDE/OCSE, UN/ONU/UNO, NATO/OTAN,
# IMF/FMI/IWF, ECB/BCE/EZB, WTO/OMC/WTO, WHO/OMS, OPEC/OPEP, IAEA/OIEA/AIEA/IAEO, ILO/OIT/IAO
# (not Italian "OIL", an English word too),
# UNHCR/ACNUR/HCR) and the national-accounts term GDP (PIB, BIP).
_ORGS_ROMANCE = {"ocde": "oecd", "onu": "un", "otan": "nato", "fmi": "imf", "bce": "ecb", "omc": "wto"}
ACRONYM_ALIASES = {
    "es": {**_ORGS_ROMANCE, "oms": "who", "opep": "opec", "oiea": "iaea", "oit": "ilo", "acnur": "unhcr", "pib": "gdp"},
    "fr": {**_ORGS_ROMANCE, "oms": "who", "opep": "opec", "aiea": "iaea", "oit": "ilo", "hcr": "unhcr", "pib": "gdp"},
    "pt": {**_ORGS_ROMANCE, "oms": "who", "opep": "opec", "aiea": "iaea", "oit": "ilo", "acnur": "unhcr", "pib": "gdp"},
    "it": {
        "ocse": "oecd",
        "onu": "un",
        "fmi": "imf",
        "bce": "ecb",
        "omc": "wto",
        "oms": "who",
        "aiea": "iaea",
        "pil": "gdp",
    },
    "de": {"uno": "un", "iwf": "imf", "ezb": "ecb", "iaeo": "iaea", "iao": "ilo", "bip": "gdp"},
}
"""Language -> {folded acronym: folded English acronym} for acronyms that differ by language."""

_SPACE = re.compile(r"\s+")


def fold(text: str) -> str:
    """Transliteration-insensitive key of a name: NFC, ASCII transliteration (``anyascii``),
    case folding, dots removed, whitespace collapsed.

    Example: ``fold("Hélène Dupré") == "helene dupre"``, ``fold("U.S.") == "us"``.
    """
    return _SPACE.sub(" ", anyascii(nfc(text)).casefold().replace(".", "")).strip()


@functools.cache
def place_aliases() -> dict[str, str]:
    """Folded place name in any of :data:`LANGUAGES` -> folded English name (CLDR territories).

    Only two-letter territory codes (countries, territories, ``EU``) are used; a name that means
    different places in two languages keeps the first (English) meaning.
    """
    from babel import Locale

    english = Locale.parse("en").territories
    out: dict[str, str] = {}
    for lang in LANGUAGES:
        names = Locale.parse(lang).territories
        for code, name in names.items():
            if len(code) != 2 or not code.isalpha() or code not in english:
                continue
            out.setdefault(fold(name), fold(english[code]))
    for k, v in EXTRA_ALIASES.items():
        out.setdefault(k, v)
    return out


def canonical_place(name: str) -> str:
    """Folded English name of a place in any of :data:`LANGUAGES` (``"Alemania"`` -> ``"germany"``),
    else the folded name itself."""
    key = fold(name)
    return place_aliases().get(key, key)


def canonical_org(name: str, language: str) -> str:
    """Folded English acronym of an organisation's acronym in ``language`` (``"OCDE"``, ``"es"``
    -> ``"oecd"``; :data:`ACRONYM_ALIASES`), else the folded name itself."""
    key = fold(name)
    return ACRONYM_ALIASES.get(language, {}).get(key, key)


@functools.cache
def stop_words(language: str) -> frozenset:
    """Folded stop words of a language (spaCy's lists); empty for a language without one.

    Read from spaCy's ``spacy/lang/<language>/stop_words.py`` (a plain list) without importing
    ``spacy`` or the language's package: importing ``spacy.lang.fr`` builds the French tokenizer
    exceptions, which a process that only needs the stop words (e.g. the story vectors of a job
    that does not run spaCy NER itself) should not pay.
    """
    import importlib.util

    if language not in LANGUAGES:
        return frozenset()
    spacy_spec = importlib.util.find_spec("spacy")
    if spacy_spec is None or not spacy_spec.submodule_search_locations:
        return frozenset()
    path = os.path.join(list(spacy_spec.submodule_search_locations)[0], "lang", language, "stop_words.py")
    spec = importlib.util.spec_from_file_location(f"_newsflow_stop_words_{language}", path)
    if spec is None or not os.path.isfile(path):
        return frozenset()
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return frozenset(fold(w) for w in mod.STOP_WORDS)


_NON_WORD = re.compile(r"[^0-9a-z]+")
_THOUSANDS_DOT = re.compile(r"(\d)\.(?=\d{3}\b)")
_DECIMAL_COMMA = re.compile(r"(\d),(\d)")


def _words(folded: str) -> str:
    return _NON_WORD.sub(" ", folded).strip()


@functools.cache
def _word_aliases() -> dict[str, str]:
    """:func:`place_aliases` with punctuation in the names turned into spaces (``"etats unis"``)."""
    out: dict[str, str] = {}
    for k, v in place_aliases().items():
        out.setdefault(_words(k), v)
    return out


@functools.cache
def _longest_alias() -> int:
    """Words in the longest place name of :func:`_word_aliases`."""
    return max(len(n.split()) for n in _word_aliases())


def _replace_places(words: list[str]) -> list[str]:
    """``words`` with each place name (longest match first, left to right) replaced by its English
    name joined with ``"_"`` (so that no word of it is dropped as a stop word)."""
    aliases, longest = _word_aliases(), _longest_alias()
    out, i = [], 0
    while i < len(words):
        for n in range(min(longest, len(words) - i), 0, -1):
            name = aliases.get(" ".join(words[i : i + n]))
            if name is not None and (n > 1 or len(words[i]) > 1):
                out.append(name.replace(" ", "_"))
                i += n
                break
        else:
            out.append(words[i])
            i += 1
    return out


def cross_language_text(text: str, language: str) -> str:
    """``text`` folded, with place names replaced by their English names, acronyms of
    :data:`ACRONYM_ALIASES` by the English ones and the language's stop words removed; ``""`` for
    empty input.

    Args:
      text: a headline or URL slug words. Punctuation becomes spaces; stop words are removed
        after place names are replaced (so no word of a name is dropped as a stop word).
      language: ISO 639-1 code of the text.

    Example: ``cross_language_text("Merkel viaja a Estados Unidos", "es") ==
    "merkel viaja united states"``.
    """
    if not text:
        return ""
    stops = stop_words(language)
    # numbers as an English headline writes them (after English tokenization and stemming):
    # "21.000" -> "21 000" (like "21,000"), "0,3" -> "03" (like "0.3"), "%" -> "percent"
    text = _DECIMAL_COMMA.sub(r"\1\2", _THOUSANDS_DOT.sub(r"\1 ", text)).replace("%", " percent ")
    # places first, joined by "_" so that no word of an English name is dropped as a stop word
    # (tokenizers split on "_" again)
    words = _replace_places(_words(fold(text)).split())
    acronyms = ACRONYM_ALIASES.get(language, {})
    return " ".join(acronyms.get(w, w) for w in words if w not in stops).replace("_", " ")
