"""Versioned nightly models in Redis: write a version in bounded pieces, switch to it atomically, roll back.

Layout (:mod:`newsflow.storage.keys`; version = the night's date ``YYYY-MM-DD``):

* the small models ``decay`` and ``weights`` are one HASH per version, ``Keys.model(name, version)``;
* the per-reader models ``interest``, ``history``, ``cluster`` and the per-story ``covisit`` are
  spread over :data:`~newsflow.storage.keys.READER_BUCKETS` (4,096) hashes per version,
  ``Keys.model_bucket(name, version, b)``, field ``f`` in bucket
  :func:`~newsflow.storage.keys.reader_bucket` ``(f)``; only non-empty buckets exist;
* ``Keys.model_manifest`` (one HASH) records each stored version, field ``<name>:<version>`` ->
  JSON ``{"state": "writing"|"ready"|"deleting", "fields": n, "buckets": [b, ...]}``;
* ``Keys.model_pointers`` (one HASH) maps ``current:<name>`` and ``previous:<name>`` to versions.

Protocol, each step bounded (no command touches more than :data:`MAX_FIELDS_PER_COMMAND` fields or
one bucket; a bucket holds ~2,440 readers at 10M):

1. :meth:`ModelStore.write` marks the version ``writing`` (listing every bucket it may leave behind),
   then replaces each bucket (``UNLINK`` + ``HSET`` chunks of one key; pipelined over
   :data:`UNLINK_BATCH` buckets for a version no pointer names, one MULTI per bucket for a version
   current or previous), removes buckets an earlier write of the same version left, and marks it
   ``ready``. Re-running a date replaces its output; while the version serves, each bucket changes
   atomically (a rerun on the same input writes the same content).
2. :meth:`ModelStore.switch` refuses a version that is not ``ready`` and moves the pointers of several
   models at once with one WATCH/MULTI on the one pointer key: the pointer moves only after every
   bucket is written. A reader reads the pointer hash once (:meth:`ModelStore.current`) and then only
   the versions it named, so it sees the old or the new model, never a mix.
3. :meth:`ModelStore.prune` deletes versions that are neither current nor previous: it marks the
   version ``deleting`` (a switch to it is refused), ``UNLINK`` s its keys in pipelines of
   :data:`UNLINK_BATCH` single-key commands (the memory is freed off the main thread), then drops the
   manifest entry. A crash at any point leaves a manifest entry that the next prune finishes.

Models and their hash fields (values are strings unless said):

============  ==========================================================================
name          fields
============  ==========================================================================
decay         topic label (lower case) -> λ (1/hours), only topics whose data suffices
weights       feature name -> weight, ``_intercept``, ``_auc``, ``_learned`` ("1"/"0")
interest      user id -> interest vector (128 float32 little-endian bytes)
history       user id -> JSON ``{"clicks": n, "recent": [story ids, newest first]}``
cluster       user id -> MinHash-LSH cluster id; ``c:<cluster id>`` -> JSON
              ``{story id: clicks by the cluster's users}`` (top 50)
covisit       story id -> JSON ``{story id: co-visiting users}`` (top 20 neighbours)
============  ==========================================================================

Fields starting with ``_`` are never model entries (``_empty`` marks a small model with no content,
as Redis has no empty hash; a bucketed model with no content is a ``ready`` manifest with no
buckets). The decay model is also mirrored into ``Keys.topic_lambdas`` (the hash the feed builder
reads) in one MULTI on that one key, after the switch and on rollback.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import numpy as np
from redis.exceptions import WatchError

from newsflow.core.ranking.personalize import NO_MODELS, WEIGHT_FEATURES, LearnedSignals
from newsflow.storage.keys import Keys, reader_bucket

MODEL_NAMES = ("decay", "weights", "interest", "history", "cluster", "covisit")
BUCKETED_MODELS = frozenset({"interest", "history", "cluster", "covisit"})
MAX_FIELDS_PER_COMMAND = 1000
"""Most fields one ``HSET`` of a model write carries."""
UNLINK_BATCH = 256
"""Single-key ``UNLINK`` commands per pipeline round trip of :meth:`ModelStore.prune`."""


def _s(v) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


class ModelStore:
    """Typed access to the versioned model keys.

    Args:
      client: ``redis.Redis`` (or ``RedisCluster``) client (``decode_responses=False``).
      keys: the key layout.
    """

    def __init__(self, client, keys: Keys = Keys()):
        self.client = client
        self.keys = keys

    # -- manifest -----------------------------------------------------------------------------
    def manifest(self, name: str, version: str) -> dict | None:
        """The manifest entry of ``name`` at ``version`` (``None`` when not stored)."""
        raw = self.client.hget(self.keys.model_manifest, f"{name}:{version}")
        return None if raw is None else json.loads(raw)

    def _set_manifest(self, name: str, version: str, state: str, fields: int, buckets: Iterable[int]) -> None:
        entry = {"state": state, "fields": int(fields), "buckets": sorted(set(buckets))}
        self.client.hset(self.keys.model_manifest, f"{name}:{version}", json.dumps(entry, separators=(",", ":")))

    def versions(self, name: str) -> list[str]:
        """Every stored version of ``name`` (any state), sorted."""
        start = f"{name}:"
        return sorted(
            _s(f)[len(start) :] for f in self.client.hkeys(self.keys.model_manifest) if _s(f).startswith(start)
        )

    def _keys_of(self, name: str, version: str, buckets: Iterable[int]) -> list[str]:
        if name in BUCKETED_MODELS:
            return [self.keys.model_bucket(name, version, b) for b in buckets]
        return [self.keys.model(name, version)] if list(buckets) else []

    # -- write ----------------------------------------------------------------------------------
    def write(self, name: str, version: str, mapping: Mapping[str, bytes | str | float]) -> int:
        """Replaces ``name`` at ``version`` with ``mapping``; returns the fields written.

        Bucketed models spread the fields over their buckets (module docstring, step 1); every
        command carries at most :data:`MAX_FIELDS_PER_COMMAND` fields of one key. Not visible to
        readers until :meth:`switch` points at ``version`` (and no switch to it passes while it is
        ``writing``), so the buckets of an unserved version go out in pipelines of
        :data:`UNLINK_BATCH` buckets; when ``version`` is already served (a rerun of the night),
        each bucket is replaced in its own MULTI, so readers see whole buckets.

        Raises:
          ValueError: unknown model name or bad version.
        """
        self._check(name, version)
        by_bucket: dict[int, dict] = {}
        if name in BUCKETED_MODELS:
            for field, value in mapping.items():
                if not str(field).startswith("_"):
                    by_bucket.setdefault(reader_bucket(field), {})[field] = value
        else:
            by_bucket[0] = dict(mapping) or {"_empty": "1"}
        served = version in (pointer.get(name) for pointer in self.pointers())
        old = self.begin(name, version, by_bucket)
        ordered = sorted(by_bucket.items())
        for i in range(0, len(ordered), 1 if served else UNLINK_BATCH):
            pipe = self.client.pipeline(transaction=served)
            for bucket, fields in ordered[i : i + (1 if served else UNLINK_BATCH)]:
                self._queue_bucket(pipe, name, version, bucket, fields)
            pipe.execute()
        n = sum(len(f) for f in by_bucket.values()) if name in BUCKETED_MODELS else len(mapping)
        self.commit(name, version, n, by_bucket, old)
        return n

    def begin(self, name: str, version: str, buckets: Iterable[int]) -> list[int]:
        """Marks ``name`` at ``version`` ``writing`` before its ``buckets`` are written (a switch to it is
        refused until :meth:`commit`); returns the buckets an earlier write of it left.

        Raises:
          ValueError: unknown model name or bad version.
        """
        self._check(name, version)
        old = (self.manifest(name, version) or {}).get("buckets", [])
        self._set_manifest(name, version, "writing", 0, set(old) | set(buckets))
        return old

    def commit(self, name: str, version: str, fields: int, buckets: Iterable[int], old: Iterable[int] = ()) -> None:
        """Marks ``name`` at ``version`` ``ready`` with its ``fields`` in ``buckets``, after unlinking the
        ``old`` buckets (from :meth:`begin`) no longer written."""
        buckets = sorted(set(buckets))
        self._unlink(self._keys_of(name, version, sorted(set(old) - set(buckets))))
        self._set_manifest(name, version, "ready", fields, buckets)

    def write_bucket(self, name: str, version: str, bucket: int, fields: Mapping[str, bytes | str | float]) -> None:
        """Replaces one bucket of ``name`` at ``version`` in one MULTI on its one key (``UNLINK`` +
        ``HSET`` chunks of :data:`MAX_FIELDS_PER_COMMAND`); parallel writers call it per bucket between
        :meth:`begin` and :meth:`commit`.

        Raises:
          ValueError: a field that does not belong in ``bucket``.
        """
        if name in BUCKETED_MODELS:
            wrong = [f for f in fields if reader_bucket(f) != bucket]
            if wrong:
                raise ValueError(f"field {wrong[0]!r} belongs in bucket {reader_bucket(wrong[0])}, not {bucket}")
        pipe = self.client.pipeline(transaction=True)
        self._queue_bucket(pipe, name, version, bucket, fields)
        pipe.execute()

    def _queue_bucket(self, pipe, name: str, version: str, bucket: int, fields: Mapping) -> None:
        key = self._keys_of(name, version, [bucket])[0]
        items = list(fields.items())
        pipe.unlink(key)
        for i in range(0, len(items), MAX_FIELDS_PER_COMMAND):
            pipe.hset(key, mapping=dict(items[i : i + MAX_FIELDS_PER_COMMAND]))

    def _unlink(self, keys: list[str]) -> None:
        for i in range(0, len(keys), UNLINK_BATCH):
            pipe = self.client.pipeline(transaction=False)
            for key in keys[i : i + UNLINK_BATCH]:
                pipe.unlink(key)
            pipe.execute()

    # -- pointers -------------------------------------------------------------------------------
    def pointers(self) -> tuple[dict[str, str], dict[str, str]]:
        """``(current, previous)``: ``{model name: version}`` each, from one read of the pointer key."""
        cur, prev = {}, {}
        for k, v in self.client.hgetall(self.keys.model_pointers).items():
            kind, _, name = _s(k).partition(":")
            (cur if kind == "current" else prev)[name] = _s(v)
        return cur, prev

    def current(self) -> dict[str, str]:
        """``{model name: current version}``."""
        return self.pointers()[0]

    def previous(self) -> dict[str, str]:
        """``{model name: version before the current one}``."""
        return self.pointers()[1]

    def switch(self, versions: Mapping[str, str]) -> dict[str, str]:
        """Points every model of ``versions`` at its version in one transaction on the pointer key;
        the versions they pointed at become ``previous`` (unless it is the same version: a rerun keeps
        the older rollback target). Returns the new ``current`` pointers.

        Raises:
          ValueError: unknown model name, or a version that is not completely written (nothing switched).
        """
        for name, version in versions.items():
            self._check(name, version)
        missing = [n for n, v in versions.items() if (self.manifest(n, v) or {}).get("state") != "ready"]
        if missing:
            raise ValueError(f"no stored version to switch to for {', '.join(sorted(missing))}")
        key = self.keys.model_pointers
        with self.client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(key)
                    old = {_s(k): _s(v) for k, v in pipe.hgetall(key).items()}
                    new = {f"current:{n}": v for n, v in versions.items()}
                    for n, v in versions.items():
                        if old.get(f"current:{n}") not in (None, v):
                            new[f"previous:{n}"] = old[f"current:{n}"]
                    pipe.multi()
                    pipe.hset(key, mapping=new)
                    pipe.execute()
                    break
                except WatchError:  # another switch ran meanwhile: read the pointers again
                    continue
        if "decay" in versions:
            self.mirror_decay(versions["decay"])
        return self.current()

    def rollback(self, names: Iterable[str]) -> dict[str, str]:
        """Points each of ``names`` back at its previous version (one transaction) and forgets that
        previous pointer. Returns the new ``current`` pointers.

        Raises:
          ValueError: a name without a previous version.
        """
        prev = self.previous()
        names = list(names)
        missing = [n for n in names if n not in prev]
        if missing:
            raise ValueError(f"no previous version of {', '.join(sorted(missing))}")
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(self.keys.model_pointers, mapping={f"current:{n}": prev[n] for n in names})
        pipe.hdel(self.keys.model_pointers, *[f"previous:{n}" for n in names])
        pipe.execute()
        if "decay" in names:
            self.mirror_decay(prev["decay"])
        return self.current()

    def mirror_decay(self, version: str) -> None:
        """Replaces ``Keys.topic_lambdas`` with the decay model of ``version`` (one MULTI, one key)."""
        stored = self.client.hgetall(self.keys.model("decay", version))
        lambdas = {k: v for k, v in stored.items() if not k.startswith(b"_")}
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(self.keys.topic_lambdas)
        if lambdas:
            pipe.hset(self.keys.topic_lambdas, mapping=lambdas)
        pipe.execute()

    def prune(self, name: str) -> list[str]:
        """Deletes the versions of ``name`` that are neither current nor previous, in bounded steps
        (module docstring, step 3); returns them."""
        cur, prev = self.pointers()
        keep = {cur.get(name), prev.get(name)}
        gone = []
        for version in self.versions(name):
            if version in keep:
                continue
            entry = self.manifest(name, version) or {}
            buckets = entry.get("buckets", [])
            self._set_manifest(name, version, "deleting", entry.get("fields", 0), buckets)
            self._unlink(self._keys_of(name, version, buckets))
            self.client.hdel(self.keys.model_manifest, f"{name}:{version}")
            gone.append(version)
        return gone

    def key_sizes(self, name: str, version: str) -> dict[str, int]:
        """``{key: MEMORY USAGE bytes (samples=0)}`` of every key of ``name`` at ``version`` (for sizing
        and benchmarks; one pipeline)."""
        buckets = (self.manifest(name, version) or {}).get("buckets", [])
        keys = self._keys_of(name, version, buckets)
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.memory_usage(key, samples=0)
        return {key: int(n or 0) for key, n in zip(keys, pipe.execute(), strict=True)}

    # -- read -----------------------------------------------------------------------------------
    def read(self, name: str, version: str | None = None) -> dict[bytes, bytes]:
        """The whole of ``name`` at ``version`` (default: the current one; ``{}`` when none): one
        ``HGETALL`` per stored bucket (meant for small models and tests)."""
        version = version or self.current().get(name)
        if not version:
            return {}
        buckets = (self.manifest(name, version) or {}).get("buckets", [0])
        out: dict[bytes, bytes] = {}
        for key in self._keys_of(name, version, buckets):
            out.update(self.client.hgetall(key))
        return out

    def read_fields(self, name: str, fields: Iterable[str], version: str | None = None) -> list[bytes | None]:
        """Some fields of ``name`` at ``version`` (default current); ``None`` where absent. One pipeline
        of ``HGET`` s, each to the field's bucket."""
        version = version or self.current().get(name)
        fields = list(fields)
        if not version or not fields:
            return [None] * len(fields)
        pipe = self.client.pipeline(transaction=False)
        for f in fields:
            pipe.hget(self._field_key(name, version, f), f)
        return pipe.execute()

    def _field_key(self, name: str, version: str, field: str) -> str:
        if name in BUCKETED_MODELS:
            return self.keys.model_bucket(name, version, reader_bucket(field))
        return self.keys.model(name, version)

    @staticmethod
    def _check(name: str, version: str) -> None:
        if name not in MODEL_NAMES:
            raise ValueError(f"unknown model {name!r}; models are {', '.join(MODEL_NAMES)}")
        if not version or ":" in version or "*" in version:
            raise ValueError(f"model version must be a non-empty name without ':' or '*', got {version!r}")


def json_field(value) -> object:
    """A JSON hash field decoded (``None`` when absent or unparsable)."""
    if value is None:
        return None
    try:
        return json.loads(_s(value))
    except ValueError:
        return None


def load_learned(client, keys: Keys, user_id: str) -> LearnedSignals:
    """Reads the reader's signals from the current model versions (:func:`load_learned_many` for one reader).

    The pointer key is read once and every later read names those versions, so a switch meanwhile
    never mixes two nights. Round trips: the pointers, one pipeline for the reader's interest,
    history and cluster (one bucket, one slot), one for the co-visits and cluster top of the
    reader's recent stories, one ``HGETALL`` of the weights.

    Returns :data:`NO_MODELS`-like empty fields for models that are absent; Redis errors propagate
    (the caller decides how to degrade).
    """
    return load_learned_many(client, keys, [user_id])[0]


def load_learned_many(client, keys: Keys, user_ids: list[str]) -> list[LearnedSignals]:
    """:func:`load_learned` for a batch of readers in the same four round trips (pointers, one pipeline of
    every reader's interest, history and cluster, one of their co-visits and cluster tops, the weights).

    Returns:
      One :class:`LearnedSignals` per reader, in order.
    """
    store = ModelStore(client, keys)
    versions = store.current()
    if not versions:
        return [NO_MODELS for _ in user_ids]
    mine = [n for n in ("interest", "history", "cluster") if n in versions]
    first = _read_many(store, [(n, versions[n], [u]) for u in user_ids for n in mine])
    parsed, second = [], []
    for k in range(len(user_ids)):
        got = {n: row[0] for n, row in zip(mine, first[k * len(mine) : (k + 1) * len(mine)], strict=True)}
        interest = None
        raw = got.get("interest")
        if raw is not None and len(raw) == 4 * 128:
            interest = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        history = json_field(got.get("history"))
        clicks, recent, topics = 0, [], {}
        if isinstance(history, dict):
            clicks = int(history.get("clicks") or 0)
            recent = [str(x) for x in history.get("recent") or []]
            raw_topics = history.get("topics") if isinstance(history.get("topics"), dict) else {}
            topics = {str(k).lower(): float(v) for k, v in raw_topics.items()}
        asks = []
        if recent and "covisit" in versions:
            asks.append(("covisit", versions["covisit"], recent))
        cid = got.get("cluster")
        if cid is not None:
            asks.append(("cluster", versions["cluster"], [f"c:{_s(cid)}"]))
        parsed.append((interest, clicks, recent, topics, asks))
        second += asks
    answers = iter(_read_many(store, second))
    weights = None
    if "weights" in versions:
        w = store.read("weights", versions["weights"])
        if w.get(b"_learned") == b"1":
            try:
                weights = {f: float(w[f.encode()]) for f in (*WEIGHT_FEATURES, "_intercept")}
            except (KeyError, ValueError):
                weights = None
    out = []
    for interest, clicks, recent, topics, asks in parsed:
        rows = {ask[0]: next(answers) for ask in asks}
        covisit: dict[str, float] = {}
        for row in rows.get("covisit", []):
            for sid, n in (json_field(row) or {}).items():
                if sid not in recent:
                    covisit[sid] = covisit.get(sid, 0.0) + float(n)
        cluster: dict[str, float] = {}
        if "cluster" in rows:
            top = json_field(rows["cluster"][0]) or {}
            cluster = {str(k): float(v) for k, v in top.items() if str(k) not in recent}
        out.append(LearnedSignals(versions, interest, clicks, covisit, cluster, weights, topics))
    return out


def _read_many(store: ModelStore, requests: list[tuple[str, str, list[str]]]) -> list[list[bytes | None]]:
    """``[(name, version, fields)]`` -> the values of each request's fields, in one pipeline of ``HGET`` s."""
    if not requests:
        return []
    pipe = store.client.pipeline(transaction=False)
    for name, version, fields in requests:
        for f in fields:
            pipe.hget(store._field_key(name, version, f), f)
    flat, out, i = pipe.execute(), [], 0
    for _, _, fields in requests:
        out.append(flat[i : i + len(fields)])
        i += len(fields)
    return out
