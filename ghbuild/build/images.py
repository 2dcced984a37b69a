"""Reading built images on the engine: ids and history from a local engine's socket, else (and files, tags)
through the Docker SDK (the docker extra)."""

from __future__ import annotations

import io
import subprocess
import tarfile
import threading
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from ghbuild.build.engine import local_socket
from ghbuild.errors import EngineError, GhbuildError, require
from ghbuild.http import unix
from ghbuild.naming import is_image_reference
from ghbuild.registry.credentials import docker_config_file

_clients: dict[tuple, Any] = {}
_clients_lock = threading.Lock()


def docker_sdk(env: Mapping[str, str], timeout: int = 60):
    """A Docker SDK client with `docker.from_env()` semantics on `env` (DOCKER_HOST, DOCKER_TLS_VERIFY,
    DOCKER_CERT_PATH) and registry auth from that environment's client config, credential helpers
    (credsStore, credHelpers) included; imported only when needed. One per environment: making one asks the
    engine its API version (a round trip), and a build reads its image two or three times."""
    key = (tuple(sorted(env.items())), timeout)
    with _clients_lock:
        if key not in _clients:
            _clients[key] = _new_client(env, timeout)
        return _clients[key]


def warm(env: Mapping[str, str]) -> None:
    """Import the SDK and make `env`'s client now (on a thread, while a build runs): the reads after it find
    them ready. A missing extra or an engine that does not answer is said by those reads. Nothing for a
    local socket's engine, whose reads need no SDK."""
    if local_socket(env) is not None:
        return
    try:
        docker_sdk(env)
    except GhbuildError:
        pass


def _new_client(env: Mapping[str, str], timeout: int):
    docker = require("docker", "docker", "talking to the Docker engine")

    try:
        client = docker.from_env(environment=dict(env), timeout=timeout)
    except docker.errors.DockerException as exc:
        raise EngineError(f"cannot reach the Docker engine: {exc}") from None
    # from_env reads the auth config of this process's DOCKER_CONFIG; the build's environment decides.
    client.api.credstore_env = dict(env)
    client.api.reload_config(docker_config_file(env))
    return client


def _socket_get(env: Mapping[str, str], url: str, what: str) -> tuple[int, Any] | None:
    """(status, JSON) of `GET url` from the engine on its local unix socket, as docker.from_env reaches it
    (DOCKER_HOST unset or unix://), read without the SDK; None: another endpoint, which the SDK reads."""
    path = local_socket(env)
    if path is None:
        return None
    try:
        return unix.get_json(path, url)
    except OSError as exc:
        raise EngineError(f"{what}: the Docker engine at unix://{path} does not answer ({exc})") from None


def _checked(ref: str) -> str:
    """`ref`, when it is an image reference: nothing else becomes part of an engine API path, through the socket
    or the SDK (`..` or `?` would reach another endpoint of the engine, with the runner's access)."""
    if not is_image_reference(ref):
        raise EngineError(f"{ref!r} is not an image reference (name[:tag], name@sha256:..., or an image id)")
    return ref


def _image_url(ref: str, tail: str) -> str:
    return f"/images/{quote(_checked(ref), safe='/:@')}/{tail}"


def local_image_id(env: Mapping[str, str], candidates: Sequence[str]) -> str | None:
    """The id the engine knows a built image by: the first candidate it finds (buildx's iidfile holds the
    config digest, which the classic image store uses as the id; the containerd image store uses the
    manifest digest). None when the engine has none of them (an image not loaded)."""
    candidates = [_checked(candidate) for candidate in candidates if candidate]
    for candidate in candidates:
        what = f"docker image inspect {candidate}"
        answer = _socket_get(env, _image_url(candidate, "json"), what)
        if answer is None:
            return _sdk_image_id(env, candidates)
        status, data = answer
        if status == 200 and isinstance(data, dict) and data.get("Id"):
            return str(data["Id"])
        if status != 404:
            raise EngineError(f"{what}: {unix.message(data, status)}")
    return None


def _sdk_image_id(env: Mapping[str, str], candidates: Sequence[str]) -> str | None:
    docker = require("docker", "docker", "reading built images")
    api = docker_sdk(env).api
    for candidate in candidates:
        if not candidate:
            continue
        try:
            return str(api.inspect_image(candidate)["Id"])
        except docker.errors.ImageNotFound:
            continue
        except docker.errors.APIError as exc:
            raise EngineError(f"docker image inspect {candidate}: {exc.explanation or exc}") from None
    return None


def keep_latest(env: Mapping[str, str], image_id: str, tag: str, docker_cli: str) -> str | None:
    """Point the local tag `tag` at `image_id` and remove the image it held before, if no tag names that
    one any more. For a stage the layer audit builds only to measure it: left untagged, each build left a
    stage image in the engine (a new one per commit, gigabytes of its own layers); removed outright, the
    next build had to write its unchanged layers again (seconds). The removal runs on its own (`docker
    image rm`, not waited for): on the containerd image store the engine collects content before it
    answers. Returns why it could not be done, or None."""
    docker = require("docker", "docker", "tagging an image")
    api = docker_sdk(env).api
    repository, _, name = tag.rpartition(":")
    try:
        try:
            before = str(api.inspect_image(tag)["Id"])
        except docker.errors.ImageNotFound:
            before = None
        api.tag(image_id, repository, name)
        if before is None or before == image_id or api.inspect_image(before).get("RepoTags"):
            return None
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:
        return str(exc.explanation or exc)
    try:
        subprocess.Popen([docker_cli, "image", "rm", before], env=dict(env), stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        return str(exc)
    return None


def image_history(env: Mapping[str, str], image_id: str) -> list[dict]:
    """The image's history entries, oldest first."""
    answer = _socket_get(env, _image_url(image_id, "history"), f"docker history {image_id}")
    if answer is not None:
        status, data = answer
        if status == 200 and isinstance(data, list):
            return list(reversed(data))
        if "snapshot" not in unix.message(data, status):
            raise EngineError(f"docker history {image_id}: {unix.message(data, status)}")
    docker = require("docker", "docker", "reading an image's history")
    client = docker_sdk(env)
    try:
        return list(reversed(client.api.history(image_id)))
    except docker.errors.APIError as exc:
        # The containerd image store sizes each layer from its unpacked snapshot, and an image exported from
        # imported cache records is not unpacked yet: creating a container unpacks it, then history answers.
        if "snapshot" not in str(exc.explanation or exc):
            raise EngineError(f"docker history {image_id}: {exc.explanation or exc}") from None
    try:
        client.containers.create(image_id, command=["/nonexistent"], entrypoint=[]).remove(force=True)
        return list(reversed(client.api.history(image_id)))
    except docker.errors.APIError as exc:
        raise EngineError(f"docker history {image_id}: {exc.explanation or exc}") from None


def image_files(env: Mapping[str, str], image_id: str, folder: str, suffix: str) -> dict[str, bytes] | None:
    """The files named *suffix under `folder` inside an image (no container is started); None: no folder."""
    docker = require("docker", "docker", "reading files out of an image")

    container = docker_sdk(env).containers.create(image_id, command=["/nonexistent"], entrypoint=[])
    try:
        try:
            stream, _ = container.get_archive(folder)
        except docker.errors.NotFound:
            return None
        files: dict[str, bytes] = {}
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            for member in tar.getmembers():
                if member.isfile() and member.name.endswith(suffix):
                    data = tar.extractfile(member)
                    if data is not None:
                        files[member.name] = data.read()
        return files
    finally:
        container.remove(force=True)
