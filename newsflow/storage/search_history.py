"""Rebuilding the search index from the Parquet history (``newsflow search-index --rebuild``).

Sources, under the job's output root:

* ``articles`` (every Parquet file, any partition): the article side of each row
  (:class:`~newsflow.storage.search_index.TextRow`: title, text, URL, outlet, language, event time);
* the story of each article: the ``story_assignments`` dataset when the run wrote one (bounded runs), else the
  story step's record in Redis (the ``Keys.story_assign`` buckets); articles with neither are indexed without a story
  and are not found until one is assigned;
* topics and entities: the Parquet history keeps none per article, so a rebuilt row takes its story's
  (the story record in Redis: its topic labels and the display texts of its top entities). A story no longer
  in Redis (expired) gives none.

Rows are read and written in batches of ``batch`` articles (one transaction each), so memory does not grow with
the history. The same history rebuilds the same index.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads

from newsflow.storage.keys import Keys
from newsflow.storage.parquet import open_dataset
from newsflow.storage.search_index import SearchIndex, StoryRow, TextRow
from newsflow.storage.story_index import assigned_stories

_ARTICLE_COLUMNS = ["article_id", "title", "text", "url", "source_domain", "language", "event_time"]


def _dataset(root: str, name: str) -> pads.Dataset | None:
    try:
        return open_dataset(root, name)
    except FileNotFoundError:
        return None


def _assignments(root: str) -> dict[str, str]:
    ds = _dataset(root, "story_assignments")
    if ds is None:
        return {}
    table = ds.to_table(columns=["article_id", "story_id"])
    return dict(zip(table.column("article_id").to_pylist(), table.column("story_id").to_pylist(), strict=True))


def rebuild(index: SearchIndex, output_root: str, client, keys: Keys = Keys(), batch: int = 2000) -> dict:
    """Replaces ``index``'s rows with those of the history under ``output_root`` (module docstring).

    Returns:
      ``{"articles": rows indexed, "with_story": rows that have a story}``.

    Raises:
      FileNotFoundError: there is no ``articles`` dataset under ``output_root``.
    """
    ds = _dataset(output_root, "articles")
    if ds is None:
        raise FileNotFoundError(f"no articles dataset under {output_root}: run the streaming job first")
    assigned = _assignments(output_root)
    index.clear()
    story_fields: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {}
    total = with_story = 0
    for rb in ds.to_batches(columns=_ARTICLE_COLUMNS, batch_size=batch):
        times = pc.divide(pc.cast(pc.cast(rb.column("event_time"), pa.timestamp("us", tz="UTC")), pa.int64()), 1e6)
        cols = {name: rb.column(name).to_pylist() for name in _ARTICLE_COLUMNS if name != "event_time"}
        ids = cols["article_id"]
        texts = [
            TextRow(aid, t or "", x or "", u or "", d or "", lang or "", float(et))
            for aid, t, x, u, d, lang, et in zip(
                ids,
                cols["title"],
                cols["text"],
                cols["url"],
                cols["source_domain"],
                cols["language"],
                times.to_pylist(),
                strict=True,
            )
        ]
        stories = _story_ids(client, keys, ids, assigned)
        _fill_story_fields(client, keys, set(stories.values()) - set(story_fields), story_fields)
        rows = [StoryRow(aid, sid, *story_fields.get(sid, ((), ()))) for aid, sid in stories.items()]
        index.put_texts(texts)
        index.put_stories(rows)
        total += len(texts)
        with_story += len(rows)
    index.optimize()
    return {"articles": total, "with_story": with_story}


def _story_ids(client, keys: Keys, ids: list[str], assigned: dict[str, str]) -> dict[str, str]:
    out = {aid: assigned[aid] for aid in ids if aid in assigned}
    missing = [aid for aid in ids if aid not in out]
    if missing:
        out.update((aid, sid) for aid, sid in assigned_stories(client, keys, missing).items() if sid)
    return out


def _fill_story_fields(client, keys: Keys, story_ids: set[str], into: dict) -> None:
    ids = sorted(story_ids)
    if not ids:
        return
    pipe = client.pipeline(transaction=False)
    for sid in ids:
        pipe.hmget(keys.story(sid), ["topics", "entities"])
    for sid, (topics, entities) in zip(ids, pipe.execute(), strict=True):
        t = tuple(json.loads(topics)) if topics else ()
        e = tuple(str(x.get("text", "")) for x in json.loads(entities)) if entities else ()
        into[sid] = (t, e)
