"""Language identification accuracy on language-labelled pages (newspaper4k test-page format).

Input: an ``index.jsonl`` with one record per line: ``id``, ``kind`` (``article`` |
``text_only`` | ``page_without_ground_truth``), ``language`` (ISO 639-1 label or
null), ``url``, and ``html_file`` / ``text_file`` relative to the index's folder.
Each record with a label is scored: an ``article`` is run through
:func:`newsflow.core.extraction.extract_content` (html) and its extracted text through
:class:`newsflow.core.language.LanguageIdentifier`; a ``text_only`` record's text file
is classified directly.

Baselines measured in the same run:

* ``baseline_html_lang_accuracy``: the page's declared ``<html lang>`` primary
  subtag as the prediction (over pages with html; no declaration counts as wrong);
* ``baseline_majority_accuracy``: always predicting the most frequent label.

A labelled record is scored from its html (through the extractor) when it is an ``article``
with an ``html_file``, or when it has an ``html_file`` but no ``text_file``; otherwise from its
``text_file``.

Command (prints one JSON line)::

    newsflow eval language --data /work/shared/data/newspaper4k-test-pages/index.jsonl

Short headlines (:mod:`newsflow.cli.evaluation.headlines`)::

    newsflow eval language --headlines /work/shared/data

Errors: bad input (a missing or unreadable index, a line that is not a JSON object, e.g. a CSV
given as the index, a record without ``id`` or with a non-string field, a referenced file that is
missing, unreadable or a truncated ``.gz``, no labelled record) prints
``error: <file>[:<line>]: <problem>`` to stderr and exits with code 2 (the convention of
:mod:`newsflow.cli.evaluation.inputs`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from newsflow.cli.evaluation.inputs import InputError, describe, fail

COMMAND = "language"
HELP = "score language identification on language-labelled pages (newspaper4k index.jsonl format)"


def _read_bytes(path: Path, where: str) -> bytes:
    """Bytes of a referenced page file (gunzipped for ``.gz``).

    Raises:
      InputError: ``"<where>: cannot read <path>: <problem>"``.
    """
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(f"{where}: cannot read {path}: {describe(e)}") from None


def load_records(index_path: Path) -> list[tuple[str, dict]]:
    """The labelled records of an ``index.jsonl``, each with its ``"<file>:<line>"`` location.

    Returns:
      ``[(location, record)]`` for records with a ``language`` label and an ``html_file`` or
      ``text_file``.

    Raises:
      InputError: the file cannot be read, a line is not a JSON object, a labelled record has no
        string ``id`` or a non-string ``language``/``html_file``/``text_file``/``url``, or no
        record is labelled.
    """
    try:
        text = Path(index_path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{index_path}: {describe(e)}") from None
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{index_path}:{n}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise InputError(
                f"{where}: not a JSON line ({e.msg} at column {e.colno}); expected index.jsonl "
                "records {id, language, html_file|text_file, ...}"
            ) from None
        except RecursionError:
            raise InputError(f"{where}: JSON nested too deeply") from None
        if not isinstance(rec, dict):
            raise InputError(f"{where}: expected a JSON object, got {type(rec).__name__}")
        for key in ("language", "html_file", "text_file", "url", "kind"):
            if rec.get(key) is not None and not isinstance(rec[key], str):
                raise InputError(f"{where}: field {key!r} must be a string, got {type(rec[key]).__name__}")
        if rec.get("language") and (rec.get("html_file") or rec.get("text_file")):
            if not isinstance(rec.get("id"), str) or not rec["id"]:
                raise InputError(f"{where}: record has no string 'id'")
            records.append((where, rec))
    if not records:
        raise InputError(f"{index_path}: no record has a language label and an html_file or text_file")
    return records


def _primary(tag: str) -> str:
    return tag.split("-")[0].lower() if tag else ""


def evaluate_file(index_path: Path, threshold: float | None = None, fetch_time: float | None = None) -> dict:
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
      InputError: bad input (see :func:`load_records`), or a referenced file cannot be read;
        the message names the file (and the index line).
    """
    from newsflow.core.decoding import decode_html
    from newsflow.core.extraction import ExtractionError, extract_content
    from newsflow.core.language import LanguageIdentifier
    from newsflow.core.urls import source_domain
    from newsflow.schemas.raw import RawDocument

    base = Path(index_path).parent
    located = load_records(Path(index_path))
    records = [rec for _, rec in located]
    fetch_time = time.time() if fetch_time is None else fetch_time
    lid = LanguageIdentifier() if threshold is None else LanguageIdentifier(threshold)
    texts: list[str] = []
    html_langs: dict[str, str] = {}
    errors: dict[str, str] = {}
    for where, rec in located:
        use_html = rec.get("html_file") and (rec.get("kind") == "article" or not rec.get("text_file"))
        if use_html:
            body = _read_bytes(base / rec["html_file"], where)
            url = rec.get("url") or f"http://unknown.invalid/{rec['id']}"
            try:
                raw = RawDocument(
                    url=url,
                    source_domain=source_domain(url),
                    fetch_time=fetch_time,
                    http_status=200,
                    content_type="text/html",
                    body=body,
                )
            except ValueError as e:
                raise InputError(f"{where}: bad url {url[:200]!r}: {e}") from None
            try:
                content = extract_content(raw)
                texts.append(content.title + "\n" + content.text)
                html_langs[rec["id"]] = _primary(content.html_language)
            except ExtractionError as e:
                errors[rec["id"]] = e.error_type
                texts.append("")
                html_langs[rec["id"]] = _html_lang_only(decode_html, body)
        else:
            texts.append(_read_bytes(base / rec["text_file"], where).decode("utf-8", errors="replace"))
    predictions = lid.detect_batch(texts)
    labels = [_primary(rec["language"]) for rec in records]
    correct = [lab == pred[0] for lab, pred in zip(labels, predictions, strict=False)]
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
        "wrong": {
            rec["id"]: [lab, pred[0], round(pred[1], 3)]
            for rec, lab, pred, ok in zip(records, labels, predictions, correct, strict=False)
            if not ok
        },
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
    parser.add_argument("--data", type=Path, help="index.jsonl (newspaper4k-test-pages format)")
    parser.add_argument(
        "--headlines",
        type=Path,
        metavar="SHARED_DIR",
        help="score short headlines instead: the labelled title set built from this shared data folder "
        "(fundus-news-pages, newspaper4k-test-pages) and the bundled corpus (newsflow.cli.evaluation.headlines)",
    )
    parser.add_argument("--threshold", type=float, default=None, help="LanguageIdentifier confidence threshold")


def run(args: argparse.Namespace) -> int:
    """Prints one JSON line (see :func:`evaluate_file`).

    Returns:
      0 on success; 2 on bad input, after printing ``error: <file>: <problem>`` to stderr.
    """
    t0 = time.perf_counter()
    try:
        if getattr(args, "headlines", None) is not None:
            from newsflow.cli.evaluation.headlines import build_headline_set, evaluate_headlines

            out = evaluate_headlines(build_headline_set(args.headlines), args.threshold)
        elif args.data is not None:
            out = evaluate_file(args.data, args.threshold)
        else:
            raise InputError("give --data index.jsonl or --headlines SHARED_DIR")
    except InputError as e:
        return fail(e)
    out["seconds"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(out, ensure_ascii=False))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Runs this command on its own (``python -m newsflow.cli.evaluation.language ...``)."""
    parser = argparse.ArgumentParser(prog="newsflow eval language", description=HELP)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
