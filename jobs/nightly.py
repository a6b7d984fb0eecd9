"""The nightly learning loop for one date, in order, under a lock (``newsflow nightly`` and the Flex
Template entry :mod:`newsflow.jobs.nightly_template` run it; the steps are in :func:`run_night`).

1. take the lock ``Keys.nightly_lock(D)`` (``SET NX PX`` with a random token): a second scheduler
   for the same date gets status ``locked`` and runs nothing;
2. move the reader-event stream into ``<output>/events/date=*/`` (exactly once, see
   :func:`newsflow.storage.events.flush_events`);
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
7. release the lock (only if it still holds this run's token), whatever happened.

A job that fails leaves the previous night's models serving.
"""

from __future__ import annotations

import logging
import secrets
import time

from newsflow.runtime.settings import Settings

MODELS = ("decay", "weights", "interest", "history", "cluster", "covisit")
STEPS = ("all", "flush", "switch")
log = logging.getLogger("newsflow.jobs.nightly")

_RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


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
    lock_ttl: float = 6 * 3600.0,
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
      lock_ttl: seconds.
      step: ``"all"``, or only ``"flush"`` / ``"switch"`` (see ``--step``).
      retention_days: expire state older than the end of ``date`` minus this many days (``None``: keep).

    Returns:
      The JSON-ready summary; ``status`` is ``ok``, ``failed`` or ``locked``.
    """
    from newsflow.pipelines.launcher import launch, summary
    from newsflow.storage.events import flush_events
    from newsflow.storage.models import ModelStore

    keys = settings.keys
    started = time.monotonic()
    out: dict = {"date": date, "step": step, "status": "failed", "events_flushed": 0, "jobs": [], "models": {}}
    out["error"] = ""
    lock, token = keys.nightly_lock(date), secrets.token_hex(16)
    if not client.set(lock, token, nx=True, px=int(lock_ttl * 1000)):
        out.update(status="locked", error=f"another nightly run holds {lock}")
        out["seconds"] = round(time.monotonic() - started, 3)
        return out
    try:
        while step in ("all", "flush"):
            n, _ = flush_events(client, f"{output.rstrip('/')}/events", keys=keys)
            out["events_flushed"] += n
            if n == 0:
                break
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
            t0 = time.monotonic()
            launched = launch(spec, argv)
            s = summary(launched)
            s["seconds"] = round(time.monotonic() - t0, 3)
            out["jobs"].append(s)
            if launched.state != "DONE":
                raise RuntimeError(f"job {spec.name} ended in state {launched.state}")
        if step in ("all", "switch"):
            out.update(switch_models(ModelStore(client, keys), date, force=step == "switch"))
        if step == "all":
            out["authority"] = _recompute_authority(client, keys, date)
        if step == "all" and retention_days is not None:
            from newsflow.storage.retention import expire

            out["retention"] = expire(client, _end_of(date) - float(retention_days) * 86400.0, keys)
        out["status"] = "ok"
    except Exception as e:  # noqa: BLE001 - any failure is reported in the summary and the exit code
        log.exception("nightly run for %s failed", date)
        out["error"] = f"{type(e).__name__}: {e}"
    finally:
        client.eval(_RELEASE_SCRIPT, 1, lock, token)
    out["seconds"] = round(time.monotonic() - started, 3)
    return out
