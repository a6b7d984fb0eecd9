"""Versioned nightly models in Redis: write a version, switch to it atomically, roll back.

Every nightly model is a HASH per version, ``Keys.model(name, version)`` (version = the night's
date ``YYYY-MM-DD``). A version is written completely first (:meth:`ModelStore.write`, which
replaces that version's hash, so re-running a date replaces its output); then
:meth:`ModelStore.switch` moves the pointers of several models at once in one MULTI/EXEC on the
two pointer hashes ``Keys.models_current`` / ``Keys.models_previous`` (both tagged ``{models}``:
one cluster slot). A reader reads the pointer first and then the versioned hash, so it always
sees one whole version, never half a model. The version before the current one stays for
:meth:`ModelStore.rollback`; versions older than both are deleted by :meth:`ModelStore.prune`.

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

A version with no content holds the one field ``_empty`` (Redis has no empty hash); fields starting
with ``_`` are never model entries. The decay model is also mirrored into ``Keys.topic_lambdas``
(the hash the feed builder reads) in one MULTI on that one key, after the switch and on rollback.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import numpy as np
from redis.exceptions import WatchError

from newsflow.core.ranking.personalize import NO_MODELS, WEIGHT_FEATURES, LearnedSignals
from newsflow.storage.keys import Keys

MODEL_NAMES = ("decay", "weights", "interest", "history", "cluster", "covisit")


def _s(v) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


class ModelStore:
    """Typed access to the versioned model keys.

    Args:
      client: ``redis.Redis`` client (``decode_responses=False``).
      keys: the key layout.
    """

    def __init__(self, client, keys: Keys = Keys()):
        self.client = client
        self.keys = keys

    def write(self, name: str, version: str, mapping: Mapping[str, bytes | str | float], batch: int = 5000) -> int:
        """Replaces the hash of ``name`` at ``version`` with ``mapping``; returns the fields written.

        Not visible to readers until :meth:`switch` points at ``version`` (unless it already does:
        re-writing the current version is only safe when the content is the same, as a rerun of the
        same date with the same input gives).

        Raises:
          ValueError: unknown model name or empty version.
        """
        self._check(name, version)
        key = self.keys.model(name, version)
        items = list(mapping.items())
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(key)
        for i in range(0, len(items), batch):
            pipe.hset(key, mapping=dict(items[i : i + batch]))
        pipe.execute()
        return len(items)

    def current(self) -> dict[str, str]:
        """``{model name: current version}``."""
        return {_s(k): _s(v) for k, v in self.client.hgetall(self.keys.models_current).items()}

    def previous(self) -> dict[str, str]:
        """``{model name: version before the current one}``."""
        return {_s(k): _s(v) for k, v in self.client.hgetall(self.keys.models_previous).items()}

    def switch(self, versions: Mapping[str, str]) -> dict[str, str]:
        """Points every model of ``versions`` at its version in one transaction; the versions they
        pointed at become ``previous`` (unless it is the same version: a rerun keeps the older
        rollback target). Returns the new ``current`` pointers.

        Raises:
          ValueError: unknown model name, or a version whose hash does not exist (nothing switched).
        """
        for name, version in versions.items():
            self._check(name, version)
        missing = [n for n, v in versions.items() if not self.client.exists(self.keys.model(n, v))]
        if missing:
            raise ValueError(f"no stored version to switch to for {', '.join(sorted(missing))}")
        with self.client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(self.keys.models_current)
                    old = {_s(k): _s(v) for k, v in pipe.hgetall(self.keys.models_current).items()}
                    prev = {n: old[n] for n in versions if n in old and old[n] != versions[n]}
                    pipe.multi()
                    if prev:
                        pipe.hset(self.keys.models_previous, mapping=prev)
                    pipe.hset(self.keys.models_current, mapping=dict(versions))
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
        pipe.hset(self.keys.models_current, mapping={n: prev[n] for n in names})
        pipe.hdel(self.keys.models_previous, *names)
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
        """Deletes the versions of ``name`` that are neither current nor previous; returns them."""
        keep = {self.current().get(name), self.previous().get(name)}
        base = self.keys.model(name, "")
        gone = []
        for key in self.client.scan_iter(match=self.keys.model_pattern(name), count=1000):
            version = _s(key)[len(base) :]
            if version not in keep:
                self.client.delete(key)
                gone.append(version)
        return sorted(gone)

    def read(self, name: str, version: str | None = None) -> dict[bytes, bytes]:
        """The whole hash of ``name`` at ``version`` (default: the current one; ``{}`` when none)."""
        version = version or self.current().get(name)
        return self.client.hgetall(self.keys.model(name, version)) if version else {}

    def read_fields(self, name: str, fields: Iterable[str], version: str | None = None) -> list[bytes | None]:
        """Some fields of ``name`` at ``version`` (default current); ``None`` where absent."""
        version = version or self.current().get(name)
        fields = list(fields)
        if not version or not fields:
            return [None] * len(fields)
        return self.client.hmget(self.keys.model(name, version), fields)

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
    """Reads the reader's signals from the current model versions (a few HMGETs).

    Returns :data:`NO_MODELS`-like empty fields for models that are absent; Redis errors propagate
    (the caller decides how to degrade).
    """
    store = ModelStore(client, keys)
    versions = store.current()
    if not versions:
        return NO_MODELS
    interest = None
    raw = store.read_fields("interest", [user_id])[0] if "interest" in versions else None
    if raw is not None and len(raw) == 4 * 128:
        interest = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    history = json_field(store.read_fields("history", [user_id])[0]) if "history" in versions else None
    clicks, recent, topics = 0, [], {}
    if isinstance(history, dict):
        clicks = int(history.get("clicks") or 0)
        recent = [str(x) for x in history.get("recent") or []]
        raw_topics = history.get("topics") if isinstance(history.get("topics"), dict) else {}
        topics = {str(k).lower(): float(v) for k, v in raw_topics.items()}
    covisit: dict[str, float] = {}
    if recent and "covisit" in versions:
        for row in store.read_fields("covisit", recent):
            for sid, n in (json_field(row) or {}).items():
                if sid not in recent:
                    covisit[sid] = covisit.get(sid, 0.0) + float(n)
    cluster: dict[str, float] = {}
    if "cluster" in versions:
        cid = store.read_fields("cluster", [user_id])[0]
        if cid is not None:
            top = json_field(store.read_fields("cluster", [f"c:{cid.decode()}"])[0]) or {}
            cluster = {str(k): float(v) for k, v in top.items() if str(k) not in recent}
    weights = None
    if "weights" in versions:
        w = store.read("weights")
        if w.get(b"_learned") == b"1":
            try:
                weights = {f: float(w[f.encode()]) for f in (*WEIGHT_FEATURES, "_intercept")}
            except (KeyError, ValueError):
                weights = None
    return LearnedSignals(versions, interest, clicks, covisit, cluster, weights, topics)
