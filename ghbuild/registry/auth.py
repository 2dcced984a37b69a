"""Registry auth: the WWW-Authenticate challenge, scopes, Bearer tokens fetched and cached per set of scopes,
Basic credentials, and the requests that carry them (go-containerregistry's bearer and basic transports).

A request goes out with the Authorization this registry is known to take for its scopes (none until a first
challenge). A 401 from the registry itself is answered once: Basic sends the credentials, Bearer fetches a
token for the request's scopes plus the challenge's from the realm, then the request is sent again. A 401 from
where a redirect led (blob storage) is that host's answer and never gets the registry's credentials; a body
that cannot be sent again (a streamed upload) is never sent twice: the caller restarts it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping

from ghbuild.errors import AuthError, RegistryError, TransientError
from ghbuild.http.errors import PermanentError, RequestException
from ghbuild.http.origin import same_origin
from ghbuild.http.response import Response
from ghbuild.http.session import Session
from ghbuild.registry.credentials import Credentials

_CHALLENGE_PARAM = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))')
TOKEN_LIFETIME = 60.0       # seconds a token lives when the token server says nothing (the token spec's default)
FRESH_MARGIN = 5.0          # a cached token is used only while it lives at least this much longer


def parse_challenge(header: str) -> tuple[str, dict[str, str]]:
    """`Bearer realm="..",service="..",scope=".."` -> ("bearer", {...}). One challenge is enough here."""
    scheme, _, rest = header.strip().partition(" ")
    params = {}
    for m in _CHALLENGE_PARAM.finditer(rest):
        value = m.group(2) if m.group(2) is not None else m.group(3)
        params[m.group(1).lower()] = re.sub(r"\\(.)", r"\1", value)
    return scheme.lower(), params


def canonical_scopes(scopes: Iterable[str]) -> frozenset[str]:
    """Merge scopes per resource with sorted actions: "repository:a:push,pull" == "repository:a:pull,push"."""
    merged: dict[tuple[str, str], set[str]] = {}
    for scope in scopes:
        for one in scope.split():
            kind, _, rest = one.partition(":")
            name, _, actions = rest.rpartition(":")
            merged.setdefault((kind, name), set()).update(a for a in actions.split(",") if a)
    return frozenset(f"{k}:{n}:{','.join(sorted(a))}" for (k, n), a in merged.items())


def covers(have: frozenset[str], want: frozenset[str]) -> bool:
    """Whether a token for the canonical scopes `have` grants every scope in `want`."""
    grants = {s.rpartition(":")[0]: set(s.rpartition(":")[2].split(",")) for s in have}
    return all(s.rpartition(":")[0] in grants and set(s.rpartition(":")[2].split(","))
               <= grants[s.rpartition(":")[0]] for s in want)


def pull_scope(repo: str) -> list[str]:
    return [f"repository:{repo}:pull"]


def push_scope(repo: str) -> list[str]:
    return [f"repository:{repo}:pull,push"]


class RegistryAuth:
    """One registry's auth state and the requests that carry it: the Basic header, or Bearer tokens cached
    per set of scopes with their expiry."""

    def __init__(self, session: Session, credentials: Credentials | None, verify: bool | str,
                 timeout: tuple[float, float], registry_scheme: str = "https"):
        self.session, self.credentials, self.verify, self.timeout = session, credentials, verify, timeout
        self.registry_scheme = registry_scheme
        self.scheme: str | None = None            # "basic" or "bearer" once a challenge was seen
        self.bearer: dict[str, str] = {}          # realm, service from the last challenge
        self.tokens: dict[frozenset[str], tuple[str, float]] = {}

    # ----- the requests

    def send(self, method: str, url: str, scopes: list[str], *, headers: Mapping[str, str] | None = None,
             data=None, stream: bool = False, replayable: bool = True,
             fresh_for: float = 0.0, timeout: tuple[float, float] | None = None) -> Response:
        """One request with auth: a 401 challenge is answered once (only when the body can be sent again).
        Network failures are TransientError, settings and URLs that cannot work RegistryError. `timeout`:
        this request's (connect, read) timeouts instead of the client's."""
        hdrs = dict(headers or {})
        auth = self.ensure(scopes, fresh_for) if not replayable else self.header(scopes)
        if auth:
            hdrs["Authorization"] = auth
        r = self._request(method, url, hdrs, data, stream, timeout)
        if r.status_code != 401 or not same_origin(r.url, url):
            # A 401 from where a redirect led (blob storage) is that host's answer: its challenge would name a
            # token server of its choosing, and the registry's credentials must never go there.
            return r
        r.close()
        if not replayable:
            # The streamed body is spent: take a new token and let the caller restart the blob.
            self.challenge(r, scopes)
            raise TransientError(f"{method} {url.split('?')[0]}: 401 during a streamed upload")
        if not self.challenge(r, scopes):
            return r
        auth = self.header(scopes)
        if auth:
            hdrs["Authorization"] = auth
        return self._request(method, url, hdrs, data, stream, timeout)   # a second 401: the credentials are refused

    def _request(self, method: str, url: str, headers: dict[str, str], data, stream: bool,
                 timeout: tuple[float, float] | None = None) -> Response:
        try:
            return self.session.request(method, url, headers=headers, data=data, stream=stream,
                                        verify=self.verify, timeout=timeout or self.timeout, allow_redirects=True)
        except PermanentError as exc:
            raise RegistryError(f"{method} {url.split('?')[0]}: {exc}") from None
        except RequestException as exc:
            # Includes a registry closing the connection mid-body (e.g. 401 on a token that expired).
            raise TransientError(f"{method} {url.split('?')[0]}: {type(exc).__name__}: {exc}") from exc

    # ----- the credentials

    def header(self, scopes: Iterable[str], fresh_for: float = 0.0) -> str | None:
        """Authorization value for these scopes if we already have one (valid for fresh_for more seconds)."""
        if self.scheme == "basic" and self.credentials:
            return self.credentials.basic()
        if self.scheme == "bearer":
            want = canonical_scopes(scopes)
            now = time.monotonic()
            for have, (token, expires) in self.tokens.items():
                if covers(have, want) and expires - now > max(fresh_for, FRESH_MARGIN):
                    return "Bearer " + token
        return None

    def ensure(self, scopes: Iterable[str], fresh_for: float) -> str | None:
        """Get a token now (before a request whose body cannot be replayed) when the registry uses Bearer."""
        if self.scheme == "bearer" and self.header(scopes, fresh_for) is None:
            self.fetch_token(set(scopes))
            # A token server whose tokens live no longer than fresh_for (60 s without expires_in): the new
            # token as it is, rather than none at all (a request without it is refused for sure).
            return self.header(scopes, fresh_for) or self.header(scopes)
        return self.header(scopes, fresh_for)

    def challenge(self, response: Response, scopes: Iterable[str]) -> bool:
        """React to a 401. Returns True when a retry with new credentials makes sense."""
        header = response.headers.get("WWW-Authenticate", "")
        scheme, params = parse_challenge(header) if header else ("", {})
        if scheme == "basic":
            first = self.scheme != "basic"
            self.scheme = "basic"
            return bool(self.credentials) and first
        if scheme != "bearer" or "realm" not in params:
            return False
        self.scheme = "bearer"
        self.bearer = {k: params[k] for k in ("realm", "service") if k in params}
        wanted = set(scopes) | set(params.get("scope", "").split())
        if params.get("error") == "insufficient_scope" and self.header(wanted) is not None:
            return False  # a fresh token for exactly these scopes was already refused
        self.fetch_token(wanted)
        return True

    def fetch_token(self, scopes: Iterable[str]) -> None:
        # Each scope is its own `scope=` parameter (Docker's token spec); a mount needs
        # "repository:<target>:pull,push" and "repository:<source>:pull" in the same token.
        realm = self.bearer["realm"]
        query = [("service", self.bearer["service"])] if "service" in self.bearer else []
        wanted = canonical_scopes(scopes)
        query += [("scope", s) for s in sorted(wanted)]
        headers = {"Authorization": self.credentials.basic()} if self.credentials else {}
        if headers and self.registry_scheme == "https" and not realm.lower().startswith("https://"):
            # The registry is reached over TLS: its credentials never travel in clear text to a token server.
            raise AuthError(f"token server {realm}: not https, and the registry is; the credentials are not sent there")
        try:
            r = self.session.get(realm, params=query, headers=headers, verify=self.verify, timeout=self.timeout)
        except PermanentError as exc:
            raise RegistryError(f"token request to {realm}: {exc}") from None
        except RequestException as exc:
            raise TransientError(f"token request to {realm} failed: {exc}") from exc
        if r.status_code in (401, 403):
            raise AuthError(f"token server {realm} refused the credentials ({r.status_code})")
        if r.status_code == 429 or r.status_code >= 500:
            raise TransientError(f"token server answered {r.status_code}")
        if r.status_code != 200:
            raise RegistryError(f"token server answered {r.status_code}: {r.text[:200]}")
        body = r.json()
        token = body.get("token") or body.get("access_token")
        if not token:
            raise RegistryError("token server answered without a token")
        # The token spec's default lifetime is 60 s when expires_in is absent; Docker Hub gives 300 s.
        self.tokens[wanted] = (token, time.monotonic() + float(body.get("expires_in") or TOKEN_LIFETIME))
