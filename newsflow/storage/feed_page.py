"""Precomputed personal feeds in serving form: the request path re-ranks without parsing the feed.

A reader's feed document (``Keys.feed("user", id)``, see :mod:`newsflow.core.ranking.feeds`) is JSON of up to
60 items; parsing it, copying every item for :func:`newsflow.core.ranking.rerank.rerank` and serializing the
page again was most of a personal-feed request. When the feed builder writes a reader's document it also
writes its *serving form* at ``Keys.feed_page(id)`` (same TTL, same pipeline), holding what the
re-rank needs per item and each item already serialized as the API sends it::

    line 0:    {"v":1,"generated_at":float,"edition":str|null,"ids":[...],"outlets":[...],"topics":[[...],...]}
    line 1+i:  item i as compact JSON (``json.dumps(item, separators=(",", ":"), ensure_ascii=False)``)

``outlets[i]`` is :func:`newsflow.core.outlets.outlet` of the item's ``domain`` and ``topics[i]`` its topic
labels lower-cased, so blocks and the per-outlet cap are decided on short strings; compact JSON never
holds a raw newline byte (it escapes ``\\n``; UTF-8 continuation bytes are >= 0x80), so lines split the
items. The items are those a reader of the JSON document gets (the document round-tripped through the
stored JSON), so :func:`select` + :func:`page_body` give byte for byte the page that
:func:`~newsflow.core.ranking.rerank.rerank` of the parsed document gives (tests/unit/test_feed_page.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

from newsflow.core.outlets import outlet
from newsflow.core.ranking.mmr import DEFAULT_SOURCE_CAP
from newsflow.core.ranking.rerank import injected_item, is_blocked, newer_breaking, take_capped
from newsflow.schemas import UserProfile
from newsflow.storage.keys import Keys

FORMAT_VERSION = 1
PROFILE_FIELDS = (
    "edition",
    "block_topics",
    "block_sources",
    "follow_topics",
    "follow_sources",
    "prefer_sources",
    "dismiss_topics",
    "mute_words",
)
"""The user-hash fields the request path needs with a precomputed feed: the edition, the blocks, the follows
and the serving-only preferences (removed interests and muted words decide what For You drops)."""


def compact_json(obj) -> bytes:
    """Compact UTF-8 JSON (no spaces, non-ASCII kept): the encoding of every API answer body."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def stored_doc_json(doc: Mapping) -> str:
    """The JSON text a feed document is stored as (sorted keys, compact)."""
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


class FeedPage(NamedTuple):
    """A decoded serving form (module docstring).

    Attributes:
      generated_at: when the feed was built, UTC epoch s (0.0 when the document had none).
      edition: the document's ``edition`` (``None`` when it had none).
      ids / outlets / topics: per item, its story id, outlet and lower-cased topic labels.
      items: per item, its compact JSON bytes.
    """

    generated_at: float
    edition: str | None
    ids: list
    outlets: list
    topics: list
    items: list


def encode_feed_page(doc: Mapping) -> bytes:
    """The serving form of a feed document (module docstring).

    Args:
      doc: a personal feed document (``stories`` items carry ``story_id``, ``domain``, ``topics``).

    Returns:
      The bytes to store at ``Keys.feed_page``.
    """
    parsed = json.loads(stored_doc_json(doc))  # exactly what a reader of the stored document sees
    items = parsed.get("stories") or []
    header = {
        "v": FORMAT_VERSION,
        "generated_at": float(parsed.get("generated_at") or 0.0),
        "edition": parsed.get("edition"),
        "ids": [it["story_id"] for it in items],
        "outlets": [outlet(str(it.get("domain", ""))) for it in items],
        "topics": [[str(t).lower() for t in it.get("topics", ())] for it in items],
    }
    return b"\n".join([compact_json(header), *(compact_json(it) for it in items)])


def decode_feed_page(raw: bytes) -> FeedPage:
    """Parses :func:`encode_feed_page` bytes.

    Raises:
      ValueError: not a serving form of this version, or its line count disagrees with its header.
    """
    lines = raw.split(b"\n")
    try:
        head = json.loads(lines[0])
    except ValueError as e:
        raise ValueError(f"feed page header is not JSON: {e}") from None
    if not isinstance(head, dict) or head.get("v") != FORMAT_VERSION:
        raise ValueError(f"feed page of an unknown format: {lines[0][:40]!r}")
    items = lines[1:]
    ids, outlets, topics = head.get("ids"), head.get("outlets"), head.get("topics")
    if not (isinstance(ids, list) and len(ids) == len(outlets or ()) == len(topics or ()) == len(items)):
        raise ValueError(f"feed page header lists {len(ids or ())} items but {len(items)} follow")
    return FeedPage(float(head.get("generated_at") or 0.0), head.get("edition"), ids, outlets, topics, items)


def select(
    page: FeedPage,
    breaking: Sequence[tuple[float, Mapping]],
    profile: UserProfile,
    k: int = 20,
    source_cap: int = DEFAULT_SOURCE_CAP,
    keep: Callable[[int | dict], bool] | None = None,
) -> list:
    """:func:`newsflow.core.ranking.rerank.rerank` over a serving form, without touching the item JSON.

    Same rules: breaking stories newer than the feed and not in it are injected first (newest first),
    blocked topics/outlets are removed, at most ``source_cap`` items per outlet, then the first ``k``. With
    ``keep``, a candidate (a stored item's index or an injected item) that is not blocked is also dropped when
    ``keep(candidate)`` is false (the reader's read, muted and removed-interest rules, applied by serving).

    Returns:
      The page in order: an ``int`` is the index of a stored item (sent as stored), a ``dict`` an
      injected breaking item (``breaking`` and ``injected`` set to True).
    """
    present = set(page.ids)
    injected = [injected_item(it) for it in newer_breaking(breaking, page.generated_at, present)]
    block_topics, block_sources = profile.block_topics, profile.block_sources

    def candidates():
        for d in injected:
            if not is_blocked(d, profile) and (keep is None or keep(d)):
                yield outlet(str(d.get("domain", ""))), d
        for i, (dom, tps) in enumerate(zip(page.outlets, page.topics, strict=True)):
            if (block_sources and dom in block_sources) or (block_topics and any(t in block_topics for t in tps)):
                continue
            if keep is not None and not keep(i):
                continue
            yield dom, i

    return take_capped(candidates(), k, source_cap)


def page_items(page: FeedPage, picks: Sequence, encoded: Mapping[str, bytes] | None = None) -> list[bytes]:
    """The compact JSON of each pick of :func:`select`.

    Args:
      page: the serving form the picks index.
      picks: :func:`select`'s answer.
      encoded: optional ``{story_id: compact JSON of its injected item}``
        (``compact_json(injected_item(item))``, computed once per breaking set instead of once per
        request); an injected pick missing from it is serialized here.
    """
    if not encoded:
        return [page.items[p] if isinstance(p, int) else compact_json(p) for p in picks]
    return [page.items[p] if isinstance(p, int) else (encoded.get(p["story_id"]) or compact_json(p)) for p in picks]


def page_body(
    user: str, edition: str, generated_at: float, items: Sequence[bytes], next_cursor: str | None = None
) -> bytes:
    """The ``/v1/feed`` body for ``items`` (compact JSON bytes each): the same bytes as the compact JSON of
    ``{"user", "edition", "generated_at", "stale": false, "count", "stories", "next_cursor"}``."""
    return b"".join(
        (
            b'{"user":',
            compact_json(user),
            b',"edition":',
            compact_json(edition),
            b',"generated_at":',
            compact_json(float(generated_at)),
            b',"stale":false,"count":',
            str(len(items)).encode(),
            b',"stories":[',
            b",".join(items),
            b'],"next_cursor":',
            compact_json(next_cursor),
            b"}",
        )
    )


def write_user_feeds(client, docs: Mapping[str, Mapping], ttl_seconds: int, keys: Keys = Keys()) -> None:
    """Writes readers' feed documents and their serving forms in one pipeline, both with ``ttl_seconds``.

    Args:
      client: ``redis.Redis`` (``decode_responses=False``).
      docs: ``{user id: personal feed document}``.
      ttl_seconds: TTL of both keys.
      keys: the key layout.
    """
    pipe = client.pipeline(transaction=False)
    for user, doc in docs.items():
        pipe.set(keys.feed("user", user), stored_doc_json(doc), ex=int(ttl_seconds))
        pipe.set(keys.feed_page(user), encode_feed_page(doc), ex=int(ttl_seconds))
    pipe.execute()


def drop_user_feed(client, user: str, keys: Keys = Keys()) -> None:
    """Deletes a reader's precomputed feed and its serving form (their preferences changed); one DEL per key
    in one pipeline, so it also runs where the two keys live in different Redis Cluster slots."""
    pipe = client.pipeline(transaction=False)
    pipe.delete(keys.feed("user", user))
    pipe.delete(keys.feed_page(user))
    pipe.execute()


def read_commands(user: str, keys: Keys = Keys()) -> list[tuple]:
    """The commands of :func:`read_for_request`'s round trip, as ``(name, *args)`` tuples (for a caller that
    sends them itself, e.g. from an event loop): ``HMGET`` of :data:`PROFILE_FIELDS`, ``GET`` of the form,
    ``HGETALL`` of the reader's read marks (:mod:`newsflow.storage.reader_state`)."""
    return [
        ("HMGET", keys.user(user), *PROFILE_FIELDS),
        ("GET", keys.feed_page(user)),
        ("HGETALL", keys.reader_read(user)),
    ]


def profile_fields(values: Sequence) -> dict:
    """``{field bytes: value}`` of the ``HMGET`` reply of :func:`read_commands` (missing fields left out)."""
    return {name.encode(): v for name, v in zip(PROFILE_FIELDS, values, strict=True) if v is not None}


def read_for_request(client, user: str, keys: Keys = Keys()) -> tuple[dict, bytes | None, dict]:
    """One round trip: the reader's :data:`PROFILE_FIELDS` (``{field bytes: value}``, missing ones left
    out, for :func:`newsflow.storage.ranking.user_from_hash`), the serving form (``None`` when absent) and the
    raw read-marks hash (:func:`newsflow.storage.reader_state.decode_read`)."""
    pipe = client.pipeline(transaction=False)
    pipe.hmget(keys.user(user), list(PROFILE_FIELDS))
    pipe.get(keys.feed_page(user))
    pipe.hgetall(keys.reader_read(user))
    values, raw, reads = pipe.execute()
    return profile_fields(values), raw, reads
