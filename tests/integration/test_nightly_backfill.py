"""A ``newsflow nightly --date`` backfill never moves serving back in time or deletes the newest night.

Real embedded Redis; model versions written as the nightly jobs write them (``ModelStore.write``), the
switch step as ``run_night`` runs it (:func:`newsflow.jobs.nightly.switch_models`). Before the fix, nights
2026-11-30, 1999-01-01, 1998-01-01 left every model serving 1998-01-01 with 2026-11-30 pruned.
"""

from __future__ import annotations

from newsflow.jobs.nightly import MODELS, switch_models
from newsflow.storage.keys import Keys
from newsflow.storage.models import ModelStore

KEYS = Keys()


def _write_night(models: ModelStore, date: str) -> None:
    for name in MODELS:
        models.write(name, date, {"night": date})


def _stored(client, date: str) -> list[str]:
    models = ModelStore(client, KEYS)
    return [name for name in MODELS if (models.manifest(name, date) or {}).get("state") == "ready"]


def test_backfill_keeps_serving_the_newest_night_and_prunes_nothing(redis_server):
    client, _ = redis_server
    models = ModelStore(client, KEYS)
    for date in ("2026-11-29", "2026-11-30"):
        _write_night(models, date)
        out = switch_models(models, date)
        assert out["switched"] is True and set(out["models"].values()) == {date}
    assert set(models.previous().values()) == {"2026-11-29"}

    for old in ("1999-01-01", "1998-01-01"):  # backfills, newest first then older
        _write_night(models, old)
        out = switch_models(models, old)
        assert out["switched"] is False and out["pruned"] == {}
        assert "2026-11-30" in out["backfill"] and f"--date {old} --step switch" in out["backfill"]
        assert set(models.current().values()) == {"2026-11-30"}
        assert set(models.previous().values()) == {"2026-11-29"}
        assert _stored(client, old) == list(MODELS)  # the backfilled outputs are kept, not served
    assert client.hget(KEYS.model("weights", "2026-11-30"), "night") == b"2026-11-30"

    # the next regular night (a rerun of the newest date here) switches and prunes the backfills
    out = switch_models(models, "2026-11-30")
    assert out["switched"] is True
    assert out["pruned"] == {name: ["1998-01-01", "1999-01-01"] for name in MODELS}
    assert set(models.previous().values()) == {"2026-11-29"}

    # an operator's explicit --step switch to an older night is obeyed
    out = switch_models(models, "2026-11-29", force=True)
    assert out["switched"] is True and set(models.current().values()) == {"2026-11-29"}
    assert set(models.previous().values()) == {"2026-11-30"}
