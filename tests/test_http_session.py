"""ghbuild.http.session, the registry layer's HTTP client, against real sockets on loopback: kept-alive
connections (and never a dead one), streamed bodies both ways, timeouts, redirects that leave the origin
without the credentials, proxies from the environment (absolute URLs, CONNECT tunnels, no_proxy), and TLS
verification against the system store, a named bundle or REQUESTS_CA_BUNDLE."""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
import time
from pathlib import Path

import pytest
from fakes.httpserver import LoopbackService, reply

from ghbuild.http import session as http_session
from ghbuild.http import transport_env
from ghbuild.http.errors import (
    CannotResend,
    HTTPConnectionError,
    HTTPTimeout,
    InvalidURL,
    TooManyRedirects,
    UnusableSetting,
)
from ghbuild.http.origin import keeps_credentials
from ghbuild.http.response import parse_links
from ghbuild.http.session import Session


class Scripted(LoopbackService):
    """Every request is logged (method, target, headers, body, the client's port) and answered by the route
    whose prefix matches the path: route(h, body) writes the answer itself."""

    def __init__(self):
        super().__init__()
        self.routes: dict[str, object] = {}
        self.log: list[tuple[str, str, dict, bytes, int]] = []

    def handle(self, h):
        length = h.headers.get("Content-Length")
        if length is not None:
            body = h.rfile.read(int(length))
        elif h.headers.get("Transfer-Encoding") == "chunked":
            body = b""
            while True:
                size = int(h.rfile.readline().strip(), 16)
                chunk = h.rfile.read(size + 2)[:size]
                if not size:
                    break
                body += chunk
        else:
            body = b""
        self.log.append((h.command, h.path, {k.lower(): v for k, v in h.headers.items()}, body,
                         h.client_address[1]))
        path = h.path.split("://", 1)[-1]
        path = path[path.index("/"):] if "://" in h.path else h.path
        for prefix, route in sorted(self.routes.items(), key=lambda item: -len(item[0])):
            if path.startswith(prefix):
                route(h, body)
                return
        reply(h, 404, b"no route")


@pytest.fixture
def server():
    with Scripted() as s:
        yield s
    assert not s.errors


def ok(payload: bytes = b"ok", headers=None):
    return lambda h, body: reply(h, 200, payload, headers)


# --------------------------------------------------------------------------- connections


def test_kept_alive_connection_is_reused_and_head_frees_it_at_once(server):
    server.routes["/a"] = ok(b"first")
    server.routes["/h"] = ok(b"never sent for HEAD")
    s = Session(trust_env=False)
    assert s.get(server.url + "/a").content == b"first"
    head = s.request("HEAD", server.url + "/h", stream=True)
    assert head.status_code == 200 and head.headers.get("content-length") == "19"
    assert s.get(server.url + "/a").text == "first"
    assert len({entry[4] for entry in server.log}) == 1        # one TCP connection for all three


def test_connection_closed_by_the_server_while_idle_is_not_reused(server):
    def close_after(h, body):
        reply(h, 200, b"bye")
        h.wfile.flush()
        h.close_connection = True       # no "Connection: close": the client learns only from the socket
    server.routes["/bye"] = close_after
    server.routes["/next"] = ok(b"fresh")
    s = Session(trust_env=False)
    assert s.get(server.url + "/bye").content == b"bye"
    time.sleep(0.2)
    assert s.get(server.url + "/next").content == b"fresh"
    assert len({entry[4] for entry in server.log}) == 2


def test_a_partly_read_stream_closes_its_connection(server):
    server.routes["/big"] = ok(b"x" * 1_000_000)
    server.routes["/small"] = ok(b"small")
    s = Session(trust_env=False)
    r = s.get(server.url + "/big", stream=True)
    assert r.raw.read(10) == b"x" * 10
    r.close()                                                    # the rest must not be read as the next answer
    assert s.get(server.url + "/small").content == b"small"
    assert len({entry[4] for entry in server.log}) == 2


def test_streamed_upload_has_content_length_and_streamed_download_arrives_whole(server):
    class Sized:
        def __init__(self, parts):
            self.parts = parts

        def __len__(self):
            return sum(map(len, self.parts))

        def __iter__(self):
            return iter(self.parts)

    server.routes["/up"] = lambda h, body: reply(h, 202, b"", {"X-Got": str(len(body))})
    server.routes["/down"] = ok(bytes(range(256)) * 4096)
    s = Session(trust_env=False)
    r = s.request("PATCH", server.url + "/up", data=Sized([b"a" * 70_000, b"b" * 70_000]))
    assert r.status_code == 202 and r.headers.get("X-Got") == "140000"
    _, _, headers, body, _ = server.log[-1]
    assert headers.get("content-length") == "140000" and "transfer-encoding" not in headers
    assert body == b"a" * 70_000 + b"b" * 70_000
    got = b"".join(s.get(server.url + "/down", stream=True).raw.stream(1 << 16))
    assert got == bytes(range(256)) * 4096


def test_an_answer_cut_short_is_a_connection_error(server):
    def short(h, body):
        h.send_response_only(200)
        h.send_header("Content-Length", "1000")
        h.end_headers()
        h.wfile.write(b"only this")
        h.wfile.flush()
        h.close_connection = True
    server.routes["/short"] = short
    r = Session(trust_env=False).get(server.url + "/short", stream=True)
    with pytest.raises(HTTPConnectionError, match="IncompleteRead: the connection closed 991 bytes before the end"):
        r.raw.read(1000)                            # 9 bytes came, then the connection closed: never a short body
    r = Session(trust_env=False).get(server.url + "/short", stream=True)
    with pytest.raises(HTTPConnectionError, match="IncompleteRead"):
        b"".join(r.raw.stream(64))
    with pytest.raises(OSError):    # what the registry layer catches: a RequestException is an OSError
        Session(trust_env=False).get(server.url + "/short")


def test_read_timeout_and_refused_connection():
    quiet = socket.socket()
    quiet.bind(("127.0.0.1", 0))
    quiet.listen(1)                    # accepts (the kernel does) and never answers
    port = quiet.getsockname()[1]
    try:
        start = time.monotonic()
        with pytest.raises(HTTPTimeout):
            Session(trust_env=False).get(f"http://127.0.0.1:{port}/", timeout=(2, 0.5))
        assert time.monotonic() - start < 2
    finally:
        quiet.close()
    with pytest.raises(HTTPConnectionError, match="connecting: ConnectionRefusedError"):
        Session(trust_env=False).get(f"http://127.0.0.1:{port}/")


# --------------------------------------------------------------------------- redirects


def test_redirect_to_another_origin_drops_credentials_and_a_same_origin_one_keeps_them(server):
    with Scripted() as storage:
        storage.routes["/blob"] = ok(b"layer bytes")
        server.routes["/v2/r/blobs/"] = lambda h, body: reply(h, 307, b"", {"Location": storage.url + "/blob?sig=1"})
        server.routes["/v2/same"] = lambda h, body: reply(h, 302, b"", {"Location": "/v2/target"})
        server.routes["/v2/target"] = ok(b"here")
        s = Session(trust_env=False)
        s.headers["User-Agent"] = "ghbuild/test"
        r = s.get(server.url + "/v2/r/blobs/sha256:1", headers={"Authorization": "Bearer secret"})
        assert (r.status_code, r.content, r.url) == (200, b"layer bytes", storage.url + "/blob?sig=1")
        (_, target, headers, _, _), = storage.log
        assert target == "/blob?sig=1" and "authorization" not in headers
        assert headers["user-agent"] == "ghbuild/test"
        s.get(server.url + "/v2/same", headers={"Authorization": "Bearer secret"})
        assert server.log[-1][1] == "/v2/target" and server.log[-1][2]["authorization"] == "Bearer secret"
    assert not storage.errors


def test_a_port_change_is_another_origin(server):
    with Scripted() as other:
        other.routes["/"] = ok()
        server.routes["/go"] = lambda h, body: reply(h, 302, b"", {"Location": f"http://127.0.0.1:{other.host.split(':')[1]}/x"})
        Session(trust_env=False).get(server.url + "/go", headers={"Authorization": "Basic dTpw"})
        assert "authorization" not in other.log[0][2]


def test_303_becomes_a_get_without_body_and_a_streamed_body_is_not_resent(server):
    server.routes["/post"] = lambda h, body: reply(h, 303, b"", {"Location": "/done"})
    server.routes["/done"] = ok(b"done")
    server.routes["/patch"] = lambda h, body: reply(h, 307, b"", {"Location": "/again"})
    s = Session(trust_env=False)
    r = s.request("POST", server.url + "/post", data=b"payload", headers={"Content-Type": "application/json"})
    assert r.content == b"done"
    method, target, headers, body, _ = server.log[-1]
    assert (method, target, body) == ("GET", "/done", b"") and "content-type" not in headers
    with pytest.raises(CannotResend, match="cannot be sent again"):
        s.request("PATCH", server.url + "/patch", data=iter([b"once"]))
    assert not any(entry[1] == "/again" for entry in server.log)


def test_redirect_loop_is_bounded(server):
    server.routes["/loop"] = lambda h, body: reply(h, 302, b"", {"Location": "/loop"})
    with pytest.raises(TooManyRedirects):
        Session(trust_env=False).get(server.url + "/loop")
    assert len(server.log) == http_session.MAX_REDIRECTS + 1


# --------------------------------------------------------------------------- proxies


@pytest.mark.parametrize("host, port, no_proxy, bypass", [
    ("reg.example.com", 443, "example.com", True),
    ("reg.example.com", 443, ".example.com", True),
    ("example.com", 443, ".example.com", True),
    ("badexample.com", 443, "example.com", False),
    ("reg.example.com", 443, "example.com:5000", False),
    ("reg.example.com", 5000, "example.com:5000", True),
    ("10.1.2.3", 80, "10.0.0.0/8", True),
    ("11.1.2.3", 80, "10.0.0.0/8", False),
    ("::1", 5000, "[::1]:5000", True),
    ("anything", 80, "*", True),
    ("REG.Example.COM", 443, " other.org , EXAMPLE.com", True),
    ("reg.example.com", 443, "", False),
])
def test_no_proxy(host, port, no_proxy, bypass):
    assert transport_env.no_proxy_matches(host, port, no_proxy) is bypass


def test_http_target_goes_through_the_proxy_as_an_absolute_url(server):
    server.routes["/v2/"] = ok(b"via proxy")
    env = {"HTTP_PROXY": f"http://user:p%40ss@{server.host}", "NO_PROXY": "internal.example,127.0.0.0/8"}
    s = Session(env=env)
    assert s.get("http://registry.example.test/v2/").content == b"via proxy"
    _, target, headers, _, _ = server.log[-1]
    assert target == "http://registry.example.test/v2/" and headers["host"] == "registry.example.test"
    assert headers["proxy-authorization"] == "Basic dXNlcjpwQHNz"          # user:p@ss
    assert s.get(server.url + "/v2/").content == b"via proxy"                # no_proxy: sent directly
    _, target, headers, _, _ = server.log[-1]
    assert target == "/v2/" and "proxy-authorization" not in headers
    lowercase_wins = Session(env={"http_proxy": server.url, "HTTP_PROXY": "http://127.0.0.1:1"})
    assert lowercase_wins.get("http://registry.example.test/v2/").content == b"via proxy"


def test_a_session_that_does_not_trust_the_environment_ignores_proxies(server):
    server.routes["/v2/"] = ok(b"direct")
    s = http_session.session_for(server.host, env={"HTTP_PROXY": "http://127.0.0.1:1", "ALL_PROXY": "http://127.0.0.1:1"})
    assert not s.trust_env and s.get(server.url + "/v2/").content == b"direct"


@pytest.mark.parametrize("proxy", ["https://proxy.example:3128", "socks5://127.0.0.1:1080"])
def test_a_proxy_url_this_client_cannot_use_is_refused_plainly(proxy):
    with pytest.raises(UnusableSetting, match="only http:// proxy URLs"):
        Session(env={"https_proxy": proxy}).get("https://registry.example.test/v2/")


# --------------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> tuple[Path, Path]:
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key


@pytest.fixture
def tls_server(certificate):
    cert, key = certificate
    with Scripted() as s:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        s._server.socket = ctx.wrap_socket(s._server.socket, server_side=True)
        s.routes["/v2/"] = ok(b"over tls")
        yield s


def test_tls_is_verified_against_the_system_store_a_named_bundle_or_requests_ca_bundle(tls_server, certificate):
    url = f"https://localhost:{tls_server.host.split(':')[1]}/v2/"
    with pytest.raises(HTTPConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        Session(trust_env=False).get(url)
    assert Session(trust_env=False).get(url, verify=str(certificate[0])).content == b"over tls"
    assert Session(env={"REQUESTS_CA_BUNDLE": str(certificate[0])}).get(url).content == b"over tls"
    assert Session(trust_env=False).get(url, verify=False).content == b"over tls"
    with pytest.raises(UnusableSetting, match="no such file"):
        Session(trust_env=False).get(url, verify="/nonexistent/ca.pem")


def test_https_through_a_connect_proxy(tls_server, certificate):
    """An https target behind an http proxy: CONNECT with the proxy's credentials, then TLS to the target
    end to end (the proxy sees neither the path nor the Authorization header)."""
    seen: list[bytes] = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)

    def relay(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (a, b):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def proxy() -> None:
        client, _ = listener.accept()
        head = b""
        while b"\r\n\r\n" not in head:
            head += client.recv(4096)
        seen.append(head)
        target = head.split(b" ")[1].decode()
        host, port = target.rsplit(":", 1)
        upstream = socket.create_connection(("127.0.0.1" if host == "localhost" else host, int(port)))
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        threading.Thread(target=relay, args=(upstream, client), daemon=True).start()
        relay(client, upstream)

    thread = threading.Thread(target=proxy, daemon=True)
    thread.start()
    port = tls_server.host.split(":")[1]
    env = {"HTTPS_PROXY": f"http://proxyuser:pw@127.0.0.1:{listener.getsockname()[1]}"}
    s = Session(env=env)
    r = s.get(f"https://localhost:{port}/v2/", verify=str(certificate[0]), headers={"Authorization": "Bearer t"})
    assert r.content == b"over tls"
    s.close()
    thread.join(5)
    listener.close()
    assert seen[0].startswith(f"CONNECT localhost:{port} HTTP/1.".encode())
    assert f"\r\nHost: localhost:{port}\r\n".encode() in seen[0]
    assert b"Proxy-Authorization: Basic cHJveHl1c2VyOnB3" in seen[0] and b"Bearer" not in seen[0]
    assert tls_server.log[-1][2]["authorization"] == "Bearer t"


# --------------------------------------------------------------------------- start-up


def test_publish_path_imports_none_of_the_heavy_http_stack(server, tmp_path):
    """A publish reaches its registries without importing requests or urllib3 (their import took longer than a
    republish's requests), nor boto3, docker, PyGithub or jsonschema: the staging registry here answers 404 to
    everything, so the run goes through the registry layer and fails plainly."""
    import json
    import sys

    (tmp_path / "ghbuild.toml").write_text(
        f'[registries]\nstaging = "{server.host}/p/{{image}}"\npublish = "{server.host}/pub/{{image}}"\n'
        '[images.cpu]\ndockerfile = "Dockerfile"\nplatforms = ["linux/amd64"]\n')
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    sha, digest = "0123456789abcdef" * 2 + "01234567", "sha256:" + "a" * 64
    records = {"cpu-amd64": {"image": "cpu", "arch": "amd64", "platform": "linux/amd64", "digest": digest,
                             "ref": f"{server.host}/p/cpu@{digest}", "sha": sha, "trusted": True}}
    probe = ("import sys, contextlib, io, json\nfrom ghbuild import cli\nerr = io.StringIO()\n"
             "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):\n"
             "    try:\n        rc = cli.main(sys.argv[1:])\n    except SystemExit as exc:\n        rc = exc.code\n"
             "heavy = ('requests', 'urllib3', 'boto3', 'botocore', 'docker', 'github', 'jsonschema')\n"
             "print(json.dumps([rc, [m for m in heavy if m in sys.modules], err.getvalue()]))")
    result = subprocess.run([sys.executable, "-c", probe, "publish", "nightly", "--config", "ghbuild.toml",
                             "--image", "cpu", "--sha", sha, "--records", json.dumps(records), "--event", "push",
                             "--repository", "o/r", "--ref", "main", "--default-branch", "main"],
                            capture_output=True, text=True, timeout=60, cwd=tmp_path)
    rc, loaded, stderr = json.loads(result.stdout)
    assert rc != 0 and "staging image(s) missing: " + records["cpu-amd64"]["ref"] in stderr, stderr
    assert any(entry[1].startswith("/v2/p/cpu/manifests/") for entry in server.log)   # it did reach the registry
    assert loaded == [], loaded


# --------------------------------------------------------------------------- found by attacking it


class RawServer:
    """A TCP server on loopback whose `answer(conn, index)` owns each connection: for what an HTTP server
    library will not do (answer mid-upload and close, interim 1xx answers, a wrong port in a Location)."""

    def __init__(self, answer, family=socket.AF_INET, host="127.0.0.1"):
        self.listener = socket.socket(family)
        self.listener.bind((host, 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.answer, self.connections, self.errors = answer, 0, []
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._run, args=(conn, self.connections), daemon=True).start()

    def _run(self, conn, index):
        try:
            self.answer(conn, index)
        except Exception as exc:
            self.errors.append(repr(exc))
        finally:
            conn.close()

    def close(self):
        self.listener.close()


def read_head(conn) -> bytes:
    head = b""
    while b"\r\n\r\n" not in head:
        data = conn.recv(65536)
        if not data:
            break
        head += data
    return head


class SizedBody:
    def __init__(self, size, part=1 << 16):
        self.size, self.part = size, part

    def __len__(self):
        return self.size

    def __iter__(self):
        for _ in range(self.size // self.part):
            yield b"z" * self.part


@pytest.mark.parametrize("status", [401, 413])
def test_an_answer_sent_before_the_upload_ended_is_returned(status):
    """A registry refusing an upload reads a little, answers and closes (Go's net/http: 256 KiB at most): the
    client gets that answer (a 401 to act on, a 413 to report), not a broken pipe to retry."""
    def refuse(conn, index):
        got = len(read_head(conn))
        while got < 256 << 10:
            got += len(conn.recv(65536))
        conn.sendall(f"HTTP/1.1 {status} No\r\nContent-Length: 2\r\nConnection: close\r\n\r\nno".encode())
        conn.shutdown(socket.SHUT_WR)
        time.sleep(0.5)
    server = RawServer(refuse)
    try:
        r = Session(trust_env=False).request("PATCH", f"http://127.0.0.1:{server.port}/up", data=SizedBody(8 << 20),
                                             timeout=(5, 5))
        assert (r.status_code, r.content) == (status, b"no")
    finally:
        server.close()


def test_the_registry_refreshes_its_token_after_a_401_during_an_upload():
    """Through the registry layer: the 401 mid-upload makes it fetch a new token for each attempt."""
    from ghbuild.errors import TransientError
    from ghbuild.registry import client as registry
    from ghbuild.registry import upload
    from ghbuild.registry.credentials import Credentials

    tokens, patches = [], []

    def token_and_registry(conn, index):
        buffer = b""
        while True:
            head = buffer or read_head(conn)
            buffer = b""
            if not head:
                return
            line = head.split(b"\r\n", 1)[0].decode()
            if line.startswith("GET /token"):
                tokens.append(line)
                body = b'{"token": "t%d"}' % len(tokens)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            elif line.startswith("PATCH"):
                patches.append([h for h in head.split(b"\r\n") if h.lower().startswith(b"authorization:")])
                got = len(head)
                while got < 256 << 10:
                    got += len(conn.recv(65536))
                conn.sendall(b'HTTP/1.1 401 No\r\nWWW-Authenticate: Bearer realm="http://127.0.0.1:%d/token",'
                             b'service="s",error="invalid_token"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'
                             % server.port)
                conn.shutdown(socket.SHUT_WR)
                time.sleep(0.3)
                return
            else:
                conn.sendall(b'HTTP/1.1 401 No\r\nWWW-Authenticate: Bearer realm="http://127.0.0.1:%d/token",'
                             b'service="s"\r\nContent-Length: 0\r\n\r\n' % server.port)
    server = RawServer(token_and_registry)
    try:
        reg = registry.Registry(f"127.0.0.1:{server.port}", Credentials("u", "p"), attempts=2, delay=0,
                                log=lambda m: None)
        desc = registry.Descriptor("application/octet-stream", "sha256:" + "b" * 64, 8 << 20)
        with pytest.raises(TransientError, match="401 during a streamed upload"):
            reg.retry(lambda: upload.patch_and_commit(reg, "r", desc, iter(SizedBody(8 << 20)),
                                                     [f"http://127.0.0.1:{server.port}/v2/r/blobs/uploads/1"]),
                       "copy blob")
        # The first attempt had no challenge to go on; the second sent a new token (not the refused one, and
        # not none: these tokens live 60 s, no longer than the freshness a streamed upload asks for).
        assert patches == [[], [b"Authorization: Bearer t2"]], (patches, tokens)
    finally:
        server.close()


def test_a_challenge_from_where_a_redirect_led_never_gets_the_registry_credentials():
    """The registry redirects a blob GET to storage; storage answers 401 naming a token server of its choice.
    Following that challenge would send the registry's user and password there: the 401 is an error instead."""
    from ghbuild.errors import AuthError
    from ghbuild.registry import client as registry
    from ghbuild.registry.credentials import Credentials

    token_server, storage, origin = Scripted(), Scripted(), Scripted()
    with token_server, storage, origin:
        token_server.routes["/"] = ok(b'{"token": "stolen"}')
        storage.routes["/"] = lambda h, body: reply(h, 401, b"", {
            "WWW-Authenticate": f'Bearer realm="{token_server.url}/token",service="evil"'})
        origin.routes["/v2/"] = lambda h, body: reply(h, 307, b"", {"Location": f"http://localhost:{storage.host.split(':')[1]}/blob"})
        reg = registry.Registry(origin.host, Credentials("robot", "REGISTRY-PASSWORD"), attempts=1,
                                log=lambda m: None)
        with pytest.raises(AuthError, match="HTTP 401"):
            reg.open_blob("r", "sha256:" + "c" * 64)
        assert token_server.log == []
        assert all("authorization" not in entry[2] for entry in storage.log)


def test_an_https_registry_never_sends_its_credentials_to_an_http_token_server():
    from ghbuild.errors import AuthError
    from ghbuild.registry.auth import RegistryAuth
    from ghbuild.registry.credentials import Credentials

    auth = RegistryAuth(Session(trust_env=False), Credentials("u", "p"), True, (5, 5), "https")
    auth.bearer = {"realm": "http://127.0.0.1:1/token"}
    with pytest.raises(AuthError, match="not https"):
        auth.fetch_token(["repository:r:pull"])


@pytest.mark.parametrize("location, error", [
    ("http://127.0.0.1:99999/x", "port is not a number"),
    ("http://127.0.0.1:abc/x", "port is not a number"),
    ("http://[::1/x", "not a URL"),
    ("ftp://127.0.0.1/x", "unsupported URL"),
])
def test_a_bad_location_is_one_clear_error_that_is_not_retried(server, location, error):
    server.routes["/go"] = lambda h, body: reply(h, 302, b"", {"Location": location})
    with pytest.raises(InvalidURL, match=error):
        Session(trust_env=False).get(server.url + "/go")


def test_a_location_with_spaces_or_non_ascii_is_sent_encoded(server):
    server.routes["/go"] = lambda h, body: reply(h, 302, b"", {"Location": "/caf\u00e9 blob?x=a b&y=%2F"})
    server.routes["/caf"] = ok(b"found")
    assert Session(trust_env=False).get(server.url + "/go").content == b"found"
    assert server.log[-1][1] == "/caf%C3%A9%20blob?x=a%20b&y=%2F"


def test_ipv6_literal_hosts_connect():
    def answer(conn, index):
        head = read_head(conn)
        host = next(line for line in head.split(b"\r\n") if line.lower().startswith(b"host:"))
        body = host.split(b":", 1)[1].strip()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
    server = RawServer(answer, socket.AF_INET6, "::1")    # the loopback interface has ::1 on CI's machines
    try:
        r = Session(trust_env=False).get(f"http://[::1]:{server.port}/v2/")
        assert r.content == f"[::1]:{server.port}".encode()
    finally:
        server.close()


def test_an_unreadable_ca_bundle_is_a_setting_error(tmp_path):
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(UnusableSetting, match="no certificate could be read"):
        Session(trust_env=False).get("https://127.0.0.1:1/", verify=str(garbage))
    with pytest.raises(UnusableSetting, match="no certificate could be read"):
        Session(env={"REQUESTS_CA_BUNDLE": str(garbage)}).get("https://127.0.0.1:1/")


def test_verify_false_and_zero_are_the_same_unverified_context():
    import ssl as ssl_module

    assert transport_env.tls_context(0).verify_mode == ssl_module.CERT_NONE
    assert transport_env.tls_context(False) is transport_env.tls_context(0)
    assert transport_env.tls_context(1) is transport_env.tls_context(True)
    assert transport_env.tls_context(True).verify_mode == ssl_module.CERT_REQUIRED


def test_an_interim_answer_never_leaves_the_final_one_for_the_next_request():
    def answer(conn, index):
        read_head(conn)
        if index > 1:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfresh")
            return
        conn.sendall(b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n")
        time.sleep(0.2)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nfinal" + str(index).encode())
        read_head(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecond")
    server = RawServer(answer)
    try:
        s = Session(trust_env=False)
        with pytest.raises(HTTPConnectionError, match="interim answer 103"):
            s.get(f"http://127.0.0.1:{server.port}/first")
        assert s.get(f"http://127.0.0.1:{server.port}/again").content == b"fresh"   # on a new connection
        assert server.connections == 2
    finally:
        server.close()


def test_a_reused_connection_takes_the_new_request_s_read_timeout(server):
    server.routes["/fast"] = ok(b"fast")

    def slow(h, body):
        time.sleep(1.5)
        reply(h, 200, b"slow")
    server.routes["/slow"] = slow
    s = Session(trust_env=False)
    assert s.get(server.url + "/fast", timeout=(5, 30)).content == b"fast"
    start = time.monotonic()
    with pytest.raises(HTTPTimeout):
        s.get(server.url + "/slow", timeout=(5, 0.3))
    assert time.monotonic() - start < 1.2


def test_an_empty_lower_case_proxy_variable_switches_the_upper_case_one_off(server):
    server.routes["/v2/"] = ok(b"direct")
    s = Session(env={"http_proxy": "", "HTTP_PROXY": "http://127.0.0.1:1"})
    assert s.get(server.url + "/v2/").content == b"direct"
    assert transport_env.env_proxy({"http_proxy": "", "ALL_PROXY": "http://p:1"}, "http") == "http://p:1"


def test_a_proxy_refusing_its_credentials_is_a_setting_error():
    def refuse(conn, index):
        read_head(conn)
        conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
    proxy = RawServer(refuse)
    try:
        with pytest.raises(UnusableSetting, match="refused the credentials"):
            Session(env={"https_proxy": f"http://u:wrong@127.0.0.1:{proxy.port}"}).get("https://registry.example.test/")
        with pytest.raises(UnusableSetting, match="port is not a number"):
            Session(env={"https_proxy": "http://proxy:99999"}).get("https://registry.example.test/")
    finally:
        proxy.close()


def test_http_to_https_on_the_same_host_keeps_credentials_only_on_default_ports():
    keeps = keeps_credentials
    assert keeps("http://reg.example/v2/", "https://reg.example/v2/")
    assert keeps("http://reg.example:80/v2/", "https://reg.example:443/v2/")
    assert not keeps("http://reg.example:5000/v2/", "https://reg.example/v2/")
    assert not keeps("https://reg.example/v2/", "http://reg.example/v2/")          # never a downgrade
    assert not keeps("https://reg.example/v2/", "https://storage.example/x")
    assert not keeps("https://reg.example/v2/", "https://reg.example:8443/x")


def test_keep_alive_works_with_descriptors_above_1024(server, tmp_path):
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # Raising the hard limit needs root, which the suite runs as (the Makefile starts dockerd).
    wanted_hard = hard if hard == resource.RLIM_INFINITY else max(hard, 1200)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), wanted_hard))
    held = [open(tmp_path / "f", "w") for _ in range(1100)]   # noqa: SIM115 - held open on purpose
    try:
        server.routes["/"] = ok()
        s = Session(trust_env=False)
        for _ in range(3):
            s.get(server.url + "/")
        assert len({entry[4] for entry in server.log}) == 1
    finally:
        for f in held:
            f.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_link_headers_are_read_as_requests_reads_them_and_tag_lists_follow_them(server):
    """The registry pages its tag list with `Link: <...>; rel="next"`: every page is read (release decides
    `latest` from that list), and the parsing matches requests' on the header forms registries send."""
    import json as json_module

    from ghbuild.registry import client as registry

    pages = {"": (["v1", "v2"], '</v2/app/tags/list?n=2&last=v2>; rel="next"'),
             "v2": (["v3", "v4"], "</v2/app/tags/list?n=2&last=v4>; rel=next"),
             "v4": (["v5"], None)}

    def tags(h, body):
        last = h.path.partition("last=")[2]
        names, link = pages[last]
        reply(h, 200, json_module.dumps({"name": "app", "tags": names}).encode(), {"Link": link} if link else {})
    server.routes["/v2/app/tags/list"] = tags
    assert registry.Registry(server.host, log=lambda m: None).list_tags("app", page_size=2) == \
        ["v1", "v2", "v3", "v4", "v5"]

    requests_utils = pytest.importorskip("requests.utils")
    for header in ['</a?n=1&last=x>; rel="next"', "<https://r.example/b>; rel=next, </c>; rel=\"prev\"; title=x",
                   "", '<d>', "<e>; rel=\"last\" , <f>;rel=first"]:
        assert parse_links(header) == requests_utils.parse_header_links(header), header
