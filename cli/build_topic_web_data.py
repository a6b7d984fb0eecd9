"""One-off builder of ``data/topics/web_sections.jsonl.gz``: extra section-labelled news texts for the
topic classifier, from permissively licensed shared data (run by a developer, not at install).

Sources (``--shared``, default ``../shared/data``; shared development parts only):

* ``rss-atom-feeds/expected_rss_parser/guardian.json`` (MIT, rss-parser test fixture): The Guardian
  feed items, title + ``contentSnippet``;
* ``article-extraction-benchmark/ground-truth.json`` (MIT, Scrapinghub): page URL + first 300
  characters of the article body (no title in the ground truth);
* ``fundus-news-pages/expected.jsonl`` (MIT, flairNLP/fundus), English pages only: title + first
  300 characters of ``body_text``.

Label = :func:`url_section`: the first path segment of the article URL found in
:data:`URL_SECTIONS` (an explicit table: ``/sport/`` -> Sports, ``/science/`` -> Science, ...);
pages whose URL names no section are left out. Distant supervision: a URL's section is the
publisher's filing, so labels are as good as the site's own sections.

Run::

    python -m newsflow.cli.build_topic_web_data [--shared ../shared/data] [--output data/topics/web_sections.jsonl.gz]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
from urllib.parse import urlparse

from newsflow.core.topics import url_section

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = {  # source -> license and origin, stored on every row
    "guardian-rss": "MIT; GitHub rbren/rss-parser b0d3b483 test fixture; text (c) Guardian News & Media",
    "article-extraction-benchmark": "MIT; GitHub scrapinghub/article-extraction-benchmark 4a3bc979; (c) publishers",
    "fundus-news-pages": "MIT; GitHub flairNLP/fundus 18da6e53 test fixture; text (c) publishers",
}


def _lead(text: str, chars: int = 300) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= chars else text[:chars].rsplit(" ", 1)[0]


def collect(shared: str) -> list[dict]:
    """Labelled rows ``{source, license, url, title, text, section}`` from the three sources, sorted by URL.

    Raises:
      OSError / ValueError: a source file is missing or not the documented JSON.
    """
    rows = []
    with open(os.path.join(shared, "rss-atom-feeds", "expected_rss_parser", "guardian.json"), encoding="utf-8") as f:
        for item in json.load(f)["feed"]["items"]:
            rows.append(("guardian-rss", item["link"], item.get("title") or "", item.get("contentSnippet") or ""))
    with open(os.path.join(shared, "article-extraction-benchmark", "ground-truth.json"), encoding="utf-8") as f:
        for v in json.load(f).values():
            rows.append(("article-extraction-benchmark", v["url"], "", v.get("articleBody") or ""))
    with open(os.path.join(shared, "fundus-news-pages", "expected.jsonl"), encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            if r.get("html_lang") == "en":
                rows.append(("fundus-news-pages", r["url"], r["expected"].get("title") or "", r.get("body_text") or ""))
    out = []
    for source, url, title, text in rows:
        section = url_section(url)
        if section and (title or text):
            out.append(
                {
                    "source": source,
                    "license": SOURCES[source],
                    "url": url,
                    "title": title.strip(),
                    "text": _lead(text),
                    "section": section,
                }
            )
    return sorted(out, key=lambda r: r["url"])


def main(argv: list[str] | None = None) -> int:
    """Writes the file (gzip, deterministic: no timestamp) and prints per-section counts."""
    p = argparse.ArgumentParser(prog="python -m newsflow.cli.build_topic_web_data", description=__doc__.split("\n")[0])
    p.add_argument("--shared", default=os.path.join(REPO, "..", "shared", "data"))
    p.add_argument("--output", default=os.path.join(REPO, "data", "topics", "web_sections.jsonl.gz"))
    args = p.parse_args(argv)
    rows = collect(args.shared)
    body = "".join(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in rows).encode("utf-8")
    with open(args.output, "wb") as f:
        f.write(gzip.compress(body, mtime=0))
    counts = {s: sum(r["section"] == s for r in rows) for s in sorted({r["section"] for r in rows})}
    hosts = len({urlparse(r["url"]).hostname for r in rows})
    print(json.dumps({"output": args.output, "rows": len(rows), "hosts": hosts, "sections": counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
