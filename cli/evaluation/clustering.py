"""Story / near-duplicate clustering quality on the UCI News Aggregator format.

Input: the ``news-aggregator-stories`` CSV (``ID,TITLE,URL,PUBLISHER,CATEGORY,STORY,HOSTNAME,
TIMESTAMP``; plain or ``.gz``), whose ``STORY`` column is the gold story id. Rows are processed in
``(TIMESTAMP, ID)`` order, as a stream would deliver them.

Score: pair counting over same-cluster pairs (the definition in Priberam's ``eval.py`` for Miranda
et al. 2018): precision = correct predicted pairs / predicted pairs, recall = correct predicted
pairs / gold pairs, F1 their harmonic mean.

Levels:

* ``story`` (default): :class:`newsflow.core.stories.StoryAssigner` on headline + URL slug words,
  spaCy entities of the headline and the crawl timestamp; near-duplicate groups (SimHash of the
  headline, Hamming <= 3) nest inside stories.
* ``near-duplicate``: the streaming job's own near-duplicate step on the headlines
  (:mod:`newsflow.cli.evaluation.near_duplicates`: ``RedisGroupStore`` on a throw-away embedded
  Redis): groups are connected components of "Hamming <= 3, or 4-5 bits apart in a shared LSH band
  with a MinHash Jaccard estimate >= 0.6" (:mod:`newsflow.core.minhash_check`). The same scores with the
  re-check off are reported under ``without_minhash``; ``offline_all_pairs`` scores the offline
  variant (nearest earlier fingerprint within 3, else the best borderline earlier headline among
  all pairs, :func:`near_duplicate_labels`) with ``borderline_checked``/``borderline_confirmed``
  counts. Gold labels are stories, so recall is tiny by construction; precision is the figure to watch.

Multilingual sets: an optional ``LANGUAGE`` column (ISO 639-1 per headline; missing or empty means
``en``) sets each article's language (entities and the cross-language vector form of
:mod:`newsflow.core.multilingual`), and the output then also has ``same_language`` and
``cross_language``: the pair-counting scores restricted to pairs of headlines in one language and
in two languages (``pairs``: gold pairs of that kind), plus ``by_language``: the same-language
scores of each language. The labelled set ``data/multilingual-stories/stories.csv`` (English
news-aggregator headlines and their translations, see its README) has this column.

Translations: where a ``SOURCE_ID`` column names, for a row, the row it was translated from (its own
``ID`` for an original), the output also has

* ``cross_language_vs_source``: the cross-language pair scores against the *predicted* story of each
  row's source instead of the gold story: it scores the cross-language decisions alone (did a
  translation land in its source's story, and nowhere else?), whatever the same-language
  clustering got wrong;
* ``cross_language_ceiling``: the cross-language scores against gold had every row landed exactly
  in its source's predicted story: the best the cross-language step can reach given the
  same-language clustering (an English story that wrongly holds two gold stories makes every
  correctly placed translation of one of them a false pair with the other's headlines);
* ``cross_language_false_pairs``: the predicted cross-language pairs of two gold stories (``n``),
  split into ``inherited`` (the two rows' sources are in one predicted story: the same-language
  clustering joined them first) and ``cross_language`` (a translation placed away from its
  source's story with a row of another gold story: a wrong cross-language decision);
* ``translations``: ``n`` rows with a source other than themselves, ``with_source`` of them in
  their source's story, ``other_story`` in another story that has rows in the source's language
  (a wrong join), ``apart`` in a story without any row in the source's language (a miss).

Distractors (``--distractors FILE``): the rows of a second CSV in the same format whose ``ID`` is
not in ``--stories`` are added before clustering (the realistic setting: the labelled stories among
all other news of the same hours). The multilingual set with the shared news-aggregator slice as
distractors::

    newsflow eval clustering --stories data/multilingual-stories/stories.csv \
        --distractors ../shared/data/news-aggregator-stories/newsCorpora_2014-03-10_11.csv

Baseline measured in the same run (``baseline``): single-pass TF-IDF(headline) centroid clustering
in timestamp order, cosine threshold 0.2, IDF fitted on all headlines of the file (the floor
baseline of the data set's PROVENANCE.md).

Command (prints one JSON line)::

    newsflow eval clustering --stories /work/shared/data/news-aggregator-stories/newsCorpora_2014-03-10_11.csv

Errors: bad input (a missing, unreadable or truncated file, an empty file or one without data
rows, missing columns, a row with missing fields or a bad ``TIMESTAMP``, headlines without any
scorable word) prints ``error: <file>: <problem>`` to stderr and exits with code 2 (the
convention of :mod:`newsflow.cli.evaluation.inputs`).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import sys
import time
from collections import Counter
from collections.abc import Sequence

from newsflow.cli.evaluation.inputs import READ_ERRORS, InputError, describe, fail

COMMAND = "clustering"
HELP = "score story (or near-duplicate) clustering against gold story ids (news-aggregator CSV)"


REQUIRED_COLUMNS = ("ID", "TITLE", "URL", "STORY", "TIMESTAMP")


def _row_order(row: dict) -> tuple:
    """Rows in (TIMESTAMP, numeric ID, ID) order: the order :func:`read_stories` gives and clustering replays."""
    return (row["_t"], int(row["ID"]) if row["ID"].isdigit() else 0, row["ID"])


def read_stories(path: str) -> list[dict]:
    """Rows of a news-aggregator CSV sorted by ``(TIMESTAMP, ID)``.

    Raises:
      InputError: the file cannot be read (missing, not UTF-8, truncated gzip, NUL bytes), has no
        header or no data rows, lacks a required column (:data:`REQUIRED_COLUMNS`), or a row has
        missing fields or a ``TIMESTAMP`` that is not an integer (epoch milliseconds).
    """
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in REQUIRED_COLUMNS if c not in header]
            if not header:
                raise InputError(f"{path}: empty file, expected a CSV header {','.join(REQUIRED_COLUMNS)},...")
            if missing:
                raise InputError(f"{path}: missing columns {missing} (header has {header[:10]})")
            rows = list(reader)
    except READ_ERRORS as e:
        if isinstance(e, InputError):
            raise
        raise InputError(f"{path}: {describe(e)}") from None
    if not rows:
        raise InputError(f"{path}: no data rows after the header")
    for n, r in enumerate(rows, 2):
        if any(r.get(c) is None for c in REQUIRED_COLUMNS):
            raise InputError(f"{path}: line {n} (ID={r.get('ID')!r}) has fewer fields than the header")
        try:
            r["_t"] = int(r["TIMESTAMP"]) / 1000.0
        except ValueError:
            raise InputError(f"{path}: row ID={r.get('ID')!r} has a bad TIMESTAMP {r['TIMESTAMP']!r}") from None
    rows.sort(key=_row_order)
    return rows


def merge_distractors(rows: list[dict], extra: Sequence[dict]) -> list[dict]:
    """``rows`` plus every row of ``extra`` whose ``ID`` is not in ``rows``, in ``(TIMESTAMP, ID)``
    order (as :func:`read_stories` sorts)."""
    ids = {r["ID"] for r in rows}
    out = list(rows) + [r for r in extra if r["ID"] not in ids]
    out.sort(key=_row_order)
    return out


def source_scores(gold: Sequence, pred: Sequence, languages: Sequence[str], ids: Sequence[str], sources) -> dict:
    """Cross-language scores that separate the cross-language decisions from the same-language
    clustering (see the module docstring, "Translations").

    Args:
      gold, pred, languages: per row, as for :func:`language_pair_scores`.
      ids: each row's ``ID``.
      sources: each row's ``SOURCE_ID`` (the row it was translated from; its own ID, ``""`` or
        ``None`` for an original). A source that is not among ``ids`` counts as a story of its own.

    Returns:
      ``{"cross_language_false_pairs": {"n", "inherited", "cross_language"},
      "cross_language_vs_source": {...}, "cross_language_ceiling": {...}, "translations":
      {"n", "with_source", "other_story", "apart"}}``.

    Raises:
      ValueError: the sequences differ in length.
    """
    if not len(gold) == len(pred) == len(languages) == len(ids) == len(sources):
        raise ValueError("gold, pred, languages, ids and sources differ in length")
    pred_of = dict(zip(ids, pred, strict=True))
    ref = [pred_of.get(s or i, "missing:" + (s or i)) for i, s in zip(ids, sources, strict=True)]
    language_of = dict(zip(ids, languages, strict=True))
    langs_of_story: dict = {}
    for p, lang in zip(pred, languages, strict=True):
        langs_of_story.setdefault(p, set()).add(lang)
    n = with_source = other = apart = 0
    for i, s, p, r in zip(ids, sources, pred, ref, strict=True):
        if not s or s == i:
            continue
        n += 1
        if p == r:
            with_source += 1
        elif language_of.get(s) in langs_of_story[p]:
            other += 1
        else:
            apart += 1

    def cross_pairs(*keys) -> int:
        """Pairs of rows in two languages that agree on every key sequence."""
        groups = Counter(zip(*keys, strict=True))
        within = Counter(zip(*keys, languages, strict=True))
        return sum(v * (v - 1) // 2 for v in groups.values()) - sum(v * (v - 1) // 2 for v in within.values())

    false_all = cross_pairs(pred) - cross_pairs(pred, gold)
    inherited = cross_pairs(pred, ref) - cross_pairs(pred, ref, gold)
    return {
        "cross_language_false_pairs": {"n": false_all, "inherited": inherited, "cross_language": false_all - inherited},
        "cross_language_vs_source": language_pair_scores(ref, pred, languages)["cross_language"],
        "cross_language_ceiling": language_pair_scores(gold, ref, languages)["cross_language"],
        "translations": {"n": n, "with_source": with_source, "other_story": other, "apart": apart},
    }


def pairwise_scores(gold: Sequence, pred: Sequence) -> dict:
    """Pair-counting precision, recall and F1 of a predicted clustering against gold labels.

    Args:
      gold: gold cluster label per item.
      pred: predicted cluster label per item (same length).

    Returns:
      ``{"precision", "recall", "f1"}`` floats rounded to 4 decimals (0.0 when undefined).

    Raises:
      ValueError: the sequences differ in length.
    """
    if len(gold) != len(pred):
        raise ValueError(f"gold has {len(gold)} items, pred {len(pred)}")

    def pairs(c: Counter) -> int:
        return sum(v * (v - 1) // 2 for v in c.values())

    tp = pairs(Counter(zip(gold, pred, strict=False)))
    g, p = pairs(Counter(gold)), pairs(Counter(pred))
    precision = tp / p if p else 0.0
    recall = tp / g if g else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4)}


def language_pair_scores(gold: Sequence, pred: Sequence, languages: Sequence[str]) -> dict:
    """Pair-counting scores split by whether the two items of a pair share a language.

    Args:
      gold: gold cluster label per item.
      pred: predicted cluster label per item.
      languages: language code per item.

    Returns:
      ``{"same_language": {...}, "cross_language": {...}, "by_language": {lang: {...}}}``, each
      ``{"pairs", "precision", "recall", "f1"}`` (``pairs`` = gold pairs of that kind; scores
      rounded to 4 decimals, 0.0 when undefined).

    Raises:
      ValueError: the sequences differ in length.
    """
    if not len(gold) == len(pred) == len(languages):
        raise ValueError(f"gold {len(gold)}, pred {len(pred)} and languages {len(languages)} items")

    def pairs(keys) -> int:
        return sum(v * (v - 1) // 2 for v in Counter(keys).values())

    def scores(tp: int, g: int, p: int) -> dict:
        precision = tp / p if p else 0.0
        recall = tp / g if g else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        return {"pairs": g, "precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4)}

    gp = list(zip(gold, pred, strict=True))
    tp_all, g_all, p_all = pairs(gp), pairs(gold), pairs(pred)
    tp_same = pairs(zip(gp, languages, strict=True))
    g_same = pairs(zip(gold, languages, strict=True))
    p_same = pairs(zip(pred, languages, strict=True))
    by_language = {}
    for lang in sorted(set(languages)):
        idx = [i for i, x in enumerate(languages) if x == lang]
        by_language[lang] = scores(pairs(gp[i] for i in idx), pairs(gold[i] for i in idx), pairs(pred[i] for i in idx))
    return {
        "same_language": scores(tp_same, g_same, p_same),
        "cross_language": scores(tp_all - tp_same, g_all - g_same, p_all - p_same),
        "by_language": by_language,
    }


def baseline_tfidf(titles: Sequence[str], threshold: float = 0.2) -> list[int]:
    """Single-pass TF-IDF centroid clustering (sklearn ``TfidfVectorizer`` defaults, IDF on ``titles``)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    x = TfidfVectorizer().fit_transform(titles).tocsr()
    centroids: list[dict[int, float]] = []
    norms: list[float] = []
    postings: dict[int, set] = {}
    labels = []
    for i in range(x.shape[0]):
        row = x.getrow(i)
        vec = dict(zip(row.indices.tolist(), row.data.tolist(), strict=False))
        cands = set().union(*(postings.get(t, set()) for t in vec)) if vec else set()
        best, best_s = -1, 0.0
        for c in sorted(cands):
            s = sum(w * centroids[c].get(t, 0.0) for t, w in vec.items()) / norms[c]
            if s > best_s:
                best, best_s = c, s
        if best >= 0 and best_s >= threshold:
            cen = centroids[best]
        else:
            best = len(centroids)
            cen = {}
            centroids.append(cen)
            norms.append(1.0)
        for t, w in vec.items():
            cen[t] = cen.get(t, 0.0) + w
            postings.setdefault(t, set()).add(best)
        norms[best] = math.sqrt(sum(w * w for w in cen.values())) or 1.0
        labels.append(best)
    return labels


def near_duplicate_labels(
    titles: Sequence[str], ids: Sequence[str], max_distance: int = 3, minhash_recheck: bool = True, stats=None
) -> list[str]:
    """Near-duplicate group per headline: the cluster of the nearest earlier fingerprint within
    ``max_distance`` bits, else (with ``minhash_recheck``) of the earlier headline at a borderline
    distance (:data:`newsflow.core.minhash_check.BORDERLINE`) with the highest estimated Jaccard, if
    that is at least :data:`newsflow.core.minhash_check.JACCARD_THRESHOLD`, else a new cluster
    ``"c" + id``. Borderline candidates are found by comparing with every earlier fingerprint
    (numpy, fine at evaluation sizes). ``stats`` (a dict) receives ``borderline_checked`` and
    ``borderline_confirmed`` counts."""
    import numpy as np

    from newsflow.core.lsh import BandIndex
    from newsflow.core.minhash_check import BORDERLINE, confirm, hamming_to_all, minhash_many
    from newsflow.core.simhash import simhash

    index = BandIndex()
    cluster_of: dict[str, str] = {}
    labels = []
    fps = np.array([simhash(t) for t in titles], dtype=np.uint64)
    sigs = minhash_many(list(titles)) if minhash_recheck else []
    checked = confirmed = 0
    for i, (item_id, fp) in enumerate(zip(ids, fps, strict=False)):
        fp = int(fp)
        hit = index.nearest(fp, max_distance) if fp else None
        label = cluster_of[hit[0]] if hit else None
        if label is None and minhash_recheck and fp and i:
            dist = hamming_to_all(fp, fps[:i])
            dist[fps[:i] == 0] = 64
            cands = np.flatnonzero((dist >= BORDERLINE[0]) & (dist <= BORDERLINE[1]))
            best = (-1.0, -1)
            for c in cands.tolist():
                checked += 1
                ok, j = confirm(sigs[i], sigs[c])
                if ok and j > best[0]:
                    best = (j, c)
            if best[1] >= 0:
                confirmed += 1
                label = cluster_of[ids[best[1]]]
        label = label or "c" + item_id
        cluster_of[item_id] = label
        if fp:
            index.add(item_id, fp)
        labels.append(label)
    if stats is not None:
        stats.update(borderline_checked=checked, borderline_confirmed=confirmed)
    return labels


def story_labels(
    rows: Sequence[dict], *, use_entities: bool = True, use_time: bool = True, config=None
) -> tuple[list[str], dict]:
    """Runs :class:`StoryAssigner` over the rows; returns (live story id per row, stats)."""
    from newsflow.core.embedding import load_text_model
    from newsflow.core.stories import StoryAssigner, StoryConfig
    from newsflow.core.story_state import InMemoryStoryStore
    from newsflow.core.urls import source_domain
    from newsflow.schemas import StoryArticle

    cfg = config or StoryConfig()
    if not use_time:
        cfg = StoryConfig(**{**cfg.__dict__, "time_scale_s": math.inf})
    titles = [r["TITLE"] for r in rows]
    ids = [r["ID"] for r in rows]
    languages = row_languages(rows)
    nd = near_duplicate_labels(titles, ids)
    ents: list = [()] * len(rows)
    if use_entities:
        from newsflow.core.entities import EntityExtractor

        ents = EntityExtractor().extract_many([(t, "") for t in titles], languages)
    store = InMemoryStoryStore()
    clusterer = StoryAssigner(store, load_text_model(), cfg)
    assigned = []
    for r, cid, e, lang in zip(rows, nd, ents, languages, strict=False):
        a = StoryArticle(
            article_id=r["ID"],
            event_time=r["_t"],
            title=r["TITLE"],
            url=r["URL"],
            source_domain=r.get("HOSTNAME") or source_domain(r["URL"]),
            cluster_id=cid,
            language=lang,
            entities=tuple((x.key, x.text, x.label) for x in e),
        )
        assigned.append(clusterer.add(a).story_id)
    labels = [store.resolve(s) for s in assigned]
    stats = {"merges": len(store.merges), "near_duplicate_clusters": len(set(nd))}
    return labels, stats


def row_languages(rows: Sequence[dict]) -> list[str]:
    """Each row's ``LANGUAGE`` (lower case), ``"en"`` when the column is missing or empty."""
    return [(r.get("LANGUAGE") or "en").strip().lower() or "en" for r in rows]


def evaluate(
    path: str,
    level: str = "story",
    use_entities: bool = True,
    use_time: bool = True,
    baseline: bool = True,
    distractors: str | None = None,
) -> dict:
    """Scores one clustering level on a news-aggregator CSV (see the module docstring).

    Args:
      distractors: optional second CSV whose rows (IDs not in ``path``) are clustered too
        (:func:`merge_distractors`).

    Raises:
      InputError: bad input (see :func:`read_stories`; also headlines without any word the
        TF-IDF baseline can use).
      ValueError: an unknown ``level``.
    """
    rows = read_stories(path)
    if distractors:
        rows = merge_distractors(rows, read_stories(distractors))
    gold = [r["STORY"] for r in rows]
    t0 = time.perf_counter()
    extra: dict = {}
    if level == "story":
        pred, extra = story_labels(rows, use_entities=use_entities, use_time=use_time)
    elif level == "near-duplicate":
        from newsflow.cli.evaluation.near_duplicates import pipeline_near_duplicate_labels

        titles, ids = [r["TITLE"] for r in rows], [r["ID"] for r in rows]
        pred = pipeline_near_duplicate_labels(rows)  # the streaming job's own step, MinHash re-check on
        without = pipeline_near_duplicate_labels(rows, borderline_jaccard=None)
        extra["without_minhash"] = {"clusters": len(set(without)), **pairwise_scores(gold, without)}
        offline_stats: dict = {}
        offline = near_duplicate_labels(titles, ids, stats=offline_stats)
        extra["offline_all_pairs"] = {"clusters": len(set(offline)), **pairwise_scores(gold, offline), **offline_stats}
    else:
        raise ValueError(f"unknown level {level!r}")
    seconds = time.perf_counter() - t0
    out = {
        "docs": len(rows),
        "gold_clusters": len(set(gold)),
        "clusters": len(set(pred)),
        **pairwise_scores(gold, pred),
        "level": level,
        "entities": use_entities,
        "time": use_time,
        **extra,
        "seconds": round(seconds, 2),
    }
    languages = row_languages(rows)
    multilingual = len(set(languages)) > 1
    if multilingual:
        out.update(language_pair_scores(gold, pred, languages))
        if any(r.get("SOURCE_ID") for r in rows):
            ids = [r["ID"] for r in rows]
            out.update(source_scores(gold, pred, languages, ids, [r.get("SOURCE_ID") for r in rows]))
    if baseline:
        try:
            b = baseline_tfidf([r["TITLE"] for r in rows])
        except ValueError as e:  # sklearn: "empty vocabulary; perhaps the documents only contain stop words"
            raise InputError(f"{path}: the TITLE column has no scorable words for the TF-IDF baseline ({e})") from None
        out["baseline"] = {
            "method": "single-pass tfidf(title) centroid, cosine 0.2",
            "clusters": len(set(b)),
            **pairwise_scores(gold, b),
        }
        if multilingual:
            pair = language_pair_scores(gold, b, languages)
            out["baseline"].update(same_language=pair["same_language"], cross_language=pair["cross_language"])
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds ``--stories``, ``--level``, ``--no-entities``, ``--no-time``, ``--no-baseline``,
    ``--distractors``."""
    parser.add_argument(
        "--stories", required=True, help="news-aggregator CSV (ID,TITLE,URL,...,STORY,TIMESTAMP), plain or .gz"
    )
    parser.add_argument(
        "--level",
        choices=("story", "near-duplicate"),
        default="story",
        help="clustering level to score (default: story)",
    )
    parser.add_argument("--no-entities", action="store_true", help="story level: ignore entity overlap (ablation)")
    parser.add_argument("--no-time", action="store_true", help="story level: ignore time proximity (ablation)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the TF-IDF baseline")
    parser.add_argument(
        "--distractors",
        default=None,
        help="second CSV in the same format: its rows (IDs not in --stories) are clustered too",
    )


def run(args: argparse.Namespace) -> int:
    """Prints one JSON line.

    Returns:
      0 on success; 2 on bad input, after printing ``error: <file>: <problem>`` to stderr.
    """
    try:
        result = evaluate(
            args.stories,
            args.level,
            not args.no_entities,
            not args.no_time,
            not args.no_baseline,
            getattr(args, "distractors", None),
        )
    except InputError as e:
        return fail(e)
    print(json.dumps(result, sort_keys=False))
    return 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=HELP)
    add_arguments(p)
    sys.exit(run(p.parse_args()))
