"""A small HTTP/1.1 client on the standard library (http.client, ssl): the one every ghbuild HTTP client uses
(the registry layer, the Docker Hub and GitHub API clients, the artifact download), PyGithub's aside.

Why not `requests`: the registry layer is on the path of every publish, and a republish of a nightly the hub
already holds is about fifteen small requests. `import requests` (urllib3, charset_normalizer, idna, cookies)
took longer than those requests; `http.client` and `ssl` cost a fraction of it (docs/benchmarks.md). What the
callers relied on `requests` for is kept, with the same names, in layers:

- `Session` (here): default headers, query parameters, JSON bodies, the environment's proxies and CA bundle
  (ghbuild.http.transport_env; never for a session with `trust_env = False`), redirects followed (at most
  MAX_REDIRECTS) with Authorization, Proxy-Authorization and Cookie dropped when the redirect leaves the
  origin (blob GETs redirect to S3 or a CDN), and 303 (or 301/302 after a POST) turned into a GET without a
  body;
- a `Transport` (ghbuild.http.transport): one exchange on the wire; `ConnectionPool` keeps connections alive
  per origin, streams request bodies (an iterable with `__len__` goes out with Content-Length) and answers
  (`stream=True`, then `raw.read` / `raw.stream`), with connect and read timeouts;
- `Response` (ghbuild.http.response), the errors (ghbuild.http.errors), origins (ghbuild.http.origin); the
  retry policy sits on top (ghbuild.http.retry).

Left out on purpose: cookies, .netrc credentials, response decompression (no Accept-Encoding but
`identity` is sent, so layers arrive as stored), https:// and SOCKS proxy URLs (refused with a clear error).
"""

from __future__ import annotations

import json as jsonlib
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

from ghbuild.http.errors import CannotResend, InvalidURL, TooManyRedirects
from ghbuild.http.origin import is_loopback, keeps_credentials, port_of
from ghbuild.http.response import Response
from ghbuild.http.transport import Body, ConnectionPool, Transport
from ghbuild.http.transport_env import env_ca_bundle, proxy_for, tls_context

MAX_REDIRECTS = 10
REDIRECTS = (301, 302, 303, 307, 308)
_CREDENTIALS = ("authorization", "proxy-authorization", "cookie")


class Session:
    """Default headers and a transport (by default kept-alive connections) for one thread (like
    requests.Session, not thread-safe for concurrent requests; make one per thread)."""

    def __init__(self, *, trust_env: bool = True, env: Mapping[str, str] | None = None,
                 transport: Transport | None = None):
        self.trust_env = trust_env
        self.headers: dict[str, str] = {}
        self.verify: bool | str = True
        self.transport: Transport = transport if transport is not None else ConnectionPool()
        self._env = env

    # ----- requests' surface

    def get(self, url: str, **kwargs: Any) -> Response:
        return self.request("GET", url, **kwargs)

    def request(self, method: str, url: str, *, params=None, headers: Mapping[str, str] | None = None,
                data: Body | str = None, json: Any = None, stream: bool = False, verify: bool | str | None = None,
                timeout: float | tuple[float, float] | None = None, allow_redirects: bool = True) -> Response:
        """Send a request and follow its redirects. `json`: a body encoded as JSON (instead of `data`)."""
        method = method.upper()
        if params:
            url += ("&" if urlsplit(url).query else "?") + urlencode(list(params.items()) if isinstance(
                params, Mapping) else list(params))
        sent = {**self.headers, **dict(headers or {})}
        if json is not None:
            data = jsonlib.dumps(json).encode()
            if not any(k.lower() == "content-type" for k in sent):
                sent["Content-Type"] = "application/json"
        body: Body = data.encode() if isinstance(data, str) else data
        timeouts = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        verify = self.verify if verify is None else verify
        for _ in range(MAX_REDIRECTS + 1):
            r = self._send_once(method, url, sent, body, verify, timeouts)
            if not allow_redirects or r.status_code not in REDIRECTS or not r.headers.get("Location"):
                if not stream:
                    _ = r.content
                return r
            _ = r.content   # read the redirect's body so the connection can be reused
            try:
                target = urljoin(url, r.headers["Location"].strip())
            except ValueError:
                raise InvalidURL(f"{method} {url.split('?')[0]}: the redirect's Location is not a URL") from None
            if (r.status_code == 303 and method != "HEAD") or (r.status_code in (301, 302) and method == "POST"):
                method, body = "GET", None
                sent = {k: v for k, v in sent.items() if k.lower() not in ("content-type", "content-length")}
            elif body is not None and not isinstance(body, (bytes, bytearray)):
                raise CannotResend(f"{method} {url.split('?')[0]}: redirected ({r.status_code}) after a "
                                   "streamed body was sent; it cannot be sent again")
            if not keeps_credentials(url, target):
                sent = {k: v for k, v in sent.items() if k.lower() not in _CREDENTIALS}
            url = target
        raise TooManyRedirects(f"{method} {url.split('?')[0]}: more than {MAX_REDIRECTS} redirects")

    def close(self) -> None:
        self.transport.close()

    # ----- plumbing

    def _environment(self) -> Mapping[str, str]:
        return self._env if self._env is not None else os.environ

    def _send_once(self, method: str, url: str, headers: dict[str, str], body: Body, verify: bool | str,
                   timeouts: tuple[float | None, float | None]) -> Response:
        """One exchange, after the checks that fail plainly (not as network errors): the URL, the proxy URL and
        the CA bundle the environment names."""
        try:
            parts = urlsplit(url)
        except ValueError:
            raise InvalidURL(f"{url.split('?')[0]!r} is not a URL") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidURL(f"unsupported URL {url.split('?')[0]!r}")
        port_of(parts, url.split("?")[0])
        env = self._environment() if self.trust_env else {}
        proxy = proxy_for(parts, env) if self.trust_env else None
        if parts.scheme == "https" and verify is True and self.trust_env:
            verify = env_ca_bundle(env) or verify
        if parts.scheme == "https":
            tls_context(verify)     # a bundle that cannot be read fails here, plainly, not as a network error
        return self.transport.send(method, url, headers, body, verify=verify, proxy=proxy, timeout=timeouts)


def session_for(target: str, env: Mapping[str, str] | None = None, transport: Transport | None = None) -> Session:
    """A Session for `target` (a host or URL) that never sends loopback traffic through a proxy."""
    return Session(trust_env=not is_loopback(target), env=env, transport=transport)
