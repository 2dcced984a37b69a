"""Recorded HTTP exchanges replayed below a real ghbuild.http.session.Session: a Transport that checks each
request against the next recorded one and answers with the recorded bytes, parsed by http.client as an
answer off the wire is.

An exchange file (tests/exchanges/*.http) holds exchanges separated by a line `---`:

    > GET https://registry-1.docker.io/v2/library/alpine/manifests/3.20
    > Authorization: -                      (a request header to check; `-`: it must be absent)
    < HTTP/1.1 401 Unauthorized
    < Www-Authenticate: Bearer realm="https://auth.docker.io/token",service="registry.docker.io"
    <
    < {"errors":[...]}

The request line's URL is compared with the query (each `scope=` parameter in its order). A `<` block may
instead be `! HTTPConnectionError` (the connection broke: no answer). Lines starting with `#` are comments.
"""

from __future__ import annotations

import http.client
import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ghbuild.http import errors
from ghbuild.http.response import Response
from ghbuild.http.session import Session

EXCHANGES = Path(__file__).resolve().parent.parent / "exchanges"


@dataclass
class Exchange:
    method: str
    url: str
    expect: dict[str, str | None]        # header -> value, None: absent
    answer: bytes | None                 # the raw HTTP/1.1 answer; None with `fails`
    fails: str | None = None             # an ghbuild.http.errors class name raised instead of answering


@dataclass
class Sent:
    method: str
    url: str
    headers: dict[str, str]
    body: Any = None


def parse(text: str) -> list[Exchange]:
    out = []
    for block in text.split("\n---\n"):
        lines = [line for line in block.strip("\n").splitlines() if not line.startswith("#")]
        if not lines:
            continue
        request = [line[2:] for line in lines if line.startswith(">")]
        answer = [line[2:] for line in lines if line.startswith("<")]
        failure = [line[2:].strip() for line in lines if line.startswith("!")]
        method, url = request[0].split(" ", 1)
        expect: dict[str, str | None] = {}
        for header in request[1:]:
            name, _, value = header.partition(":")
            expect[name.strip().lower()] = None if value.strip() == "-" else value.strip()
        out.append(Exchange(method, url.strip(), expect, _raw(answer) if answer else None,
                            failure[0] if failure else None))
    return out


def _raw(lines: list[str]) -> bytes:
    """The answer's bytes: head lines with CRLF, the body after the first empty line; Content-Length added
    when the recording leaves it out (the body as written is what is sent)."""
    head, body = (lines[:lines.index("")], lines[lines.index("") + 1:]) if "" in lines else (lines, [])
    payload = "\n".join(body).encode()
    if not any(line.lower().startswith("content-length:") for line in head):
        head = [*head, f"Content-Length: {len(payload)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + payload


def load(name: str, **values: str) -> list[Exchange]:
    """The exchanges of tests/exchanges/`name`, each `KEY` of `values` in it replaced by its value."""
    text = (EXCHANGES / name).read_text("utf-8")
    for key, value in values.items():
        text = text.replace(key, value)
    return parse(text)


class _Wire:
    """What http.client.HTTPResponse reads an answer from."""

    def __init__(self, data: bytes):
        self._file = io.BytesIO(data)

    def makefile(self, mode: str, *args: Any, **kwargs: Any) -> io.BytesIO:
        return self._file


@dataclass
class ReplayTransport:
    exchanges: list[Exchange]
    sent: list[Sent] = field(default_factory=list)

    def send(self, method: str, url: str, headers: Mapping[str, str], body: Any, *, verify: bool | str,
             proxy: Any, timeout: Any) -> Response:
        position = len(self.sent)
        if not self.exchanges:
            raise AssertionError(f"request {position + 1} ({method} {url}) was not recorded: nothing left to replay")
        want = self.exchanges.pop(0)
        lowered = {k.lower(): v for k, v in headers.items()}
        if hasattr(body, "__iter__") and not isinstance(body, (bytes, bytearray, str)):
            body = b"".join(body)            # a streamed body: spent, as on the wire
        self.sent.append(Sent(method, url, lowered, body))
        assert (method, url) == (want.method, want.url), \
            f"request {position + 1}: sent {method} {url}, recorded {want.method} {want.url}"
        for name, value in want.expect.items():
            assert lowered.get(name) == value, f"request {position + 1} ({method} {url}): {name} is " \
                                               f"{lowered.get(name)!r}, recorded {value!r}"
        if want.fails:
            raise getattr(errors, want.fails)(f"{want.fails} (replayed)")
        assert want.answer is not None
        answer = http.client.HTTPResponse(_Wire(want.answer), method=method)    # type: ignore[arg-type]
        answer.begin()
        return Response(method, url, answer, lambda broken=False: None)

    def close(self) -> None:
        pass

    def done(self) -> None:
        assert not self.exchanges, f"{len(self.exchanges)} recorded exchange(s) never requested: " \
                                   f"{[(e.method, e.url) for e in self.exchanges]}"


def replaying(session: Session, exchanges: list[Exchange]) -> ReplayTransport:
    """Put the replay under `session` (a Registry's or a RetryingClient's) and return it."""
    transport = ReplayTransport(list(exchanges))
    session.transport = transport
    return transport
