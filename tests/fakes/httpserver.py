"""The HTTP scaffolding every fake server in tests/fakes shares: a threaded server on 127.0.0.1 (a free
port unless one is asked for) that tracks its connections, so ``stop`` can close idle keep-alive ones
and join every thread; the start/stop/context-manager lifecycle; and writing one response.

- ``LoopbackService``: subclass it, set ``handler`` (a ``QuietHandler`` subclass) and implement
  ``handle(h)``; every request of every method lands there. ``FaultProxy`` (faultproxy.py) is one.
- ``FakeServer``: a ``LoopbackService`` with routing, fault injection and a request log, for fakes of
  JSON APIs (``DockerHubFake``, ``GitHubFake``).
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
import traceback
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A loopback port nobody listens on (bound and closed again), for a server that cannot take port 0."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return sock.getsockname()[1]


def reply(h: BaseHTTPRequestHandler, status: int, payload: bytes = b"", headers: dict[str, str] | None = None) -> int:
    """Write one response (status line, Date, ``headers``, Content-Length, body unless HEAD/204/304).

    Returns the body bytes written."""
    h.send_response_only(status)
    h.send_header("Date", h.date_time_string())
    for key, value in (headers or {}).items():
        h.send_header(key, value)
    has_body = status >= 200 and status not in (204, 304)
    if has_body:
        h.send_header("Content-Length", str(len(payload)))
    h.end_headers()
    if has_body and h.command != "HEAD":
        h.wfile.write(payload)
        return len(payload)
    return 0


def reply_json(h: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None) -> int:
    return reply(h, status, json.dumps(body).encode(), {"Content-Type": "application/json", **(headers or {})})


class QuietHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 keep-alive, no access log; every method goes to the owning service's ``handle``."""

    protocol_version = "HTTP/1.1"
    timeout = 30  # an idle keep-alive connection is dropped after this (bounds the handler threads)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        self.server.service.handle(self)  # type: ignore[attr-defined]

    do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _handle


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, service: LoopbackService, port: int):
        self.service = service
        self._track = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._conn_threads: set[threading.Thread] = set()
        super().__init__((LOOPBACK, port), service.handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self._run, args=(request, client_address), daemon=True,
                                  name=f"{type(self.service).__name__}-conn")
        with self._track:
            self._sockets.add(request)
            self._conn_threads.add(thread)
        thread.start()

    def _run(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except self.service.quiet_errors:
            pass  # a client going away mid-request is not the service's error
        except Exception:
            self.service.errors.append(traceback.format_exc())
        finally:
            self.shutdown_request(request)
            with self._track:
                self._sockets.discard(request)
                self._conn_threads.discard(threading.current_thread())

    def close_connections(self) -> list[threading.Thread]:
        with self._track:
            sockets, threads = list(self._sockets), list(self._conn_threads)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        return threads


class LoopbackService:
    """Lifecycle of a threaded HTTP server on 127.0.0.1: ``start``/``stop`` or ``with``; ``url``, ``host``."""

    handler: type[BaseHTTPRequestHandler] = QuietHandler
    quiet_errors: tuple[type[BaseException], ...] = (Exception,)   # connection errors not worth reporting
    join_timeout = 5.0

    def __init__(self, port: int = 0) -> None:
        self.url = ""                 # "http://127.0.0.1:<port>"
        self.host = ""                # "127.0.0.1:<port>"
        self.errors: list[str] = []   # tracebacks of crashes inside the service (a test asserts it is empty)
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def handle(self, h: BaseHTTPRequestHandler) -> None:
        raise NotImplementedError

    def start(self) -> Any:
        if self._server is not None:
            return self
        self._server = _Server(self, self._port)
        host, port = self._server.server_address[:2]
        self.host, self.url = f"{host}:{port}", f"http://{host}:{port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True, name=f"{type(self).__name__}-serve")
        self._thread.start()
        return self

    def _wake(self) -> None:
        """Hook: unblock handlers waiting on something else than their client (called during ``stop``)."""

    def stop(self) -> list[threading.Thread]:
        """Stop accepting, close every connection, join the threads; returns those still alive."""
        server, self._server = self._server, None
        if server is None:
            return []
        server.shutdown()                          # no new connections
        server.server_close()
        threads = server.close_connections()       # idle keep-alive readers see EOF
        self._wake()
        for thread in threads:
            thread.join(timeout=self.join_timeout)
        if self._thread is not None:
            self._thread.join(timeout=self.join_timeout)
            self._thread = None
        return [t for t in threads if t.is_alive()]

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# ----------------------------------------------------------------------------------------------
# Fakes of JSON APIs: routing, faults, a request log
# ----------------------------------------------------------------------------------------------


class RequestRecord(NamedTuple):
    """One served request: ``path`` is the request target as sent (query string included), ``time`` is
    ``time.monotonic()`` when the request arrived (so gaps between records measure a client's pacing)."""
    method: str
    path: str
    status: int
    time: float


@dataclass
class Request:
    method: str
    target: str                      # as sent, with the query string
    path: str                        # without the query string, still percent-encoded
    query: dict[str, list[str]]
    headers: Any                     # http.client.HTTPMessage (case-insensitive .get)
    body: bytes

    def arg(self, name: str, default: str | None = None) -> str | None:
        values = self.query.get(name)
        return values[0] if values else default

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8")) if self.body else None


@dataclass
class Response:
    status: int
    body: Any = None                 # dict / list (sent as JSON), bytes, or None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class _Fault:
    pattern: re.Pattern[str]
    status: int
    headers: dict[str, str]
    remaining: int
    body: Any
    method: str | None


class FakeServer(LoopbackService):
    """A threaded HTTP server on 127.0.0.1 (free port) with routing, fault injection and a request log.

    Subclasses add routes with ``self.route(method, regex, handler)``; the regex is matched against the
    percent-encoded path and its groups are passed percent-decoded to ``handler(request, *groups)``,
    which returns a ``Response``.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.RLock()
        self._log: list[RequestRecord] = []
        self._faults: list[_Fault] = []
        self._routes: list[tuple[str, re.Pattern[str], Callable[..., Response]]] = []

    # -- knobs -------------------------------------------------------------------------------

    def fail_next(self, path_regex: str, status: int, headers: dict[str, str] | None = None, count: int = 1,
                  body: Any = None, method: str | None = None) -> None:
        """Answer the next ``count`` requests whose target (path and query) matches ``path_regex``
        (``re.search``; and ``method``, if given) with ``status``, ``headers`` and ``body`` (default: the
        fake's usual error JSON), before any authentication or routing, as an edge proxy would."""
        with self._lock:
            self._faults.append(_Fault(re.compile(path_regex), status, dict(headers or {}), count, body,
                                       method.upper() if method else None))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    @property
    def requests(self) -> list[RequestRecord]:
        """A snapshot of the request log: (method, path-with-query, status, monotonic arrival time)."""
        with self._lock:
            return list(self._log)

    def clear_requests(self) -> None:
        with self._lock:
            self._log.clear()

    # -- plumbing ----------------------------------------------------------------------------

    def route(self, method: str, pattern: str, handler: Callable[..., Response]) -> None:
        self._routes.append((method.upper(), re.compile(pattern), handler))

    def error_body(self, status: int, message: str) -> Any:
        """The JSON body this API sends with an error; subclasses use their API's shape."""
        return {"message": message}

    def default_headers(self, request: Request, response: Response) -> dict[str, str]:
        return {}

    def _take_fault(self, request: Request) -> Response | None:
        with self._lock:
            for fault in self._faults:
                if fault.remaining > 0 and (fault.method is None or fault.method == request.method) \
                        and fault.pattern.search(request.target):
                    fault.remaining -= 1
                    if fault.remaining == 0:
                        self._faults.remove(fault)
                    body = fault.body if fault.body is not None else self.error_body(
                        fault.status, http.client.responses.get(fault.status, "Error"))
                    return Response(fault.status, body, dict(fault.headers))
        return None

    def _dispatch(self, request: Request) -> Response:
        allowed = False
        for method, pattern, handler in self._routes:
            match = pattern.fullmatch(request.path)
            if match is None:
                continue
            if method != request.method and not (request.method == "HEAD" and method == "GET"):
                allowed = True
                continue
            groups = [urllib.parse.unquote(g) if g is not None else None for g in match.groups()]
            return handler(request, *groups)
        if allowed:
            return Response(405, self.error_body(405, "Method Not Allowed"))
        return Response(404, self.error_body(404, "Not Found"))

    def _read_body(self, handler: BaseHTTPRequestHandler) -> bytes:
        if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            for _ in range(1_000_000):
                size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    handler.rfile.readline()
                    break
                chunks.append(handler.rfile.read(size))
                handler.rfile.readline()
            return b"".join(chunks)
        length = int(handler.headers.get("Content-Length") or 0)
        return handler.rfile.read(length) if length > 0 else b""

    def handle(self, handler: BaseHTTPRequestHandler) -> None:
        arrived = time.monotonic()
        body = self._read_body(handler)
        split = urllib.parse.urlsplit(handler.path)
        request = Request(handler.command, handler.path, split.path or "/",
                          urllib.parse.parse_qs(split.query, keep_blank_values=True), handler.headers, body)
        response = self._take_fault(request)
        if response is None:
            try:
                response = self._dispatch(request)
            except Exception:
                self.errors.append(f"{request.method} {request.target}\n{traceback.format_exc()}")
                response = Response(500, self.error_body(500, "Internal Server Error"))
        headers = self.default_headers(request, response)
        headers.update(response.headers)
        if response.body is None:
            payload = b""
        elif isinstance(response.body, bytes):
            payload = response.body
        else:
            payload = json.dumps(response.body).encode()
            headers.setdefault("Content-Type", "application/json")
        with self._lock:
            self._log.append(RequestRecord(request.method, request.target, response.status, arrived))
        reply(handler, response.status, payload, headers)
        handler.wfile.flush()
