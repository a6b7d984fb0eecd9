"""Story / near-duplicate clustering quality on the UCI News Aggregator format.

Input: the ``news-aggregator-stories`` CSV (``ID,TITLE,URL,PUBLISHER,CATEGORY,STORY,HOSTNAME,
TIMESTAMP``; plain or ``.gz``), whose ``STORY`` column is the gold story id. Rows are processed in
``(TIMESTAMP, ID)`` order, as a stream would deliver them.

Score: pair counting over same-cluster pairs (the definition in Priberam's ``eval.py`` for Miranda
et al. 2018): precision = correct predicted pairs / predicted pairs, recall = correct predicted
pairs / gold pairs, F1 their harmonic mean. ``top20_purity``: over the 20 largest predicted stories,
the size-weighted share of members in each story's majority gold story (sum of majority counts /
sum of sizes; what a reader of the front page sees).

Story-split protocol (``--split folds`` / ``--split holdout``, story level): rows are split by gold
STORY, never by row. The distinct story ids are ranked by SHA-256 of ``SPLIT_SALT + id``; the first
``round(0.2 * n)`` are held out (never tuned on: score them once per kept change with ``--split
holdout``) and the rest are dealt in turn to ``--folds`` (5) selection folds. ``--split folds``
prints each fold's scores ``alone`` (the fold's rows as a stream of their own, the way a held-back
file is scored) and ``in_context`` (inside one stream of every fold's rows, counting wrong joins
with other folds' stories), each with mean and spread (sample standard deviation over folds);
select by the mean, and treat a gain below the spread as noise. See :func:`evaluate_split`::

    newsflow eval clustering --split folds \
        --stories /work/shared/data/news-aggregator-stories/newsCorpora_2014-03-10_11.csv

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
import hashlib
import json
import math
import statistics
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence

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


def top_purity(gold: Sequence, pred: Sequence, top: int = 20) -> float:
    """Size-weighted purity of the ``top`` largest predicted clusters.

    Over the ``top`` largest predicted clusters (size descending, then label as text, so ties are
    deterministic): the sum over those clusters of the count of their most frequent gold label,
    divided by the sum of their sizes. 1.0 means none of them holds a member of another gold
    cluster than its majority one.

    Args:
      gold: gold cluster label per item.
      pred: predicted cluster label per item (same length).
      top: how many of the largest predicted clusters count (``>= 1``).

    Returns:
      The share in ``[0, 1]`` rounded to 4 decimals; 0.0 for no items.

    Raises:
      ValueError: the sequences differ in length, or ``top < 1``.
    """
    if len(gold) != len(pred):
        raise ValueError(f"gold has {len(gold)} items, pred {len(pred)}")
    if top < 1:
        raise ValueError(f"top must be >= 1, got {top}")
    members: dict = {}
    for g, p in zip(gold, pred, strict=True):
        members.setdefault(p, Counter())[g] += 1
    largest = sorted(members.items(), key=lambda kv: (-sum(kv[1].values()), str(kv[0])))[:top]
    size = sum(sum(c.values()) for _, c in largest)
    majority = sum(max(c.values()) for _, c in largest)
    return round(majority / size, 4) if size else 0.0


def clustering_scores(gold: Sequence, pred: Sequence) -> dict:
    """:func:`pairwise_scores` plus ``top20_purity`` (:func:`top_purity` over the 20 largest predicted clusters)."""
    return {**pairwise_scores(gold, pred), "top20_purity": top_purity(gold, pred, 20)}


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
    rows: Sequence[dict], *, use_entities: bool = True, use_time: bool = True, config=None, assigner=None
) -> tuple[list[str], dict]:
    """Runs :class:`StoryAssigner` over the rows; returns (live story id per row, stats).

    ``assigner`` (optional): a callable ``(store, text_model, config) -> StoryAssigner`` (a subclass
    with another scoring, for comparing candidates); default :class:`StoryAssigner` itself.
    """
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
    clusterer = (assigner or StoryAssigner)(store, load_text_model(), cfg)
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
        **clustering_scores(gold, pred),
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


HOLDOUT_FRACTION = 0.2
SPLIT_SALT = "newsflow-story-split-v1"
SPLIT_METRICS = ("precision", "recall", "f1", "top20_purity")


def _story_rank(story: str) -> tuple[str, str]:
    """Sort key of a gold story id in the split: SHA-256 of ``SPLIT_SALT + id`` (hex), then the id."""
    return hashlib.sha256((SPLIT_SALT + story).encode("utf-8")).hexdigest(), story


def split_stories(
    stories: Iterable[str], folds: int = 5, holdout: float = HOLDOUT_FRACTION
) -> tuple[set[str], list[set[str]]]:
    """Splits gold story ids (never rows) into a held-out set and ``folds`` selection folds.

    The distinct ids are sorted by :func:`_story_rank` (a salted SHA-256, so the order depends on
    nothing but the ids); the first ``round(holdout * n)`` are held out and the rest are dealt to
    the folds in turn (fold ``i`` takes ranks ``i, i + folds, ...`` of the rest), so fold sizes in
    stories differ by at most one. The same file always gives the same split.

    Args:
      stories: gold story ids (duplicates allowed).
      folds: number of selection folds (``>= 2``).
      holdout: held-out share of the stories (``0 <= holdout < 1``).

    Returns:
      ``(held-out story ids, [story ids of fold 0, ..., fold folds-1])``.

    Raises:
      ValueError: ``folds < 2``, ``holdout`` outside ``[0, 1)``, or fewer stories outside the
        held-out set than folds.
    """
    if folds < 2:
        raise ValueError(f"folds must be >= 2, got {folds}")
    if not 0 <= holdout < 1:
        raise ValueError(f"holdout must be in [0, 1), got {holdout}")
    ordered = sorted(set(stories), key=_story_rank)
    n_held = round(holdout * len(ordered))
    rest = ordered[n_held:]
    if len(rest) < folds:
        raise ValueError(f"{len(rest)} stories outside the held-out set cannot fill {folds} folds")
    return set(ordered[:n_held]), [set(rest[i::folds]) for i in range(folds)]


def subset_scores(gold: Sequence, pred: Sequence, keep: set) -> dict:
    """Scores of the gold stories in ``keep`` inside a clustering of more rows ("in context").

    Pairs counted are those with at least one item of a ``keep`` story, so every wrong join of such
    an item with any other item counts: precision = correct such predicted pairs / such predicted
    pairs, recall = correct pairs / gold pairs of the ``keep`` stories. ``top20_purity`` is
    :func:`top_purity`'s share over the 20 largest predicted clusters whose majority gold story
    (ties: the smaller label as text) is in ``keep``, all of their members counted.

    Returns:
      ``{"docs", "gold_clusters", "precision", "recall", "f1", "top20_purity"}`` (4 decimals).

    Raises:
      ValueError: the sequences differ in length.
    """
    if len(gold) != len(pred):
        raise ValueError(f"gold has {len(gold)} items, pred {len(pred)}")

    def touching(counts_all: Counter, counts_in: Counter) -> int:
        return sum(n * (n - 1) // 2 - (n - counts_in[k]) * (n - counts_in[k] - 1) // 2 for k, n in counts_all.items())

    inside = [g in keep for g in gold]
    by_pred, by_pred_in = Counter(pred), Counter(p for p, i in zip(pred, inside, strict=True) if i)
    pairs = list(zip(gold, pred, strict=True))
    by_pair, by_pair_in = Counter(pairs), Counter(x for x, i in zip(pairs, inside, strict=True) if i)
    predicted, correct = touching(by_pred, by_pred_in), touching(by_pair, by_pair_in)
    gold_sizes = Counter(g for g in gold if g in keep)
    gold_pairs = sum(n * (n - 1) // 2 for n in gold_sizes.values())
    precision = correct / predicted if predicted else 0.0
    recall = correct / gold_pairs if gold_pairs else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    members: dict = {}
    for g, p in pairs:
        members.setdefault(p, Counter())[g] += 1
    owned = [c for c in members.values() if min(c.items(), key=lambda kv: (-kv[1], str(kv[0])))[0] in keep]
    owned.sort(key=lambda c: (-sum(c.values()), sorted(map(str, c))))
    size = sum(sum(c.values()) for c in owned[:20])
    purity = sum(max(c.values()) for c in owned[:20]) / size if size else 0.0
    return {
        "docs": sum(inside),
        "gold_clusters": len(gold_sizes),
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "top20_purity": round(purity, 4),
    }


def _score_alone(rows: Sequence[dict], keep: set[str], **story_options) -> dict:
    """Clusters the rows of the gold stories in ``keep`` alone (in stream order) and scores them."""
    sub = [r for r in rows if r["STORY"] in keep]
    gold = [r["STORY"] for r in sub]
    pred, _ = story_labels(sub, **story_options)
    return {"docs": len(sub), "gold_clusters": len(keep), "clusters": len(set(pred)), **clustering_scores(gold, pred)}


def _summary(per_fold: Sequence[dict]) -> dict:
    """``mean``, ``spread`` (sample standard deviation), ``min`` and ``max`` over folds of :data:`SPLIT_METRICS`."""
    out = {}
    for name, fn in (("mean", statistics.fmean), ("spread", statistics.stdev), ("min", min), ("max", max)):
        out[name] = {m: round(fn([f[m] for f in per_fold]), 4) for m in SPLIT_METRICS}
    return out


def evaluate_split(path: str, split: str, folds: int = 5, **story_options) -> dict:
    """Story-level scores under the story-split protocol (:func:`split_stories`).

    Every figure comes two ways: ``alone``, the rows of the scored stories clustered as a stream of
    their own (how a reviewer scores a held-back file), and ``in_context``, the scored stories'
    rows clustered among other stories' rows and scored by :func:`subset_scores` (wrong joins with
    the other stories count: the harder, precision-sensitive figure).

    ``split="folds"`` (selection): ``folds`` is a list of ``{"alone", "in_context"}`` per fold,
    where in context means in one stream of all folds' rows (the held-out rows are never read);
    ``alone`` and ``in_context`` each give ``mean``, ``spread`` (sample standard deviation over the
    folds), ``min`` and ``max`` of :data:`SPLIT_METRICS`. ``split="holdout"`` (report once):
    ``held_out`` = ``{"alone", "in_context"}``, in context meaning in the stream of every row of
    the file.

    Args:
      path: news-aggregator CSV (:func:`read_stories`).
      split: ``"folds"`` or ``"holdout"``.
      folds: number of selection folds.
      story_options: passed to :func:`story_labels`.

    Raises:
      InputError: bad input (see :func:`read_stories`), or too few stories for the split.
      ValueError: an unknown ``split``.
    """
    if split not in ("folds", "holdout"):
        raise ValueError(f"unknown split {split!r}")
    rows = read_stories(path)
    try:
        held, fold_sets = split_stories((r["STORY"] for r in rows), folds)
    except ValueError as e:
        raise InputError(f"{path}: {e}") from None
    t0 = time.perf_counter()
    out: dict = {
        "split": split,
        "protocol": {
            "unit": "gold story",
            "holdout_fraction": HOLDOUT_FRACTION,
            "salt": SPLIT_SALT,
            "folds": folds,
            "stories": len(held) + sum(len(f) for f in fold_sets),
            "held_out_stories": len(held),
        },
    }
    if split == "holdout":
        pred, _ = story_labels(rows, **story_options)
        gold = [r["STORY"] for r in rows]
        out["held_out"] = {
            "alone": _score_alone(rows, held, **story_options),
            "in_context": subset_scores(gold, pred, held),
        }
    else:
        stream = [r for r in rows if r["STORY"] not in held]
        pred, _ = story_labels(stream, **story_options)
        gold = [r["STORY"] for r in stream]
        per_fold = [
            {"alone": _score_alone(stream, f, **story_options), "in_context": subset_scores(gold, pred, f)}
            for f in fold_sets
        ]
        out["folds"] = per_fold
        out["alone"] = _summary([f["alone"] for f in per_fold])
        out["in_context"] = {**_summary([f["in_context"] for f in per_fold]), "pooled": clustering_scores(gold, pred)}
    out["seconds"] = round(time.perf_counter() - t0, 2)
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds ``--stories``, ``--level``, ``--no-entities``, ``--no-time``, ``--no-baseline``,
    ``--split``, ``--folds``, ``--distractors``."""
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
        "--split",
        choices=("all", "folds", "holdout"),
        default="all",
        help="story level: score every row (all, default), or split by gold story: per-fold scores with "
        "mean and spread (folds; for selection), or the fixed held-out 20%% of stories (holdout; report once)",
    )
    parser.add_argument("--folds", type=int, default=5, help="number of selection folds for --split (default 5)")
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
    split = getattr(args, "split", "all")
    if split != "all" and (args.level != "story" or getattr(args, "distractors", None)):
        return fail("--split scores the story level only, without --distractors")
    try:
        if split != "all":
            result = evaluate_split(
                args.stories, split, args.folds, use_entities=not args.no_entities, use_time=not args.no_time
            )
            print(json.dumps(result, sort_keys=False))
            return 0
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
