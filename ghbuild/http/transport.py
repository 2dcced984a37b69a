"""One HTTP/1.1 exchange on the wire (go-containerregistry's http.RoundTripper): the request as sent, the answer
as it arrives. `ConnectionPool` is the one on sockets (http.client and ssl, kept-alive connections per origin,
an idle connection the server closed never reused, CONNECT tunnels through an http proxy); a test replays
recorded answers through the same `Transport` interface instead.
"""

from __future__ import annotations

import http.client
import select
import socket
import threading
from collections.abc import Iterable, Mapping, Sized
from typing import Protocol
from urllib.parse import quote, urlsplit

from ghbuild.http.errors import HTTPConnectionError, HTTPTimeout, InvalidURL, UnusableSetting
from ghbuild.http.origin import port_of
from ghbuild.http.response import Response
from ghbuild.http.transport_env import Proxy, tls_context

Body = bytes | bytearray | Iterable[bytes] | None
Timeouts = tuple[float | None, float | None]     # (connect, read) seconds; None: no limit

_IDLE_PER_ORIGIN = 4           # kept-alive connections kept per origin (a copy worker uses at most two)
# What may stay unescaped in a request target (requests' requote_uri keeps the same set): a Location with a
# space or a non-ASCII path is sent percent-encoded, an existing %XX escape is kept as it is.
_TARGET_SAFE = "!#$%&'()*+,/:;=?@[]~"
_SENT_ERRNOS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class Transport(Protocol):
    def send(self, method: str, url: str, headers: Mapping[str, str], body: Body, *, verify: bool | str,
             proxy: Proxy | None, timeout: Timeouts) -> Response:
        """Send one request to `url` (absolute, http or https) and return the answer, its body unread when
        it has one. Raises HTTPConnectionError / HTTPTimeout when no whole answer head arrived."""
        ...

    def close(self) -> None: ...


def _target(url: str, proxy: Proxy | None) -> str:
    parts = urlsplit(url)
    target = quote(parts.path or "/", safe=_TARGET_SAFE) + ("?" + quote(parts.query, safe=_TARGET_SAFE)
                                                            if parts.query else "")
    if proxy is not None and parts.scheme == "http":
        target = f"http://{parts.netloc.rpartition('@')[2]}{target}"   # an http proxy takes the absolute URL
    return target


def closed_by_peer(sock: socket.socket) -> bool:
    """An idle kept-alive socket that is readable was closed by the server (or holds bytes nobody asked for):
    either way it cannot carry the next request. poll(), not select(): select fails on descriptors >= 1024."""
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


class ConnectionPool:
    """Kept-alive connections per (scheme, host, port, verification, proxy). Like one requests.Session, for
    one thread at a time."""

    def __init__(self) -> None:
        self._idle: dict[tuple, list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()

    def send(self, method: str, url: str, headers: Mapping[str, str], body: Body, *, verify: bool | str,
             proxy: Proxy | None, timeout: Timeouts) -> Response:
        parts = urlsplit(url)
        port = port_of(parts, url.split("?")[0])
        verify = verify if isinstance(verify, str) else bool(verify)
        all_headers = dict(headers)
        if proxy is not None and parts.scheme == "http" and proxy.authorization:
            all_headers["Proxy-Authorization"] = proxy.authorization
        if isinstance(body, Sized) and not isinstance(body, (bytes, bytearray)) \
                and not any(k.lower() == "content-length" for k in all_headers):
            all_headers["Content-Length"] = str(len(body))
        key = (parts.scheme, parts.hostname, port, verify, proxy and (proxy.host, proxy.port))
        what = f"{method} {url.split('?')[0]}"
        conn = self._take(key, timeout[1])
        if conn is None:
            conn = self._connect(parts.scheme, parts.hostname or "", port, proxy, verify, timeout, what)
        answer = self._exchange(conn, method, _target(url, proxy), body, all_headers, what)

        released = False

        def release(broken: bool = False) -> None:
            nonlocal released
            if not released:
                released = True
                self._give_back(key, conn, broken or answer.will_close)

        if method == "HEAD" or answer.length == 0:
            answer.read()           # no body: closes the answer, so the connection is free at once
        response = Response(method, url, answer, release)
        if answer.isclosed():
            release()
        return response

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    @staticmethod
    def _exchange(conn: http.client.HTTPConnection, method: str, target: str, body: Body,
                  headers: dict[str, str], what: str) -> http.client.HTTPResponse:
        try:
            try:
                conn.request(method, target, body=body, headers=headers)
            except _SENT_ERRNOS:
                # The server answered before it took the whole body (a registry refusing an upload reads a
                # little, answers 401 or 413 and closes): that answer is what the caller needs, if it came.
                pass
            answer = conn.getresponse()
        except TimeoutError as exc:
            conn.close()
            raise HTTPTimeout(f"{what}: timed out ({exc})") from exc
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise HTTPConnectionError(f"{what}: no complete answer: {type(exc).__name__}: {exc}") from exc
        except ValueError as exc:       # a header value with a line break, a target with a space left in it
            conn.close()
            raise InvalidURL(f"{what}: the request cannot be sent: {exc}") from None
        if answer.status < 200:
            # An interim 1xx left for us (http.client skips only 100 Continue): the final answer would be read
            # as the next request's. Never reuse the connection.
            conn.close()
            raise HTTPConnectionError(f"{what}: interim answer {answer.status} without a final one")
        return answer

    @staticmethod
    def _connect(scheme: str, host: str, port: int, proxy: Proxy | None, verify: bool | str, timeout: Timeouts,
                 what: str) -> http.client.HTTPConnection:
        connect_timeout, read_timeout = timeout   # IPv6 hosts without brackets: http.client takes the port apart
        conn: http.client.HTTPConnection
        try:
            if scheme == "https":
                ctx = tls_context(verify)
                if proxy is not None:
                    conn = http.client.HTTPSConnection(proxy.host, proxy.port, timeout=connect_timeout, context=ctx)
                    shown = f"[{host}]" if ":" in host else host
                    tunnel_headers = {"Host": f"{shown}:{port}"}      # Python 3.11 sends none on its own
                    if proxy.authorization:
                        tunnel_headers["Proxy-Authorization"] = proxy.authorization
                    conn.set_tunnel(shown, port, headers=tunnel_headers)
                else:
                    conn = http.client.HTTPSConnection(host, port, timeout=connect_timeout, context=ctx)
            elif proxy is not None:
                conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=connect_timeout)
            else:
                conn = http.client.HTTPConnection(host, port, timeout=connect_timeout)
            conn.connect()
        except TimeoutError as exc:
            raise HTTPTimeout(f"{what}: connecting timed out ({exc})") from exc
        except OSError as exc:
            if proxy is not None and str(exc).startswith("Tunnel connection failed: 407"):
                raise UnusableSetting(f"proxy {proxy.host}:{proxy.port} refused the credentials of the proxy URL "
                                      "(407)") from None
            raise HTTPConnectionError(f"{what}: connecting: {type(exc).__name__}: {exc}") from exc
        if conn.sock is not None:
            conn.sock.settimeout(read_timeout)      # connected: from now on the read timeout applies
        conn.timeout = read_timeout
        return conn

    def _take(self, key: tuple, read_timeout: float | None) -> http.client.HTTPConnection | None:
        with self._lock:
            conns = self._idle.get(key)
            while conns:
                conn = conns.pop()
                if conn.sock is not None and not closed_by_peer(conn.sock):
                    conn.sock.settimeout(read_timeout)     # this request's, not the one that opened it
                    return conn
                conn.close()
        return None

    def _give_back(self, key: tuple, conn: http.client.HTTPConnection, broken: bool) -> None:
        if broken or conn.sock is None:
            conn.close()
            return
        with self._lock:
            conns = self._idle.setdefault(key, [])
            if len(conns) < _IDLE_PER_ORIGIN:
                conns.append(conn)
                return
        conn.close()
