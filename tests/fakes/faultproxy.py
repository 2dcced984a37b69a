"""A small HTTP reverse proxy that injects faults between a client and a registry (tests only).

Usage::

    with FaultProxy("http://127.0.0.1:5001") as proxy:          # listens on 127.0.0.1:<free port>
        proxy.respond("HEAD", r"/manifests/", 503, count=2)      # the first two manifest HEADs: 503
        proxy.respond("PATCH", r"/blobs/uploads/", 429, headers={"Retry-After": "3"})
        proxy.reset("PATCH", r"/blobs/uploads/", after=1 << 20, content_length=big_layer_size)
        proxy.reset("GET", r"/blobs/sha256:", after=4096, on="response")
        proxy.delay("PUT", r"/manifests/", 0.5)
        ... point the client at proxy.host ("127.0.0.1:<port>") ...
        proxy.log        # [LogEntry(method, path, status, action, rule, start, end, ...)]

Rules are matched in the order they were added: method (None: any), ``path`` (``re.search`` on the path
without the query string), optional ``query`` regex, optional request ``Content-Length`` (exact, or
``min_content_length``). Every matching request counts as one occurrence of every rule it matches; a rule acts
on occurrences ``nth`` .. ``nth + count - 1`` (``count=None``: from ``nth`` on, for ever) and the first rule
that acts wins. Actions:

- ``respond``: answer with ``status``, ``headers`` and a distribution-style JSON error body (none for HEAD)
  without contacting the upstream; a request body is read to its end and discarded first.
- ``reset``: forward, and after ``after`` bytes of the request body (``on="request"``) or of the response body
  (``on="response"``) close the client's socket abruptly (SO_LINGER 0: the client sees a TCP RST) and drop
  the upstream connection.
- ``delay``: wait ``seconds``, then forward normally.
- ``lose_reply``: forward the whole request and read the upstream's whole answer (the request took effect),
  then instead of that answer reset the connection (``status`` 0) or answer ``status`` (e.g. 502): a reply
  lost on the way back.

Everything else is forwarded as is, bodies streamed in ``CHUNK``-byte pieces both ways (never a whole blob in
memory), one upstream connection per request. ``Location`` and ``Link`` headers that name the upstream are
rewritten to name the proxy, so blob upload sessions keep going through it. ``Host`` is the upstream's.

``stop()`` (or leaving the ``with`` block) closes the listening socket and every connection and joins the
threads. Unexpected exceptions inside the proxy end up in ``errors`` (tests should assert it is empty).
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import struct
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field

from .httpserver import LoopbackService, QuietHandler, reply, reply_json

CHUNK = 64 * 1024


def in_flight_limit(client_chunk: int) -> int:
    """The most request-body bytes a client may have handed its kernel past a ``reset``: what the loopback
    connection's buffers can hold (the client's send buffer and the proxy's receive buffer, each autotuned up to
    the third field of ``tcp_wmem`` / ``tcp_rmem``), one proxy read and one client chunk. Machines differ: this
    one lets a receive buffer grow to 32 MiB, where 16 MiB of slack was once enough."""
    def ceiling(name: str) -> int:
        with open(f"/proc/sys/net/ipv4/{name}") as sysctl:
            return int(sysctl.read().split()[2])
    return ceiling("tcp_wmem") + ceiling("tcp_rmem") + CHUNK + client_chunk

# Hop-by-hop headers (RFC 9110 7.6.1) plus the framing ones the proxy sets itself.
_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
                  "te", "trailer", "transfer-encoding", "upgrade", "content-length", "host"})

_ERROR_CODES = {401: "UNAUTHORIZED", 403: "DENIED", 404: "NAME_UNKNOWN", 429: "TOOMANYREQUESTS"}


@dataclass
class Rule:
    """One injected fault; ``occurrences`` counts matching requests, ``fired`` how often it acted."""

    action: str                       # "respond" | "reset" | "delay" | "lose_reply"
    method: str | None
    path: re.Pattern[str]
    query: re.Pattern[str] | None = None
    content_length: int | None = None
    min_content_length: int | None = None
    nth: int = 1
    count: int | None = 1
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    after: int = 0
    on: str = "request"               # reset: "request" or "response" body
    seconds: float = 0.0
    name: str = ""
    occurrences: int = 0
    fired: int = 0

    def matches(self, method: str, path: str, query: str, length: int | None) -> bool:
        if self.method is not None and self.method != method:
            return False
        if not self.path.search(path):
            return False
        if self.query is not None and not self.query.search(query):
            return False
        if self.content_length is not None and length != self.content_length:
            return False
        return not (self.min_content_length is not None and (length is None or length < self.min_content_length))

    def in_window(self) -> bool:
        n = self.occurrences
        return n >= self.nth and (self.count is None or n < self.nth + self.count)


@dataclass(frozen=True)
class LogEntry:
    """One request through the proxy. ``status`` is what the client got (None after a reset or when the
    client went away); ``action`` is "forward", "respond", "reset", "delay" (then forwarded) or
    "upstream-error" (answered 502); times are ``time.monotonic()`` at arrival and when the proxy was done
    with the request (the last byte sent, or the reset)."""

    method: str
    path: str                         # the request target, query included
    status: int | None
    action: str
    rule: str | None
    start: float
    end: float
    request_bytes: int                # request body bytes read from the client
    response_bytes: int               # response body bytes sent to the client
    content_length: int | None        # the request's Content-Length header
    error: str | None = None


class _Reset(Exception):
    """Raised inside a handler once the client socket was reset on purpose."""


class _ClientGone(Exception):
    """The client closed its side while the proxy was reading from or writing to it."""


class _Handler(QuietHandler):
    timeout = 60  # an idle keep-alive connection is dropped after this (bounds the handler threads)
    do_OPTIONS = QuietHandler._handle


class FaultProxy(LoopbackService):
    """Reverse proxy to ``upstream`` (``http://host:port``) on 127.0.0.1 with injectable faults and a log."""

    def __init__(self, upstream: str, port: int = 0, upstream_timeout: float = 120.0):
        u = urllib.parse.urlsplit(upstream if "://" in upstream else "http://" + upstream)
        if u.scheme != "http" or not u.hostname:
            raise ValueError(f"upstream must be http://host:port, got {upstream!r}")
        self.upstream_netloc = u.netloc
        self._up_host, self._up_port = u.hostname, u.port or 80
        self.upstream_timeout = upstream_timeout
        super().__init__(port)
        # Optional auth gate: gate(method, path, query, headers) -> None (forward) or (status, headers).
        self.gate = None
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._in_flight = 0           # requests being handled (not idle keep-alive connections)
        self._rules: list[Rule] = []
        self._log: list[LogEntry] = []
        self._upstreams: set[http.client.HTTPConnection] = set()
        self._stopping = threading.Event()

    # ------------------------------------------------------------------ lifecycle

    handler = _Handler
    quiet_errors = (OSError, _Reset, _ClientGone)   # a client that went away (or that we reset)
    join_timeout = 10.0

    def start(self) -> FaultProxy:
        self._stopping.clear()
        return super().start()

    def _wake(self) -> None:
        with self._lock:
            upstreams = list(self._upstreams)
        for conn in upstreams:                     # handlers blocked on the upstream wake up
            sock = conn.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stop(self) -> list[threading.Thread]:
        self._stopping.set()                       # wakes delays
        alive = super().stop()
        if alive:
            self.errors.append(f"{len(alive)} connection thread(s) still running after stop()")
        return alive

    # ------------------------------------------------------------------ rules

    def add(self, rule: Rule) -> Rule:
        if not rule.name:
            rule.name = f"{rule.action} {rule.method or '*'} {rule.path.pattern}#{len(self._rules) + 1}"
        with self._lock:
            self._rules.append(rule)
        return rule

    @staticmethod
    def _common(method: str | None, path: str, query: str | None, nth: int, count: int | None,
                content_length: int | None, min_content_length: int | None, name: str) -> dict:
        if nth < 1 or (count is not None and count < 1):
            raise ValueError("nth and count start at 1 (count=None: for ever)")
        return dict(method=method.upper() if method else None, path=re.compile(path),
                    query=re.compile(query) if query is not None else None, nth=nth, count=count,
                    content_length=content_length, min_content_length=min_content_length, name=name)

    def respond(self, method: str | None, path: str, status: int, headers: dict[str, str] | None = None,
                body: bytes | None = None, *, query: str | None = None, nth: int = 1, count: int | None = 1,
                content_length: int | None = None, min_content_length: int | None = None,
                name: str = "") -> Rule:
        """Answer matching requests with ``status`` (+ ``headers``) instead of forwarding them."""
        return self.add(Rule("respond", status=status, headers=dict(headers or {}), body=body,
                             **self._common(method, path, query, nth, count, content_length,
                                            min_content_length, name)))

    def reset(self, method: str | None, path: str, after: int, on: str = "request", *, query: str | None = None,
              nth: int = 1, count: int | None = 1, content_length: int | None = None,
              min_content_length: int | None = None, name: str = "") -> Rule:
        """Forward, then reset the client connection after ``after`` body bytes of the request or response."""
        if on not in ("request", "response"):
            raise ValueError("on= must be 'request' or 'response'")
        return self.add(Rule("reset", after=after, on=on,
                             **self._common(method, path, query, nth, count, content_length,
                                            min_content_length, name)))

    def delay(self, method: str | None, path: str, seconds: float, *, query: str | None = None, nth: int = 1,
              count: int | None = 1, content_length: int | None = None, min_content_length: int | None = None,
              name: str = "") -> Rule:
        """Wait ``seconds`` before forwarding matching requests."""
        return self.add(Rule("delay", seconds=seconds,
                             **self._common(method, path, query, nth, count, content_length,
                                            min_content_length, name)))

    def lose_reply(self, method: str | None, path: str, status: int = 0, *, query: str | None = None,
                   nth: int = 1, count: int | None = 1, content_length: int | None = None,
                   min_content_length: int | None = None, name: str = "") -> Rule:
        """Forward, let the upstream act on the request, then reset (``status`` 0) or answer ``status``."""
        return self.add(Rule("lose_reply", status=status,
                             **self._common(method, path, query, nth, count, content_length,
                                            min_content_length, name)))

    def clear(self) -> None:
        """Remove every rule (the log stays)."""
        with self._lock:
            self._rules.clear()

    @property
    def rules(self) -> list[Rule]:
        with self._lock:
            return list(self._rules)

    @property
    def log(self) -> list[LogEntry]:
        """A snapshot of the request log. Waits (up to 5 s) for requests still being handled: a client can
        have the whole answer a moment before the proxy has written its log entry."""
        with self._idle:
            self._idle.wait_for(lambda: self._in_flight == 0, timeout=5)
            return list(self._log)

    def clear_log(self) -> None:
        with self._lock:
            self._log.clear()

    def requests(self, method: str | None = None, path: str | None = None) -> list[LogEntry]:
        """Log entries filtered by method and a regex searched in the request target."""
        pattern = re.compile(path) if path is not None else None
        return [e for e in self.log if (method is None or e.method == method.upper())
                and (pattern is None or pattern.search(e.path))]

    def _take(self, method: str, path: str, query: str, length: int | None) -> Rule | None:
        chosen = None
        with self._lock:
            self._in_flight += 1
            for rule in self._rules:
                if rule.matches(method, path, query, length):
                    rule.occurrences += 1
                    if chosen is None and rule.in_window():
                        rule.fired += 1
                        chosen = rule
        return chosen

    # ------------------------------------------------------------------ serving

    def handle(self, h: _Handler) -> None:
        start = time.monotonic()
        method, target = h.command, h.path
        split = urllib.parse.urlsplit(target)
        length_header = h.headers.get("Content-Length")
        length = int(length_header) if length_header and length_header.strip().isdigit() else None
        rule = self._take(method, split.path, split.query, length)
        state = {"req": 0, "resp": 0, "status": None, "action": "forward", "error": None}
        gate = self.gate
        refusal = gate(method, split.path, split.query, h.headers) if gate is not None else None
        try:
            if refusal is not None:
                # An auth gate in front of the registry (e.g. Bearer token checks): answer instead of forwarding.
                state["action"] = "gate"
                for chunk in self._request_body(h):
                    state["req"] += len(chunk)
                status, headers = refusal
                h.send_response(status)
                for key, value in headers.items():
                    h.send_header(key, value)
                h.send_header("Content-Length", "0")
                h.end_headers()
                state["status"] = status
                return
            if rule is not None and rule.action == "delay":
                state["action"] = "delay"
                self._stopping.wait(rule.seconds)
            if rule is not None and rule.action == "respond":
                state["action"] = "respond"
                for chunk in self._request_body(h):
                    state["req"] += len(chunk)
                self._send_fault(h, rule, state)
            else:
                self._forward(h, rule if rule is not None and rule.action in ("reset", "lose_reply") else None,
                              state)
        except _Reset:
            state["action"] = "lose_reply" if state["action"] == "lose_reply" else "reset"
            state["status"] = None
            raise
        except _ClientGone as exc:
            state["status"], state["error"] = None, f"client went away: {exc}"
            raise
        finally:
            entry = LogEntry(method, target, state["status"], state["action"], rule.name if rule else None,
                             start, time.monotonic(), state["req"], state["resp"], length, state["error"])
            with self._idle:
                self._log.append(entry)
                self._in_flight -= 1
                self._idle.notify_all()

    # ----- client side

    def _request_body(self, h: _Handler) -> Iterator[bytes]:
        """The request body as it arrives, CHUNK bytes at a time (chunked framing removed)."""
        try:
            if h.headers.get("Transfer-Encoding", "").lower() == "chunked":
                while True:
                    line = h.rfile.readline(1024)
                    if not line:
                        raise _ClientGone("EOF in a chunked request body")
                    size = int(line.split(b";")[0].strip() or b"0", 16)
                    if size == 0:
                        while h.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                            pass                      # trailers
                        return
                    while size:
                        data = h.rfile.read(min(size, CHUNK))
                        if not data:
                            raise _ClientGone("EOF in a chunked request body")
                        size -= len(data)
                        yield data
                    h.rfile.readline(16)
                return
            remaining = int(h.headers.get("Content-Length") or 0)
            while remaining > 0:
                data = h.rfile.read(min(remaining, CHUNK))
                if not data:
                    raise _ClientGone(f"EOF with {remaining} request body bytes still expected")
                remaining -= len(data)
                yield data
        except (TimeoutError, ConnectionError) as exc:
            raise _ClientGone(str(exc)) from exc

    def _write(self, h: _Handler, data: bytes) -> None:
        try:
            h.wfile.write(data)
        except OSError as exc:
            raise _ClientGone(str(exc)) from exc

    def _abort(self, h: _Handler, conn: http.client.HTTPConnection | None) -> None:
        """Close the client's socket with a TCP RST (SO_LINGER 0) and drop the upstream connection."""
        h.close_connection = True
        try:
            h.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        try:
            h.rfile.close()              # release the makefile reference, so close() really closes the fd
        except OSError:
            pass
        h.connection.close()
        if conn is not None:
            conn.close()
        raise _Reset()

    def _send_fault(self, h: _Handler, rule: Rule, state: dict) -> None:
        status = rule.status
        if rule.body is not None:
            payload = rule.body
        else:
            code = _ERROR_CODES.get(status, "UNAVAILABLE" if status >= 500 else "UNKNOWN")
            payload = json.dumps({"errors": [{"code": code, "message": f"injected by faultproxy ({rule.name})",
                                              "detail": None}]}).encode()
        try:
            state["resp"] = reply(h, status, payload,
                                  {"Content-Type": "application/json; charset=utf-8", **rule.headers})
        except OSError as exc:
            raise _ClientGone(str(exc)) from exc
        state["status"] = status

    # ----- upstream side

    def _rewrite(self, value: str) -> str:
        """Absolute URLs naming the upstream name the proxy instead (Location, Link)."""
        for scheme in ("http://", "https://"):
            value = value.replace(scheme + self.upstream_netloc, self.url)
        return value

    def _forward(self, h: _Handler, reset: Rule | None, state: dict) -> None:
        conn = http.client.HTTPConnection(self._up_host, self._up_port, timeout=self.upstream_timeout)
        with self._lock:
            self._upstreams.add(conn)
        try:
            self._exchange(h, conn, reset, state)
        finally:
            with self._lock:
                self._upstreams.discard(conn)
            conn.close()

    def _exchange(self, h: _Handler, conn: http.client.HTTPConnection, reset: Rule | None, state: dict) -> None:
        chunked_in = h.headers.get("Transfer-Encoding", "").lower() == "chunked"
        has_body = chunked_in or h.headers.get("Content-Length") is not None
        lose = reset is not None and reset.action == "lose_reply"
        reset_request = reset is not None and not lose and reset.on == "request"
        reset_response = reset is not None and not lose and reset.on == "response"
        try:
            conn.putrequest(h.command, h.path, skip_host=True, skip_accept_encoding=True)
            conn.putheader("Host", self.upstream_netloc)
            for key, value in h.headers.items():
                if key.lower() not in _HOP:
                    conn.putheader(key, value)
            if chunked_in:
                conn.putheader("Transfer-Encoding", "chunked")
            elif has_body:
                conn.putheader("Content-Length", h.headers["Content-Length"])
            conn.endheaders()
        except OSError as exc:
            self._bad_gateway(h, state, f"upstream {self.upstream_netloc}: {exc}")
            return

        # request body: client -> upstream
        upstream_broken: str | None = None
        for chunk in self._request_body(h):
            if reset_request and state["req"] + len(chunk) >= reset.after:
                part = chunk[:reset.after - state["req"]]
                if part and upstream_broken is None:
                    try:
                        conn.send(part)
                    except OSError:
                        pass
                state["req"] += len(part)
                self._abort(h, conn)
            state["req"] += len(chunk)
            if upstream_broken is None:
                try:
                    conn.send(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked_in else chunk)
                except OSError as exc:      # upstream gave up early (it may still answer): keep draining
                    upstream_broken = str(exc)
        if reset_request:                   # the body was shorter than `after`: reset at its end
            self._abort(h, conn)
        if chunked_in and upstream_broken is None:
            try:
                conn.send(b"0\r\n\r\n")
            except OSError as exc:
                upstream_broken = str(exc)

        try:
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            self._bad_gateway(h, state, f"upstream {self.upstream_netloc}: {upstream_broken or exc}")
            return

        if lose:                            # the upstream acted; the client never hears of it
            try:
                resp.read()
            except (OSError, http.client.HTTPException):
                pass
            state["action"] = "lose_reply"
            if reset.status:
                self._send_fault(h, reset, state)
                return
            self._abort(h, conn)

        # response: upstream -> client
        no_body = h.command == "HEAD" or resp.status in (204, 304) or resp.status < 200
        up_length = resp.getheader("Content-Length")
        chunked_out = not no_body and up_length is None
        h.send_response_only(resp.status, resp.reason)
        for key, value in resp.getheaders():
            low = key.lower()
            if low in _HOP and not (low == "content-length" and up_length is not None):
                continue
            if low in ("location", "link", "content-location"):
                value = self._rewrite(value)
            h.send_header(key, value)
        if chunked_out:
            h.send_header("Transfer-Encoding", "chunked")
        try:
            h.end_headers()
        except OSError as exc:
            raise _ClientGone(str(exc)) from exc
        state["status"] = resp.status
        if no_body:
            if reset_response:
                self._abort(h, conn)
            return
        while True:
            try:
                data = resp.read(CHUNK)
            except (OSError, http.client.HTTPException) as exc:
                # The upstream broke mid-body: the client must not take a short body for a whole one.
                state["error"] = f"upstream broke mid-body: {exc}"
                self._abort(h, conn)
            if not data:
                break
            if reset_response and state["resp"] + len(data) >= reset.after:
                part = data[:reset.after - state["resp"]]
                if part:
                    self._write(h, b"%x\r\n%s\r\n" % (len(part), part) if chunked_out else part)
                state["resp"] += len(part)
                self._abort(h, conn)
            self._write(h, b"%x\r\n%s\r\n" % (len(data), data) if chunked_out else data)
            state["resp"] += len(data)
        if reset_response:                  # the body was shorter than `after`: reset at its end
            self._abort(h, conn)
        if chunked_out:
            self._write(h, b"0\r\n\r\n")

    def _bad_gateway(self, h: _Handler, state: dict, message: str) -> None:
        state["action"], state["error"] = "upstream-error", message
        h.close_connection = True
        try:
            reply_json(h, 502, {"errors": [{"code": "UNAVAILABLE", "message": message}]}, {"Connection": "close"})
        except OSError as exc:
            raise _ClientGone(str(exc)) from exc
        state["status"] = 502


def start(upstream: str, **kwargs) -> FaultProxy:
    """A started proxy (use it as a context manager to stop it)."""
    return FaultProxy(upstream, **kwargs).start()
