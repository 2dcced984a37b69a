"""The registry client's Bearer token flow against a registry that demands tokens (the distribution token
protocol: 401 + `WWW-Authenticate: Bearer realm,service,scope`, tokens from the realm with Basic credentials),
built from a real registry behind an auth gate and a small token server. Covers what Docker Hub and GHCR need:
scoped tokens, re-scoping from pull to push, one token with two repositories for a cross-repository mount,
rejected credentials as AuthError (never a "missing"), anonymous pulls of a public repository."""

from __future__ import annotations

import base64
import json
from urllib.parse import parse_qs

import pytest
from fakes.faultproxy import FaultProxy
from fakes.httpserver import LoopbackService, reply, reply_json
from fakes.oci import RegistryClient
from fakes.registry_server import running_registry

from ghbuild.errors import AuthError, RegistryError
from ghbuild.registry.client import Registry
from ghbuild.registry.copy import copy_image
from ghbuild.registry.credentials import Credentials

USER, PASSWORD = "robot", "s3cret-token-value"


class TokenServer(LoopbackService):
    """GET /token?service=..&scope=..: a token naming the granted scopes; Basic credentials for push."""

    def __init__(self):
        super().__init__()
        self.requests: list[dict] = []

    @property
    def token_url(self) -> str:
        return self.url + "/token"

    def handle(self, h):
        query = parse_qs(h.path.partition("?")[2])
        auth = h.headers.get("Authorization", "")
        user = None
        if auth.startswith("Basic "):
            got = base64.b64decode(auth[6:]).decode()
            if got != f"{USER}:{PASSWORD}":
                reply(h, 401)
                return
            user = USER
        scopes = query.get("scope", [])
        self.requests.append({"user": user, "scopes": scopes})
        granted = []
        for scope in scopes:
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            allowed = [a for a in actions.split(",") if user or (a == "pull" and name.startswith("public/"))]
            if allowed:
                granted.append(f"{kind}:{name}:{','.join(sorted(allowed))}")
        reply_json(h, 200, {"token": base64.b64encode(json.dumps(granted).encode()).decode(), "expires_in": 300})


def _needed(method: str, path: str, query: str) -> list[str]:
    parts = path.split("/")
    if len(parts) < 4 or parts[1] != "v2":
        return []
    for marker in ("manifests", "blobs", "tags"):
        if marker in parts:
            name = "/".join(parts[2:parts.index(marker)])
            break
    else:
        return []
    action = "pull" if method in ("GET", "HEAD") else "push"
    needed = [f"repository:{name}:{action}"]
    source = parse_qs(query).get("from")
    if source:
        needed.append(f"repository:{source[0]}:pull")
    return needed


def _covered(needed: list[str], granted: list[str]) -> bool:
    have = {}
    for g in granted:
        head, _, actions = g.rpartition(":")
        have[head] = set(actions.split(","))
    return all(n.rpartition(":")[2] in have.get(n.rpartition(":")[0], set()) for n in needed)


@pytest.fixture()
def token_registry(tmp_path):
    with running_registry(tmp_path) as url:
        tokens = TokenServer().start()
        proxy = FaultProxy(url)
        proxy.start()

        def gate(method, path, query, headers):
            needed = _needed(method, path, query)
            auth = headers.get("Authorization", "")
            granted = json.loads(base64.b64decode(auth[7:])) if auth.startswith("Bearer ") else []
            if path == "/v2/" or _covered(needed, granted):
                return None
            scope = " ".join(needed)
            challenge = f'Bearer realm="{tokens.token_url}",service="test-registry",scope="{scope}"'
            return 401, {"WWW-Authenticate": challenge}

        proxy.gate = gate
        try:
            yield RegistryClient(url), proxy, tokens
        finally:
            proxy.stop()
            tokens.stop()


def test_push_pull_and_mount_with_scoped_tokens(token_registry):
    direct, proxy, tokens = token_registry
    image = direct.push_image("team/src", "v1", architecture="amd64", payload=b"token auth")
    client = Registry(proxy.host, Credentials(USER, PASSWORD))

    # a pull needs a pull token for that repository only
    assert client.resolve("team/src", "v1").digest == image["digest"]
    assert tokens.requests[-1]["scopes"] == ["repository:team/src:pull"]

    # a copy within one registry mounts: one token carries push on the target and pull on the source
    _, stats = copy_image(client, "team/src", "v1", client, "team/dst", tags=("v1",), parallel=1)
    assert stats.mounted_blobs == 2 and stats.copied_blobs == 0 and stats.tags_moved == 1
    assert any({"repository:team/dst:pull,push", "repository:team/src:pull"} <= set(r["scopes"])
               for r in tokens.requests)
    assert direct.head_manifest("team/dst", "v1")[0] == image["digest"]
    assert all(PASSWORD not in json.dumps(r) for r in tokens.requests)


def test_rejected_credentials_are_an_auth_error_not_a_miss(token_registry):
    direct, proxy, _ = token_registry
    direct.push_image("team/src", "v1", payload=b"x")
    client = Registry(proxy.host, Credentials(USER, "wrong"), attempts=2, delay=0)
    with pytest.raises(AuthError) as info:
        client.resolve("team/src", "v1")
    assert "wrong" not in str(info.value)


def test_anonymous_pull_of_a_public_repository_and_refused_push(token_registry):
    direct, proxy, _ = token_registry
    image = direct.push_image("public/app", "v1", payload=b"public")
    anonymous = Registry(proxy.host)
    assert anonymous.resolve("public/app", "v1").digest == image["digest"]
    manifest = anonymous.get_manifest("public/app", "v1")
    with pytest.raises(RegistryError):
        anonymous.put_manifest("public/app", "v2", manifest.raw, manifest.media_type)
