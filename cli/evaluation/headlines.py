"""Language identification of short headlines: a labelled set and its scores.

The labelled set (:func:`build_headline_set`) is built from permissively licensed data only:

* ``fundus-news-pages`` (MIT): each page's gold ``title``, its declared ``html_lang`` as label
  (pages without one are skipped) and the first 300 characters of its gold body as lead text;
* ``newspaper4k-test-pages`` (MIT): each ``metadata/*.json`` ``title`` with its ``language``
  label, lead from the record's gold text file;
* the bundled corpus ``data/corpus/headlines.jsonl.gz`` (UCI News Aggregator, CC BY 4.0):
  every feed headline, label ``en`` (the data set collects English-language outlets), no lead.

Scores (:func:`evaluate_headlines`), each an accuracy over all headlines (``und`` is wrong):

* ``headline``: the headline alone (what the pipeline did before the declared-language evidence);
* ``headline_lead``: headline + lead text;
* ``headline_declared``: headline with the correct language declared (for the pages the
  declaration is the label's source, so this shows only that the model never overrides a correct
  declaration; the aggregator headlines declare nothing and score as ``headline``);
* ``headline_lead_wrong_declared``: headline + lead with a *wrong* declaration (``de`` for
  English pages, ``en`` for all others), the robustness check: the text must win;
* ``headline_wrong_declared``: the same without lead (a bare headline follows its declaration
  by design; reported to show that cost);
* ``all_evidence``: what the pipeline stores: headline + lead, the page's declaration (for an
  aggregator headline its outlet's registered language in the sources table, as the pipeline's
  fallback), and the sources table's language mix as prior (:class:`OutletLanguages`).

Command (prints one JSON line)::

    newsflow eval language --headlines /work/shared/data

Errors: a missing data folder or file prints ``error: <file>: <problem>`` and exits with code 2.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

from newsflow.cli.evaluation.inputs import InputError, describe

LEAD_CHARS = 300
"""Characters of lead text used with a headline."""

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "data" / "corpus" / "headlines.jsonl.gz"


def _primary(tag: str | None) -> str:
    from newsflow.core.language import declared_code

    return declared_code(tag)  # "en-US" -> "en", "nb" -> "no" (lid.176's label)


def _read_jsonl(path: Path) -> list[dict]:
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, EOFError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: {describe(e)}") from None


def build_headline_set(shared: Path, corpus: Path | None = None) -> list[dict]:
    """The labelled short-title set (module docstring).

    Args:
      shared: the shared data folder (holding ``fundus-news-pages`` and ``newspaper4k-test-pages``).
      corpus: ``headlines.jsonl.gz`` (``RawDocument`` JSON lines); default :data:`DEFAULT_CORPUS`.

    Returns:
      ``[{"id", "source", "title", "lead", "label"}]`` (aggregator rows also ``"domain"``, the
      outlet); ``label`` an ISO 639-1 code.

    Raises:
      InputError: a folder or file is missing or unreadable.
    """
    shared = Path(shared)
    out: list[dict] = []
    for rec in _read_jsonl(shared / "fundus-news-pages" / "expected.jsonl"):
        label = _primary(rec.get("html_lang"))
        title = (rec.get("expected") or {}).get("title") or ""
        if not label or not title.strip():
            continue
        lead = (rec.get("body_text") or "")[:LEAD_CHARS]
        out.append({"id": f"fundus:{rec['id']}", "source": "fundus", "title": title, "lead": lead, "label": label})
    n4k = shared / "newspaper4k-test-pages"
    for rec in _read_jsonl(n4k / "index.jsonl"):
        meta_file = rec.get("metadata_file")
        if not rec.get("language") or not meta_file:
            continue
        try:
            meta = json.loads((n4k / meta_file).read_text(encoding="utf-8"))
            lead = (n4k / rec["text_file"]).read_text(encoding="utf-8")[:LEAD_CHARS] if rec.get("text_file") else ""
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InputError(f"{n4k / meta_file}: {describe(e)}") from None
        title = meta.get("title") or ""
        if title.strip():
            out.append(
                {
                    "id": f"n4k:{rec['id']}",
                    "source": "newspaper4k",
                    "title": title,
                    "lead": lead,
                    "label": _primary(rec["language"]),
                }
            )
    for i, rec in enumerate(_read_jsonl(Path(corpus or DEFAULT_CORPUS))):
        if rec.get("title"):
            rec_id = f"aggregator:{i}"
            out.append(
                {
                    "id": rec_id,
                    "source": "aggregator",
                    "title": rec["title"],
                    "lead": "",
                    "label": "en",
                    "domain": rec.get("source_domain") or "",
                }
            )
    if not out:
        raise InputError(f"{shared}: no labelled headline found")
    return out


def evaluate_headlines(records: list[dict], threshold: float | None = None, sources_path: str | None = None) -> dict:
    """Scores the variants of the module docstring on ``records`` (from :func:`build_headline_set`).

    Returns:
      ``{"headlines", "by_source", "label_counts", "<variant>": {"accuracy", "und", "by_source"},
      "wrong_headline_lead_declared": [...]}`` with accuracies rounded to 4 digits; ``by_source``
      maps source -> accuracy. ``sources_path``: the sources CSV for ``all_evidence`` (default: the
      shipped ``data/sources.csv``).
    """
    from newsflow.core.language import LanguageIdentifier, OutletLanguages
    from newsflow.core.sources import DEFAULT_SOURCES_PATH, SourceTable

    lid = LanguageIdentifier() if threshold is None else LanguageIdentifier(threshold)
    titles = [r["title"] for r in records]
    with_lead = [f"{r['title']}\n{r['lead']}" if r["lead"] else r["title"] for r in records]
    # The aggregator headlines declare nothing: an outlet-level declaration is not in the data.
    correct_decl = [r["label"] if r["source"] != "aggregator" else None for r in records]
    wrong_decl = ["de" if r["label"] == "en" else "en" for r in records]
    table = SourceTable.load(sources_path or DEFAULT_SOURCES_PATH)
    registered = [(table.lookup(r.get("domain") or "") or None) for r in records]
    pipeline_decl = [
        d if d is not None else (s.language if s else "") for d, s in zip(correct_decl, registered, strict=True)
    ]
    variants = {
        "headline": lid.detect_batch(titles),
        "headline_lead": lid.detect_batch(with_lead),
        "headline_declared": lid.detect_batch(titles, declared=correct_decl),
        "headline_lead_declared": lid.detect_batch(with_lead, declared=correct_decl),
        "headline_lead_wrong_declared": lid.detect_batch(with_lead, declared=wrong_decl),
        "headline_wrong_declared": lid.detect_batch(titles, declared=wrong_decl),
        "all_evidence": lid.detect_batch(
            with_lead, declared=pipeline_decl, prior=OutletLanguages.from_sources(table).prior()
        ),
    }
    sources = sorted({r["source"] for r in records})
    out: dict = {
        "headlines": len(records),
        "by_source": dict(Counter(r["source"] for r in records)),
        "label_counts": dict(Counter(r["label"] for r in records).most_common()),
    }
    for name, preds in variants.items():
        ok = [p[0] == r["label"] for p, r in zip(preds, records, strict=True)]
        out[name] = {
            "accuracy": round(sum(ok) / len(ok), 4),
            "und": sum(1 for p in preds if p[0] == "und"),
            "by_source": {
                s: round(
                    sum(o for o, r in zip(ok, records, strict=True) if r["source"] == s)
                    / sum(1 for r in records if r["source"] == s),
                    4,
                )
                for s in sources
            },
        }
    out["wrong_headline_lead_declared"] = [
        [r["id"], r["label"], p[0], round(p[1], 3)]
        for r, p in zip(records, variants["headline_lead_declared"], strict=True)
        if p[0] != r["label"]
    ][:20]
    return out
