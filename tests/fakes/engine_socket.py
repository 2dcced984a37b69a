"""The Docker engine's API on a unix socket, as dockerd answers it (tests only): GET routes to JSON answers,
every request path kept.

Usage::

    with EngineSocket(tmp_path / "docker.sock", {"/info": (200, {"ServerVersion": "26.1.5"})}) as engine:
        env = {"DOCKER_HOST": engine.url}
        ...
        assert engine.asked == ["/info"]

Unknown paths get the engine's 404 (`{"message": "page not found"}`).
"""

from __future__ import annotations

import socketserver
import threading
from pathlib import Path
from typing import Any

from fakes.httpserver import QuietHandler, reply_json


class EngineSocket:
    def __init__(self, path: Path, routes: dict[str, tuple[int, Any]]) -> None:
        self.path, self.routes, self.asked = path, routes, []
        owner = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                owner.asked.append(self.path)
                status, body = owner.routes.get(self.path, (404, {"message": "page not found"}))
                reply_json(self, status, body, {"Api-Version": "1.45"})

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

            def get_request(self):      # a unix peer has no address; the request handler wants one
                request, _ = super().get_request()
                return request, ("local", 0)

        self._server = Server(str(path), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def __enter__(self) -> EngineSocket:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
