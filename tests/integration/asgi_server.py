"""Runs an ASGI app on a real uvicorn server on 127.0.0.1 in a background thread (for tests)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator


@contextlib.contextmanager
def serve_in_thread(app, *, lifespan: str = "auto", start_timeout: float = 10.0) -> Iterator[int]:
    """Starts ``app`` on an ephemeral port of 127.0.0.1 and yields the port; stops it on exit.

    Raises:
      RuntimeError: the server did not start within ``start_timeout`` seconds.
    """
    import uvicorn

    # as `newsflow serve`: forwarded headers are the app's to believe (ServingConfig.trusted_proxies), not uvicorn's
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="error", lifespan=lifespan, proxy_headers=False)
    srv = uvicorn.Server(config)
    t = threading.Thread(target=srv.run, daemon=True)
    t.start()
    deadline = time.time() + start_timeout
    while not srv.started and time.time() < deadline:
        time.sleep(0.02)
    if not srv.started:
        srv.should_exit = True
        raise RuntimeError("uvicorn did not start")
    try:
        yield srv.servers[0].sockets[0].getsockname()[1]
    finally:
        srv.should_exit = True
        t.join(5)
