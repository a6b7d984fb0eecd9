"""Builds the bundled demo corpus (landing files) from the licensed sets in ../shared/data.

Run from the repository root (only needed when the shared data changes; the
output is committed)::

    python data/build_corpus.py --shared ../shared/data --out data/corpus

Writes ``pages.jsonl.gz`` (real article pages, MIT) and ``headlines.jsonl.gz``
(feed-only headline stream, CC BY 4.0), one ``RawDocument.to_json_dict()`` per
line, sorted by fetch time, gzip with mtime 0 so the bytes are reproducible.
Gold labels (story ids, expected text) are not copied: they stay evaluation data.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import gzip
import io
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from newsflow.core.urls import source_domain  # noqa: E402
from newsflow.schemas import RawDocument  # noqa: E402

# Upstream does not record when these pages were fetched; we use the first day of the
# month their collection is dated to (documented in data/corpus/NOTICE.md).
AEB_FETCH_TIME = dt.datetime(2019, 11, 1, tzinfo=dt.UTC).timestamp()
N4K_FETCH_TIME = dt.datetime(2023, 11, 7, tzinfo=dt.UTC).timestamp()


def _gz(path: str) -> bytes:
    with gzip.open(path, "rb") as f:
        return f.read()


def pages(shared: str) -> list[RawDocument]:
    docs = []
    aeb = os.path.join(shared, "article-extraction-benchmark")
    truth = json.load(open(os.path.join(aeb, "ground-truth.json"), encoding="utf-8"))
    for item_id in sorted(truth):
        url = truth[item_id]["url"]
        body = _gz(os.path.join(aeb, "html", f"{item_id}.html.gz"))
        docs.append(
            RawDocument(
                url=url,
                source_domain=source_domain(url),
                fetch_time=AEB_FETCH_TIME,
                http_status=200,
                content_type="text/html; charset=utf-8",
                body=body,
            )
        )
    fundus = os.path.join(shared, "fundus-news-pages")
    for line in open(os.path.join(fundus, "expected.jsonl"), encoding="utf-8"):
        rec = json.loads(line)
        url = rec["url"]
        fetched = dt.datetime.fromisoformat(rec["crawl_date"]).replace(tzinfo=dt.UTC).timestamp()
        body = _gz(os.path.join(fundus, rec["html_file"]))
        docs.append(
            RawDocument(
                url=url,
                source_domain=source_domain(url),
                fetch_time=round(fetched, 3),
                http_status=200,
                content_type="text/html",
                content_language="",
                body=body,
                source_name=rec["publisher"],
            )
        )
    n4k = os.path.join(shared, "newspaper4k-test-pages")
    for line in open(os.path.join(n4k, "index.jsonl"), encoding="utf-8"):
        rec = json.loads(line)
        if not rec.get("html_file"):
            continue
        url = rec.get("url") or f"https://newspaper4k-fixtures.invalid/{rec['id']}"
        body = _gz(os.path.join(n4k, rec["html_file"]))
        docs.append(
            RawDocument(
                url=url,
                source_domain=source_domain(url),
                fetch_time=N4K_FETCH_TIME,
                http_status=200,
                content_type="text/html",
                body=body,
            )
        )
    return docs


def headlines(shared: str) -> list[RawDocument]:
    docs = []
    path = os.path.join(shared, "news-aggregator-stories", "newsCorpora_2014-03-10_11.csv")
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            url = row["URL"].replace("\\", "")
            ts = int(row["TIMESTAMP"]) / 1000.0
            host = row["HOSTNAME"].lower()
            domain = host[4:] if host.startswith("www.") else host
            docs.append(
                RawDocument(
                    url=url,
                    source_domain=domain,
                    fetch_time=ts,
                    http_status=0,
                    title=row["TITLE"],
                    summary=None,
                    published_time=ts,
                    source_name=row["PUBLISHER"].replace("\\", ""),
                )
            )
    return docs


def write(docs: list[RawDocument], path: str) -> None:
    docs = sorted(docs, key=lambda d: (d.fetch_time, d.url))
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, compresslevel=9) as gz:
        for d in docs:
            gz.write((json.dumps(d.to_json_dict(), ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(buf.getvalue())
    os.replace(tmp, path)
    print(f"{path}: {len(docs)} documents, {os.path.getsize(path) / 1e6:.1f} MB")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default="../shared/data")
    ap.add_argument("--out", default="data/corpus")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    write(pages(args.shared), os.path.join(args.out, "pages.jsonl.gz"))
    write(headlines(args.shared), os.path.join(args.out, "headlines.jsonl.gz"))


if __name__ == "__main__":
    main()
