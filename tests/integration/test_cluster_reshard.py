"""A reshard of a real three-master Redis Cluster while the streaming job writes (the bundled redis-server).

``redis-cli --cluster reshard`` moves 1,000 slots between two masters (``MIGRATE`` key by key, ``CLUSTER
SETSLOT``) while the job runs on 150 headlines; clients meet ``ASK``, ``MOVED`` and ``TRYAGAIN`` replies, which
redis-py's cluster client follows or retries. The job must finish without an error and leave exactly the keys
and values of the same run on one server.
"""

from __future__ import annotations

import subprocess
import threading
import time

import pytest
import redis

from newsflow.pipelines.streaming import run
from newsflow.runtime.redis_conn import connect
from newsflow.storage.keys import Keys
from tests.helpers import redis_state, single_server_state, state_difference, write_headlines
from tests.integration.redis_cluster import _bin

N_HEADLINES = 150
SLOTS = 1000


def _node_ids(ports: list[int]) -> list[str]:
    return [redis.Redis(port=p).execute_command("CLUSTER", "MYID").decode() for p in ports]


def _reshard(port: int, src: str, dst: str) -> subprocess.CompletedProcess:
    cmd = [_bin("redis-cli"), "--cluster", "reshard", f"127.0.0.1:{port}"]
    cmd += ["--cluster-from", src, "--cluster-to", dst, "--cluster-slots", str(SLOTS), "--cluster-yes"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _slots_of(port: int) -> int:
    info = redis.Redis(port=port).execute_command("CLUSTER", "NODES").decode()
    myself = next(line for line in info.splitlines() if "myself" in line)
    n = 0
    for part in myself.split()[8:]:
        lo, _, hi = part.partition("-")
        n += (int(hi) if hi else int(lo)) - int(lo) + 1
    return n


@pytest.mark.slow
def test_moving_1000_slots_while_the_job_writes_surfaces_no_error_and_changes_no_state(tmp_path, cluster, redis_server):
    url, ports = cluster
    client = connect(url)
    client.flushall(target_nodes=client.PRIMARIES)
    landing = write_headlines(tmp_path / "headlines.jsonl", N_HEADLINES)
    src, dst = _node_ids(ports)[:2]
    before = [_slots_of(p) for p in ports]
    keys = Keys()
    moves: list[tuple[float, float, int]] = []  # (start, end, returncode) of each reshard
    done = threading.Event()

    def reshard_while_the_job_runs() -> None:
        probe = redis.RedisCluster(host="127.0.0.1", port=ports[0])
        while not done.is_set() and not probe.exists(keys.nd_count):  # the job has started writing
            time.sleep(0.05)
        a, b = src, dst
        while not done.is_set():
            start = time.monotonic()
            out = _reshard(ports[0], a, b)
            moves.append((start, time.monotonic(), out.returncode))
            assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
            a, b = b, a  # and back again while the job still runs

    mover = threading.Thread(target=reshard_while_the_job_runs, daemon=True)
    mover.start()
    argv = ["--runner", "DirectRunner", "--input", landing, "--redis_url", url, "--output", str(tmp_path / "c")]
    try:
        assert run(argv, environ={}).state == "DONE"
        job_end = time.monotonic()
    finally:
        done.set()
        mover.join(timeout=300)
    assert moves and all(rc == 0 for *_, rc in moves), moves
    assert moves[0][1] < job_end, "no reshard finished while the job was writing"
    after = [_slots_of(p) for p in ports]
    assert sum(after) == 16384 and (len(moves) % 2 == 0 or after[0] == before[0] - SLOTS), (before, after)
    on_cluster = redis_state(client)

    on_one = single_server_state(redis_server, landing, tmp_path / "s")
    assert on_cluster == on_one, state_difference(on_cluster, on_one)
