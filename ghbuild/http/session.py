"""A small HTTP/1.1 client on the standard library (http.client, ssl) for the registry layer.

Why not `requests` here: the registry layer is on the path of every publish, and a republish of a nightly the
hub already holds is about fifteen small requests. `import requests` (urllib3, charset_normalizer, idna,
cookies) took longer than those requests; `http.client` and `ssl` cost a fraction of it (docs/benchmarks.md).
This module keeps what the registry layer relied on `requests` for, with the same names:

- TLS verified against the system's CA store (the defaults of `ssl`, which honour SSL_CERT_FILE and
  SSL_CERT_DIR), a bundle named by `verify=` or by REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE, or certifi's bundle
  when the system has none;
- proxies from the environment (http_proxy, https_proxy, all_proxy and no_proxy, either case; an http://
  proxy, tunnelled with CONNECT for https targets), never for a session with `trust_env = False`;
- kept-alive connections per origin, a connection the server closed while idle never reused;
- streamed request bodies (an iterable with `__len__` goes out with Content-Length) and streamed answers
  (`stream=True`, then `raw.read` / `raw.stream`), connect and read timeouts;
- redirects followed (at most MAX_REDIRECTS), with Authorization and Proxy-Authorization dropped when the
  redirect leaves the origin (blob GETs redirect to S3 or a CDN), and 303 (or 301/302 after a POST) turned
  into a GET without a body.

Left out on purpose: cookies, .netrc credentials, response decompression (no Accept-Encoding but
`identity` is sent, so layers arrive as stored), https:// and SOCKS proxy URLs (refused with a clear error).
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import select
import socket
import threading
from collections.abc import Iterator, Mapping
from urllib.parse import quote, unquote, urlencode, urljoin, urlsplit

MAX_REDIRECTS = 10
REDIRECTS = (301, 302, 303, 307, 308)
_IDLE_PER_ORIGIN = 4           # kept-alive connections kept per origin (a copy worker uses at most two)


class RequestException(OSError):
    """Any failure to get an answer (the name and the OSError base follow `requests`)."""


class ConnectionError(RequestException):
    """The connection failed, was refused, reset or closed before a whole answer arrived."""


class Timeout(ConnectionError):
    """No connection or no data within the timeout."""


class TooManyRedirects(RequestException):
    pass


class HTTPError(RequestException):
    """raise_for_status() on a 4xx or 5xx answer."""


class PermanentError(Exception):
    """A failure that a retry cannot fix (callers must not treat it as a network hiccup)."""


class UnusableSetting(PermanentError, ValueError):
    """A setting from the environment or the caller: a proxy URL this client cannot use, a CA bundle that does
    not exist or holds no certificate, a proxy that refuses the credentials it was given."""


class CannotResend(PermanentError):
    """A redirect after a streamed body: the body is spent, and the same request would be redirected again."""


# --------------------------------------------------------------------------- TLS

_contexts: dict[object, object] = {}
_contexts_lock = threading.Lock()


def _certifi_bundle() -> str | None:
    try:
        import certifi
    except ImportError:
        return None
    return certifi.where()


def _system_store_present() -> bool:
    import ssl

    paths = ssl.get_default_verify_paths()
    if paths.cafile and os.path.isfile(paths.cafile):
        return True
    return bool(paths.capath and os.path.isdir(paths.capath) and os.listdir(paths.capath))


def tls_context(verify: bool | str):
    """The ssl context for `verify`: False (no verification), True (the system store; certifi's bundle when
    the system has none) or the path of a CA bundle file or a hashed directory. Built once per value."""
    import ssl

    verify = verify if isinstance(verify, str) else bool(verify)   # 0 and False: one key, one meaning
    with _contexts_lock:
        if verify in _contexts:
            return _contexts[verify]
        try:
            ctx = _new_context(ssl, verify)
        except (ssl.SSLError, OSError) as exc:
            raise UnusableSetting(f"CA bundle {verify}: no certificate could be read from it ({exc})") from None
        _contexts[verify] = ctx
        return ctx


def _new_context(ssl, verify: bool | str):
    if verify is False:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif isinstance(verify, str):
        if os.path.isdir(verify):
            ctx = ssl.create_default_context(capath=verify)
        elif os.path.isfile(verify):
            ctx = ssl.create_default_context(cafile=verify)
        else:
            raise UnusableSetting(f"CA bundle {verify}: no such file or directory")
    elif _system_store_present():
        ctx = ssl.create_default_context()
    else:
        bundle = _certifi_bundle()
        ctx = ssl.create_default_context(cafile=bundle) if bundle else ssl.create_default_context()
    ctx.set_alpn_protocols(["http/1.1"])
    return ctx


def _env_ca_bundle(env: Mapping[str, str]) -> str | None:
    """The bundle `requests` would have used from the environment (instead of the system store, as there)."""
    return env.get("REQUESTS_CA_BUNDLE") or env.get("CURL_CA_BUNDLE") or None


# --------------------------------------------------------------------------- proxies


def _env_proxy(env: Mapping[str, str], scheme: str) -> str | None:
    for name in (f"{scheme}_proxy", "all_proxy"):
        # As urllib reads them: the lower-case variable wins when it is set, even empty (then the upper-case
        # one is ignored and all_proxy is asked next).
        value = env[name] if name in env else env.get(name.upper())
        if value and value.strip():
            return value.strip()
    return None


def _no_proxy_matches(host: str, port: int, no_proxy: str) -> bool:
    """no_proxy as curl and requests read it: `*`, host names matched as the name or a parent domain
    (`example.com` and `.example.com` both match `reg.example.com`, never `badexample.com`), IP addresses,
    CIDR ranges, each optionally with `:port`."""
    host = host.lower().strip("[]")
    for entry in no_proxy.replace(" ", ",").split(","):
        entry = entry.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        name, want_port = entry, None
        if entry.startswith("["):                       # [::1]:5000
            name, _, rest = entry[1:].partition("]")
            want_port = rest[1:] if rest.startswith(":") else None
        elif entry.count(":") == 1:
            name, want_port = entry.split(":")
        if want_port and want_port != str(port):
            continue
        if "/" in name:
            import ipaddress

            try:
                if ipaddress.ip_address(host) in ipaddress.ip_network(name, strict=False):
                    return True
            except ValueError:
                pass
            continue
        name = name.lstrip(".")
        if name and (host == name or host.endswith("." + name)):
            return True
    return False


class InvalidURL(PermanentError):
    """A URL that cannot be requested: a bad port, an unsupported scheme, no host."""


def _default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def _port(parts, what: str) -> int:
    try:
        port = parts.port
    except ValueError:
        raise InvalidURL(f"{what}: the port is not a number from 0 to 65535") from None
    return port or _default_port(parts.scheme)


class _Proxy:
    __slots__ = ("host", "port", "authorization")

    def __init__(self, url: str):
        try:
            parts = urlsplit(url if "://" in url else "http://" + url)
        except ValueError:
            raise UnusableSetting("a proxy URL in the environment is not a URL") from None
        if parts.scheme != "http":
            raise UnusableSetting(f"proxy {parts.scheme}://{parts.hostname}: only http:// proxy URLs are supported "
                                  "(https targets are tunnelled through them with CONNECT)")
        if not parts.hostname:
            raise UnusableSetting("proxy URL without a host in the environment")
        try:
            self.host, self.port = parts.hostname, _port(parts, f"proxy {parts.hostname}")
        except InvalidURL as exc:
            raise UnusableSetting(str(exc)) from None
        self.authorization = None
        if parts.username is not None:
            pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
            self.authorization = "Basic " + base64.b64encode(pair).decode()


def proxy_for(url_parts, env: Mapping[str, str]) -> _Proxy | None:
    """The proxy a request to these URL parts goes through, from the environment; None for a direct one."""
    value = _env_proxy(env, url_parts.scheme)
    if not value:
        return None
    no_proxy = env["no_proxy"] if "no_proxy" in env else env.get("NO_PROXY", "")
    port = _port(url_parts, url_parts.hostname or "")
    if no_proxy and _no_proxy_matches(url_parts.hostname or "", port, no_proxy):
        return None
    return _Proxy(value)


# --------------------------------------------------------------------------- answers


class _Request:
    __slots__ = ("method", "url")

    def __init__(self, method: str, url: str):
        self.method, self.url = method, url


class Raw:
    """The body of an answer as it arrives (never decoded: no Accept-Encoding but identity is sent)."""

    def __init__(self, response: http.client.HTTPResponse, release):
        self._response, self._release = response, release

    def read(self, amt: int | None = None, decode_content: bool | None = None) -> bytes:
        try:
            data = self._response.read(amt)
        except TimeoutError as exc:
            self._release(broken=True)
            raise Timeout(f"read timed out: {exc}") from exc
        except (http.client.HTTPException, OSError) as exc:
            self._release(broken=True)
            raise ConnectionError(f"{type(exc).__name__}: {exc}") from exc
        if amt and len(data) < amt and self._response.length:
            # A socket read returns less than asked only at the end of the stream, and http.client then hands
            # back what came (read(amt) does not raise): a body cut short must not look like a complete one.
            missing = self._response.length
            self._response.close()
            self._release(broken=True)
            raise ConnectionError(f"IncompleteRead: the connection closed {missing} bytes before the end of the body")
        if self._response.isclosed():   # the whole body: the connection may serve the next request
            self._release()
        return data

    def stream(self, amt: int = 1 << 16, decode_content: bool | None = None) -> Iterator[bytes]:
        while True:
            data = self.read(amt)
            if not data:
                return
            yield data


class Response:
    """An answer, with the attributes of `requests.Response` the registry layer uses."""

    def __init__(self, method: str, url: str, response: http.client.HTTPResponse, release):
        self.status_code = response.status
        self.reason = response.reason
        self.headers = response.headers            # case-insensitive .get()
        self.url = url
        self.request = _Request(method, url)
        self.raw = Raw(response, release)
        self._response, self._release, self._content = response, release, None

    @property
    def content(self) -> bytes:
        if self._content is None:
            self._content = b"" if self._response.isclosed() else self.raw.read()
        return self._content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self):
        return json.loads(self.content)

    @property
    def links(self) -> dict[str, dict[str, str]]:
        """The Link headers (RFC 8288) by `rel` (else by URL), as requests gives them: the registry's tag list
        pages with `Link: </v2/<name>/tags/list?n=100&last=x>; rel="next"`."""
        found: dict[str, dict[str, str]] = {}
        for link in parse_links(", ".join(self.headers.get_all("Link") or [])):
            found[link.get("rel") or link["url"]] = link
        return found

    def iter_content(self, chunk_size: int = 1 << 16) -> Iterator[bytes]:
        return self.raw.stream(chunk_size)

    def close(self) -> None:
        """Done with the answer: a fully read one frees its connection for the next request, a partly read one
        closes it (the rest of the body would be read as the next answer)."""
        if not self._response.isclosed():
            self._response.close()
            self._release(broken=True)

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise HTTPError(f"{self.status_code} {self.reason} for {self.url}")

    def __enter__(self) -> Response:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def parse_links(value: str) -> list[dict[str, str]]:
    """`<url>; rel="next"; title=x, <url2>; rel=prev` -> [{"url": .., "rel": .., ...}] (requests' reading)."""
    links: list[dict[str, str]] = []
    value = value.strip(" '\"")
    if not value:
        return links
    import re

    for part in re.split(", *<", value):
        url, _, params = part.partition(";")
        link = {"url": url.strip("<> '\"")}
        for param in params.split(";"):
            key, sep, val = param.partition("=")
            if not sep:
                break
            link[key.strip(" '\"")] = val.strip(" '\"")
        links.append(link)
    return links


# --------------------------------------------------------------------------- the session

# What may stay unescaped in a request target (requests' requote_uri keeps the same set): a Location with a
# space or a non-ASCII path is sent percent-encoded, an existing %XX escape is kept as it is.
_TARGET_SAFE = "!#$%&'()*+,/:;=?@[]~"
_SENT_ERRNOS = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)


class Session:
    """Kept-alive connections and default headers for one thread (like requests.Session, not thread-safe for
    concurrent requests; make one per thread)."""

    def __init__(self, *, trust_env: bool = True, env: Mapping[str, str] | None = None):
        self.trust_env = trust_env
        self.headers: dict[str, str] = {}
        self.verify: bool | str = True
        self._env = env
        self._idle: dict[tuple, list[http.client.HTTPConnection]] = {}
        self._lock = threading.Lock()

    # ----- requests' surface

    def get(self, url: str, **kwargs) -> Response:
        return self.request("GET", url, **kwargs)

    def request(self, method: str, url: str, *, params=None, headers: Mapping[str, str] | None = None,
                data=None, stream: bool = False, verify: bool | str | None = None,
                timeout: float | tuple[float, float] | None = None, allow_redirects: bool = True) -> Response:
        method = method.upper()
        if params:
            url += ("&" if urlsplit(url).query else "?") + urlencode(list(params.items()) if isinstance(
                params, Mapping) else list(params))
        sent = {**self.headers, **dict(headers or {})}
        connect_timeout, read_timeout = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        verify = self.verify if verify is None else verify
        for _ in range(MAX_REDIRECTS + 1):
            r = self._send_once(method, url, sent, data, verify, connect_timeout, read_timeout)
            if not allow_redirects or r.status_code not in REDIRECTS or not r.headers.get("Location"):
                if not stream:
                    _ = r.content
                return r
            r.content   # noqa: B018 - read the redirect's body so the connection can be reused
            try:
                target = urljoin(url, r.headers["Location"].strip())
            except ValueError:
                raise InvalidURL(f"{method} {url.split('?')[0]}: the redirect's Location is not a URL") from None
            if (r.status_code == 303 and method != "HEAD") or (r.status_code in (301, 302) and method == "POST"):
                method, data = "GET", None
                sent = {k: v for k, v in sent.items() if k.lower() not in ("content-type", "content-length")}
            elif data is not None and not isinstance(data, (bytes, bytearray, str)):
                raise CannotResend(f"{method} {url.split('?')[0]}: redirected ({r.status_code}) after a "
                                   "streamed body was sent; it cannot be sent again")
            if not _keeps_credentials(url, target):
                sent = {k: v for k, v in sent.items()
                        if k.lower() not in ("authorization", "proxy-authorization", "cookie")}
            url = target
        raise TooManyRedirects(f"{method} {url.split('?')[0]}: more than {MAX_REDIRECTS} redirects")

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for conns in idle.values():
            for conn in conns:
                conn.close()

    # ----- plumbing

    def _environment(self) -> Mapping[str, str]:
        return self._env if self._env is not None else os.environ

    def _send_once(self, method: str, url: str, headers: dict[str, str], data, verify,
                   connect_timeout, read_timeout) -> Response:
        try:
            parts = urlsplit(url)
        except ValueError:
            raise InvalidURL(f"{url.split('?')[0]!r} is not a URL") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidURL(f"unsupported URL {url.split('?')[0]!r}")
        port = _port(parts, url.split("?")[0])
        env = self._environment() if self.trust_env else {}
        proxy = proxy_for(parts, env) if self.trust_env else None
        if parts.scheme == "https" and verify is True and self.trust_env and _env_ca_bundle(env):
            verify = _env_ca_bundle(env)
        if parts.scheme == "https":
            tls_context(verify)     # a bundle that cannot be read fails here, plainly, not as a network error
        verify = verify if isinstance(verify, str) else bool(verify)
        target = quote(parts.path or "/", safe=_TARGET_SAFE) + ("?" + quote(parts.query, safe=_TARGET_SAFE)
                                                                if parts.query else "")
        all_headers = dict(headers)
        if proxy is not None and parts.scheme == "http":
            target = f"http://{parts.netloc.rpartition('@')[2]}{target}"   # an http proxy takes the absolute URL
            if proxy.authorization:
                all_headers["Proxy-Authorization"] = proxy.authorization
        body = data.encode() if isinstance(data, str) else data
        if body is not None and not isinstance(body, (bytes, bytearray)) and hasattr(body, "__len__") \
                and not any(k.lower() == "content-length" for k in all_headers):
            all_headers["Content-Length"] = str(len(body))
        key = (parts.scheme, parts.hostname, port, verify, proxy and (proxy.host, proxy.port))
        what = f"{method} {url.split('?')[0]}"
        conn = self._take(key, read_timeout)
        if conn is None:
            conn = self._connect(parts, port, proxy, verify, connect_timeout, read_timeout, what)
        try:
            try:
                conn.request(method, target, body=body, headers=all_headers)
            except _SENT_ERRNOS:
                # The server answered before it took the whole body (a registry refusing an upload reads a
                # little, answers 401 or 413 and closes): that answer is what the caller needs, if it came.
                pass
            answer = conn.getresponse()
        except TimeoutError as exc:
            conn.close()
            raise Timeout(f"{what}: timed out ({exc})") from exc
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise ConnectionError(f"{what}: no complete answer: {type(exc).__name__}: {exc}") from exc
        except ValueError as exc:       # a header value with a line break, a target with a space left in it
            conn.close()
            raise InvalidURL(f"{what}: the request cannot be sent: {exc}") from None
        if answer.status < 200:
            # An interim 1xx left for us (http.client skips only 100 Continue): the final answer would be read
            # as the next request's. Never reuse the connection.
            conn.close()
            raise ConnectionError(f"{what}: interim answer {answer.status} without a final one")

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

    def _connect(self, parts, port: int, proxy: _Proxy | None, verify, connect_timeout, read_timeout, what: str):
        host = parts.hostname            # IPv6 without brackets: http.client takes the port separately
        try:
            if parts.scheme == "https":
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
            raise Timeout(f"{what}: connecting timed out ({exc})") from exc
        except OSError as exc:
            if proxy is not None and str(exc).startswith("Tunnel connection failed: 407"):
                raise UnusableSetting(f"proxy {proxy.host}:{proxy.port} refused the credentials of the proxy URL "
                                      "(407)") from None
            raise ConnectionError(f"{what}: connecting: {type(exc).__name__}: {exc}") from exc
        conn.sock.settimeout(read_timeout)      # connected: from now on the read timeout applies
        conn.timeout = read_timeout
        return conn

    def _take(self, key: tuple, read_timeout) -> http.client.HTTPConnection | None:
        with self._lock:
            conns = self._idle.get(key)
            while conns:
                conn = conns.pop()
                if conn.sock is not None and not _closed_by_peer(conn.sock):
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


def _origin(url: str) -> tuple[str, str, int]:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    return parts.scheme, (parts.hostname or "").lower(), port or _default_port(parts.scheme)


def same_origin(a: str, b: str) -> bool:
    return _origin(a) == _origin(b)


def _keeps_credentials(old: str, new: str) -> bool:
    """Authorization goes along only to the same origin, or from http to https on the same host on the default
    ports (an http registry that upgrades, as `requests` allows)."""
    was, now = _origin(old), _origin(new)
    return was == now or ((was[0], now[0]) == ("http", "https") and was[1] == now[1] and (was[2], now[2]) == (80, 443))


def _closed_by_peer(sock: socket.socket) -> bool:
    """An idle kept-alive socket that is readable was closed by the server (or holds bytes nobody asked for):
    either way it cannot carry the next request. poll(), not select(): select fails on descriptors >= 1024."""
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


def session_for(target: str, env: Mapping[str, str] | None = None) -> Session:
    """A Session for `target` (a host or URL) that never sends loopback traffic through a proxy."""
    from ghbuild.http.retry import is_loopback

    return Session(trust_env=not is_loopback(target), env=env)
