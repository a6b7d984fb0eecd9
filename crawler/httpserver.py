"""A small threaded HTTP/1.1 server on 127.0.0.1 for ``replay-web`` (:mod:`newsflow.crawler.replay`) and tests.

The push endpoint does not use it: ``newsflow push-server`` serves the Starlette
app of :func:`newsflow.crawler.push.create_app` with uvicorn.

Handlers are plain functions ``handler(request) -> Response``; a response body
may be bytes or an iterable of ``(delay_s, bytes)`` chunks (to serve slow or
endless responses). Every request is logged with its start and end time
(monotonic seconds), so tests can check politeness (no overlapping requests
to one host, gaps between them).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Request:
    """An incoming request: ``method``, ``path`` (with query), ``host`` (Host header, lower case),
    ``headers``, ``body``."""

    method: str
    path: str
    host: str
    headers: dict
    body: bytes = b""


@dataclass
class Response:
    """A response: status, headers, and bytes or an iterable of ``(delay_s, chunk)``."""

    status: int = 200
    headers: dict = field(default_factory=dict)
    body: bytes | Iterable = b""


@dataclass
class LogEntry:
    """One served request: host, path, start/end (``time.monotonic()``), status."""

    host: str
    path: str
    start: float
    end: float
    status: int
    headers: dict


class HttpServer:
    """Threaded HTTP server bound to ``host:port`` (port 0 = a free port).

    Args:
      handler: ``handler(Request) -> Response``.
      host: bind address (127.0.0.1 by default).
      port: TCP port, 0 for any free port.
    """

    def __init__(self, handler: Callable[[Request], Response], host: str = "127.0.0.1", port: int = 0):
        self.handler = handler
        self.log: list[LogEntry] = []
        self._lock = threading.Lock()
        outer = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # TCP_NODELAY: the status line + headers and the body are separate writes; with Nagle's
            # algorithm a small body waited for the client's delayed ACK (~40 ms per small response on
            # Linux loopback: robots.txt, feeds, 304s), a latency no real server adds.
            disable_nagle_algorithm = True

            def log_message(self, *a):  # quiet
                pass

            def _serve(self):
                start = time.monotonic()
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, 20_000_000)) if length else b""
                req = Request(
                    self.command,
                    self.path,
                    (self.headers.get("Host") or "").lower(),
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                try:
                    resp = outer.handler(req)
                except Exception as e:  # a handler bug becomes a 500, the server keeps running
                    resp = Response(500, {"Content-Type": "text/plain"}, f"handler error: {e}".encode())
                status = resp.status
                try:
                    self.send_response(status)
                    chunked = not isinstance(resp.body, (bytes, bytearray))
                    for k, v in resp.headers.items():
                        self.send_header(k, v)
                    if chunked:
                        self.send_header("Transfer-Encoding", "chunked")
                    else:
                        self.send_header("Content-Length", str(len(resp.body)))
                    self.end_headers()
                    if self.command != "HEAD":
                        if chunked:
                            for delay, chunk in resp.body:
                                if delay:
                                    time.sleep(delay)
                                if chunk:
                                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                                    self.wfile.flush()
                            self.wfile.write(b"0\r\n\r\n")
                        else:
                            self.wfile.write(resp.body)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True
                finally:
                    with outer._lock:
                        outer.log.append(LogEntry(req.host, req.path, start, time.monotonic(), status, req.headers))

            do_GET = do_POST = do_HEAD = _serve

        class _Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):  # client went away mid-response: not an error
                pass

        self._server = _Server((host, port), _H)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound TCP port."""
        return self._server.server_address[1]

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://{self._server.server_address[0]}:{self.port}"

    def start(self) -> HttpServer:
        """Serves in a daemon thread; returns self."""
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops serving and closes the socket."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
