"""Registry auth (ghbuild.registry.auth, through ghbuild.registry.client.Registry) on recorded HTTP exchanges
(tests/exchanges/): what goes on the wire, which token each request carries, and the one error a caller sees.
The wire is replayed below a real Session (tests/fakes/replay.py); nothing waits (`sleep` records)."""

from __future__ import annotations

import hashlib

import pytest
from fakes.replay import load, parse, replaying

from ghbuild.errors import AuthError, RegistryError, TransientError
from ghbuild.registry import auth as auth_module
from ghbuild.registry import upload
from ghbuild.registry.client import Registry
from ghbuild.registry.credentials import Credentials

HUB_CHALLENGE = ('www-authenticate: Bearer realm="https://auth.docker.io/token",service="registry.docker.io",'
                 'scope="repository:library/alpine:pull"')
HEAD_ALPINE = "HEAD https://registry-1.docker.io/v2/library/alpine/manifests/3.20"
TOKEN_URL = "GET https://auth.docker.io/token?service=registry.docker.io&scope=repository%3Alibrary%2Falpine%3Apull"
OK_HEAD = ("< HTTP/1.1 200 OK\n< content-type: application/vnd.oci.image.index.v1+json\n"
           "< docker-content-digest: sha256:" + "a" * 64 + "\n< content-length: 10")


def challenged(token_answer: str, token_auth: str | None = None) -> str:
    """The anonymous HEAD of alpine:3.20 challenged, then the token request answered with `token_answer` (it
    carries `token_auth` as its Authorization when given)."""
    sent = f"\n> Authorization: {token_auth}" if token_auth else ""
    return (f"> {HEAD_ALPINE}\n> Authorization: -\n< HTTP/1.1 401 Unauthorized\n< {HUB_CHALLENGE}\n---\n"
            f"> {TOKEN_URL}{sent}\n{token_answer}")


def registry(host: str = "docker.io", credentials: Credentials | None = None) -> tuple[Registry, list[float]]:
    waits: list[float] = []
    return Registry(host, credentials, sleep=waits.append, log=lambda message: None), waits


def test_an_anonymous_pull_takes_a_token_for_the_challenge_s_scope_and_keeps_it_for_the_repository():
    reg, waits = registry()
    wire = replaying(reg.session, load("dockerhub_pull.http"))
    first = reg.resolve("alpine", "3.20")
    second = reg.resolve("alpine", "3.19")       # the cached token: no second token request
    wire.done()
    assert first is not None and first.digest.startswith("sha256:1e42bb")
    assert second is not None and second.media_type == "application/vnd.oci.image.index.v1+json"
    token_request = wire.sent[1]
    assert "authorization" not in token_request.headers       # anonymous: no credentials to the token server
    assert waits == []


def test_a_push_after_a_pull_fetches_a_token_for_pull_and_push_with_the_user_s_credentials():
    manifest = b"{}"
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    reg, _ = registry(credentials=Credentials("ci", "s3cret"))
    wire = replaying(reg.session, load("dockerhub_push.http", DIGEST=digest))
    assert reg.resolve("acme/app", "nightly") is None
    assert reg.put_manifest("acme/app", "nightly", manifest, "application/vnd.oci.image.manifest.v1+json") == digest
    assert reg.resolve("acme/app", "nightly") is not None     # a cached token that covers pull
    wire.done()
    assert wire.sent[4].url.endswith("scope=repository%3Aacme%2Fapp%3Apull%2Cpush")
    assert wire.sent[5].body == manifest


def test_scopes_are_the_same_whatever_the_order_of_their_actions():
    assert auth_module.canonical_scopes(["repository:a:push,pull"]) == auth_module.canonical_scopes(
        ["repository:a:pull", "repository:a:push"])
    have = auth_module.canonical_scopes(["repository:a:pull,push"])
    assert auth_module.covers(have, auth_module.canonical_scopes(["repository:a:pull"]))
    assert not auth_module.covers(have, auth_module.canonical_scopes(["repository:b:pull"]))


def test_a_token_is_not_used_once_it_is_about_to_expire(monkeypatch):
    clock = [1000.0]
    monkeypatch.setattr(auth_module.time, "monotonic", lambda: clock[0])
    token = ('< HTTP/1.1 200 OK\n< content-type: application/json\n<\n'
             '< {"token":"T%d","expires_in":60,"issued_at":"2026-12-04T18:00:00Z"}')
    reg, _ = registry()
    wire = replaying(reg.session, parse(f"""
{challenged(token % 1)}
---
> {HEAD_ALPINE}
> Authorization: Bearer T1
{OK_HEAD}
---
{challenged(token % 2)}
---
> {HEAD_ALPINE}
> Authorization: Bearer T2
{OK_HEAD}
"""))
    reg.resolve("alpine", "3.20")
    clock[0] += 60 - auth_module.FRESH_MARGIN + 1      # T1 lives less than the margin: a new one is taken
    reg.resolve("alpine", "3.20")
    wire.done()


def test_basic_credentials_go_after_the_challenge_and_then_with_every_request():
    reg, _ = registry("registry.example.com", Credentials("ci", "s3cret"))
    wire = replaying(reg.session, load("distribution_basic.http"))
    assert reg.list_tags("team/app") == ["nightly", "v1"]
    assert reg.blob_exists("team/app", "sha256:4f5e1b9a3bd8d0dbc05f6bc8e0d9ee7aa4c1c1e4b0d0d9a4e35cbf4d0b3a4f11")
    wire.done()


def test_a_basic_challenge_without_credentials_is_one_clear_auth_error_not_a_retry():
    reg, waits = registry("registry.example.com")
    wire = replaying(reg.session, load("distribution_basic.http")[:1])
    with pytest.raises(AuthError, match=r"^GET tags team/app: HTTP 401 UNAUTHORIZED: authentication required$"):
        reg.list_tags("team/app")
    wire.done()
    assert waits == []


def test_a_401_after_a_fresh_token_is_one_auth_error_naming_the_request():
    refused = ('< HTTP/1.1 401 Unauthorized\n< content-type: application/json\n< ' + HUB_CHALLENGE + '\n<\n'
               '< {"errors":[{"code":"UNAUTHORIZED","message":"authentication required","detail":null}]}')
    reg, waits = registry(credentials=Credentials("ci", "wrong"))
    wire = replaying(reg.session, parse(f"""
> GET https://registry-1.docker.io/v2/library/alpine/manifests/3.20
{refused}
---
> {TOKEN_URL}
< HTTP/1.1 200 OK
<
< {{"token":"T"}}
---
> GET https://registry-1.docker.io/v2/library/alpine/manifests/3.20
> Authorization: Bearer T
{refused}
"""))
    with pytest.raises(AuthError, match=r"^GET manifest library/alpine:3.20: HTTP 401 UNAUTHORIZED: authentication"):
        reg.get_manifest("alpine", "3.20")
    wire.done()
    assert waits == []


@pytest.mark.parametrize("status", ["401 Unauthorized", "403 Forbidden"])
def test_a_token_server_refusing_the_credentials_is_an_auth_error(status):
    reg, _ = registry(credentials=Credentials("ci", "wrong"))
    refused = (f"< HTTP/1.1 {status}\n< content-type: application/json\n<\n"
               '< {"details":"incorrect username or password"}')
    wire = replaying(reg.session, parse(challenged(refused, token_auth="Basic Y2k6d3Jvbmc=")))
    with pytest.raises(AuthError, match=rf"token server https://auth.docker.io/token refused the credentials "
                                        rf"\({status[:3]}\)"):
        reg.resolve("alpine", "3.20")
    wire.done()


def test_a_token_server_answering_503_is_retried_with_the_request():
    reg, waits = registry()
    challenge = f"> {HEAD_ALPINE}\n< HTTP/1.1 401 Unauthorized\n< {HUB_CHALLENGE}"
    wire = replaying(reg.session, parse(f"""
{challenge}
---
> {TOKEN_URL}
< HTTP/1.1 503 Service Unavailable
<
< upstream connect error
---
{challenge}
---
> {TOKEN_URL}
< HTTP/1.1 200 OK
<
< {{"token":"T"}}
---
> {HEAD_ALPINE}
> Authorization: Bearer T
{OK_HEAD}
"""))
    assert reg.resolve("alpine", "3.20") is not None
    wire.done()
    assert waits == [reg.delay]


def test_an_https_registry_never_sends_its_credentials_to_an_http_token_server():
    reg, _ = registry("registry.example.com", Credentials("ci", "s3cret"))
    wire = replaying(reg.session, parse("""
> HEAD https://registry.example.com/v2/team/app/manifests/v1
< HTTP/1.1 401 Unauthorized
< Www-Authenticate: Bearer realm="http://auth.example.com/token",service="registry.example.com"
"""))
    with pytest.raises(AuthError, match="not https, and the registry is; the credentials are not sent there"):
        reg.resolve("team/app", "v1")
    wire.done()
    assert len(wire.sent) == 1


def test_a_401_from_where_a_redirect_led_gets_no_credentials():
    reg, _ = registry("registry.example.com", Credentials("ci", "s3cret"))
    reg.auth.scheme = "basic"
    wire = replaying(reg.session, parse("""
> GET https://registry.example.com/v2/team/app/blobs/sha256:abc
> Authorization: Basic Y2k6czNjcmV0
< HTTP/1.1 307 Temporary Redirect
< Location: https://storage.example.net/blobs/abc?sig=1
<
---
> GET https://storage.example.net/blobs/abc?sig=1
> Authorization: -
< HTTP/1.1 401 Unauthorized
< Www-Authenticate: Bearer realm="https://evil.example.net/token"
<
< denied
"""))
    r = reg.auth.send("GET", "https://registry.example.com/v2/team/app/blobs/sha256:abc", ["repository:team/app:pull"])
    wire.done()
    assert r.status_code == 401 and r.url.startswith("https://storage.example.net/")
    assert reg.auth.scheme == "basic" and reg.auth.tokens == {}      # that challenge was not taken up


def test_a_streamed_upload_refused_mid_way_is_never_sent_again():
    reg, _ = registry("registry.example.com", Credentials("ci", "s3cret"))
    wire = replaying(reg.session, parse("""
> PATCH https://registry.example.com/v2/team/app/blobs/uploads/u1
< HTTP/1.1 401 Unauthorized
< Www-Authenticate: Bearer realm="https://registry.example.com/token",service="registry.example.com",scope="repository:team/app:pull,push"
---
> GET https://registry.example.com/token?service=registry.example.com&scope=repository%3Ateam%2Fapp%3Apull%2Cpush
> Authorization: Basic Y2k6czNjcmV0
< HTTP/1.1 200 OK
<
< {"token":"fresh"}
"""))
    body = iter([b"layer ", b"bytes"])
    with pytest.raises(TransientError, match="401 during a streamed upload"):
        reg.auth.send("PATCH", "https://registry.example.com/v2/team/app/blobs/uploads/u1",
                      ["repository:team/app:pull,push"], data=body, replayable=False)
    wire.done()
    assert [s.method for s in wire.sent] == ["PATCH", "GET"]          # the body went out once
    assert reg.auth.header(["repository:team/app:pull,push"]) == "Bearer fresh"   # the restart carries it


def test_a_token_server_answering_without_a_token_is_a_registry_error():
    reg, _ = registry()
    wire = replaying(reg.session, parse(challenged('< HTTP/1.1 200 OK\n<\n< {"expires_in":300}')))
    with pytest.raises(RegistryError, match="token server answered without a token"):
        reg.resolve("alpine", "3.20")
    wire.done()


# ----- recorded live from a distribution registry with htpasswd auth (tests/exchanges/recorded_basic_*.http)

LIVE = "127.0.0.1:5000"
LIVE_CREDENTIALS = Credentials("ghbuild", "recorded-password")
LIVE_DIGEST = "sha256:8cac139af4d50a74e5e702d0d848e958eacb66b6e4ac907d66facebfaf810148"
LIVE_UPLOAD = ("http://127.0.0.1:5000/v2/ghbuild/replay/blobs/uploads/10bba35b-3d01-4b50-ab5e-747fb19732ec?_state="
               "_pdi4hmsFxnR6AYxuxxRETaST-Q0Ab87sco-RHUR4rB7Ik5hbWUiOiJnaGJ1aWxkL3JlcGxheSIsIlVVSUQiOiIxMGJiYTM1Yi0zZ"
               "DAxLTRiNTAtYWI1ZS03NDdmYjE5NzMyZWMiLCJPZmZzZXQiOjAsIlN0YXJ0ZWRBdCI6IjIwMjYtMTItMDRUMTk6MDU6MDIuODg2MT"
               "E4MjcxWiJ9")


def live_registry(credentials: Credentials | None = LIVE_CREDENTIALS) -> tuple[Registry, list[float], list[str]]:
    waits: list[float] = []
    logs: list[str] = []
    return Registry(LIVE, credentials, sleep=waits.append, log=logs.append), waits, logs


def test_recorded_basic_challenge_is_answered_once_then_the_credentials_go_at_once():
    reg, waits, _ = live_registry()
    get = load("recorded_basic_get_manifest.http")
    wire = replaying(reg.session, [*get, get[1]])
    assert reg.get_manifest("ghbuild/replay", "1").digest == LIVE_DIGEST
    assert reg.get_manifest("ghbuild/replay", "1").digest == LIVE_DIGEST     # one request: Basic sent at once
    wire.done()
    assert [s.headers.get("authorization") for s in wire.sent] == [None, *[LIVE_CREDENTIALS.basic()] * 2]
    assert reg.auth.scheme == "basic" and waits == []


def test_recorded_basic_challenge_to_an_anonymous_client_is_the_401_not_a_retry():
    reg, waits, _ = live_registry(credentials=None)
    wire = replaying(reg.session, load("recorded_basic_get_manifest.http")[:1])
    with pytest.raises(AuthError, match=r"^GET manifest ghbuild/replay:1: HTTP 401 UNAUTHORIZED: authentication "
                                        r"required$"):
        reg.get_manifest("ghbuild/replay", "1")
    wire.done()
    assert waits == []


def test_recorded_wrong_password_is_sent_once_and_is_one_auth_error():
    reg, waits, _ = live_registry(Credentials("ghbuild", "wrong-password"))
    wire = replaying(reg.session, load("recorded_basic_wrong_password.http"))
    with pytest.raises(AuthError, match=r"^GET manifest ghbuild/replay:1: HTTP 401 UNAUTHORIZED"):
        reg.get_manifest("ghbuild/replay", "1")
    wire.done()                      # the challenge answered once: no third request
    assert waits == []


def test_recorded_head_challenge_without_a_body_then_the_descriptor():
    reg, waits, _ = live_registry()
    wire = replaying(reg.session, load("recorded_basic_head_manifest.http"))
    desc = reg.resolve("ghbuild/replay", "1")
    wire.done()
    assert desc is not None
    assert (desc.media_type, desc.digest, desc.size) == ("application/vnd.oci.image.manifest.v1+json", LIVE_DIGEST,
                                                         259)
    assert waits == []


def test_recorded_manifest_unknown_with_credentials_is_a_confirmed_miss():
    reg, _, _ = live_registry()
    reg.auth.scheme = "basic"        # learnt from an earlier challenge
    wire = replaying(reg.session, load("recorded_basic_manifest_unknown.http"))
    assert reg.find_manifest("ghbuild/replay", "2") is None
    wire.done()


def test_recorded_streamed_upload_refused_is_restarted_with_a_new_body_never_the_spent_one():
    """The PATCH went out before the registry's scheme was known: 401 Basic. The streamed body is not sent again
    by the auth layer; the retry restarts with a fresh stream and the credentials, then commits with PUT."""
    from ghbuild.registry.manifest import Descriptor

    reg, waits, logs = live_registry()
    wire = replaying(reg.session, load("recorded_basic_blob_upload.http")[1:])     # the POST opened LIVE_UPLOAD
    desc = Descriptor("application/octet-stream", "sha256:" + hashlib.sha256(b"hello").hexdigest(), 5)
    streams: list[list[bytes]] = []

    def stream():
        taken: list[bytes] = []
        streams.append(taken)
        for part in (b"hel", b"lo"):
            taken.append(part)
            yield part

    reg.retry(lambda: upload.patch_and_commit(reg, "ghbuild/replay", desc, stream(), [LIVE_UPLOAD]), "copy blob")
    wire.done()
    assert [(s.method, s.headers.get("authorization"), s.body) for s in wire.sent] == [
        ("PATCH", None, b"hello"), ("PATCH", LIVE_CREDENTIALS.basic(), b"hello"),
        ("PUT", LIVE_CREDENTIALS.basic(), None)]
    assert streams == [[b"hel", b"lo"], [b"hel", b"lo"]]     # two streams, each read once
    assert waits == [2.0] and "401 during a streamed upload" in logs[0]
