"""newsflow.serving.resilience without a server: the circuit breaker on an injected clock, and the URL the
app's asyncio client is opened with (parsed back by redis-py's own URL parser)."""

import pytest
import redis
from redis.connection import parse_url

from newsflow.serving.resilience import RedisBreaker, async_url


def test_the_breaker_skips_redis_for_its_window_and_errors_inside_it_do_not_extend_it():
    now = [100.0]
    breaker = RedisBreaker(2.0, clock=lambda: now[0])
    breaker.guard()  # never marked down: Redis is tried
    breaker.mark_down()
    for t in (100.0, 101.0, 101.9):
        now[0] = t
        with pytest.raises(redis.ConnectionError):
            breaker.guard()
        breaker.mark_down()  # what a handler does with the guard's own error
    now[0] = 102.0  # 2 s after the first error, not after the last skipped request
    breaker.guard()
    breaker.mark_down()  # a real error after the window: a new window
    now[0] = 103.9
    with pytest.raises(redis.ConnectionError):
        breaker.guard()
    now[0] = 104.0
    breaker.guard()


@pytest.mark.parametrize(
    "client, want",
    [
        (redis.Redis(unix_socket_path="/tmp/a%b?c d.sock", db=2, password="p@ss:w"), {"path": "/tmp/a%b?c d.sock"}),
        (redis.Redis(host="10.0.0.5", port=6380, username="u", password="a/b"), {"host": "10.0.0.5", "port": 6380}),
        (redis.Redis(), {"host": "localhost", "port": 6379}),
    ],
)
def test_async_url_names_the_clients_server_db_and_credentials(client, want):
    kw = client.connection_pool.connection_kwargs
    parsed = parse_url(async_url(client))
    assert {k: parsed[k] for k in want} == want
    assert parsed.get("db", 0) == kw.get("db", 0)
    assert (parsed.get("username"), parsed.get("password")) == (kw.get("username"), kw.get("password"))


def test_async_url_is_none_for_a_client_without_one():
    class Custom(redis.Connection):
        pass

    assert async_url(redis.Redis(connection_pool=redis.ConnectionPool(connection_class=Custom))) is None
    assert async_url(redis.Redis(ssl=True)) is None
    assert async_url(object()) is None
