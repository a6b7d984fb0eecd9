"""Builds ``stories.csv`` (the labelled multilingual story set) from the news-aggregator-stories CSV.

Run from the repository root (the source CSV is the shared development copy, not bundled)::

    python data/multilingual-stories/build_stories.py \
        ../shared/data/news-aggregator-stories/newsCorpora_2014-03-10_11.csv data/multilingual-stories/stories.csv

Selection (deterministic): the stories with at least 8 headlines, in ``sha256("ml:" + STORY)`` order,
at most 7 per CATEGORY; per story the first 4 headlines with distinct lower-cased titles in
``sha256("ml:" + ID)`` order. Every English headline whose ID is a key of ``translations.json`` gets
one row per translation: ID ``<source id>-<language>``, the source's STORY (gold label) and CATEGORY,
TIMESTAMP = the source's + 1-60 minutes (``sha256`` of the new ID), URL and HOSTNAME
``https://translation.invalid/<language>/<source id>`` (no slug words: a translation is matched on
its headline alone), PUBLISHER ``translation``, LANGUAGE the language code.
"""

from __future__ import annotations

import collections
import csv
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COLUMNS = ["ID", "TITLE", "URL", "PUBLISHER", "CATEGORY", "STORY", "HOSTNAME", "TIMESTAMP", "LANGUAGE", "SOURCE_ID"]


def _h(s: str) -> str:
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


def build(source_csv: str, out_csv: str) -> int:
    """Writes ``out_csv``; returns the number of rows."""
    with open(source_csv, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    with open(os.path.join(HERE, "translations.json"), encoding="utf-8") as f:
        translations = json.load(f)
    by_story = collections.defaultdict(list)
    for r in rows:
        by_story[r["STORY"]].append(r)
    stories = sorted((s for s, v in by_story.items() if len(v) >= 8), key=lambda s: _h("ml:" + s))
    per_cat: collections.Counter = collections.Counter()
    out = []
    for s in stories:
        cat = by_story[s][0]["CATEGORY"]
        if per_cat[cat] >= 7:
            continue
        per_cat[cat] += 1
        seen, picked = set(), []
        for r in sorted(by_story[s], key=lambda r: _h("ml:" + r["ID"])):
            if r["TITLE"].lower() not in seen:
                seen.add(r["TITLE"].lower())
                picked.append(r)
            if len(picked) == 4:
                break
        for r in picked:
            out.append({**{c: r[c] for c in COLUMNS[:8]}, "LANGUAGE": "en", "SOURCE_ID": r["ID"]})
            for lang, title in translations.get(r["ID"], {}).items():
                new_id = f"{r['ID']}-{lang}"
                url = f"https://translation.invalid/{lang}/{r['ID']}"
                minutes = 1 + int(_h(new_id), 16) % 60
                out.append(
                    {
                        "ID": new_id,
                        "TITLE": title,
                        "URL": url,
                        "PUBLISHER": "translation",
                        "CATEGORY": r["CATEGORY"],
                        "STORY": r["STORY"],
                        "HOSTNAME": "translation.invalid",
                        "TIMESTAMP": str(int(r["TIMESTAMP"]) + minutes * 60_000),
                        "LANGUAGE": lang,
                        "SOURCE_ID": r["ID"],
                    }
                )
    missing = set(translations) - {r["SOURCE_ID"] for r in out}
    if missing:
        raise SystemExit(f"translations of headlines not selected: {sorted(missing)}")
    with open(out_csv, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        w.writerows(out)
    return len(out)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    print(build(sys.argv[1], sys.argv[2]))
