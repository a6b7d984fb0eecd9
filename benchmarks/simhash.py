"""SimHash throughput of newsflow.core.simhash, for capacity planning.

Run: ``python -m benchmarks.simhash --json`` (one JSON line; ~30 s).

Texts: the bundled corpus ``data/corpus/pages.jsonl.gz`` (page text = all text
nodes outside script/style, via ``html.parser``; feed-only documents use title
+ summary) and, as a short-text workload, ``data/corpus/headlines.jsonl.gz``
titles. Without the corpus it falls back to the article bodies in
``/work/shared/data/article-extraction-benchmark/ground-truth.json``, and
without that to seeded random texts over a fixed word list. Texts without any
token are left out (reported as ``dropped_empty``).

Measured, each as the median of ``--repeat`` runs over the whole workload
(taken round-robin, one run of each per round), in ``docs_per_s`` (texts per
second on one core):
- ``simhash``: ``[simhash(t) for t in texts]``, the call the streaming job makes per article.
- ``tokenize_only``: ``tokenize(t)`` (NFKC + casefold + token regex) for every text, the floor
  every implementation of this fingerprint pays.
``simhash_share_of_tokenize_bound`` is ``simhash`` over ``tokenize_only`` (at most 1);
``features_per_s`` is shingles fingerprinted per second. That the fingerprints equal the PyPI
``simhash`` package's is a test (``tests/unit/test_simhash.py``), not a benchmark figure.
"""

from __future__ import annotations

import base64
import gzip
import json
import random
import re
from html.parser import HTMLParser
from pathlib import Path

from benchmarks._common import emit, environment, median, parse_args, sig, time_repeat
from newsflow.core.simhash import shingles, simhash, tokenize

REPO = Path(__file__).resolve().parents[1]
PAGES = REPO / "data" / "corpus" / "pages.jsonl.gz"
HEADLINES = REPO / "data" / "corpus" / "headlines.jsonl.gz"
SHARED_GROUND_TRUTH = Path("/work/shared/data/article-extraction-benchmark/ground-truth.json")

_FALLBACK_WORDS = (
    "the of and to in a is that for on with as by at from it was said government minister police "
    "people year new city state president report market company officials week court election "
    "percent million health school water storm power country public million workers prices bank "
    "according told data research team season game season final club coach players fans match"
).split()


class _TextOfHtml(HTMLParser):
    """Collects text nodes outside script/style/noscript/template."""

    _SKIP = {"script", "style", "noscript", "template"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._depth = 0

    def handle_starttag(self, tag, attrs):
        if tag in self._SKIP:
            self._depth += 1

    def handle_endtag(self, tag):
        if tag in self._SKIP and self._depth:
            self._depth -= 1

    def handle_data(self, data):
        if not self._depth:
            self.parts.append(data)


def _html_text(body: bytes, content_type: str) -> str:
    m = re.search(r"charset=([\w-]+)", content_type or "", re.I)
    try:
        html = body.decode(m.group(1) if m else "utf-8", errors="replace")
    except LookupError:
        html = body.decode("utf-8", errors="replace")
    parser = _TextOfHtml()
    parser.feed(html)
    parser.close()
    return " ".join(" ".join(parts.split()) for parts in parser.parts if parts.strip())


def load_workloads() -> tuple[str, dict[str, list[str]]]:
    """Returns (source description, {workload name: texts})."""
    if PAGES.exists():
        pages = []
        with gzip.open(PAGES, "rt", encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                if d.get("body_b64"):
                    pages.append(_html_text(base64.b64decode(d["body_b64"]), d.get("content_type", "")))
                else:
                    pages.append(" ".join(x for x in (d.get("title"), d.get("summary")) if x))
        workloads = {"pages": pages}
        if HEADLINES.exists():
            with gzip.open(HEADLINES, "rt", encoding="utf-8") as f:
                workloads["headlines"] = [json.loads(line).get("title") or "" for line in f]
        return "data/corpus", workloads
    if SHARED_GROUND_TRUTH.exists():
        gt = json.loads(SHARED_GROUND_TRUTH.read_text(encoding="utf-8"))
        return str(SHARED_GROUND_TRUTH), {"pages": [v["articleBody"] for v in gt.values()]}
    rng = random.Random(20240501)
    weights = [1.0 / (r + 1) for r in range(len(_FALLBACK_WORDS))]  # Zipf-like
    texts = [" ".join(rng.choices(_FALLBACK_WORDS, weights, k=rng.randint(200, 1200))) for _ in range(300)]
    return "generated (seeded, fixed word list)", {"pages": texts}


def measure(texts: list[str], repeat: int) -> dict:
    """Throughput figures for one workload (see module docstring)."""
    kept = [t for t in texts if tokenize(t)]
    n = len(kept)
    n_features = sum(len(shingles(tokenize(t))) for t in kept)
    n_tokens = sum(len(tokenize(t)) for t in kept)
    runs = {
        "simhash": lambda: [simhash(t) for t in kept],
        "tokenize_only": lambda: [tokenize(t) for t in kept],
    }
    # Round-robin (one run of each per round) so that load changes on the
    # machine hit both alike; the median run counts.
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, fn in runs.items():
            samples[name].extend(time_repeat(fn, 1))
    per_s = {name: n / median(values) for name, values in samples.items()}
    return {
        "docs": n,
        "dropped_empty": len(texts) - n,
        "tokens": n_tokens,
        "features": n_features,
        "docs_per_s": {name: sig(v) for name, v in per_s.items()},
        "features_per_s": sig(n_features * per_s["simhash"] / n),
        "simhash_share_of_tokenize_bound": sig(per_s["simhash"] / per_s["tokenize_only"], 3),
    }


def main(argv=None) -> int:
    args = parse_args(
        "SimHash throughput",
        argv,
        lambda p: p.add_argument("--repeat", type=int, default=5, help="timed runs per figure (median)"),
    )
    source, workloads = load_workloads()
    result = {
        "benchmark": "simhash",
        "texts": source,
        "repeat": args.repeat,
        "unit": "docs_per_s = texts fingerprinted (or tokenized) per second on one core",
        "workloads": {name: measure(texts, args.repeat) for name, texts in workloads.items()},
        "env": environment(),
    }
    emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
