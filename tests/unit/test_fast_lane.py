"""The fast lane's guard (``--fast-lane``, tests/conftest.py), run in-process on a small suite with this
repository's conftest: a test that starts a process or opens a listening socket fails, even when it catches
the error; a pure test passes; without the flag nothing is refused."""

from __future__ import annotations

import os

import pytest

CONFTEST = os.path.join(os.path.dirname(os.path.dirname(__file__)), "conftest.py")

SUITE = """
import multiprocessing
import os
import socket
import subprocess


def test_pure():
    assert sum(range(4)) == 6


def test_subprocess():
    subprocess.run(["true"], check=True)


def test_subprocess_error_swallowed():
    try:
        subprocess.Popen(["true"]).wait()
    except Exception:
        pass


def test_fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


def test_multiprocessing():
    p = multiprocessing.get_context("spawn").Process(target=print)
    p.start()
    p.join()


def test_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    with open(CONFTEST) as f:
        pytester.makeconftest(f.read())
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_the_fast_lane_fails_every_process_start_and_server(suite):
    result = suite.runpytest("--fast-lane", "-p", "no:cacheprovider")
    outcomes = {
        r.nodeid.split("::")[1]: r.outcome
        for r in result.reprec.getreports("pytest_runtest_logreport")
        if r.when == "call"
    }
    assert outcomes == {
        "test_pure": "passed",
        "test_subprocess": "failed",
        "test_subprocess_error_swallowed": "failed",
        "test_fork": "failed",
        "test_multiprocessing": "failed",
        "test_server": "failed",
    }
    result.stdout.fnmatch_lines(["*--fast-lane: this test starts a subprocess*"])


def test_without_the_flag_nothing_is_refused(suite, request):
    if request.config.getoption("--fast-lane"):
        pytest.skip("this run's own --fast-lane guard is active in this process")
    result = suite.runpytest("-p", "no:cacheprovider", "-k", "pure or server")
    result.assert_outcomes(passed=2)
