"""The sources registry: which feeds newsflow polls, kept in Redis and read by the crawl frontier.

A *feed* is one URL the crawler polls: an RSS/Atom/JSON feed (``kind="feed"``) or a news sitemap
(``kind="sitemap"``). Its id is its crawl task id (:func:`crawl_task_id`, 24 hex characters of
SHA-1 of ``kind|canonical URL``), so the registry and the frontier name a feed the same way. Every
feed belongs to an *outlet*, its registrable domain (:func:`newsflow.core.outlets.outlet`); an outlet
record holds the publisher's name, tier, authority and language. ``data/sources.csv`` stays the
seed table: its rows whose domain is a registrable domain seed the outlet records (never
overwriting an edited record), see ``data/SOURCES.md``.

Keys (all named by :class:`newsflow.storage.keys.Keys`): ``src:feed:<id>`` (HASH), ``src:feeds`` (ZSET id
-> registration time), ``src:outlet:<outlet>`` (HASH), ``src:outlet:<outlet>:feeds`` (SET),
``src:outlets`` (SET), ``src:log`` (LIST of change records), ``src:status:<status>`` (ZSET id ->
registration time per status, and ``src:status:listed`` for active and paused: the paging index of
:meth:`SourceRegistry.page`, built from the feed records once when a registry predates it, marked by
``src:status-indexed``). The frontier reads two keys:
``{cr:<bucket>}:crawl:held`` (SET of the task ids of paused and removed feeds, in the frontier bucket of
the feed's host; never queued, see the crawl frontier) and ``crawl:register`` (SET of ``{"kind", "url"}``
JSON members the frontier turns into tasks, so a registered or resumed feed is polled by the next worker claim).

Statuses: ``active`` (polled), ``paused`` (not polled, listed), ``removed`` (not polled, not
listed by default; the record and the frontier's schedule state are kept, so history survives and
resuming restores it). Registering a feed that exists is ``unchanged`` (a removed one is
``restored``), so importing the same file twice changes nothing.

Entries, ids and the URL rules (no DNS) are in :mod:`newsflow.core.source_entries` (re-exported here).

Writes are pipelined in batches (default 1,000 entries per round trip pair) and idempotent.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
import time
from collections.abc import Callable, Iterable, Iterator

from newsflow.core.authority import default_authority
from newsflow.core.outlets import outlet as outlet_of
from newsflow.core.source_entries import (  # re-exported: the registry's vocabulary
    KINDS,
    MAX_TITLE,
    STATUSES,
    FeedEntry,
    FeedError,
    FileNote,
    Outcome,
    Report,
    check_feed_url,
    clean_categories,
    crawl_task_id,
    validate_outlet_fields,
)
from newsflow.core.urls import MAX_URL_LENGTH, host_key
from newsflow.storage.keys import Keys

__all__ = [
    "KINDS",
    "STATUSES",
    "FeedEntry",
    "FeedError",
    "Outcome",
    "Report",
    "SourceRegistry",
    "check_feed_url",
    "clean_categories",
    "crawl_task_id",
    "validate_outlet_fields",
]

LOG_CAP = 100_000
_FEED_ID_RE = re.compile(r"[0-9a-f]{24}\Z")


def _s(v) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def _decode(h: dict) -> dict:
    return {_s(k): _s(v) for k, v in h.items()}


class SourceRegistry:
    """Registered feeds and outlets in Redis (layout in the module docstring).

    Args:
      redis: redis-py client (bytes or decoded responses).
      keys: the key layout.
      seed: outlets to seed from (``newsflow.core.sources.SourceTable``), written once with HSETNX
        before the first write; ``None`` seeds nothing.
      clock: UTC epoch seconds (injectable).
      batch: entries per pipelined round trip.
    """

    def __init__(self, redis, keys: Keys = Keys(), seed=None, clock: Callable[[], float] = time.time, batch=1000):
        self.r = redis
        self.keys = keys
        self._seed = seed
        self._seeded = seed is None
        self.clock = clock
        self.batch = max(1, int(batch))

    # ------------------------------------------------------------------ outlets
    def seed_outlets(self, table) -> int:
        """Writes outlet records from a :class:`newsflow.core.sources.SourceTable` without overwriting.

        Rows whose domain is not a registrable domain (``abcnews.go.com``) are skipped: they stay
        suffix entries of the table, not outlets. Returns the number of outlet records created.
        """
        now = self.clock()
        rows = [s for s in table.sources() if outlet_of(s.domain) == s.domain]
        pipe = self.r.pipeline(transaction=False)
        for s in rows:
            pipe.hsetnx(self.keys.source_outlet(s.domain), "authority_source", "seed")
        created = pipe.execute()
        pipe = self.r.pipeline(transaction=False)
        for s, new in zip(rows, created, strict=True):
            if new:
                fields = {"name": s.name, "tier": s.tier, "authority": repr(s.authority), "updated": repr(now)}
                if s.language:
                    fields["language"] = s.language
                pipe.hset(self.keys.source_outlet(s.domain), mapping=fields)
                pipe.sadd(self.keys.source_outlets, s.domain)
        pipe.execute()
        return sum(1 for c in created if c)

    def _ensure_seeded(self) -> None:
        if not self._seeded:
            self.seed_outlets(self._seed)
            self._seeded = True

    def outlet(self, name: str) -> dict:
        """The outlet record of a registrable domain (``{}`` when it has none)."""
        return _decode(self.r.hgetall(self.keys.source_outlet(name)))

    def set_outlet(
        self,
        name: str,
        *,
        display_name: str | None = None,
        tier: str | None = None,
        authority: float | None = None,
        language: str | None = None,
    ) -> dict:
        """Sets an outlet's name, tier, authority or language (``None`` leaves a field as it is).

        An explicit ``authority`` is an override (``authority_source = "override"``); a ``tier``
        without one sets the rubric's authority (:func:`newsflow.core.authority.default_authority`)
        unless the outlet's authority is an override.

        Returns:
          The outlet record after the change.

        Raises:
          ValueError: unknown tier, authority outside [0, 1], or a malformed language code.
        """
        self._ensure_seeded()
        authority = validate_outlet_fields(tier, authority, language)
        key = self.keys.source_outlet(name)
        current = self.outlet(name)
        fields: dict[str, str] = {}
        if display_name is not None:
            fields["name"] = display_name.strip()[:MAX_TITLE]
        if language is not None:
            fields["language"] = language
        if tier is not None:
            fields["tier"] = tier
        if authority is not None:
            fields.update(authority=repr(authority), authority_source="override")
        elif tier is not None and current.get("authority_source") != "override":
            fields.update(authority=repr(default_authority(tier)), authority_source="rubric")
        if fields:
            fields["updated"] = repr(self.clock())
            pipe = self.r.pipeline(transaction=False)
            pipe.hset(key, mapping=fields)
            pipe.sadd(self.keys.source_outlets, name)
            self._log(pipe, "outlet", outlet=name, fields=sorted(fields))
            pipe.execute()
        return self.outlet(name)

    def recompute_authority(self, counts: dict[str, tuple[int, int]]) -> int:
        """Applies the rubric with originality to every outlet record whose authority is not an override.

        Args:
          counts: ``{outlet: (first_reports, copies)}`` (:func:`newsflow.core.authority.originality_counts`);
            outlets not in it keep originality 0.5 (no term).

        Returns:
          Number of outlet records written. Each gets ``authority`` =
          :func:`newsflow.core.authority.default_authority` of its tier and originality, and the fields
          ``first_reports``, ``copies``, ``originality``; ``authority_source`` becomes ``rubric``.
        """
        from newsflow.core.authority import originality

        self._ensure_seeded()
        names = sorted(_s(o) for o in self.r.smembers(self.keys.source_outlets))
        now = repr(self.clock())
        written = 0
        for start in range(0, len(names), self.batch):
            chunk = names[start : start + self.batch]
            pipe = self.r.pipeline(transaction=False)
            for name in chunk:
                pipe.hmget(self.keys.source_outlet(name), "tier", "authority_source")
            pipe_out = pipe.execute()
            pipe = self.r.pipeline(transaction=False)
            for name, (tier, source) in zip(chunk, pipe_out, strict=True):
                if source is not None and _s(source) == "override":
                    continue
                first, copies = counts.get(name, (0, 0))
                o = originality(first, copies)
                fields = {
                    "authority": repr(default_authority(_s(tier) if tier else "", o if first + copies else None)),
                    "authority_source": "rubric",
                    "first_reports": str(first),
                    "copies": str(copies),
                    "originality": repr(round(o, 4)),
                    "updated": now,
                }
                pipe.hset(self.keys.source_outlet(name), mapping=fields)
                written += 1
            pipe.execute()
        pipe = self.r.pipeline(transaction=False)
        self._log(pipe, "authority", outlets=written)
        pipe.execute()
        return written

    def source_table(self, base=None):
        """A :class:`newsflow.core.sources.SourceTable` of the outlet records layered over ``base``.

        Every outlet record with an authority replaces the ``base`` row of the same domain (the seed
        table's subdomain rows such as ``abcnews.go.com`` stay and, being longer suffixes, still win
        for their hosts), so ranking code that takes a SourceTable sees the registry's authority. An outlet
        record with a language but no authority is kept too, with the authority ``base`` gives its domain (else
        :data:`newsflow.core.sources.UNKNOWN_AUTHORITY`), so its language reaches the language step.

        Args:
          base: the table to start from (default: none, only the registry's outlets).
        """
        from newsflow.core.sources import UNKNOWN_AUTHORITY, Source, SourceTable

        rows = {s.domain: s for s in base.sources()} if base is not None else {}
        names = sorted(_s(o) for o in self.r.smembers(self.keys.source_outlets))
        for start in range(0, len(names), self.batch):
            chunk = names[start : start + self.batch]
            pipe = self.r.pipeline(transaction=False)
            for name in chunk:
                pipe.hmget(self.keys.source_outlet(name), "name", "tier", "authority", "language")
            for name, (display, tier, authority, language) in zip(chunk, pipe.execute(), strict=True):
                if authority is None and not language:
                    continue
                old = rows.get(name)
                if authority is None:
                    found = base.lookup(name) if base is not None else None
                    value = found.authority if found is not None else UNKNOWN_AUTHORITY
                else:
                    value = float(_s(authority))
                rows[name] = Source(
                    name,
                    _s(display) if display else (old.name if old else ""),
                    _s(tier) if tier else (old.tier if old else ""),
                    value,
                    _s(language) if language else (old.language if old else ""),
                )
        return SourceTable(rows)

    # ------------------------------------------------------------------ registration
    def register(
        self,
        entries: Iterable[tuple[str, FeedEntry | FeedError]],
        origin: str = "",
        host_check: Callable[[str], tuple[str | None, str | None]] | None = None,
    ) -> Report:
        """Registers feeds; entries already registered are left as they are.

        Args:
          entries: ``(ref, FeedEntry)`` pairs, ``(ref, FeedError)`` for entries a parser refused
            (reported as errors), or ``(ref, FileNote)`` for a repair the parser made (reported as
            ``repaired``); ``ref`` says where an entry came from (``"outline 12"``). A feed listed
            again (the same feed id) is reported ``unchanged``; when this call registered its first
            listing, the categories of the later listings are added to it (an OPML export that lists a
            feed at the top level and again in a folder gives one feed with that folder's category).
          origin: recorded with new feeds (``"import:feeds.opml"``, ``"add"``, ``"api"``).
          host_check: ``url -> (problem, warning)`` run on each URL that passed
            :func:`check_feed_url` (``newsflow.crawler.safety.RegistrationHostCheck`` resolves the
            host): a problem refuses the entry (error ``unsafe_address``), a warning goes into the
            entry's ``detail``.

        Returns:
          A :class:`Report` with one outcome per entry, in input order.
        """
        self._ensure_seeded()
        if not getattr(self, "_indexed", False) and not self.r.exists(self.keys.source_feeds):
            self.r.set(self.keys.source_status_indexed, "1")  # a new registry: every feed is indexed as added
            self._indexed = True
        report = Report()
        seen: dict[str, str] = {}
        added: dict[str, list[str]] = {}  # feeds this call added -> their categories
        chunk: list[tuple[str, FeedEntry | FeedError]] = []
        for item in entries:
            chunk.append(item)
            if len(chunk) >= self.batch:
                self._register_batch(chunk, origin, seen, added, report, host_check)
                chunk = []
        if chunk:
            self._register_batch(chunk, origin, seen, added, report, host_check)
        return report

    def _register_batch(
        self, chunk, origin: str, seen: dict[str, str], added: dict[str, list[str]], report: Report, host_check=None
    ) -> None:
        now = self.clock()
        valid: list[tuple[str, FeedEntry, str, str]] = []
        slots: list[int] = []
        merged: dict[str, list[str]] = {}  # feeds added by an earlier batch whose categories grew here
        for ref, item in chunk:
            if isinstance(item, FeedError):
                report.outcomes.append(Outcome(ref, "", "", "error", str(item)))
                continue
            if isinstance(item, FileNote):
                report.outcomes.append(Outcome(ref, "", "", "repaired", item.message))
                continue
            try:
                if item.kind not in KINDS:
                    raise FeedError("bad_entry", f"kind must be 'feed' or 'sitemap', got {item.kind!r}")
                if item.status not in ("active", "paused"):
                    raise FeedError("bad_entry", f"status must be 'active' or 'paused', got {item.status!r}")
                url = check_feed_url(item.url)
                problem, warning = host_check(url) if host_check else (None, None)
                if problem:
                    raise FeedError("unsafe_address", f"refusing {url[:200]!r}: {problem}")
            except FeedError as e:
                report.outcomes.append(Outcome(ref, str(item.url)[:300], "", "error", str(e)))
                continue
            fid = crawl_task_id(item.kind, url)
            if fid in seen:
                detail = f"same feed as {seen[fid]}"
                extra = self._merge_categories(fid, item, valid, added, merged)
                if extra:
                    detail += f"; its categories added: {', '.join(extra)}"
                report.outcomes.append(Outcome(ref, url, fid, "unchanged", detail))
                continue
            seen[fid] = ref
            slots.append(len(report.outcomes))
            report.outcomes.append(Outcome(ref, url, fid, "pending", warning or ""))
            valid.append((ref, item, url, fid))
        if merged:
            pipe = self.r.pipeline(transaction=False)
            for fid, cats in merged.items():
                pipe.hset(self.keys.source_feed(fid), "categories", json.dumps(cats, ensure_ascii=False))
            pipe.execute()
        if not valid:
            return
        pipe = self.r.pipeline(transaction=False)
        for _, _, _, fid in valid:
            pipe.hget(self.keys.source_feed(fid), "status")
        statuses = pipe.execute()
        outlet_by_url = {url: outlet_of(url) for _, _, url, _ in valid}
        outlets = sorted(set(outlet_by_url.values()))
        pipe = self.r.pipeline(transaction=False)
        for o in outlets:
            pipe.exists(self.keys.source_outlet(o))
        outlet_exists = dict(zip(outlets, pipe.execute(), strict=True))
        restored: list[str] = []
        pipe = self.r.pipeline(transaction=False)
        changed = 0
        for (ref, item, url, fid), status, slot in zip(valid, statuses, slots, strict=True):
            o = outlet_by_url[url]
            if status is None:
                result = "added"
                added[fid] = list(clean_categories(item.categories))
                record = {
                    "url": url,
                    "kind": item.kind,
                    "outlet": o,
                    "title": " ".join(item.title.split())[:MAX_TITLE],
                    "categories": json.dumps(list(clean_categories(item.categories)), ensure_ascii=False),
                    "html_url": item.html_url.strip()[:MAX_URL_LENGTH],
                    "status": item.status,
                    "added": repr(now),
                    "updated": repr(now),
                    "origin": origin[:200],
                }
                pipe.hset(self.keys.source_feed(fid), mapping=record)
                pipe.zadd(self.keys.source_feeds, {fid: now}, nx=True)
                self._index(pipe, fid, now, item.status)
                pipe.sadd(self.keys.source_outlet_feeds(o), fid)
                if not outlet_exists.get(o):
                    pipe.hsetnx(self.keys.source_outlet(o), "authority", repr(default_authority("")))
                    pipe.hsetnx(self.keys.source_outlet(o), "authority_source", "rubric")
                    pipe.sadd(self.keys.source_outlets, o)
                    outlet_exists[o] = 1
                self._apply_status(pipe, fid, item.kind, url, item.status)
            elif _s(status) == "removed":
                result = "restored"
                pipe.hset(self.keys.source_feed(fid), mapping={"status": "active", "updated": repr(now)})
                pipe.hdel(self.keys.source_feed(fid), "removed")
                self._apply_status(pipe, fid, item.kind, url, "active")
                restored.append(fid)
            else:
                report.outcomes[slot] = Outcome(ref, url, fid, "unchanged", f"already registered ({_s(status)})")
                continue
            changed += 1
            report.outcomes[slot] = Outcome(ref, url, fid, result, report.outcomes[slot].detail)
        if changed:
            self._log(pipe, "register", origin=origin[:200], feeds=changed)
            pipe.execute()
        if restored:
            added = self.r.zmscore(self.keys.source_feeds, restored)
            pipe = self.r.pipeline(transaction=False)
            for fid, score in zip(restored, added, strict=True):
                self._index(pipe, fid, float(score or now), "active", "removed")
            pipe.execute()

    @staticmethod
    def _merge_categories(fid: str, item: FeedEntry, valid: list, added: dict, merged: dict) -> list[str]:
        """Adds a repeated listing's new categories to the feed's first listing in this call: to the entry
        still pending in this batch (``valid``), or to ``merged`` when an earlier batch of this call added the
        feed (``added``: feed id -> its categories). Returns the categories added ([] when none, or when the
        feed was registered before this call)."""
        for i, (ref, first, url, vfid) in enumerate(valid):
            if vfid == fid:
                cats = list(clean_categories(first.categories))
                extra = [c for c in clean_categories(item.categories) if c not in cats]
                if extra:
                    valid[i] = (ref, dataclasses.replace(first, categories=tuple(cats + extra)), url, vfid)
                return extra
        if fid not in added:
            return []
        cats = added[fid]
        extra = [c for c in clean_categories(item.categories) if c not in cats]
        if extra:
            cats.extend(extra)
            merged[fid] = list(clean_categories(cats))
        return extra

    def _apply_status(self, pipe, fid: str, kind: str, url: str, status: str) -> None:
        held = self.keys.crawl_held(self.keys.crawl_bucket(host_key(url)))  # the feed's frontier bucket
        if status == "active":
            pipe.srem(held, fid)
            pipe.sadd(
                self.keys.crawl_registrations,
                json.dumps({"kind": kind, "url": url}, sort_keys=True, ensure_ascii=False),
            )
        else:
            pipe.sadd(held, fid)

    def _index(self, pipe, fid: str, added: float, status: str, previous: str | None = None) -> None:
        """Queues the status-index update of a feed now in ``status`` (registered at ``added``), ``previous``
        its status before (``None``: a new feed)."""
        if previous is not None and previous != status:
            pipe.zrem(self.keys.source_status(previous), fid)
        pipe.zadd(self.keys.source_status(status), {fid: added})
        if status == "removed":
            pipe.zrem(self.keys.source_status("listed"), fid)
        else:
            pipe.zadd(self.keys.source_status("listed"), {fid: added})

    def _ensure_indexed(self) -> None:
        """Builds the status index from the feed records when the registry predates it (once)."""
        if getattr(self, "_indexed", False) or self.r.exists(self.keys.source_status_indexed):
            self._indexed = True
            return
        start = 0
        while True:
            chunk = self.r.zrange(self.keys.source_feeds, start, start + self.batch - 1, withscores=True)
            if not chunk:
                break
            pipe = self.r.pipeline(transaction=False)
            for fid, _ in chunk:
                pipe.hget(self.keys.source_feed(_s(fid)), "status")
            statuses = pipe.execute()
            pipe = self.r.pipeline(transaction=False)
            for (fid, added), status in zip(chunk, statuses, strict=True):
                self._index(pipe, _s(fid), float(added), _s(status) if status else "active")
            pipe.execute()
            start += len(chunk)
        self.r.set(self.keys.source_status_indexed, "1")
        self._indexed = True

    def _log(self, pipe, action: str, **fields) -> None:
        pipe.lpush(self.keys.source_log, json.dumps({"time": self.clock(), "action": action, **fields}))
        pipe.ltrim(self.keys.source_log, 0, LOG_CAP - 1)

    # ------------------------------------------------------------------ lookup
    def resolve(self, ref: str) -> list[str]:
        """Feed ids named by ``ref``: a feed id, a feed/sitemap URL, or an outlet (every feed of it).

        Returns:
          Registered feed ids (``[]`` when none matches).
        """
        ref = (ref or "").strip()
        if _FEED_ID_RE.match(ref):
            return [ref] if self.r.exists(self.keys.source_feed(ref)) else []
        if "://" in ref:
            return [f for k in KINDS if self.r.exists(self.keys.source_feed(f := crawl_task_id(k, ref)))]
        name = outlet_of(ref)
        return sorted(_s(f) for f in self.r.smembers(self.keys.source_outlet_feeds(name))) if name else []

    def get(self, feed_id: str) -> dict | None:
        """One feed with its outlet's fields (see :meth:`feeds`), or ``None``."""
        rows = self._load([feed_id])
        return rows[0] if rows else None

    def count(self) -> int:
        """Number of registered feeds, removed ones included."""
        return int(self.r.zcard(self.keys.source_feeds))

    def iter_feeds(self, statuses: Iterable[str] = ("active", "paused")) -> Iterator[dict]:
        """Every feed whose status is in ``statuses``, in registration order, loaded in batches.

        Each dict has ``id``, ``url``, ``kind``, ``outlet``, ``title``, ``categories`` (list),
        ``html_url``, ``status``, ``added``/``updated`` (epoch s, float), ``origin``, ``removed``
        (epoch s of the removal, ``None`` unless removed) and the outlet's
        ``name``, ``tier``, ``authority`` (float or ``None``), ``authority_source``, ``language``.
        """
        wanted = set(statuses)
        start = 0
        while True:
            ids = [_s(f) for f in self.r.zrange(self.keys.source_feeds, start, start + self.batch - 1)]
            if not ids:
                return
            for row in self._load(ids):
                if row["status"] in wanted:
                    yield row
            start += len(ids)

    def page(
        self, statuses: Iterable[str] = ("active", "paused"), offset: int = 0, limit: int = 50, search: str = ""
    ) -> tuple[list[dict], bool]:
        """One page of :meth:`iter_feeds` rows: ``(rows, more)``, ``limit`` rows from the ``offset``-th feed with a
        status in ``statuses`` (registration order), ``more`` when a later one exists.

        The status index (module docstring) orders and filters the feeds (any status, one status, or active and
        paused; another pair of statuses reads the feeds in order until the page is found); only the page's rows
        are loaded. ``search`` keeps the feeds of the outlets whose name contains it (case-insensitive; the
        outlet set is scanned in Redis with ``SSCAN MATCH``, the matches ranked with one ``ZMSCORE``).
        """
        wanted = set(statuses)
        index = None
        if wanted >= set(STATUSES):
            index = self.keys.source_feeds
        elif len(wanted) == 1 or wanted == {"active", "paused"}:
            self._ensure_indexed()
            index = self.keys.source_status("listed" if len(wanted) == 2 else next(iter(wanted)))
        if search:
            glob = "".join("\\" + c if c in "*?[]\\^" else c for c in search.strip().lower())
            names = [_s(o) for o in self.r.sscan_iter(self.keys.source_outlets, match=f"*{glob}*", count=1000)]
            pipe = self.r.pipeline(transaction=False)
            for name in names:
                pipe.smembers(self.keys.source_outlet_feeds(name))
            ids = sorted({_s(f) for members in (pipe.execute() if names else []) for f in members})
            if index is None:
                rows = sorted(
                    (r for r in self._load(ids) if r["status"] in wanted), key=lambda r: (r["added"], r["id"])
                )
                return rows[offset : offset + limit], len(rows) > offset + limit
            scores = self.r.zmscore(index, ids) if ids else []
            ranked = sorted((score, fid) for fid, score in zip(ids, scores, strict=True) if score is not None)
            return self._load([fid for _, fid in ranked[offset : offset + limit]]), len(ranked) > offset + limit
        if index is not None:
            ids = [_s(f) for f in self.r.zrange(index, offset, offset + limit)]
            return self._load(ids[:limit]), len(ids) > limit
        rows = list(itertools.islice(self.iter_feeds(wanted), offset, offset + limit + 1))
        return rows[:limit], len(rows) > limit

    def status_counts(self) -> dict[str, int]:
        """``{status: number of feeds}`` from the status index."""
        self._ensure_indexed()
        pipe = self.r.pipeline(transaction=False)
        for s in STATUSES:
            pipe.zcard(self.keys.source_status(s))
        return dict(zip(STATUSES, (int(n) for n in pipe.execute()), strict=True))

    def crawl_state(self, feed_ids: list[str]) -> dict[str, dict]:
        """The crawl frontier's schedule of each feed id (a feed id is its crawl task id): ``{id: {"due" (epoch s,
        None while leased or never queued), "interval_s", "last_fetch", "last_status", "failures", "errors",
        "backoff_until", "last_error", "fetches", "items"}}``; a feed the frontier has not taken yet is absent."""
        hosts = self.r.hmget(self.keys.crawl_feeds, feed_ids) if feed_ids else []  # locates each task's bucket
        taken = [(fid, _s(h)) for fid, h in zip(feed_ids, hosts, strict=True) if h is not None]
        pipe = self.r.pipeline(transaction=False)
        for fid, host in taken:
            pipe.hgetall(self.keys.crawl_task(host, fid))
        tasks = {fid: _decode(h) for (fid, _), h in zip(taken, pipe.execute() if taken else [], strict=True) if h}
        pipe = self.r.pipeline(transaction=False)
        for fid, h in tasks.items():
            pipe.zscore(self.keys.crawl_queue(h.get("host", "")), fid)
        dues = pipe.execute() if tasks else []
        out = {}
        for (fid, h), due in zip(tasks.items(), dues, strict=True):
            num = {k: float(h[k]) if h.get(k) else None for k in ("interval_s", "last_fetch", "backoff_until")}
            out[fid] = {
                "due": due,
                **num,
                "last_status": h.get("last_status", ""),
                "failures": int(h.get("failures") or 0),
                "errors": int(h.get("errors") or 0),
                "last_error": h.get("last_error", ""),
                "fetches": int(h.get("fetches") or 0),
                "items": int(h.get("items") or 0),
            }
        return out

    def feeds(self, statuses: Iterable[str] = ("active", "paused"), outlet: str | None = None) -> list[dict]:
        """The feeds of :meth:`iter_feeds`, optionally only those of one outlet."""
        if outlet is None:
            return list(self.iter_feeds(statuses))
        wanted = set(statuses)
        ids = self.resolve(outlet) if "://" not in outlet else []
        rows = [r for r in self._load(ids) if r["status"] in wanted]
        return sorted(rows, key=lambda r: (r["added"], r["id"]))

    def _load(self, ids: list[str]) -> list[dict]:
        self._ensure_seeded()  # so a read before any write shows the seed table's outlet fields
        pipe = self.r.pipeline(transaction=False)
        for fid in ids:
            pipe.hgetall(self.keys.source_feed(fid))
        rows = []
        for fid, h in zip(ids, pipe.execute(), strict=True):
            if h:
                rows.append({"id": fid, **_decode(h)})
        outlets = sorted({r.get("outlet", "") for r in rows})
        pipe = self.r.pipeline(transaction=False)
        for o in outlets:
            pipe.hgetall(self.keys.source_outlet(o))
        info = {o: _decode(h) for o, h in zip(outlets, pipe.execute(), strict=True)}
        out = []
        for r in rows:
            o = info.get(r.get("outlet", ""), {})
            authority = o.get("authority")
            out.append(
                {
                    "id": r["id"],
                    "url": r.get("url", ""),
                    "kind": r.get("kind", "feed"),
                    "outlet": r.get("outlet", ""),
                    "title": r.get("title", ""),
                    "categories": json.loads(r.get("categories") or "[]"),
                    "html_url": r.get("html_url", ""),
                    "status": r.get("status", "active"),
                    "added": float(r.get("added") or 0),
                    "updated": float(r.get("updated") or 0),
                    "origin": r.get("origin", ""),
                    "removed": float(r["removed"]) if r.get("removed") else None,
                    "name": o.get("name", ""),
                    "tier": o.get("tier", ""),
                    "authority": float(authority) if authority else None,
                    "authority_source": o.get("authority_source", ""),
                    "language": o.get("language", ""),
                }
            )
        return out

    # ------------------------------------------------------------------ status
    def set_status(self, ref: str, action: str) -> Report:
        """Pauses, resumes or removes the feeds ``ref`` names (see :meth:`resolve`).

        Args:
          ref: feed id, feed URL or outlet.
          action: ``"pause"``, ``"resume"`` or ``"remove"``. Pause: active -> paused. Resume:
            paused or removed -> active (queued again). Remove: active or paused -> removed (the
            record and crawl history are kept). Anything else is ``unchanged``.

        Returns:
          A :class:`Report`; one ``error`` outcome (``not_found``) when nothing matches.

        Raises:
          ValueError: unknown action.
        """
        target = {"pause": "paused", "resume": "active", "remove": "removed"}.get(action)
        if target is None:
            raise ValueError(f"action must be pause, resume or remove, got {action!r}")
        report = Report()
        ids = self.resolve(ref)
        if not ids:
            report.outcomes.append(Outcome(ref, "", "", "error", f"not_found: no registered feed matches {ref!r}"))
            return report
        now = self.clock()
        allowed = {"paused": ("active",), "active": ("paused", "removed"), "removed": ("active", "paused")}[target]
        result = {"paused": "paused", "active": "resumed", "removed": "removed"}[target]
        pipe = self.r.pipeline(transaction=False)
        changed = []
        for row in self._load(ids):
            if row["status"] not in allowed:
                report.outcomes.append(Outcome(ref, row["url"], row["id"], "unchanged", f"already {row['status']}"))
                continue
            fields = {"status": target, "updated": repr(now)}
            if target == "removed":
                fields["removed"] = repr(now)
            else:
                pipe.hdel(self.keys.source_feed(row["id"]), "removed")
            pipe.hset(self.keys.source_feed(row["id"]), mapping=fields)
            self._apply_status(pipe, row["id"], row["kind"], row["url"], target)
            self._index(pipe, row["id"], row["added"], target, row["status"])
            changed.append(row["id"])
            report.outcomes.append(Outcome(ref, row["url"], row["id"], result))
        if changed:
            self._log(pipe, action, feeds=changed[:100], count=len(changed))
            pipe.execute()
        return report
