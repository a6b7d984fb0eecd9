"""Every key family of the key table (newsflow.storage.keys) spreads over a Redis Cluster by entity.

The table in the module docstring is the list of families: each row's hash tag (or, untagged, its whole name,
which is then what Redis hashes) must hold a per-entity value (``<...>``), never a constant, except the short
lists below of single global keys, each with its reason. The table is checked against the code: every key a
:class:`Keys` method builds matches exactly one row and every row is built by some method, so a new family
cannot skip the check. The slots are computed with redis-py's own CRC16 (``redis.crc.key_slot``).
"""

from __future__ import annotations

import inspect
import re

import pytest
from redis.crc import key_slot

from newsflow.storage import keys as keys_module
from newsflow.storage.keys import Keys

# Rows whose hash tag is a constant: one key pair per deployment.
CONSTANT_TAGS = {
    "P:{stw}:story:lease": "the story writer's lease: one writer at a time, by design",
    "P:{stw}:story:journal": "the story writer's redo journal, stored by one script only while the lease (same "
    "slot) holds the writer's token; one write set, deleted once applied",
}
# Untagged rows with no value in their name: single global keys, each of bounded size.
SINGLETONS = {
    "P:nd:lease": "the near-duplicate writer's lease and redo journal (one cycle's write set)",
    "P:nd:count": "one integer: the number of indexed versions",
    "P:lambda:topic": "one learned decay per topic label (~20 fields)",
    "P:models:pointers": "current/previous version per model name (~10 fields), switched by one MULTI",
    "P:models:manifest": "one JSON state per stored model version (a few per model name)",
    "P:breaking": "the stories breaking now (tens); expires 2 x the breaking TTL after the last one",
    "P:trending:windows:<kind>": "three keys (story, entity, topic), the newest 2,016 window ends each",
    "P:clock:replay": "one number: the replay clock of newsflow demo",
    "P:retention:cutoff": "one number: the event time before which state was expired",
    "P:crawl:feedhosts": "tid -> host of each registered feed (50,000 feeds: a few MB), read whole by status",
    "P:crawl:priority": "a queue of re-crawl requests, drained before every claim round",
    "P:crawl:deadletter": "refused crawl work, capped at 10,000 entries",
    "P:crawl:stats": "crawl counters (tens of fields)",
    "P:crawl:register": "a queue of registered feeds, drained by the workers",
    "P:src:feeds": "the sources registry's index of feeds (one member per registered feed)",
    "P:src:outlets": "the sources registry's index of outlets (one member per outlet)",
    "P:src:log": "the sources registry's change log, capped at 100,000 records",
    "P:src:status-indexed": "one flag: the status index covers every registered feed",
    "P:accounts": "the admin readers page's name index, one short member per account (shard it by name prefix "
    "before ~10M accounts, ~0.5 GB)",
    "P:accounts:indexed": "one flag: the name index lists every account",
    "P:admin:audit": "the editors' audit log, capped at its newest records",
}
# Keys methods that build no key of their own (patterns, prefixes, helpers) or another method's key by an
# entity id (the ``*_of`` forms pick the bucket or shard of an article, story or host).
NOT_FAMILIES = {
    "pattern",
    "lsh_pattern",
    "lsh_bands",
    "lsh_band_id_keys",
    "nd_shards",
    "cluster_shard",
    "story_assign_bucket",
    "story_index_shard",
    "story_assign_of",
    "story_merges_of",
    "story_active_of",
    "story_retired_of",
    "story_assign_keys",
    "story_merges_keys",
    "story_active_keys",
    "story_retired_keys",
    "story_patterns",
    "story_pattern",
    "trending_pattern",
    "pool_pattern",
    "account_pattern",
    "feed_pattern",
    "feed_name_of",
    "crawl_bucket",
    "crawl_scheduling",
    "crawl_base",
    "source_base",
    "reader_state",
    "reader_owned",
}


def table_rows() -> list[str]:
    """The key column of every row of the key table (``P:...``), in order."""
    doc = keys_module.__doc__
    table = doc[doc.index("Table of keys") :]
    rows = re.findall(r"^``(P:[^`]*)``", table, flags=re.M)
    assert len(rows) > 50, rows
    return rows


def hash_tag(key: str) -> str | None:
    """What Redis hashes of a tagged key: the text between the first ``{`` and the next ``}``, if not empty."""
    m = re.search(r"{([^}]*)}", key)
    return m.group(1) if m and m.group(1) else None


def sample_args(method, i: int) -> list:
    """Arguments for the ``i``-th sample key of ``method``: ints for bucket/shard/band parameters, a kind its
    method accepts for ``kind``, otherwise a string distinct per ``i``."""
    out = []
    for name, param in inspect.signature(method).parameters.items():
        if name == "self":
            continue
        if name == "kind":
            out.append("topic")  # every kind-taking method accepts "topic"
        elif param.annotation in (int, "int") or name in ("bucket", "shard", "i"):
            out.append(i % 4 if name == "i" else i)
        elif param.annotation in (float, "float"):
            out.append(1_700_000_000.0 + 300 * i)
        elif name == "band_hex":
            out.append(f"{i:04x}")
        else:
            out.append(f"{name}{i}")
    return out


def family_members() -> dict[str, bool]:
    """Name -> whether it is a property (a constant key), for every family method and property of Keys."""
    out = {}
    for name, member in inspect.getmembers(Keys):
        if name.startswith("_") or name in NOT_FAMILIES or name == "prefix":
            continue
        if isinstance(member, property) or callable(member):
            out[name] = isinstance(member, property)
    return out


def built_key(k: Keys, name: str, i: int = 1) -> str:
    """The ``i``-th sample key of family member ``name``."""
    member = getattr(k, name)
    return member if isinstance(member, str) else member(*sample_args(member, i))


def row_regex(row: str, prefix: str) -> re.Pattern:
    parts = re.split(r"(<[^>]*>)", row)
    special = {"<origin>": ".+", "<window_end>": "[0-9]+"}  # an origin has colons; a window end is a number
    body = "".join(special.get(p, "[^:]+") if p.startswith("<") else re.escape(p) for p in parts)
    return re.compile(re.escape(prefix) + body[1:] + r"\Z")  # body starts with "P"


def test_every_family_of_the_table_is_tagged_by_an_entity_or_is_a_justified_global_key():
    rows = table_rows()
    for row in rows:
        tag = hash_tag(row)
        if tag is not None:
            assert "<" in tag or row in CONSTANT_TAGS, f"{row}: its hash tag {{{tag}}} is a constant"
        else:
            assert "<" in row or row in SINGLETONS, f"{row}: an untagged constant name outside the allow-list"
    for row in (*CONSTANT_TAGS, *SINGLETONS):
        assert row in rows, f"allow-listed {row} is not in the key table"
    assert all(len(reason) > 10 for reason in (*CONSTANT_TAGS.values(), *SINGLETONS.values()))
    assert len({hash_tag(r) for r in CONSTANT_TAGS}) == 1  # one constant tag: the story writer's


def test_the_table_lists_exactly_the_keys_the_layout_builds():
    k = Keys("pfx")
    rows = table_rows()
    regexes = {row: row_regex(row, k.prefix) for row in rows}
    matched = set()
    for name in family_members():
        key = built_key(k, name)
        hits = [row for row, rx in regexes.items() if rx.match(key)]
        # the most specific row wins where a shorter one also matches (``...:story`` vs ``...:story:state``)
        exact = [row for row in hits if row.count(":") == ("P" + key[len(k.prefix) :]).count(":")]
        assert len(exact) == 1, (name, key, hits)
        matched.add(exact[0])
    assert matched == set(rows), set(rows) - matched


def test_entity_keyed_families_spread_over_the_slots_and_global_keys_are_the_allow_listed_ones():
    k = Keys()
    members = family_members()
    singletons = {name for name, is_property in members.items() if is_property}
    constant_keys = {getattr(k, name) for name in singletons}
    allowed = {r.replace("P:", f"{k.prefix}:", 1) for r in (*CONSTANT_TAGS, *SINGLETONS)}
    assert constant_keys <= allowed, constant_keys - allowed
    for name in members:
        if name in singletons or name == "trending_windows":  # per kind: allow-listed above
            continue
        samples = [built_key(k, name, i) for i in range(200)]
        tags = {hash_tag(s) or s for s in samples}
        slots = {key_slot(s.encode()) for s in samples}
        assert len(tags) > 60 and len(slots) > 60, (name, samples[0], len(tags), len(slots))


@pytest.mark.parametrize(
    "entity_keys",
    [
        lambda k, i: [
            k.story(f"s{i}"),
            k.story_articles(f"s{i}"),
            k.story_state(f"s{i}"),
            k.story_groups(f"s{i}"),
            k.story_outlets(f"s{i}"),
        ],
        lambda k, i: [k.story_assign_of(f"a{i}"), k.story_merges_of(f"a{i}")],
        lambda k, i: [k.story_active_of(f"s{i}"), k.story_retired_of(f"s{i}")],
        lambda k, i: [
            k.crawl_task(f"h{i}.test", "t1"),
            k.crawl_queue(f"h{i}.test"),
            k.crawl_host(f"h{i}.test"),
            k.crawl_hosts(k.crawl_bucket(f"h{i}.test")),
            k.crawl_leases(k.crawl_bucket(f"h{i}.test")),
            k.crawl_held(k.crawl_bucket(f"h{i}.test")),
        ],
    ],
    ids=["story", "assignment bucket", "index shard", "crawl host"],
)
def test_the_keys_one_script_or_write_touches_together_share_a_slot(entity_keys):
    k = Keys("alt")
    for i in range(50):
        assert len({key_slot(x.encode()) for x in entity_keys(k, i)}) == 1, entity_keys(k, i)
    assert len({key_slot(entity_keys(k, i)[0].encode()) for i in range(50)}) > 20  # entities spread
