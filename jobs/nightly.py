"""The nightly learning loop for one date, in order, under a lease (``newsflow nightly`` and the Flex
Template entry :mod:`newsflow.jobs.nightly_template` run it; the steps are in :func:`run_night`).

1. take the lease ``Keys.nightly_lock(D)`` (:class:`newsflow.storage.lease.Lease`: ``SET NX PX`` with a
   random token, ``lock_ttl`` ≤ 60 s, renewed by its owner every ``lock_ttl / 3`` s): a second scheduler
   for the same date gets status ``locked`` and runs nothing; a run killed anywhere (``kill -9``, OOM,
   preemption) stops renewing, so the next run can take the date at most ``lock_ttl`` seconds later
   and, every step being idempotent per date, leaves the outputs of one clean run;
2. move the reader-event stream into ``<output>/events/date=*/`` (exactly once, see
   :func:`newsflow.storage.events.flush_events`), then quarantine every events file of the jobs'
   windows that does not read whole (dead letter naming the file and the reason;
   :func:`newsflow.jobs.nightly_common.quarantine_unreadable`), so the jobs run on the rest, and drop the
   events of deleted accounts from those windows (:func:`newsflow.storage.tombstones.purge_deleted_events`);
3. run the Beam batch jobs in dependency order on the shared launcher (same flags as the
   streaming job; DirectRunner by default): ``snapshot_stories`` -> ``decay_rates`` ->
   ``interest_vectors`` -> ``ranking_weights`` (each replaces its date's Parquet and Redis version);
4. switch every model to version ``D`` in one transaction
   (:meth:`newsflow.storage.models.ModelStore.switch`; the previous version stays for rollback,
   older ones are pruned), unless ``D`` is older than the models serving (a backfill: outputs written,
   serving unchanged; :func:`switch_models`);
5. recompute outlet authority from the rubric and the near-duplicate groups (the sources registry,
   :meth:`newsflow.storage.source_registry.SourceRegistry.recompute_authority`; manual overrides kept);
6. with ``retention_days``, expire stories, groups and articles older than the end of ``D`` minus
   that many days (:func:`newsflow.storage.retention.expire`);
7. release the lease (only if it still holds this run's token), whatever happened.

Writes are fenced: before the flush, each job, the switch, the authority and the retention step the run
checks-and-renews its lease in one script (:meth:`~newsflow.storage.lease.Lease.check`), and a run whose
lease was lost (it expired while the process was paused, and another run may hold the date) stops with
status ``failed`` before writing more. A job that fails leaves the previous night's models serving.
"""

from __future__ import annotations

import logging
import time

from newsflow.runtime.settings import Settings

MODELS = ("decay", "weights", "interest", "history", "cluster", "covisit")
STEPS = ("all", "flush", "switch")
log = logging.getLogger("newsflow.jobs.nightly")


def _jobs():
    import newsflow.jobs.decay_rates
    import newsflow.jobs.interest_vectors
    import newsflow.jobs.ranking_weights
    import newsflow.jobs.snapshot_stories

    return (
        newsflow.jobs.snapshot_stories.SPEC,
        newsflow.jobs.decay_rates.SPEC,
        newsflow.jobs.interest_vectors.SPEC,
        newsflow.jobs.ranking_weights.SPEC,
    )


def _end_of(date: str) -> float:
    """The end of ``date`` (next midnight UTC), epoch seconds: the night's own clock."""
    import datetime as dt

    return (dt.datetime.fromisoformat(date).replace(tzinfo=dt.UTC) + dt.timedelta(days=1)).timestamp()


def _recompute_authority(client, keys, date: str) -> dict:
    """Step 5: outlet authority from the rubric and originality (the ``newsflow sources authority`` step).

    The registry's ``updated`` and log times are the end of ``date``, not the wall clock, so a rerun of
    the night (or the same night on another runner) writes the same values."""
    from newsflow.core.authority import originality_counts, read_near_duplicate_groups
    from newsflow.core.sources import SourceTable
    from newsflow.storage.source_registry import SourceRegistry

    groups = list(read_near_duplicate_groups(client, keys))
    counts = originality_counts(groups)
    registry = SourceRegistry(client, keys, seed=SourceTable.load(), clock=lambda: _end_of(date))
    written = registry.recompute_authority(counts)
    return {"groups": len(groups), "outlets_counted": len(counts), "outlets_written": written}


def switch_models(models, date: str, force: bool = False) -> dict:
    """Step 4: serves the models of ``date`` and prunes old versions, unless ``date`` is a backfill.

    A backfill is a date older than a model's current version (``YYYY-MM-DD`` strings compare as
    dates): its Parquet and Redis versions are written, but serving keeps the newer night's models
    and nothing is pruned, so a ``--date`` backfill never moves serving back in time or deletes the
    newest night. ``force`` (``newsflow nightly --step switch --date D``: an operator asking for that
    night) switches to ``date`` whatever its age.

    Args:
      models: a :class:`newsflow.storage.models.ModelStore`.
      date: ``YYYY-MM-DD``.
      force: switch even to an older night.

    Returns:
      ``{"models": current pointers after the step, "switched": bool, "pruned": {name: [versions]}}``
      plus ``"backfill"`` (a sentence naming the newer versions) when nothing was switched.

    Raises:
      ValueError: a model without a stored version for ``date`` (nothing switched), from
      :meth:`~newsflow.storage.models.ModelStore.switch`.
    """
    current = models.current()
    newer = {name: current[name] for name in MODELS if current.get(name, "") > date}
    if newer and not force:
        versions = ", ".join(f"{n} {v}" for n, v in sorted(newer.items()))
        return {
            "models": current,
            "switched": False,
            "pruned": {},
            "backfill": f"{date} is older than the models serving ({versions}): its outputs are written, "
            f"serving is unchanged; 'newsflow nightly --date {date} --step switch' serves them",
        }
    switched = models.switch({name: date for name in MODELS})
    return {"models": switched, "switched": True, "pruned": {name: models.prune(name) for name in MODELS}}


def run_night(
    client,
    settings: Settings,
    date: str,
    output: str,
    beam_args: list[str] | None = None,
    history_days: int = 28,
    decay_days: int = 7,
    lock_ttl: float = 60.0,
    step: str = "all",
    retention_days: float | None = None,
) -> dict:
    """Runs one night (steps in the module docstring) and returns the summary dict.

    Args:
      client: ``redis.Redis`` client of the serving Redis.
      settings: resolved settings (key prefix; ``redis_url`` handed to the jobs).
      date: ``YYYY-MM-DD``.
      output: Parquet root.
      beam_args: extra Beam flags for every job.
      history_days / decay_days: event windows of the jobs.
      lock_ttl: seconds the lease lives without a renewal, in (0, 60].
      step: ``"all"``, or only ``"flush"`` / ``"switch"`` (see ``--step``).
      retention_days: expire state older than the end of ``date`` minus this many days (``None``: keep).

    Returns:
      The JSON-ready summary; ``status`` is ``ok``, ``failed`` or ``locked``; ``quarantined`` lists the
      events files moved aside (``file``, ``quarantined_to``, ``error``).

    Raises:
      ValueError: ``lock_ttl`` out of range.
    """
    from newsflow.jobs.nightly_common import NightlyConfig, quarantine_unreadable
    from newsflow.pipelines.launcher import counters, launch, summary
    from newsflow.storage.events import flush_events
    from newsflow.storage.lease import Lease
    from newsflow.storage.models import ModelStore
    from newsflow.storage.tombstones import purge_deleted_events

    keys = settings.keys
    started = time.monotonic()
    out: dict = {"date": date, "step": step, "status": "failed", "events_flushed": 0, "jobs": [], "models": {}}
    out.update(quarantined=[], error="")
    lease = Lease(client, keys.nightly_lock(date), lock_ttl)
    if not lease.acquire():
        out.update(status="locked", error=f"another nightly run holds {lease.key}")
        out["seconds"] = round(time.monotonic() - started, 3)
        return out
    try:
        while step in ("all", "flush"):
            lease.check()
            n, _ = flush_events(client, f"{output.rstrip('/')}/events", keys=keys)
            out["events_flushed"] += n
            if n == 0:
                break
        if step in ("all", "flush"):
            window = NightlyConfig(date, output, None, settings.key_prefix).dates(max(history_days, decay_days))
            out["quarantined"] = quarantine_unreadable(output, "events", window)
            # deleted accounts' events never reach a job (newsflow.storage.tombstones)
            out["deleted_reader_events"] = purge_deleted_events(client, f"{output.rstrip('/')}/events", keys, window)
            for q in out["quarantined"]:
                log.error("quarantined unreadable events file %s -> %s: %s", q["file"], q["quarantined_to"], q["error"])
        argv = [
            "--date",
            date,
            "--output",
            output,
            "--history_days",
            str(history_days),
            "--decay_days",
            str(decay_days),
            "--key_prefix",
            settings.key_prefix,
            "--data_dir",
            settings.data_dir,
        ]
        if settings.redis_url:
            argv += ["--redis_url", settings.redis_url]
        argv += list(beam_args or [])
        for spec in _jobs() if step == "all" else ():
            lease.check()
            t0 = time.monotonic()
            launched = launch(spec, argv)
            s = summary(launched)
            c = counters(launched.result)
            if c is not None and spec.name != "snapshot_stories":  # events readers: rows refused as future-dated
                s["future_events_refused"] = c.get("future_events_refused", 0)
            s["seconds"] = round(time.monotonic() - t0, 3)
            out["jobs"].append(s)
            if launched.state != "DONE":
                raise RuntimeError(f"job {spec.name} ended in state {launched.state}")
        if step in ("all", "switch"):
            lease.check()
            out.update(switch_models(ModelStore(client, keys), date, force=step == "switch"))
        if step == "all":
            lease.check()
            out["authority"] = _recompute_authority(client, keys, date)
        if step == "all" and retention_days is not None:
            from newsflow.storage.retention import expire

            lease.check()
            out["retention"] = expire(client, _end_of(date) - float(retention_days) * 86400.0, keys)
        out["status"] = "ok"
    except Exception as e:  # noqa: BLE001 - any failure is reported in the summary and the exit code
        log.exception("nightly run for %s failed", date)
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        lease.release()
    out["seconds"] = round(time.monotonic() - started, 3)
    return out
