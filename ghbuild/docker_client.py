"""The Docker edge: every call to the docker client and the Docker engine's API goes through here.

Find a client that can build, create the buildx builder and run builds; push and read built images
(history, files) through the Docker SDK, which speaks the engine API with `docker.from_env()` semantics.

Which client: GHBUILD_DOCKER_CLI if set, else `docker` on PATH, else /usr/bin/docker. A client with
the buildx plugin builds with `docker buildx build` (backend "buildx"). Without buildx, a client
older than 23.0 still drives the engine's built-in BuildKit with DOCKER_BUILDKIT=1 (backend
"engine"); newer clients refuse BuildKit builds without buildx, so they are passed over.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from ghbuild.credentials import docker_config_file, read_docker_config
from ghbuild.errors import EngineError, require


class DockerClient(NamedTuple):
    path: str
    version: str
    buildx: bool

    @property
    def backend(self) -> str:
        return "buildx" if self.buildx else "engine"


def _run(argv: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                          env=dict(env) if env is not None else None)


def _major(version: str) -> int:
    match = re.match(r"(\d+)", version)
    return int(match.group(1)) if match else 0


# One `docker version` for both sides: the server line stays empty when the engine does not answer.
_VERSION_FORMAT = '{{.Client.Version}}{{"\\n"}}{{if .Server}}{{.Server.Version}}{{end}}'

# Where the docker CLI looks for a plugin (docker/cli, cli-plugins/manager): the config file's
# cliPluginsExtraDirs, the config folder's cli-plugins, then these system folders (Linux).
SYSTEM_PLUGIN_DIRS = ("/usr/local/lib/docker/cli-plugins", "/usr/local/libexec/docker/cli-plugins",
                      "/usr/lib/docker/cli-plugins", "/usr/libexec/docker/cli-plugins")


def plugin_dirs(env: Mapping[str, str]) -> list[str]:
    """The folders the docker CLI searches for `docker-<name>` plugins, in its order, for this environment."""
    config = docker_config_file(env)
    found = (read_docker_config(config) or {}).get("cliPluginsExtraDirs")   # the CLI too reads none from a broken one
    extra = [d for d in found if isinstance(d, str) and d] if isinstance(found, list) else []
    return [*extra, os.path.join(os.path.dirname(config), "cli-plugins"), *SYSTEM_PLUGIN_DIRS]


def buildx_plugin(env: Mapping[str, str]) -> str | None:
    """The buildx plugin the docker CLI would run, found on disk without running anything (first match, as the
    CLI takes it): an executable regular file or symlink to one named docker-buildx."""
    for folder in plugin_dirs(env):
        path = os.path.join(folder, "docker-buildx")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def _banner_version(text: str) -> str:
    """The client version from `docker --version` ("Docker version 28.2.2, build e6534b4")."""
    match = re.search(r"version\s+([^\s,]+)", text)
    return match.group(1) if match else ""


def _start_probe(path: str, env: Mapping[str, str], engine: bool = True) -> list[subprocess.Popen]:
    """The questions to one client, asked at the same time: each client run costs tens of milliseconds.
    Without `engine` (a dry run), only the client's own version: no engine is asked, no plugin run."""
    env = dict(env)
    questions = ([path, "version", "--format", _VERSION_FORMAT], [path, "buildx", "version"]) if engine \
        else ([path, "--version"],)
    return [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            for argv in questions]


def _finish_probe(started: list[subprocess.Popen], timeout: float = 30) -> tuple[str, str | None, bool]:
    """(client version, why its engine cannot be used or None, has buildx)."""
    out, err = started[0].communicate(timeout=timeout)
    started[1].communicate(timeout=timeout)
    client, _, server = out.partition("\n")
    unreachable = None
    if started[0].returncode != 0 or not server.strip():
        unreachable = f"engine not reachable ({(err.strip().splitlines() or ['no answer'])[-1]})"
    return client.strip(), unreachable, started[1].returncode == 0


def _finish_offline_probe(started: list[subprocess.Popen], has_buildx: bool, timeout: float = 30,
                          ) -> tuple[str, str | None, bool]:
    """The same for a dry run: the version from `docker --version`; buildx as found in the plugin folders."""
    out, err = started[0].communicate(timeout=timeout)
    version = _banner_version(out) if started[0].returncode == 0 else ""
    unreadable = None if version else (err.strip().splitlines()
                                       or [f"`--version` printed no version: {out.strip()[:80]!r}"])[-1]
    return version, unreadable, has_buildx


class ClientProbe:
    """The questions to every candidate client, asked at once when the probe starts (each client run costs tens
    of milliseconds, so a command starts the probe first and does its own work while the clients answer);
    `client()` reads the answers in order of preference. Always `close()` it (or use it as a context
    manager): the processes of candidates not needed are stopped there.

    `engine=False` (a dry run, which runs nothing): no engine is asked and no plugin run; each client tells its
    version (`docker --version`) and buildx is the plugin the CLI would find on disk, so the choice is the first
    client that could build, whether or not its engine answers now."""

    def __init__(self, env: Mapping[str, str] | None = None, engine: bool = True):
        self.env = os.environ if env is None else env
        self.engine = engine
        self.candidates: list[str] = []
        for candidate in (self.env.get("GHBUILD_DOCKER_CLI"), shutil.which("docker", path=self.env.get("PATH")),
                          "/usr/bin/docker"):
            if candidate and candidate not in self.candidates and os.access(candidate, os.X_OK):
                self.candidates.append(candidate)
        self.probes: dict[str, list[subprocess.Popen] | OSError] = {}
        for path in self.candidates:
            try:
                self.probes[path] = _start_probe(path, self.env, engine)
            except OSError as exc:
                self.probes[path] = exc

    def client(self, backend: str | None = None) -> DockerClient:
        """The first client that can run BuildKit builds against a reachable engine."""
        if not self.candidates:
            raise EngineError("no docker client found (install Docker, or set GHBUILD_DOCKER_CLI)")
        reasons = []
        has_plugin = not self.engine and buildx_plugin(self.env) is not None    # the same folders for every client
        try:
            for path, started in self.probes.items():
                try:
                    if isinstance(started, OSError):
                        raise started
                    version, unusable, has_buildx = (_finish_probe(started) if self.engine else
                                                     _finish_offline_probe(started, has_plugin))
                except (OSError, subprocess.TimeoutExpired) as exc:
                    reasons.append(f"{path}: {exc}")
                    continue
                if unusable:
                    reasons.append(f"{path}: {unusable}")
                    continue
                client = DockerClient(path=path, version=version, buildx=has_buildx)
                if backend == "buildx" and not has_buildx:
                    reasons.append(f"{path}: no buildx plugin")
                    continue
                if not has_buildx and _major(version) >= 23:
                    reasons.append(f"{path}: client {version} needs the buildx plugin for BuildKit builds")
                    continue
                return client
        finally:
            self.close()
        raise EngineError("no usable docker client: " + "; ".join(reasons))

    def close(self) -> None:
        probes, self.probes = self.probes, {}
        for started in probes.values():
            for proc in started if isinstance(started, list) else ():
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
                for stream in (proc.stdout, proc.stderr):
                    if stream:
                        stream.close()

    def __enter__(self) -> ClientProbe:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def find_client(env: Mapping[str, str] | None = None, backend: str | None = None) -> DockerClient:
    """The first client that can run BuildKit builds against a reachable engine (see ClientProbe)."""
    return ClientProbe(env).client(backend)


def run_streaming(argv: Sequence[str], env: Mapping[str, str], log_path: Path, echo: bool = True,
                  redact: Sequence[str] = ()) -> tuple[int, float]:
    """Run a command, copy its output to stderr (redacted) and to log_path; return (rc, seconds)."""
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8", errors="replace") as log:
        proc = subprocess.Popen(list(argv), env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace", bufsize=1)
        assert proc.stdout is not None
        for line in proc.stdout:
            for secret in redact:
                if secret:
                    line = line.replace(secret, "***")
            log.write(line)
            if echo:
                sys.stderr.write(line)
        rc = proc.wait()
    return rc, time.monotonic() - start


def docker_sdk(env: Mapping[str, str], timeout: int = 60):
    """A Docker SDK client with `docker.from_env()` semantics on `env` (DOCKER_HOST, DOCKER_TLS_VERIFY,
    DOCKER_CERT_PATH) and registry auth from that environment's client config, credential helpers
    (credsStore, credHelpers) included; imported only when needed."""
    docker = require("docker", "docker", "talking to the Docker engine")

    try:
        client = docker.from_env(environment=dict(env), timeout=timeout)
    except docker.errors.DockerException as exc:
        raise EngineError(f"cannot reach the Docker engine: {exc}") from None
    # from_env reads the auth config of this process's DOCKER_CONFIG; the build's environment decides.
    client.api.credstore_env = dict(env)
    client.api.reload_config(docker_config_file(env))
    return client


def push(tag: str, env: Mapping[str, str]) -> str:
    """Push TAG through the engine API; returns the manifest digest from the push stream's structured result
    (its `aux.Digest`), with the credentials `docker push` would use for the registry."""
    docker = require("docker", "docker", "pushing an image")
    import requests
    from docker.utils import parse_repository_tag

    repository, name_tag = parse_repository_tag(tag)
    digest = None
    try:
        for event in docker_sdk(env, timeout=600).api.push(repository, tag=name_tag, stream=True, decode=True):
            if event.get("error"):
                raise EngineError(f"push {tag}: {event['error']}")
            digest = (event.get("aux") or {}).get("Digest") or digest
    except docker.errors.APIError as exc:
        raise EngineError(f"push {tag}: {exc.explanation or exc}") from None
    except requests.RequestException as exc:
        raise EngineError(f"push {tag}: {type(exc).__name__}: {exc}") from None
    if not digest or not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise EngineError(f"push {tag}: the engine reported no manifest digest")
    return digest


def ensure_builder(client: DockerClient, name: str, endpoint: str | None, network: str,
                   env: Mapping[str, str]) -> None:
    """The buildx builder `name`, created once: a docker-container builder on `network`, or a remote
    BuildKit at `endpoint` (tcp://, unix://, ssh://)."""
    if subprocess.run([client.path, "buildx", "inspect", name], capture_output=True, env=dict(env)).returncode == 0:
        return
    if endpoint:
        argv = [client.path, "buildx", "create", "--name", name, "--driver", "remote", endpoint]
    else:
        argv = [client.path, "buildx", "create", "--name", name, "--driver", "docker-container",
                "--driver-opt", f"network={network}",
                "--buildkitd-flags", "--allow-insecure-entitlement network.host", "--bootstrap"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=dict(env))
    if proc.returncode != 0:
        raise EngineError(f"docker buildx create: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")


def image_history(env: Mapping[str, str], image_id: str) -> list[dict]:
    """The image's history entries, oldest first."""
    return list(reversed(docker_sdk(env).api.history(image_id)))


def image_files(env: Mapping[str, str], image_id: str, folder: str, suffix: str) -> dict[str, bytes] | None:
    """The files named *suffix under `folder` inside an image (no container is started); None: no folder."""
    import io
    import tarfile

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


def prune_cache_mounts(client: DockerClient, builder: str | None, env: Mapping[str, str]) -> str | None:
    """Drop the builder's `RUN --mount=type=cache` contents (exec.cachemount records), which no cache key
    covers. Returns why it failed, or None."""
    argv = ([client.path, "buildx", "prune", "--builder", builder] if client.backend == "buildx" and builder
            else [client.path, "builder", "prune"])
    try:
        proc = _run([*argv, "--force", "--filter", "type=exec.cachemount"], env, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["failed"])[-1]
