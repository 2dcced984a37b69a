"""An answer as the callers read it, with the attributes of `requests.Response` they use: status, headers,
the body whole (`content`, `text`, `json()`) or as it arrives (`raw.read`, `raw.stream`, `iter_content`), and
the Link headers (`links`) that page a listing."""

from __future__ import annotations

import http.client
import json
import re
from collections.abc import Iterator
from typing import Any, Protocol

from ghbuild.http.errors import HTTPConnectionError, HTTPError, HTTPTimeout


class Release(Protocol):
    """Hands the connection back once the answer is read (broken=True: close it instead)."""

    def __call__(self, broken: bool = False) -> None: ...


class Request:
    __slots__ = ("method", "url")

    def __init__(self, method: str, url: str):
        self.method, self.url = method, url


class Raw:
    """The body of an answer as it arrives (never decoded: no Accept-Encoding but identity is sent)."""

    def __init__(self, response: http.client.HTTPResponse, release: Release):
        self._response, self._release = response, release

    def read(self, amt: int | None = None, decode_content: bool | None = None) -> bytes:
        try:
            data = self._response.read(amt)
        except TimeoutError as exc:
            self._release(broken=True)
            raise HTTPTimeout(f"read timed out: {exc}") from exc
        except (http.client.HTTPException, OSError) as exc:
            self._release(broken=True)
            raise HTTPConnectionError(f"{type(exc).__name__}: {exc}") from exc
        if amt and len(data) < amt and self._response.length:
            # A socket read returns less than asked only at the end of the stream, and http.client then hands
            # back what came (read(amt) does not raise): a body cut short must not look like a complete one.
            missing = self._response.length
            self._response.close()
            self._release(broken=True)
            raise HTTPConnectionError(f"IncompleteRead: the connection closed {missing} bytes before the end of "
                                      "the body")
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
    """An answer, with the attributes of `requests.Response` the callers use."""

    def __init__(self, method: str, url: str, response: http.client.HTTPResponse, release: Release):
        self.status_code = response.status
        self.reason = response.reason
        self.headers = response.headers            # case-insensitive .get()
        self.url = url
        self.request = Request(method, url)
        self.raw = Raw(response, release)
        self._response, self._release = response, release
        self._content: bytes | None = None

    @property
    def content(self) -> bytes:
        if self._content is None:
            self._content = b"" if self._response.isclosed() else self.raw.read()
        return self._content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
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

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_links(value: str) -> list[dict[str, str]]:
    """`<url>; rel="next"; title=x, <url2>; rel=prev` -> [{"url": .., "rel": .., ...}] (requests' reading)."""
    links: list[dict[str, str]] = []
    value = value.strip(" '\"")
    if not value:
        return links
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
