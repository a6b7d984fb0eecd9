"""The Redis key layout of newsflow: every key and scan pattern, named in one place.

Every reader and writer builds its key names from a :class:`Keys` (``Keys()`` is the default
prefix ``nf``; :attr:`newsflow.runtime.settings.Settings.keys` gives the configured one). No other module
spells a key.

**Prefix.** Every key is ``<prefix>:...``. The prefix is a plain namespace (letters, digits,
``_ . -``, see :func:`validate_key_prefix`); two deployments with different
prefixes share a Redis without seeing each other's keys.

**Hash tags: one entity per tag.** Keys that one Lua script or one transaction touches together must live
in one cluster slot, so the layout places a hash tag right after the prefix: ``<prefix>:{<tag>}:<rest>``.
Every tag names ONE entity (an article, a band bucket, a group, a story, an assignment bucket, an index
shard, a reader bucket, a stream shard, a crawl host bucket), never a kind of key, so every family spreads
over the slots of a Redis Cluster; ``tests/unit/test_key_families.py`` checks every row of the table below.
The only constant tag is ``{stw}``, the story writer's lease and journal (one key pair per deployment).

==================  ==========================================  ==========================================
tag                 keys                                        why they share a slot
==================  ==========================================  ==========================================
``{lsh:<i>:<h>}``   one LSH band bucket's two strings           read together per probe
``{art:<id>}``      an article's serving hash, index record,    one entity
                    versions
``{uid:<sid>}``     the versions carrying one stable URL id     one entity
``{ndg:<id>}``      a near-duplicate group's hash and sets      one entity
``{ndx:<shard>}``   one of ``ND_SHARDS`` = 1,024 shards of the  by-size and by-latest of the same ids
                    group indexes (CRC-32 of the group id)
``{st:<id>}``       a story's serving hash, members, state,     one entity
                    groups, outlets
``{sa:<b>}``        one of ``STORY_ASSIGN_BUCKETS`` = 1,024     an article's assignment and the merge
                    buckets of article -> story assignments     records its step made live together
                    and merge records (CRC-32 of the article
                    id)
``{sx:<k>}``        one of ``STORY_INDEX_SHARDS`` = 64 shards   a story's live and retired entries
                    of the live- and retired-story indexes
                    (CRC-32 of the story id)
``{stw}``           the story writer's lease and redo journal   the journal is stored only if the lease
                                                                is still the writer's (one script)
``{r<b>}``          reader bucket ``b`` of every nightly model  one node answers a reader's models
                    version (below)
``{s<k>}``          reader-event stream shard ``k`` (below)     stream, cursor and active set of a shard
``{cr:<b>}``        one of ``CRAWL_BUCKETS`` = 128 crawl host   the frontier's add/claim/complete scripts
                    buckets: tasks, host queues, hosts,         move a task between its host's keys
                    politeness, leases, held tasks (CRC-32 of
                    the politeness host)
==================  ==========================================  ==========================================

No transaction spans two tags: the near-duplicate index and the story state write through a fenced redo
journal (:mod:`newsflow.storage.groups`, :mod:`newsflow.storage.stories`), every frontier script touches
one host bucket. Every other key is untagged, so it hashes on its whole name: a key named by an entity
(``P:user:<user id>``, ``P:crawl:seen:<article id>``, ...) spreads with its entities; the few untagged
constant names are single global keys of bounded size (writer leases, counters, the model pointers and
manifest, the breaking set, the crawl and sources registries' indexes and logs; each is listed with its
reason in ``tests/unit/test_key_families.py``). Multi-key writes between untagged keys are plain
(non-transactional) pipelines whose order makes them safe: a pool is replaced by DEL + ZADD + EXPIRE of its
own key in one MULTI (no temporary key), the events flush advances ``events:flushed`` before deleting the
flushed entries (a repeat rewrites the same content-addressed file), and the crawl dead-letter list and its
counter need no atomicity. The tag does not include the prefix, so the same entity of two prefixes shares a
slot; that is correct, only less spread. The Lua scripts get their bucket's tagged prefix
(:meth:`Keys.crawl_scheduling`) and one key of the bucket (for cluster routing) from Python; they never
spell a prefix.

**Reader buckets and event shards.** Per-reader state is spread, never held in one key: a nightly
per-reader model (and the per-story co-visitation model) is :data:`READER_BUCKETS` = 4,096 hashes
per version, ``P:{r<b>}:model:<name>:<version>``, the field ``f`` in bucket
``b =`` :func:`reader_bucket` ``(f)`` (CRC-32 of the UTF-8 field mod 4,096); the tag ``{r<b>}``
puts a reader's interest, history and cluster of every version in one slot (one node answers
:func:`newsflow.storage.models.load_learned`); a reader's own state (read marks, coverage seen, saved stories:
:mod:`newsflow.storage.reader_state`) is ``P:{r<b>}:reader:<user>:<read|seen|saved>`` with ``b`` the bucket of
the user id, in the same slot as their model fields. At 10M readers a bucket holds ~2,440 readers
(fullest ~2,640): ~1.5 MB of interest vectors, ~2.8 MB of histories (50 recent stories each). Reader events and the
active-reader set are :data:`EVENT_SHARDS` = 256 stream shards, ``P:{s<k>}:events``,
``P:{s<k>}:events:flushed`` and ``P:{s<k>}:users:active``, ``k =`` :func:`event_shard` ``(user id)``
(= the reader bucket mod 256); a shard's stream, cursor and active set share the tag ``{s<k>}``.
At 10M active readers a shard's active set is ~39k members (~4.5 MB); a shard's stream is bounded by
:data:`newsflow.storage.events.MAX_PENDING_EVENTS` unflushed events (~0.9 MB). ``benchmarks.model_switch``
measures these sizes. The pointer of the served versions is
one untagged hash (``P:models:pointers``), so one MULTI on one key switches every model.

Table of keys (``P`` = prefix; ``<name>`` = a value, ``{...}`` = the hash tag; times are UTC epoch seconds):

========================================  ======  ==============================  ================  ==================
key                                       type    holds                           written by        read by
========================================  ======  ==============================  ================  ==================
``P:{lsh:<i>:<hhhh>}:fps``                STRING  8-byte big-endian SimHash per   RedisGroupStore   RedisGroupStore
                                                  entry of band bucket i (bits
                                                  16i..16i+15 = hhhh)
``P:{lsh:<i>:<hhhh>}:ids``                STRING  "<version id>\\n" per entry,    RedisGroupStore   RedisGroupStore
                                                  aligned with ``:fps``
``P:{art:<article_id>}:article``          HASH    title, url, source_domain,      RedisGroupStore   ranking store,
                                                  source_name, event_time,                          trends, sinks
                                                  language, cluster_id, ...
``P:{art:<version_id>}:nd``               HASH    index record: fp (16 hex), mh   RedisGroupStore   RedisGroupStore,
                                                  (MinHash, 128 x uint32 BE),                       sinks, story step,
                                                  rev (the article id a                             storage.aliases
                                                  re-slugged version is stored
                                                  under), sid (its stable URL
                                                  id, optional)
``P:{art:<article_id>}:versions``         HASH    version id -> JSON fields, for  RedisGroupStore   RedisGroupStore
                                                  articles with >= 2 versions
``P:{uid:<stable_id>}:versions``          STRING  "<version id>\\n" per entry,    RedisGroupStore   RedisGroupStore
                                                  sorted: the indexed versions
                                                  whose URL has this stable id
                                                  (newsflow.core.revisions.
                                                  stable_url_id)
``P:{ndg:<cid>}:cluster``                 HASH    representative_*,               RedisGroupStore   RedisGroupStore
                                                  rep_authority, rep_time,
                                                  earliest_time, latest_time,
                                                  created_by, founder_time
``P:{ndg:<cid>}:cluster:articles``        SET     member article ids              RedisGroupStore   RedisGroupStore
``P:{ndg:<cid>}:cluster:sources``         SET     distinct member source domains  RedisGroupStore   RedisGroupStore
``P:{ndg:<cid>}:cluster:languages``       SET     distinct member languages       RedisGroupStore   RedisGroupStore
``P:{ndx:<shard>}:clusters:by_size``      ZSET    live cluster id -> article      RedisGroupStore   RedisGroupStore,
                                                  count (groups of >= 2)                            authority
``P:{ndx:<shard>}:clusters:by_latest``    ZSET    live cluster id -> latest       RedisGroupStore   retention
                                                  member event time
``P:nd:lease``                            HASH    writer lease of the index:      RedisGroupStore   RedisGroupStore
                                                  token, deadline (epoch ms),
                                                  journal (redo log)
``P:nd:count``                            STRING  number of indexed versions      RedisGroupStore   RedisGroupStore
``P:{st:<story_id>}:story``               HASH    serving record: title, url,     RedisStoryStore   ranking store,
                                                  domain, representative_id,                        trends, serving,
                                                  article_count, source_count,                      demo
                                                  independent_count,
                                                  earliest_time, latest_time,
                                                  topics (JSON), types (JSON), languages,
                                                  authority, embedding,
                                                  entities, merged_into
``P:{st:<story_id>}:story:articles``      ZSET    article id -> event time: the   RedisStoryStore   ranking store,
                                                  members (written by delta; a                      trends, snapshot
                                                  merged story keeps its own)
``P:{st:<story_id>}:story:state``         STRING  clusterer JSON state, zlib,     RedisStoryStore   RedisStoryStore
                                                  fixed size, no members
                                                  (deleted on merge)
``P:{st:<story_id>}:story:groups``        HASH    near-duplicate group id ->      RedisStoryStore   RedisStoryStore
                                                  JSON original [t, id,
                                                  authority, domain, title, url]
                                                  (deleted on merge)
``P:{st:<story_id>}:story:outlets``       HASH    distinct member outlets -> 1    RedisStoryStore   RedisStoryStore
                                                  (deleted on merge)
``P:{sa:<b>}:story:assign``               HASH    article id -> story id it was   RedisStoryStore   RedisStoryStore,
                                                  first assigned to, for the                        story_assignments
                                                  articles of bucket b (CRC-32
                                                  of the id mod 1,024)
``P:{sa:<b>}:story:merges``               HASH    article id -> JSON list of the  RedisStoryStore   RedisStoryStore,
                                                  merge records {from, into,                        story_assignments
                                                  time, article_id} its step
                                                  made (bucket b as assign)
``P:{sx:<k>}:story:active``               ZSET    live story id -> latest event   RedisStoryStore   RedisStoryStore,
                                                  time, stories of shard k                          ranking, demo
                                                  (CRC-32 of the id mod 64)
``P:{sx:<k>}:story:retired``              ZSET    merged story id -> its latest   RedisStoryStore   retention
                                                  event time (shard k)
``P:{stw}:story:lease``                   STRING  random token of the one story   RedisStoryStore   RedisStoryStore
                                                  writer holding the lease (PX
                                                  expiry; deleted on release)
``P:{stw}:story:journal``                 STRING  redo journal: the packed,       RedisStoryStore   RedisStoryStore
                                                  zlib-compressed write set
                                                  committed under the lease
                                                  (deleted once applied)
``P:lambda:topic``                        HASH    topic label -> learned λ        nightly decay     ranking store
                                                  (1/hours)                       job
``P:user:<user_id>``                      HASH    interest (128 float32 LE),      profile jobs,     ranking store,
                                                  clicks, follow_*/block_* (JSON  tests             serving
                                                  lists)
``P:{r<b>}:reader:<user_id>:read``        HASH    story id -> "<t>:<n>": when the  serving (reader   serving (lists,
                                                  reader read it (UTC epoch s)    state store)      For You, /v1/me)
                                                  and its independent reports
                                                  then (30-day TTL, capped)
``P:{r<b>}:reader:<user_id>:seen``        HASH    story id -> JSON {t, title,     serving (web UI)  serving (web UI)
                                                  outlets, reports} of the
                                                  coverage last seen (30-day TTL)
``P:{r<b>}:reader:<user_id>:saved``       ZSET    story id -> when saved (UTC     serving (reader   serving (Saved,
                                                  epoch s), capped                state store)      /v1/me/saved)
``P:{r<b>}:account:<user_id>``            HASH    password (argon2id), role,      accounts          serving,
                                                  created (b = reader_bucket)                       accounts CLI
``P:{r<b>}:account:<user_id>:sessions``   HASH    SHA-256 of a session id ->      serving sign-in   serving
                                                  expiry
``P:{r<b>}:account:<user_id>:tokens``     HASH    personal API token id -> JSON   serving           serving
                                                  {name, created, expires}
``P:{r<b>}:account:<user_id>:failures``   ZSET    failed sign-ins (15 min)        serving sign-in   serving sign-in
``P:signin:failures:<address>``           ZSET    failed sign-ins of a client     serving sign-in   serving sign-in
                                                  address (15 min)
``P:accounts``                            ZSET    every account name (score 0:    accounts          admin readers
                                                  ZRANGEBYLEX finds a prefix)                       page
``P:accounts:indexed``                    STRING  ``1`` once P:accounts lists     serving           serving
                                                  every account
``P:admin:audit``                         LIST    JSON editor actions (newest     admin API         admin pages
                                                  first, capped)
``P:{s<k>}:readers:deleted``              HASH    deleted reader -> JSON {time,   account deletion  nightly,
                                                  last_event}: its tombstone in                     retention
                                                  shard k (last_event: the
                                                  stream's last id then)
``P:models:pointers``                     HASH    ``current:<name>`` -> version   nightly           ranking
                                                  serving reads; ``previous:``    (switch,          (personalize),
                                                  ``<name>`` -> version before    rollback)         nightly
                                                  (rollback); one key, switched
                                                  by one MULTI
``P:models:manifest``                     HASH    ``<name>:<version>`` -> JSON    ModelStore        ModelStore
                                                  {state writing|ready|deleting,  (write, prune)    (switch, prune)
                                                  fields, buckets written}
``P:model:<name>:<version>``              HASH    one night's small model:        nightly jobs      ranking
                                                  decay (topic -> λ), weights                       (personalize)
``P:{r<b>}:model:<name>:<version>``       HASH    bucket b (0..4095) of one       nightly jobs      ranking
                                                  night's per-reader/per-story                      (personalize)
                                                  model: interest, history,
                                                  cluster, covisit; a field
                                                  lives in bucket
                                                  :func:`reader_bucket` (field)
``P:nightly:lock:<date>``                 STRING  token of the nightly run        newsflow nightly  newsflow nightly
                                                  holding the date (TTL)
``P:history:lock:<dataset>:<partition>``  STRING  token of the writer rewriting    history writers   history writers
                                                  one Parquet partition (TTL)
``P:{s<k>}:users:active``                 ZSET    user id -> last event time,     events (serving)  build_feeds
                                                  readers of shard k              retention (trim)
                                                  (:func:`event_shard`)
``P:{s<k>}:events``                       STREAM  reader events of shard k        serving           events flush job
                                                  (newsflow.storage.events)       /v1/events
``P:{s<k>}:events:flushed``               STRING  flush cursor of shard k: id of  events flush job  events flush job
                                                  the last event flushed to
                                                  Parquet
``P:breaking``                            ZSET    story id -> breaking expiry     trending sink     ranking, serving
                                                  time
``P:breaking:windows:<story_id>``         ZSET    breaking window end -> end      trending sink     ranking, serving
                                                  (newest 2,016; TTL 2 × breaking
                                                  TTL): the story's breaking
                                                  runs, whose latest start is
                                                  when it became breaking
``P:trending:<kind>:<window_end>``        ZSET    key -> count in that window     trending sink     ranking, serving
                                                  (kind story, entity, topic;
                                                  top-N, TTL 2 × window)
``P:trending:windows:<kind>``             ZSET    window end -> window end        trending sink     ranking, serving
                                                  (newest 2,016)
``P:pool:<kind>:<name>``                  ZSET    story id -> score, top ~500     build_feeds       build_feeds,
                                                  (replaced whole)                                  serving
``P:feed:<kind>:<name>``                  STRING  feed JSON, 5-minute TTL         build_feeds,      serving
                                                                                  serving (user)
``P:feedpage:user:<user_id>``             STRING  the user feed's serving form    build_feeds,      serving
                                                  (newsflow.storage.feed_page),   serving (user)
                                                  same TTL
``P:clock:replay``                        STRING  replay clock (epoch s) of       demo              ranking, feeds
                                                  newsflow demo
``P:retention:cutoff``                    STRING  event time (epoch s) before     newsflow          near-duplicate
                                                  which state was expired         retention         and story steps
``P:{cr:<b>}:crawl:task:<tid>``           HASH    a crawl task and its feed       frontier scripts  frontier, worker
                                                  schedule state (b = bucket of
                                                  its host, CRC-32 mod 128)
``P:{cr:<b>}:crawl:q:<host>``             ZSET    tids of one host by due time    frontier scripts  frontier
``P:{cr:<b>}:crawl:hosts``                ZSET    bucket b's hosts by when they   frontier scripts  frontier
                                                  may be contacted next
``P:{cr:<b>}:crawl:host:<host>``          HASH    inflight, next_allowed, delay   frontier scripts  frontier scripts
``P:{cr:<b>}:crawl:leases``               ZSET    bucket b's leased tids by       frontier scripts  frontier
                                                  lease expiry
``P:{cr:<b>}:crawl:held``                 SET     tids of paused/removed feeds    sources registry  frontier scripts
                                                  of bucket b (never queued)
``P:crawl:feedhosts``                     HASH    tid -> host of every            frontier          frontier (status)
                                                  feed/sitemap task
``P:crawl:domainfeeds:<domain>``          HASH    feed tid -> host, feeds of a    frontier          frontier
                                                  source domain                                     (priority)
``P:crawl:seen:<article_id>``             STRING  seen canonical article URL      frontier          frontier
                                                  (TTL)
``P:alias:<alias_id>``                    STRING  article id an alias URL         crawler           storage.aliases
                                                  resolves to (alias_id =         (newsflow.        (resolve)
                                                  article_id(alias URL); TTL)     aliases)
``P:crawl:fg:<tid>``                      SET     item ids of a feed's last       frontier          frontier
                                                  fetch
``P:crawl:robots:<origin>``               STRING  cached robots.txt policy JSON   frontier          frontier
                                                  (TTL)
``P:crawl:priority``                      LIST    priority re-crawl requests      trending sink,    frontier
                                                  (JSON)                          priority
``P:crawl:deadletter``                    LIST    refused crawl work (JSON),      frontier          operators
                                                  capped at 10,000
``P:crawl:stats``                         HASH    crawl counters                  frontier          sources status
``P:crawl:register``                      SET     JSON {kind, url} of feeds to    sources registry  frontier
                                                  (re)queue
``P:src:feed:<feed_id>``                  HASH    registered feed: url, kind,     sources registry  sources registry,
                                                  outlet, title, categories,                        sources commands,
                                                  html_url, status, added, ...                      admin API
``P:src:feeds``                           ZSET    feed id -> registration time    sources registry  sources registry
``P:src:outlet:<outlet>``                 HASH    name, tier, authority,          sources registry  sources registry
                                                  authority_source, language
``P:src:outlet:<outlet>:feeds``           SET     feed ids of an outlet           sources registry  sources registry
``P:src:outlets``                         SET     outlets with a record           sources registry  sources registry
``P:src:status:<status>``                 ZSET    feed id -> registration time    sources registry  admin sources
                                                  per status, and ``listed``                        page, sources
                                                  (active and paused)                               list
``P:src:status-indexed``                  STRING  ``1`` once the status index     sources registry  sources registry
                                                  covers every feed
``P:src:log``                             LIST    JSON change records (newest     sources registry  operators
                                                  first, capped at 100,000)
========================================  ======  ==============================  ================  ==================
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass

DEFAULT_KEY_PREFIX = "nf"
_PREFIX_RE = re.compile(r"[A-Za-z0-9_.-]{1,32}\Z")

ND_SHARDS = 1024  # shards of the near-duplicate group indexes (Keys.clusters_by_size/_by_latest)
STORY_ASSIGN_BUCKETS = 1024
"""Buckets of the article -> story assignments and the merge records (``Keys.story_assign``/``story_merges``)."""
STORY_INDEX_SHARDS = 64
"""Shards of the live- and retired-story indexes (``Keys.story_active``/``story_retired``)."""
STORY_WRITER_TAG = "{stw}"
CRAWL_BUCKETS = 128
"""Buckets of the crawl frontier's scheduling keys, by CRC-32 of the politeness host (``Keys.crawl_bucket``)."""
READER_BUCKETS = 4096
"""Buckets of every per-reader (and per-story) nightly model version; see the module docstring."""
EVENT_SHARDS = 256
"""Shards of the reader events stream and the active-reader set; divides :data:`READER_BUCKETS`."""
POOL_KINDS = ("edition", "topic")
FEED_KINDS = ("edition", "topic", "user")


def validate_key_prefix(prefix: str) -> str:
    """Returns ``prefix`` if it is a plain namespace (1-32 of ``[A-Za-z0-9_.-]``).

    Raises:
      ValueError: anything else, e.g. ``{nf}`` (hash tags are placed by :mod:`newsflow.storage.keys`) or ``a:b``.
    """
    if not isinstance(prefix, str) or not _PREFIX_RE.match(prefix):
        raise ValueError(
            f"key prefix must be 1-32 characters of letters, digits, '_', '.', '-' (got {prefix!r}); "
            "Redis Cluster hash tags are placed by the key layout, so write 'nf', not '{nf}'"
        )
    return prefix


def reader_bucket(field: str) -> int:
    """Bucket (0..:data:`READER_BUCKETS` - 1) of a model field: CRC-32 of its UTF-8 bytes mod the bucket count.

    Stable across processes and Python versions (unlike ``hash``), so every writer and reader agrees.
    """
    return zlib.crc32(str(field).encode("utf-8")) % READER_BUCKETS


def event_shard(user_id: str) -> int:
    """Stream shard (0..:data:`EVENT_SHARDS` - 1) of a reader: its :func:`reader_bucket` mod :data:`EVENT_SHARDS`."""
    return reader_bucket(user_id) % EVENT_SHARDS


def _s(v) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


@dataclass(frozen=True)
class Keys:
    """Names of every Redis key under one prefix (see the module docstring for the table).

    Attributes:
      prefix: plain namespace, ``"nf"`` by default; validated by
        :func:`validate_key_prefix`.

    Raises:
      ValueError: the prefix is not a plain namespace (e.g. ``"{nf}"`` or ``"a:b"``).
    """

    prefix: str = DEFAULT_KEY_PREFIX

    def __post_init__(self):
        validate_key_prefix(self.prefix)

    # -- whole namespace --------------------------------------------------------------------------
    @property
    def pattern(self) -> str:
        """SCAN pattern of every key under the prefix."""
        return f"{self.prefix}:*"

    # -- near-duplicate index (one hash tag per entity; newsflow.storage.groups) ----------------
    def lsh_band(self, i: int, band_hex: str) -> str:
        """STRING of one LSH band bucket's fingerprints: 8-byte big-endian SimHash per entry, in entry order.

        Band ``i`` (0..3, bits ``16i .. 16i+15``) with 4-hex value ``band_hex``; tag ``{lsh:<i>:<hhhh>}``."""
        return f"{self.prefix}:{{lsh:{int(i)}:{band_hex}}}:fps"

    def lsh_band_ids(self, i: int, band_hex: str) -> str:
        """STRING of the same bucket's version ids, ``"<id>\\n"`` per entry, aligned with :meth:`lsh_band`."""
        return f"{self.prefix}:{{lsh:{int(i)}:{band_hex}}}:ids"

    @property
    def lsh_pattern(self) -> str:
        """SCAN pattern of every LSH band key (both strings of every bucket)."""
        return f"{self.prefix}:{{lsh:*"

    def lsh_bands(self, fp_hex: str) -> list[str]:
        """The 4 band fingerprint keys of a 16-hex SimHash (band 0 = least significant 16 bits)."""
        return [self.lsh_band(i, fp_hex[12 - 4 * i : 16 - 4 * i]) for i in range(4)]

    def lsh_band_id_keys(self, fp_hex: str) -> list[str]:
        """The 4 band id keys of a 16-hex SimHash, in the order of :meth:`lsh_bands`."""
        return [self.lsh_band_ids(i, fp_hex[12 - 4 * i : 16 - 4 * i]) for i in range(4)]

    def article(self, article_id: str) -> str:
        """HASH of an article's serving fields (``cluster_id`` is its near-duplicate group); tag ``{art:<id>}``."""
        return f"{self.prefix}:{{art:{article_id}}}:article"

    def article_record(self, version_id: str) -> str:
        """HASH index record of one indexed version: ``fp`` (16 hex), ``mh`` (MinHash, 512 bytes, optional),
        ``rev`` (the article id it is a revision of, optional), ``sid`` (its stable URL id, optional);
        tag ``{art:<id>}``."""
        return f"{self.prefix}:{{art:{version_id}}}:nd"

    def article_versions(self, article_id: str) -> str:
        """HASH version id -> JSON fields of each version of an article with two or more versions."""
        return f"{self.prefix}:{{art:{article_id}}}:versions"

    def stable_url_versions(self, stable_id: str) -> str:
        """STRING of the indexed version ids whose URL has stable id ``stable_id`` (32 hex,
        :func:`newsflow.core.revisions.stable_url_id`), ``"<id>\\n"`` each, sorted; tag ``{uid:<stable id>}``."""
        return f"{self.prefix}:{{uid:{stable_id}}}:versions"

    def cluster(self, cluster_id: str) -> str:
        """HASH of a near-duplicate group of two or more articles; tag ``{ndg:<cluster id>}``."""
        return f"{self.prefix}:{{ndg:{cluster_id}}}:cluster"

    def cluster_articles(self, cluster_id: str) -> str:
        """SET of a cluster's member article ids."""
        return f"{self.cluster(cluster_id)}:articles"

    def cluster_sources(self, cluster_id: str) -> str:
        """SET of a cluster's distinct source domains."""
        return f"{self.cluster(cluster_id)}:sources"

    def cluster_languages(self, cluster_id: str) -> str:
        """SET of a cluster's distinct languages."""
        return f"{self.cluster(cluster_id)}:languages"

    @property
    def nd_shards(self) -> int:
        """Number of shards of the group indexes (``ND_SHARDS``)."""
        return ND_SHARDS

    @staticmethod
    def cluster_shard(cluster_id: str) -> int:
        """The index shard (0 .. ``ND_SHARDS`` - 1) of a cluster id: CRC-32 of its UTF-8 bytes mod ``ND_SHARDS``."""
        return zlib.crc32(cluster_id.encode("utf-8")) % ND_SHARDS

    def clusters_by_size(self, shard: int) -> str:
        """ZSET live cluster id -> article count, groups of >= 2 articles of one shard; tag ``{ndx:<shard>}``."""
        return f"{self.prefix}:{{ndx:{int(shard)}}}:clusters:by_size"

    def clusters_by_latest(self, shard: int) -> str:
        """ZSET live cluster id -> latest member event time (UTC epoch s) of one shard, the retention index."""
        return f"{self.prefix}:{{ndx:{int(shard)}}}:clusters:by_latest"

    @property
    def nd_lease(self) -> str:
        """HASH writer lease of the near-duplicate index: ``token``, ``deadline`` (epoch ms), ``journal``."""
        return f"{self.prefix}:nd:lease"

    @property
    def nd_count(self) -> str:
        """STRING number of indexed versions (band entries / 4)."""
        return f"{self.prefix}:nd:count"

    # -- stories (one tag per story, per assignment bucket, per index shard; newsflow.storage.stories) -----
    @staticmethod
    def story_assign_bucket(article_id: str) -> int:
        """The assignment bucket (0 .. ``STORY_ASSIGN_BUCKETS`` - 1) of an article id: CRC-32 of its UTF-8 bytes."""
        return zlib.crc32(str(article_id).encode("utf-8")) % STORY_ASSIGN_BUCKETS

    @staticmethod
    def story_index_shard(story_id: str) -> int:
        """The live/retired index shard (0 .. ``STORY_INDEX_SHARDS`` - 1) of a story id: CRC-32 of its UTF-8 bytes."""
        return zlib.crc32(str(story_id).encode("utf-8")) % STORY_INDEX_SHARDS

    def story(self, story_id: str) -> str:
        """HASH serving record of a story; tag ``{st:<story id>}``."""
        return f"{self.prefix}:{{st:{story_id}}}:story"

    def story_articles(self, story_id: str) -> str:
        """ZSET article id -> event time of a story."""
        return f"{self.story(story_id)}:articles"

    def story_state(self, story_id: str) -> str:
        """STRING zlib-compressed clusterer JSON state of a live story (fixed-size fields, no member list)."""
        return f"{self.story(story_id)}:state"

    def story_groups(self, story_id: str) -> str:
        """HASH near-duplicate group id -> JSON original ``[t, article id, authority, domain, title, url]``
        of a live story's independent reports."""
        return f"{self.story(story_id)}:groups"

    def story_outlets(self, story_id: str) -> str:
        """HASH distinct outlet (registrable domain) of a live story's members -> 1 (a HASH, not a SET: small
        hashes are stored compactly by Redis, small sets of strings are not before Redis 7.2)."""
        return f"{self.story(story_id)}:outlets"

    def story_assign(self, bucket: int) -> str:
        """HASH article id -> story id it was first assigned to, of the articles of one assignment bucket
        (:meth:`story_assign_bucket`); tag ``{sa:<bucket>}``."""
        return f"{self.prefix}:{{sa:{int(bucket)}}}:story:assign"

    def story_assign_of(self, article_id: str) -> str:
        """The :meth:`story_assign` key holding ``article_id``'s assignment."""
        return self.story_assign(self.story_assign_bucket(article_id))

    def story_merges(self, bucket: int) -> str:
        """HASH article id -> JSON list of the merge records ``{from, into, time, article_id}`` its step made,
        of the articles of one assignment bucket (same slot as their assignments)."""
        return f"{self.prefix}:{{sa:{int(bucket)}}}:story:merges"

    def story_merges_of(self, article_id: str) -> str:
        """The :meth:`story_merges` key holding the records of ``article_id``'s step."""
        return self.story_merges(self.story_assign_bucket(article_id))

    def story_active(self, shard: int) -> str:
        """ZSET live story id -> latest event time, of one index shard (:meth:`story_index_shard`); tag
        ``{sx:<shard>}``."""
        return f"{self.prefix}:{{sx:{int(shard)}}}:story:active"

    def story_active_of(self, story_id: str) -> str:
        """The :meth:`story_active` shard holding ``story_id``."""
        return self.story_active(self.story_index_shard(story_id))

    def story_retired(self, shard: int) -> str:
        """ZSET merged story id -> its latest event time (UTC epoch s), the retention index of merged stories,
        of one index shard; tag ``{sx:<shard>}``."""
        return f"{self.prefix}:{{sx:{int(shard)}}}:story:retired"

    def story_retired_of(self, story_id: str) -> str:
        """The :meth:`story_retired` shard holding ``story_id``."""
        return self.story_retired(self.story_index_shard(story_id))

    @property
    def story_assign_keys(self) -> list[str]:
        """Every :meth:`story_assign` bucket key, in bucket order."""
        return [self.story_assign(b) for b in range(STORY_ASSIGN_BUCKETS)]

    @property
    def story_merges_keys(self) -> list[str]:
        """Every :meth:`story_merges` bucket key, in bucket order."""
        return [self.story_merges(b) for b in range(STORY_ASSIGN_BUCKETS)]

    @property
    def story_active_keys(self) -> list[str]:
        """Every :meth:`story_active` shard key, in shard order."""
        return [self.story_active(k) for k in range(STORY_INDEX_SHARDS)]

    @property
    def story_retired_keys(self) -> list[str]:
        """Every :meth:`story_retired` shard key, in shard order."""
        return [self.story_retired(k) for k in range(STORY_INDEX_SHARDS)]

    @property
    def story_lease(self) -> str:
        """STRING writer lease of story assignment: the holder's random token, with a PX expiry; tag ``{stw}``."""
        return f"{self.prefix}:{STORY_WRITER_TAG}:story:lease"

    @property
    def story_journal(self) -> str:
        """STRING redo journal of the story writer: the write set committed under the lease and not yet
        known applied (same slot as the lease; :mod:`newsflow.storage.stories`)."""
        return f"{self.prefix}:{STORY_WRITER_TAG}:story:journal"

    @property
    def story_patterns(self) -> list[str]:
        """SCAN patterns matching every story key but the writer's lease and journal: per-story keys,
        assignment buckets, index shards."""
        return [f"{self.prefix}:{{st:*", f"{self.prefix}:{{sa:*", f"{self.prefix}:{{sx:*"]

    @property
    def story_pattern(self) -> str:
        """SCAN pattern matching every per-story key (``{st:<id>}``)."""
        return f"{self.prefix}:{{st:*"

    # -- ranking, users, events (untagged) --------------------------------------------------------
    @property
    def topic_lambdas(self) -> str:
        """HASH topic label -> learned decay λ."""
        return f"{self.prefix}:lambda:topic"

    def user(self, user_id: str) -> str:
        """HASH reader profile."""
        return f"{self.prefix}:user:{user_id}"

    def reader_state(self, user_id: str) -> str:
        """Start of a reader's own state keys (read marks, seen coverage, saved stories), ``P:{r<b>}:reader:<id>``
        with ``b =`` :func:`reader_bucket` ``(user id)``: the reader's keys share one slot (one pipeline, one node)
        and readers spread over the :data:`READER_BUCKETS` tags like the per-reader models."""
        return f"{self.prefix}:{{r{reader_bucket(user_id)}}}:reader:{user_id}"

    def reader_read(self, user_id: str) -> str:
        """HASH story id -> ``"<read time>:<independent reports then>"`` (:mod:`newsflow.storage.reader_state`)."""
        return self.reader_state(user_id) + ":read"

    def reader_seen(self, user_id: str) -> str:
        """HASH story id -> JSON of the full coverage the signed-in reader last saw (serving web UI)."""
        return self.reader_state(user_id) + ":seen"

    def reader_saved(self, user_id: str) -> str:
        """ZSET story id -> when the reader saved it (UTC epoch s)."""
        return self.reader_state(user_id) + ":saved"

    # -- accounts (tag {r<b>}: one reader's account keys share a slot, :mod:`newsflow.storage.accounts`) ------
    def account(self, user_id: str) -> str:
        """HASH an account: ``password`` (argon2id hash), ``role`` (``reader`` or ``editor``), ``created``."""
        return f"{self.prefix}:{{r{reader_bucket(user_id)}}}:account:{user_id}"

    def account_sessions(self, user_id: str) -> str:
        """HASH SHA-256 hex of a web session id -> its expiry (UTC epoch s)."""
        return self.account(user_id) + ":sessions"

    def account_tokens(self, user_id: str) -> str:
        """HASH personal API token id -> JSON ``{"name", "created", "expires"}``."""
        return self.account(user_id) + ":tokens"

    def account_failures(self, user_id: str) -> str:
        """ZSET failed sign-in id -> time (UTC epoch s) of one account name, the last 15 minutes (TTL)."""
        return self.account(user_id) + ":failures"

    def address_failures(self, address: str) -> str:
        """ZSET failed sign-in id -> time (UTC epoch s) from one client address, the last 15 minutes (TTL)."""
        return f"{self.prefix}:signin:failures:{address}"

    @property
    def accounts_index(self) -> str:
        """ZSET every account name (score 0, so ``ZRANGEBYLEX`` finds names by prefix); the admin readers list."""
        return f"{self.prefix}:accounts"

    @property
    def accounts_indexed(self) -> str:
        """STRING ``1`` once :attr:`accounts_index` lists every account (accounts made before it are added once)."""
        return f"{self.prefix}:accounts:indexed"

    def account_pattern(self) -> str:
        """``SCAN`` pattern of the account hashes (and their ``:sessions``, ``:tokens``, ``:failures`` keys)."""
        return f"{self.prefix}:{{r*}}:account:*"

    @property
    def admin_audit(self) -> str:
        """LIST JSON records of editors' admin actions ``{"time", "editor", "action", "target", "detail"}``,
        newest first (capped, :mod:`newsflow.storage.audit`)."""
        return f"{self.prefix}:admin:audit"

    def deleted_readers(self, shard: int) -> str:
        """HASH deleted reader id -> JSON ``{"time": deletion time (UTC epoch s), "last_event": "<ms>-<seq>"}`` of
        event shard ``shard`` (:func:`event_shard`; ``last_event`` is the id the shard's stream had last given
        then): the tombstones whose events the nightly run and ``newsflow retention`` drop from the events
        dataset (:mod:`newsflow.storage.tombstones`)."""
        return f"{self.prefix}:{{s{int(shard)}}}:readers:deleted"

    def reader_owned(self, user_id: str) -> list[str]:
        """Every key that holds one reader's data alone (deleted with the account): account, sessions, tokens,
        sign-in failures, profile, read marks, last-seen coverage, saved stories, precomputed feed. Per-reader
        model fields and the active-reader entry live in shared keys and are removed field by field
        (:meth:`newsflow.storage.accounts.AccountStore.delete`)."""
        return [
            self.account(user_id),
            self.account_sessions(user_id),
            self.account_tokens(user_id),
            self.account_failures(user_id),
            self.user(user_id),
            self.reader_read(user_id),
            self.reader_seen(user_id),
            self.reader_saved(user_id),
            self.feed("user", user_id),
            self.feed_page(user_id),
        ]

    # -- nightly models (small models untagged; per-reader models in reader buckets) -------------
    @property
    def model_pointers(self) -> str:
        """HASH ``current:<name>`` / ``previous:<name>`` -> version (``YYYY-MM-DD``): what serving reads."""
        return f"{self.prefix}:models:pointers"

    @property
    def model_manifest(self) -> str:
        """HASH ``<name>:<version>`` -> JSON state of that stored version (:mod:`newsflow.storage.models`)."""
        return f"{self.prefix}:models:manifest"

    def model(self, name: str, version: str) -> str:
        """HASH content of one version of a small (unbucketed) nightly model: ``decay``, ``weights``."""
        return f"{self.prefix}:model:{name}:{version}"

    def model_bucket(self, name: str, version: str, bucket: int) -> str:
        """HASH bucket ``bucket`` (0..4095) of one version of a bucketed model (``interest``, ``history``,
        ``cluster``, ``covisit``); tag ``{r<bucket>}``."""
        return f"{self.prefix}:{{r{int(bucket)}}}:model:{name}:{version}"

    def nightly_lock(self, date: str) -> str:
        """STRING lock of ``newsflow nightly`` for one date (token, TTL)."""
        return f"{self.prefix}:nightly:lock:{date}"

    def history_lock(self, dataset: str, partition: str) -> str:
        """STRING lock of one rewritable Parquet partition (``story_assignments``): token, TTL."""
        return f"{self.prefix}:history:lock:{dataset}:{partition}"

    def active_users(self, shard: int) -> str:
        """ZSET user id -> last event time of the readers of stream shard ``shard`` (:func:`event_shard`)."""
        return f"{self.prefix}:{{s{int(shard)}}}:users:active"

    def events(self, shard: int) -> str:
        """STREAM of the reader events of stream shard ``shard`` (:func:`event_shard` of the reader)."""
        return f"{self.prefix}:{{s{int(shard)}}}:events"

    def events_flushed(self, shard: int) -> str:
        """STRING flush cursor of stream shard ``shard`` (:mod:`newsflow.storage.events`)."""
        return f"{self.prefix}:{{s{int(shard)}}}:events:flushed"

    @property
    def breaking(self) -> str:
        """ZSET story id -> breaking expiry time."""
        return f"{self.prefix}:breaking"

    def breaking_windows(self, story_id: str) -> str:
        """ZSET window end -> window end: the ends of a story's breaking windows (its breaking runs)."""
        return f"{self.prefix}:breaking:windows:{story_id}"

    def trending(self, kind: str, window_end: float) -> str:
        """ZSET counts of one trending window (``kind``: story, entity, topic)."""
        return f"{self.prefix}:trending:{kind}:{int(window_end)}"

    @property
    def trending_pattern(self) -> str:
        """SCAN pattern of every trending key (windows and their indexes)."""
        return f"{self.prefix}:trending:*"

    def trending_windows(self, kind: str) -> str:
        """ZSET of the written window ends of ``kind``."""
        return f"{self.prefix}:trending:windows:{kind}"

    def pool(self, kind: str, name: str) -> str:
        """ZSET candidate pool; ``kind`` is ``"edition"`` or ``"topic"``."""
        if kind not in POOL_KINDS:
            raise ValueError(f"pool kind must be 'edition' or 'topic', got {kind!r}")
        return f"{self.prefix}:pool:{kind}:{name}"

    def pool_pattern(self, kind: str | None = None) -> str:
        """SCAN pattern of the pools of ``kind`` (``None``: every pool)."""
        return f"{self.prefix}:pool:*" if kind is None else self.pool(kind, "*")

    def feed(self, kind: str, name: str) -> str:
        """STRING feed JSON; ``kind`` is ``"edition"``, ``"topic"`` or ``"user"``."""
        if kind not in FEED_KINDS:
            raise ValueError(f"feed kind must be 'edition', 'topic' or 'user', got {kind!r}")
        return f"{self.prefix}:feed:{kind}:{name}"

    def feed_page(self, user_id: str) -> str:
        """STRING serving form of a reader's precomputed feed (:mod:`newsflow.storage.feed_page`)."""
        return f"{self.prefix}:feedpage:user:{user_id}"

    def feed_pattern(self, kind: str | None = None) -> str:
        """SCAN pattern of the feeds of ``kind`` (``None``: every feed)."""
        return f"{self.prefix}:feed:*" if kind is None else self.feed(kind, "*")

    def feed_name_of(self, kind: str, key) -> str | None:
        """The feed name if ``key`` (str or bytes) is a feed of ``kind``, else ``None``."""
        key, start = _s(key), self.feed(kind, "")
        return key[len(start) :] if key.startswith(start) and len(key) > len(start) else None

    @property
    def replay_clock(self) -> str:
        """STRING replay clock (epoch s) of ``newsflow demo``."""
        return f"{self.prefix}:clock:replay"

    @property
    def retention_cutoff(self) -> str:
        """STRING event time (UTC epoch s) before which stories, groups and articles were expired."""
        return f"{self.prefix}:retention:cutoff"

    # -- crawl frontier (scheduling keys per host bucket; crawler.frontier) ---------------------------
    @staticmethod
    def crawl_bucket(host: str) -> int:
        """The frontier bucket (0 .. ``CRAWL_BUCKETS`` - 1) of a politeness host (``host[:port]``, lower
        case, :func:`newsflow.core.urls.host_key`): CRC-32 of its UTF-8 bytes."""
        return zlib.crc32(str(host).encode("utf-8")) % CRAWL_BUCKETS

    def crawl_scheduling(self, bucket: int) -> str:
        """Tagged prefix (``nf:{cr:<bucket>}:crawl:``, trailing colon) of one bucket's keys the frontier scripts
        move tasks between; the scripts append ``task:``, ``q:``, ``hosts``, ``host:``, ``leases``, ``held``."""
        return f"{self.prefix}:{{cr:{int(bucket)}}}:crawl:"

    def crawl_task(self, host: str, tid: str) -> str:
        """HASH crawl task ``tid`` of politeness host ``host`` (in the host's bucket)."""
        return f"{self.crawl_scheduling(self.crawl_bucket(host))}task:{tid}"

    def crawl_queue(self, host: str) -> str:
        """ZSET tids of one host by due time."""
        return f"{self.crawl_scheduling(self.crawl_bucket(host))}q:{host}"

    def crawl_hosts(self, bucket: int) -> str:
        """ZSET hosts of one bucket by next allowed contact."""
        return f"{self.crawl_scheduling(bucket)}hosts"

    def crawl_host(self, host: str) -> str:
        """HASH politeness state of a host."""
        return f"{self.crawl_scheduling(self.crawl_bucket(host))}host:{host}"

    def crawl_leases(self, bucket: int) -> str:
        """ZSET leased tids of one bucket by lease expiry."""
        return f"{self.crawl_scheduling(bucket)}leases"

    def crawl_held(self, bucket: int) -> str:
        """SET task ids of paused/removed feeds of one bucket's hosts, which the frontier scripts never queue."""
        return f"{self.crawl_scheduling(bucket)}held"

    @property
    def crawl_base(self) -> str:
        """``nf:crawl:``, the start of the untagged crawl keys."""
        return f"{self.prefix}:crawl:"

    @property
    def crawl_feeds(self) -> str:
        """HASH tid -> politeness host of every feed/sitemap task (the host locates the task's bucket)."""
        return self.crawl_base + "feedhosts"

    def crawl_domain(self, domain: str) -> str:
        """HASH feed tid -> politeness host, of the feeds of a source domain."""
        return f"{self.crawl_base}domainfeeds:{domain}"

    def crawl_seen(self, article_id: str) -> str:
        """STRING marker of a seen article URL."""
        return f"{self.crawl_base}seen:{article_id}"

    def url_alias(self, alias_id: str) -> str:
        """STRING article id that the URL with id ``alias_id`` (``newsflow.core.urls.article_id``) resolves to."""
        return f"{self.prefix}:alias:{alias_id}"

    def crawl_feed_items(self, tid: str) -> str:
        """SET item ids of a feed's last fetch."""
        return f"{self.crawl_base}fg:{tid}"

    def crawl_robots(self, origin: str) -> str:
        """STRING cached robots policy of ``scheme://host[:port]``."""
        return f"{self.crawl_base}robots:{origin}"

    @property
    def crawl_priority(self) -> str:
        """ZSET priority re-crawl requests (JSON request -> request time; :mod:`newsflow.storage.priority`)."""
        return self.crawl_base + "priority"

    @property
    def crawl_deadletter(self) -> str:
        """LIST refused crawl work."""
        return self.crawl_base + "deadletter"

    @property
    def crawl_stats(self) -> str:
        """HASH crawl counters."""
        return self.crawl_base + "stats"

    # -- sources registry (newsflow.storage.source_registry) ---------------------------------------------
    @property
    def crawl_registrations(self) -> str:
        """SET JSON ``{"kind", "url"}`` of registered/resumed feeds the frontier (re)queues."""
        return self.crawl_base + "register"

    @property
    def source_base(self) -> str:
        """``nf:src:``, the start of every sources-registry key."""
        return f"{self.prefix}:src:"

    def source_feed(self, feed_id: str) -> str:
        """HASH of a registered feed."""
        return f"{self.source_base}feed:{feed_id}"

    @property
    def source_feeds(self) -> str:
        """ZSET feed id -> registration time."""
        return self.source_base + "feeds"

    def source_outlet(self, outlet: str) -> str:
        """HASH of an outlet (registrable domain): name, tier, authority, language."""
        return f"{self.source_base}outlet:{outlet}"

    def source_outlet_feeds(self, outlet: str) -> str:
        """SET feed ids of an outlet."""
        return f"{self.source_outlet(outlet)}:feeds"

    def source_status(self, status: str) -> str:
        """ZSET feed id -> registration time of the feeds with ``status`` (``active``, ``paused``, ``removed``, or
        ``listed`` for active and paused): the admin's paging index."""
        return f"{self.source_base}status:{status}"

    @property
    def source_status_indexed(self) -> str:
        """STRING ``1`` once the status index (:meth:`source_status`) covers every registered feed."""
        return self.source_base + "status-indexed"

    @property
    def source_outlets(self) -> str:
        """SET outlets with a record."""
        return self.source_base + "outlets"

    @property
    def source_log(self) -> str:
        """LIST JSON change records of the registry, newest first (capped)."""
        return self.source_base + "log"


DEFAULT_KEYS = Keys()
