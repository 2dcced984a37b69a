"""GET from an HTTP server on a unix socket (the Docker engine's API), with http.client alone.

For the local engine's few reads on a build's critical path: the Docker SDK costs tens of milliseconds of CPU to
import and a version round trip per client; http.client is imported on the first call, on the caller's thread.
"""

from __future__ import annotations

import json
import socket
from typing import Any


def get_json(path: str, url: str, timeout: float = 60) -> tuple[int, Any]:
    """(status, the body as JSON, or None when it is not JSON) of `GET url` on unix socket `path`. Raises
    OSError when nothing answers there."""
    import http.client

    class Connection(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(path)

    conn = Connection("docker", timeout=timeout)     # the engine ignores the Host header
    try:
        conn.request("GET", url)
        answer = conn.getresponse()
        body = answer.read()
    except http.client.HTTPException as exc:
        raise OSError(f"not an HTTP answer: {exc}") from None
    finally:
        conn.close()
    try:
        return answer.status, json.loads(body)
    except ValueError:
        return answer.status, None


def message(data: Any, status: int) -> str:
    """The engine's error message of an answer (`{"message": ...}`), else its status."""
    found = data.get("message") if isinstance(data, dict) else None
    return str(found) if found else f"HTTP {status}"
