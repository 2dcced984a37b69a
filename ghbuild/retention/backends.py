"""Which retention backend a publish repository gets, by its host: Docker Hub, GHCR, else the plain registry API.

Kept apart from the delete loop (ghbuild.retention) so `ghbuild prune` prints its first line before the HTTP
stack and the registry client load: they are needed only once a backend is opened.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ghbuild import naming
from ghbuild.http.session import Session
from ghbuild.registry.client import RegistryFactory, client_factory
from ghbuild.registry.credentials import GHCR_HOST
from ghbuild.retention import dockerhub, ghcr
from ghbuild.retention.backend import Backend
from ghbuild.retention.oci import OciBackend
from ghbuild.retention.plan import nightly_pattern


def open_backend(repository: str, env: Mapping[str, str], *, nightly: str, suffixes: Iterable[str],
                 hub_api: str | None, github_api: str | None, registry_factory: RegistryFactory | None,
                 sleep: Callable[[float], None], log: Callable[[str], None],
                 session: Session | None) -> tuple[Backend[Any], str | None]:
    """The backend for `repository` and the API URL it talks to (None for the plain registry API).

    Docker Hub: DOCKERHUB_USERNAME, DOCKERHUB_TOKEN, `hub_api` or GHBUILD_DOCKERHUB_API. GHCR: GITHUB_TOKEN,
    `github_api` or GITHUB_API_URL, index manifests read through `registry_factory(host)`. Anything else: the
    registry API through `registry_factory` (default ghbuild.registry.client.client_factory(env, log)).
    """
    host, path = naming.split_repository(repository)
    clients: dict[str, Any] = {"sleep": sleep, "log": log, "session": session}
    if host in naming.DOCKER_HUB_HOSTS:
        api = dockerhub.api_url(hub_api, env)
        return dockerhub.backend(repository, path, env, api, **clients), api
    if host == GHCR_HOST:
        api = ghcr.api_url(github_api, env)
        return ghcr.backend(repository, path, env, api, registry_factory=registry_factory, **clients), api
    factory = registry_factory or client_factory(env, log)
    return OciBackend(factory(host), repository, path, nightly_pattern(nightly, tuple(suffixes))), None
