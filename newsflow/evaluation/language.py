"""Language identification accuracy on language-labelled pages (newspaper4k test-page format).

Input: an ``index.jsonl`` with one record per line: ``id``, ``kind`` (``article`` |
``text_only`` | ``page_without_ground_truth``), ``language`` (ISO 639-1 label or
null), ``url``, and ``html_file`` / ``text_file`` relative to the index's folder.
Each record with a label is scored: an ``article`` is run through
:class:`newsflow.extraction.ArticleExtractor` (html) and its extracted text through
:class:`newsflow.language.LanguageIdentifier`; a ``text_only`` record's text file
is classified directly.

Baselines measured in the same run:

* ``baseline_html_lang_accuracy``: the page's declared ``<html lang>`` primary
  subtag as the prediction (over pages with html; no declaration counts as wrong);
* ``baseline_majority_accuracy``: always predicting the most frequent label.

Command (prints one JSON line)::

    newsflow eval language --data /work/shared/data/newspaper4k-test-pages/index.jsonl
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

COMMAND = "language"
HELP = "score language identification on language-labelled pages (newspaper4k index.jsonl format)"


def _read_text(path: Path) -> str:
    data = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
    return data.decode("utf-8", errors="replace")


def _primary(tag: str) -> str:
    return tag.split("-")[0].lower() if tag else ""


def evaluate_file(index_path: Path, threshold: Optional[float] = None, fetch_time: Optional[float] = None) -> dict:
    """Scores language identification over the labelled records of ``index_path``.

    Args:
      index_path: the ``index.jsonl`` file.
      threshold: :class:`LanguageIdentifier` threshold (its default when None).
      fetch_time: UTC epoch seconds used as the pages' fetch time (default: now).

    Returns:
      Dict with ``docs``, ``accuracy``, ``html_docs``, ``baseline_html_lang_accuracy``,
      ``baseline_majority_label``, ``baseline_majority_accuracy``, ``extraction_errors``
      (``{id: error_type}``; such a page is classified from its feed-less empty text,
      i.e. counts as wrong) and ``wrong`` (``{id: [label, predicted, confidence]}``).

    Raises:
      ValueError: a line is not a JSON object, or no record has a language label.
      OSError: a referenced file cannot be read.
    """
    from newsflow.extraction import ArticleExtractor, ExtractionConfig, ExtractionError, decode_html
    from newsflow.language import LanguageIdentifier
    from newsflow.urls import source_domain
    from schemas.raw import RawDocument

    base = Path(index_path).parent
    records = []
    for n, line in enumerate(Path(index_path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        rec = json.loads(line)
        if not isinstance(rec, dict):
            raise ValueError(f"{index_path}:{n}: expected a JSON object")
        if rec.get("language") and (rec.get("html_file") or rec.get("text_file")):
            records.append(rec)
    if not records:
        raise ValueError(f"{index_path}: no record has a language label and a file")
    fetch_time = time.time() if fetch_time is None else fetch_time
    lid = LanguageIdentifier() if threshold is None else LanguageIdentifier(threshold)
    texts: list[str] = []
    html_langs: dict[str, str] = {}
    errors: dict[str, str] = {}
    with ArticleExtractor(ExtractionConfig()) as extractor:
        for rec in records:
            if rec.get("kind") == "article" and rec.get("html_file"):
                path = base / rec["html_file"]
                body = gzip.open(path, "rb").read() if path.suffix == ".gz" else path.read_bytes()
                url = rec.get("url") or f"http://unknown.invalid/{rec['id']}"
                raw = RawDocument(url=url, source_domain=source_domain(url), fetch_time=fetch_time,
                                  http_status=200, content_type="text/html", body=body)
                try:
                    content = extractor.extract(raw)
                    texts.append(content.title + "\n" + content.text)
                    html_langs[rec["id"]] = _primary(content.html_language)
                except ExtractionError as e:
                    errors[rec["id"]] = e.error_type
                    texts.append("")
                    html_langs[rec["id"]] = _html_lang_only(decode_html, body)
            else:
                texts.append(_read_text(base / rec["text_file"]))
    predictions = lid.detect_batch(texts)
    labels = [_primary(rec["language"]) for rec in records]
    correct = [lab == pred[0] for lab, pred in zip(labels, predictions)]
    majority, _ = Counter(labels).most_common(1)[0]
    html_ids = [rec["id"] for rec in records if rec["id"] in html_langs]
    html_correct = [html_langs[rec["id"]] == _primary(rec["language"]) for rec in records if rec["id"] in html_langs]
    return {
        "docs": len(records),
        "accuracy": round(sum(correct) / len(records), 4),
        "html_docs": len(html_ids),
        "baseline_html_lang_accuracy": round(sum(html_correct) / len(html_ids), 4) if html_ids else None,
        "baseline_majority_label": majority,
        "baseline_majority_accuracy": round(labels.count(majority) / len(labels), 4),
        "extraction_errors": errors,
        "wrong": {rec["id"]: [lab, pred[0], round(pred[1], 3)]
                  for rec, lab, pred, ok in zip(records, labels, predictions, correct) if not ok},
    }


def _html_lang_only(decode_html, body: bytes) -> str:
    """``<html lang>`` of a page that failed extraction (for the baseline only)."""
    import re

    try:
        text, _ = decode_html(body)
    except Exception:  # noqa: BLE001 - baseline only; an undecodable page has no declaration
        return ""
    m = re.search(r"<html\b[^>]*\blang\s*=\s*[\"']?([A-Za-z_-]+)", text[:20000], re.I)
    return _primary(m.group(1).replace("_", "-")) if m else ""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this command's options to ``parser``."""
    parser.add_argument("--data", required=True, type=Path, help="index.jsonl (newspaper4k-test-pages format)")
    parser.add_argument("--threshold", type=float, default=None, help="LanguageIdentifier confidence threshold")


def run(args: argparse.Namespace) -> int:
    """Prints one JSON line (see :func:`evaluate_file`); returns the exit code."""
    t0 = time.perf_counter()
    try:
        out = evaluate_file(args.data, args.threshold)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out["seconds"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(out, ensure_ascii=False))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs this command on its own (``python -m newsflow.evaluation.language ...``)."""
    parser = argparse.ArgumentParser(prog="newsflow eval language", description=HELP)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
