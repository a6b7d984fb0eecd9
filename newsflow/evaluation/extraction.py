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
:class:`newsflow.extraction.ArticleExtractor` with its ground-truth URL. A page that
fails extraction counts as an empty prediction; failures are counted per
``error_type`` under ``"errors"``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Mapping, NamedTuple, Optional, Sequence

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


def tokenize(text: Optional[str]) -> list[str]:
    """``\\w+`` tokens of ``text`` (``None`` counts as empty)."""
    return _TOKEN_RE.findall(text or "")


def shingles(text: Optional[str], n: int = SHINGLE_N) -> Counter:
    """Multiset of token ``n``-grams of ``text``, as a ``Counter`` of tuples.

    A text with fewer than ``n`` (but at least one) tokens yields one shingle of
    all its tokens, as upstream does.
    """
    tokens = tokenize(text)
    return Counter(tuple(tokens[i : i + n]) for i in range(max(1, len(tokens) - n + 1)) if tokens[i : i + n])


def page_score(true: Optional[str], pred: Optional[str], n: int = SHINGLE_N) -> PageScore:
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


def evaluate(ground_truth: Mapping[str, str], predictions: Mapping[str, Optional[str]]) -> ExtractionScores:
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
      ValueError: the file is not a JSON object of objects with ``articleBody``.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not all(isinstance(v, dict) and "articleBody" in v for v in data.values()):
        raise ValueError(f"{path}: expected {{id: {{'articleBody': ..., 'url': ...}}}}")
    return data


def load_predictions(path: Path) -> dict[str, Optional[str]]:
    """Reads a predictions file: benchmark ``{"output": {id: {"articleBody"}}}`` or plain ``{id: {...}}``/``{id: str}``."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict) and isinstance(data.get("output"), dict):
        data = data["output"]
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object of predictions")
    return {k: (v.get("articleBody") if isinstance(v, dict) else v) for k, v in data.items()}


def _read_html(html_dir: Path, page_id: str) -> Optional[bytes]:
    gz = html_dir / f"{page_id}.html.gz"
    if gz.exists():
        with gzip.open(gz, "rb") as f:
            return f.read()
    plain = html_dir / f"{page_id}.html"
    if plain.exists():
        return plain.read_bytes()
    return None


def extract_pages(html_dir: Path, ground_truth: Mapping[str, dict], config=None,
                  fetch_time: Optional[float] = None) -> tuple[dict[str, str], Counter]:
    """Runs :class:`ArticleExtractor` on every ground-truth page found in ``html_dir``.

    Args:
      html_dir: folder of ``<id>.html.gz`` / ``<id>.html``.
      ground_truth: as :func:`load_ground_truth`; its ``url`` is used as the page URL.
      config: :class:`newsflow.extraction.ExtractionConfig`, default settings when None.
      fetch_time: UTC epoch seconds recorded as the fetch time (default: now).

    Returns:
      ``(predictions, errors)``: ``{id: text}`` ("" for a failed or missing page)
      and a ``Counter`` of failure reasons (``error_type`` or ``"missing_file"``).
    """
    from newsflow.extraction import ArticleExtractor, ExtractionConfig, ExtractionError
    from newsflow.urls import source_domain
    from schemas.raw import RawDocument

    fetch_time = time.time() if fetch_time is None else fetch_time
    predictions: dict[str, str] = {}
    errors: Counter = Counter()
    with ArticleExtractor(config or ExtractionConfig()) as extractor:
        for page_id, item in ground_truth.items():
            body = _read_html(Path(html_dir), page_id)
            if body is None:
                errors["missing_file"] += 1
                predictions[page_id] = ""
                continue
            url = item.get("url") or f"http://unknown.invalid/{page_id}"
            raw = RawDocument(url=url, source_domain=source_domain(url), fetch_time=fetch_time, http_status=200,
                              content_type="text/html", body=body)
            try:
                predictions[page_id] = extractor.extract(raw).text
            except ExtractionError as e:
                errors[e.error_type] += 1
                predictions[page_id] = ""
    return predictions, errors


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds this command's options to ``parser``."""
    parser.add_argument("--ground-truth", required=True, type=Path,
                        help="ground-truth JSON {id: {articleBody, url}} (benchmark ground-truth.json)")
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--html-dir", type=Path, help="folder of <id>.html.gz or <id>.html pages to extract")
    src.add_argument("--predictions", type=Path,
                     help="score this predictions file ({'output': {id: {articleBody}}}) instead of extracting")
    parser.add_argument("--timeout-s", type=float, default=None, help="per-page extraction time limit, seconds")


def run(args: argparse.Namespace) -> int:
    """Prints one JSON line with pages, precision, recall, f1 (and errors, seconds); returns the exit code."""
    try:
        gt = load_ground_truth(args.ground_truth)
    except (OSError, ValueError) as e:
        print(f"error: cannot read ground truth: {e}", file=sys.stderr)
        return 2
    truth = {k: v["articleBody"] for k, v in gt.items()}
    t0 = time.perf_counter()
    errors: Counter = Counter()
    if args.predictions is not None:
        try:
            predictions = load_predictions(args.predictions)
        except (OSError, ValueError) as e:
            print(f"error: cannot read predictions: {e}", file=sys.stderr)
            return 2
        missing = [k for k in truth if k not in predictions]
        if missing:
            errors["missing_prediction"] = len(missing)
    else:
        if not args.html_dir.is_dir():
            print(f"error: --html-dir {args.html_dir} is not a directory", file=sys.stderr)
            return 2
        from newsflow.extraction import ExtractionConfig

        config = ExtractionConfig() if args.timeout_s is None else ExtractionConfig(timeout_s=args.timeout_s)
        predictions, errors = extract_pages(args.html_dir, gt, config)
    try:
        scores = evaluate(truth, predictions)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
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


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Runs this command on its own (``python -m newsflow.evaluation.extraction ...``)."""
    parser = argparse.ArgumentParser(prog="newsflow eval extraction", description=HELP)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
