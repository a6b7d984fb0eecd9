"""Article-body extraction quality: the scrapinghub article-extraction-benchmark metric.

Metric (re-implemented from upstream ``evaluate.py`` of
github.com/scrapinghub/article-extraction-benchmark, as described in
``/work/shared/data/article-extraction-benchmark/PROVENANCE.md``):

* tokens are the regex ``\\w+`` (Unicode) matches of a text;
* shingles are the 4-grams of tokens, counted as a multiset (a text with fewer
  than 4 tokens gives one shorter shingle; an empty text gives none);
* per page: ``tp = sum(min(true, pred))``, ``fp = sum(max(0, pred - true))``,
  ``fn = sum(max(0, true - pred))`` over shingles, each divided by ``tp + fp + fn``;
* per-page precision ``tp / (tp + fp)`` and recall ``tp / (tp + fn)`` (both 1.0
  when ``fp = fn = 0``; 0.0 when there is nothing to match), **averaged over
  pages** (a page with ``tp + fp = 0`` is left out of the precision average,
  ``tp + fn = 0`` out of the recall average);
* F1 = 2PR / (P + R) of the two averages.

Command (prints one JSON line ``{"pages", "precision", "recall", "f1", ...}``)::

    newsflow eval extraction --html-dir DIR --ground-truth ground-truth.json
    newsflow eval extraction --ground-truth ground-truth.json --predictions reference_outputs/trafilatura.json

``--html-dir`` holds ``<id>.html.gz`` or ``<id>.html``; each page is run through
:func:`newsflow.core.extraction.extract_content` with its ground-truth URL. A page that
fails extraction counts as an empty prediction; failures are counted per
``error_type`` under ``"errors"``. A page file that cannot be read (a truncated or
corrupt ``.html.gz``, an unreadable file) is scored the same way: an empty prediction,
counted as ``"unreadable_file"``, with a ``warning: <file>: <problem>`` line on stderr;
a page without any file counts as ``"missing_file"``.

Errors: bad input (missing or unreadable ground-truth/predictions file, wrong JSON shape,
a non-string ``articleBody``, ``--html-dir`` not a directory, nothing to score) prints
``error: <file>: <problem>`` to stderr and exits with code 2 (the convention of
:mod:`newsflow.cli.evaluation.inputs`); a successful run exits 0.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from newsflow.cli.evaluation.inputs import InputError, describe, fail, read_json

COMMAND = "extraction"
HELP = "score article-body extraction (4-gram shingle P/R/F1 of the article-extraction-benchmark)"

_TOKEN_RE = re.compile(r"\w+", re.UNICODE)
SHINGLE_N = 4


class PageScore(NamedTuple):
    """Normalised shingle counts of one page: ``tp + fp + fn == 1`` (or all 0)."""

    tp: float
    fp: float
    fn: float


class ExtractionScores(NamedTuple):
    """Averaged scores over pages (see the module docstring for the definition)."""

    pages: int
    precision: float
    recall: float
    f1: float


def tokenize(text: str | None) -> list[str]:
    """``\\w+`` tokens of ``text`` (``None`` counts as empty)."""
    return _TOKEN_RE.findall(text or "")


def shingles(text: str | None, n: int = SHINGLE_N) -> Counter:
    """Multiset of token ``n``-grams of ``text``, as a ``Counter`` of tuples.

    A text with fewer than ``n`` (but at least one) tokens yields one shingle of
    all its tokens, as upstream does.
    """
    tokens = tokenize(text)
    return Counter(tuple(tokens[i : i + n]) for i in range(max(1, len(tokens) - n + 1)) if tokens[i : i + n])


def page_score(true: str | None, pred: str | None, n: int = SHINGLE_N) -> PageScore:
    """Normalised ``(tp, fp, fn)`` of one page's predicted text against the truth.

    Args:
      true: ground-truth article body.
      pred: extracted text (``None`` or "" when extraction failed).
      n: shingle length in tokens.

    Returns:
      :class:`PageScore` with the three counts divided by their sum (all zero when
      both texts have no tokens).
    """
    t, p = shingles(true, n), shingles(pred, n)
    tp = fp = fn = 0
    for key in t.keys() | p.keys():
        a, b = t.get(key, 0), p.get(key, 0)
        tp += min(a, b)
        fp += max(0, b - a)
        fn += max(0, a - b)
    s = tp + fp + fn
    if s == 0:
        return PageScore(0.0, 0.0, 0.0)
    return PageScore(tp / s, fp / s, fn / s)


def _precision(s: PageScore) -> float:
    if s.fp == s.fn == 0:
        return 1.0
    if s.tp == s.fp == 0:
        return 0.0
    return s.tp / (s.tp + s.fp)


def _recall(s: PageScore) -> float:
    if s.fp == s.fn == 0:
        return 1.0
    if s.tp == s.fn == 0:
        return 0.0
    return s.tp / (s.tp + s.fn)


def aggregate(scores: Sequence[PageScore]) -> ExtractionScores:
    """Averages per-page precision and recall, and takes F1 of the averages.

    Raises:
      ValueError: no page has a prediction (precision undefined) or no page has
        ground truth (recall undefined).
    """
    ps = [_precision(s) for s in scores if s.tp + s.fp > 0]
    rs = [_recall(s) for s in scores if s.tp + s.fn > 0]
    if not ps or not rs:
        raise ValueError(f"cannot average: {len(ps)} pages with predictions, {len(rs)} with ground truth")
    p = sum(ps) / len(ps)
    r = sum(rs) / len(rs)
    f1 = 2 * p * r / (p + r) if p + r > 0 else 0.0
    return ExtractionScores(len(scores), p, r, f1)


def evaluate(ground_truth: Mapping[str, str], predictions: Mapping[str, str | None]) -> ExtractionScores:
    """Scores predicted article bodies against ground truth, page by page.

    Args:
      ground_truth: ``{page_id: true_body}``.
      predictions: ``{page_id: predicted_body}``; a missing id or ``None`` counts as "".

    Returns:
      :class:`ExtractionScores` over all ``ground_truth`` pages.
    """
    return aggregate([page_score(true, predictions.get(key)) for key, true in ground_truth.items()])


def load_ground_truth(path: Path) -> dict[str, dict]:
    """Reads ``{id: {"articleBody": str, "url": str}}`` (benchmark ``ground-truth.json``).

    Raises:
      InputError: the file is missing, unreadable or not JSON, or not a JSON object of objects
        with a string ``articleBody`` (and, when present, a string ``url``); the message names
        the file and the first bad page.
    """
    data = read_json(path)
    if not isinstance(data, dict):
        raise InputError(
            f"{path}: not a ground truth file: expected a JSON object "
            f"{{id: {{'articleBody': ..., 'url': ...}}}}, got {type(data).__name__}"
        )
    for key, value in data.items():
        if not isinstance(value, dict) or not isinstance(value.get("articleBody"), str):
            raise InputError(f"{path}: ground truth page {key!r} has no string 'articleBody'")
        if value.get("url") is not None and not isinstance(value["url"], str):
            raise InputError(f"{path}: ground truth page {key!r} has a non-string 'url'")
    return data


def load_predictions(path: Path) -> dict[str, str | None]:
    """Reads a predictions file: benchmark ``{"output": {id: {"articleBody"}}}`` or plain ``{id: {...}}``/``{id: str}``.

    Raises:
      InputError: the file is missing, unreadable or not JSON, not an object, or a prediction
        is neither a string, ``null`` nor an object whose ``articleBody`` is a string or ``null``.
    """
    data = read_json(path)
    if isinstance(data, dict) and isinstance(data.get("output"), dict):
        data = data["output"]
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object of predictions, got {type(data).__name__}")
    out = {}
    for key, value in data.items():
        text = value.get("articleBody") if isinstance(value, dict) else value
        if text is not None and not isinstance(text, str):
            raise InputError(f"{path}: prediction {key!r} is not a string (got {type(text).__name__})")
        out[key] = text
    return out


def _read_html(html_dir: Path, page_id: str) -> tuple[bytes | None, Path | None]:
    """``(bytes, path)`` of a page file, ``(None, None)`` when there is none.

    Raises:
      InputError: the file exists but cannot be read (truncated/corrupt gzip, permissions).
    """
    for path in (html_dir / f"{page_id}.html.gz", html_dir / f"{page_id}.html"):
        if not path.exists():
            continue
        try:
            if path.suffix == ".gz":
                with gzip.open(path, "rb") as f:
                    return f.read(), path
            return path.read_bytes(), path
        except (OSError, EOFError, zlib.error) as e:
            raise InputError(f"{path}: {describe(e)}") from None
    return None, None


def extract_pages(
    html_dir: Path, ground_truth: Mapping[str, dict], config=None, fetch_time: float | None = None
) -> tuple[dict[str, str], Counter]:
    """Runs :func:`newsflow.core.extraction.extract_content` on every ground-truth page found in ``html_dir``.

    Args:
      html_dir: folder of ``<id>.html.gz`` / ``<id>.html``.
      ground_truth: as :func:`load_ground_truth`; its ``url`` is used as the page URL.
      config: :class:`newsflow.core.extraction.ExtractionConfig`, default settings when None.
      fetch_time: UTC epoch seconds recorded as the fetch time (default: now).

    Returns:
      ``(predictions, errors)``: ``{id: text}`` ("" for a failed, missing or unreadable page)
      and a ``Counter`` of failure reasons (``error_type``, ``"missing_file"`` or
      ``"unreadable_file"``; an unreadable file also gets a ``warning:`` line on stderr).
    """
    from newsflow.core.extraction import ExtractionConfig, ExtractionError, extract_content
    from newsflow.core.urls import source_domain
    from newsflow.schemas.raw import RawDocument

    fetch_time = time.time() if fetch_time is None else fetch_time
    predictions: dict[str, str] = {}
    errors: Counter = Counter()
    config = config or ExtractionConfig()
    for page_id, item in ground_truth.items():
        try:
            body, _ = _read_html(Path(html_dir), page_id)
        except InputError as e:
            print(f"warning: {e} (scored as an empty prediction)", file=sys.stderr)
            errors["unreadable_file"] += 1
            predictions[page_id] = ""
            continue
        if body is None:
            errors["missing_file"] += 1
            predictions[page_id] = ""
            continue
        url = item.get("url") or f"http://unknown.invalid/{page_id}"
        raw = RawDocument(
            url=url,
            source_domain=source_domain(url),
            fetch_time=fetch_time,
            http_status=200,
            content_type="text/html",
            body=body,
        )
        try:
            predictions[page_id] = extract_content(raw, config).text
        except ExtractionError as e:
            errors[e.error_type] += 1
            predictions[page_id] = ""
    return predictions, errors


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this command's options to ``parser``."""
    parser.add_argument(
        "--ground-truth",
        required=True,
        type=Path,
        help="ground-truth JSON {id: {articleBody, url}} (benchmark ground-truth.json)",
    )
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--html-dir", type=Path, help="folder of <id>.html.gz or <id>.html pages to extract")
    src.add_argument(
        "--predictions",
        type=Path,
        help="score this predictions file ({'output': {id: {articleBody}}}) instead of extracting",
    )
    parser.add_argument("--timeout-s", type=float, default=None, help="per-page extraction time limit, seconds")


def run(args: argparse.Namespace) -> int:
    """Prints one JSON line with pages, precision, recall, f1 (and errors, seconds).

    Returns:
      0 on success; 2 on bad input, after printing ``error: <file>: <problem>`` to stderr.
    """
    try:
        gt = load_ground_truth(args.ground_truth)
    except InputError as e:
        return fail(e)
    if not gt:
        return fail(f"{args.ground_truth}: no pages to score")
    truth = {k: v["articleBody"] for k, v in gt.items()}
    t0 = time.perf_counter()
    errors: Counter = Counter()
    if args.predictions is not None:
        source = args.predictions
        try:
            predictions = load_predictions(args.predictions)
        except InputError as e:
            return fail(e)
        missing = [k for k in truth if k not in predictions]
        if missing:
            errors["missing_prediction"] = len(missing)
    else:
        source = args.html_dir
        if not args.html_dir.is_dir():
            return fail(f"--html-dir {args.html_dir}: not a directory")
        from newsflow.core.extraction import ExtractionConfig

        config = ExtractionConfig() if args.timeout_s is None else ExtractionConfig(timeout_s=args.timeout_s)
        predictions, errors = extract_pages(args.html_dir, gt, config)
    try:
        scores = evaluate(truth, predictions)
    except ValueError as e:
        return fail(f"{source}: nothing to score against {args.ground_truth} ({e})")
    out = {
        "pages": scores.pages,
        "precision": round(scores.precision, 4),
        "recall": round(scores.recall, 4),
        "f1": round(scores.f1, 4),
        "errors": dict(sorted(errors.items())),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    print(json.dumps(out))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Runs this command on its own (``python -m newsflow.cli.evaluation.extraction ...``)."""
    parser = argparse.ArgumentParser(prog="newsflow eval extraction", description=HELP)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
