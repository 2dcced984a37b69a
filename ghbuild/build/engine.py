"""The Docker edge: every call to the docker client and the Docker engine's API goes through here.

Find a client that can build, pick (or create) the buildx builder and run builds; read built images
(history, files) through the Docker SDK, which speaks the engine API with `docker.from_env()` semantics.

Which client: GHBUILD_DOCKER_CLI if set, else `docker` on PATH, else /usr/bin/docker; the first one with the
buildx plugin against a reachable engine. Every build is `docker buildx build` (the path GitHub's runners
take); a client without the plugin is passed over with the reason. Which builder: see `resolve_builder`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from ghbuild.errors import ConfigError, EngineError, require
from ghbuild.registry.credentials import docker_config_file, read_docker_config

# The builder ghbuild creates on GitHub-hosted runners (docker/setup-buildx-action's kind), one per trust level.
CONTAINER_BUILDER = "ghbuild"
REMOTE_BUILDER = "ghbuild-remote"


class DockerClient(NamedTuple):
    path: str
    version: str
    buildx: bool

    @property
    def backend(self) -> str:
        return "buildx"


class Builder(NamedTuple):
    """The buildx builder a build runs on, as `docker buildx inspect` describes it."""

    name: str                   # what `--builder` gets (a builder or a docker context)
    driver: str                 # docker, docker-container, remote, kubernetes, ...
    buildkit: str               # the version its node reports ("v0.13.2"; Debian's build: "v0.0.0+unknown")
    image_store: str | None = None   # the docker driver's engine: "containerd" or "classic"
    context: str | None = None       # a docker context other than the current one (docker driver): buildx
                                     # reaches its builder only as `docker --context NAME buildx ...`
    docker_host: str | None = None   # that context's engine, where the built image is read for the audit
    ephemeral: bool = False          # made for this job alone and removed after it (remove_builder)

    @property
    def cache_export_problem(self) -> str | None:
        """Why this builder cannot export any cache (the docker driver on the classic image store)."""
        if self.driver == "docker" and self.image_store != "containerd":
            return (f"builder {self.name!r} (docker driver) exports no cache without the containerd image store "
                    "(dockerd's features.containerd-snapshotter), or set build.builder to another builder")
        return None

    def describe(self) -> str:
        store = f", {self.image_store} image store" if self.image_store else ""
        return f"{self.name} ({self.driver} driver, BuildKit {self.buildkit or 'unknown'}{store})"


def _run(argv: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                          env=dict(env) if env is not None else None)



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
        """The first client with the buildx plugin whose engine answers (`backend`: only "buildx" exists)."""
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
                if not has_buildx:
                    reasons.append(f"{path}: client {version} has no buildx plugin (ghbuild builds with "
                                   "`docker buildx build`: install the plugin, e.g. Debian's docker-buildx)")
                    continue
                return DockerClient(path=path, version=version, buildx=True)
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
    """The first client with the buildx plugin against a reachable engine (see ClientProbe)."""
    return ClientProbe(env).client(backend)


class StreamingProcess:
    """A command running beside the caller, its output (redacted) copied to log_path and, with echo, to
    stderr by a thread, so that the caller can start other work (a second build) while it runs."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], log_path: Path, echo: bool = False,
                 redact: Sequence[str] = ()) -> None:
        self.started = time.monotonic()
        self._log = open(log_path, "w", encoding="utf-8", errors="replace")
        self._proc = subprocess.Popen(list(argv), env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True, errors="replace", bufsize=1)
        self._copier = threading.Thread(target=self._copy, args=(echo, tuple(s for s in redact if s)), daemon=True)
        self._copier.start()

    def _copy(self, echo: bool, redact: tuple[str, ...]) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            for secret in redact:
                line = line.replace(secret, "***")
            self._log.write(line)
            if echo:
                sys.stderr.write(line)

    def wait(self) -> tuple[int, float]:
        """(exit code, seconds since the start), once the command ended and its output is in the log."""
        rc = self._proc.wait()
        self._copier.join()
        self._log.close()
        return rc, time.monotonic() - self.started

    def stop(self) -> None:
        """End the command (SIGTERM, then SIGKILL after 10 s) and wait for it."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
        self.wait()


def run_streaming(argv: Sequence[str], env: Mapping[str, str], log_path: Path, echo: bool = True,
                  redact: Sequence[str] = ()) -> tuple[int, float]:
    """Run a command, copy its output to stderr (redacted) and to log_path; return (rc, seconds)."""
    process = StreamingProcess(argv, env, log_path, echo=echo, redact=redact)
    try:
        return process.wait()
    except BaseException:
        process.stop()
        raise


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


def _last_line(proc: subprocess.CompletedProcess, default: str = "failed") -> str:
    return ((proc.stderr or "").strip().splitlines() or (proc.stdout or "").strip().splitlines() or [default])[-1]


def inspect_builder(client: DockerClient, name: str, env: Mapping[str, str], bootstrap: bool = False,
                    current: str | None = None) -> Builder | None:
    """The builder (or docker context) `name` as buildx sees it; None when there is none of that name.
    `current`: the current docker context, when the caller knows it already."""
    argv = [client.path, "buildx", "inspect", *(["--bootstrap"] if bootstrap else []), name]
    try:
        proc = _run(argv, env, timeout=300 if bootstrap else 60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"docker buildx inspect {name}: {exc}") from None
    if proc.returncode != 0:
        return None
    fields: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and key.strip() not in fields:
            fields[key.strip().lower()] = value.strip()
    driver = fields.get("driver", "")
    buildkit = fields.get("buildkit version") or fields.get("buildkit") or ""
    store = _image_store(client, name, env) if driver == "docker" else None
    builder = Builder(name=name, driver=driver, buildkit=buildkit, image_store=store)
    if driver == "docker" and name != (current or current_context(client, env)):
        host = _run([client.path, "context", "inspect", name, "--format", "{{.Endpoints.docker.Host}}"], env)
        builder = builder._replace(context=name, docker_host=host.stdout.strip() or None)
    return builder


def _image_store(client: DockerClient, context: str, env: Mapping[str, str]) -> str:
    """The image store of the engine behind a docker context: "containerd" (the containerd snapshotter) or
    "classic" (a graph driver)."""
    try:
        proc = _run([client.path, "--context", context, "info", "--format", "{{json .DriverStatus}}"], env)
    except (OSError, subprocess.TimeoutExpired):
        return "classic"
    return "containerd" if "io.containerd.snapshotter" in proc.stdout else "classic"


def current_context(client: DockerClient, env: Mapping[str, str]) -> str:
    """The docker context the CLI talks to now (`default` with DOCKER_HOST): its builder is the engine's own."""
    if env.get("DOCKER_CONTEXT"):
        return env["DOCKER_CONTEXT"]
    try:
        proc = _run([client.path, "context", "show"], env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"docker context show: {exc}") from None
    if proc.returncode != 0 or not proc.stdout.strip():
        raise EngineError(f"docker context show: {_last_line(proc)}")
    return proc.stdout.strip()


def is_docker_engine(endpoint: str, timeout: float = 5.0) -> bool:
    """Whether a Docker engine answers at tcp://HOST:PORT or unix://PATH (its `/_ping` carries an Api-Version
    header); a BuildKit daemon speaks gRPC there and does not. Raises EngineError when nothing answers."""
    scheme, _, rest = endpoint.partition("://")
    try:
        if scheme == "unix":
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.settimeout(timeout)
            conn.connect(rest)
        else:
            host, _, port = rest.rstrip("/").rpartition(":")
            conn = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    except (OSError, ValueError) as exc:
        raise EngineError(f"build.builder: nothing answers at {endpoint} ({exc})") from None
    with conn:
        try:
            conn.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            answer = conn.recv(4096)
        except OSError:
            return False
    head = answer.split(b"\r\n\r\n", 1)[0].lower()
    return head.startswith(b"http/1.") and b"\napi-version:" in head


def _create(client: DockerClient, argv: list[str], env: Mapping[str, str], what: str, why: str) -> None:
    try:
        proc = _run(argv, env, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"{what}: {exc}; {why}") from None
    if proc.returncode != 0:
        raise EngineError(f"{what}: {_last_line(proc)}; {why}")


class BuilderChoice(NamedTuple):
    """Which builder a build gets, before any engine is asked (choose_builder)."""

    kind: str                   # "named", "address", "container" (docker-container), "context" (the engine's own)
    name: str | None            # the builder or context; None: an address's (decided by probing) or the current
    ignored: str | None = None  # a build.builder left out: an untrusted build inside GitHub Actions
    ephemeral: bool = False


def choose_builder(setting: str | None, trusted: bool, env: Mapping[str, str]) -> BuilderChoice:
    """The rules, pure. Inside GitHub Actions an untrusted build never takes `build.builder` (the branch's own
    checkout or its caller's overrides name it: a remote BuildKit there would receive the build and its
    credentials, a shared builder would carry its cache to trusted builds): on a GitHub-hosted runner it gets
    the `ghbuild-untrusted` docker-container builder, on a self-hosted one a docker-container builder made for
    this job alone (the engine's own BuildKit is shared by every job on that persistent machine) and removed
    after it. Otherwise: a name, an address, `ghbuild[-untrusted]` on GitHub-hosted runners, else the engine's
    own builder (the current docker context; act and local use: gha.runner_kind)."""
    import secrets

    from ghbuild.github.gha import runner_kind

    runner = runner_kind(env)
    suffix = "" if trusted else "-untrusted"
    ignored = None
    if not trusted and env.get("GITHUB_ACTIONS") == "true":
        ignored, setting = setting, None
        if runner == "self-hosted":
            name = f"{CONTAINER_BUILDER}-untrusted-{env.get('GITHUB_RUN_ID') or 'run'}-{secrets.token_hex(4)}"
            return BuilderChoice("container", name, ignored, ephemeral=True)
    if setting and "://" not in setting:
        return BuilderChoice("named", setting)
    if setting:
        return BuilderChoice("address", None)
    if runner == "github-hosted":
        return BuilderChoice("container", CONTAINER_BUILDER + suffix, ignored)
    return BuilderChoice("context", None, ignored)


def resolve_builder(client: DockerClient, setting: str | None, network: str, trusted: bool,
                    env: Mapping[str, str]) -> Builder:
    """The builder a build runs on (choose_builder's rules), created when it must be:
    - `build.builder` a name: that buildx builder or docker context, which must exist;
    - `build.builder` a tcp://, unix:// or ssh:// address: a Docker engine there through a docker context
      ghbuild creates (`ghbuild-engine-<hash>`), else a BuildKit daemon through the `remote` driver;
    - a docker-container builder (`ghbuild`, `ghbuild-untrusted`, as docker/setup-buildx-action does, or one
      of an untrusted job's own), created once;
    - else the engine's own BuildKit, the builder of the current docker context."""
    choice = choose_builder(setting, trusted, env)
    suffix = "" if trusted else "-untrusted"
    fix = "set build.builder to a builder that exists (`docker buildx ls`), e.g. \"default\", the engine's own"
    if choice.kind == "named":
        builder = inspect_builder(client, setting or "", env)
        if builder is None:
            raise ConfigError(f"build.builder: no buildx builder or docker context named {setting!r} "
                              "(`docker buildx ls` lists them)")
        return builder
    if choice.kind == "address":
        assert setting
        scheme = setting.partition("://")[0]
        if scheme == "ssh" or (scheme in ("tcp", "unix") and is_docker_engine(setting)):
            name = "ghbuild-engine-" + hashlib.sha256(setting.encode()).hexdigest()[:12]
            if inspect_builder(client, name, env) is None:
                _create(client, [client.path, "context", "create", name, "--docker", f"host={setting}"], env,
                        f"docker context create {name} (build.builder = {setting})", fix)
        else:
            name = REMOTE_BUILDER + suffix
            if inspect_builder(client, name, env) is None:
                _create(client, [client.path, "buildx", "create", "--name", name, "--driver", "remote", setting],
                        env, f"docker buildx create --driver remote {setting} (build.builder)", fix)
        builder = inspect_builder(client, name, env, bootstrap=True)
    elif choice.kind == "container":
        name = choice.name or CONTAINER_BUILDER + suffix
        if choice.ephemeral or inspect_builder(client, name, env) is None:
            why = ("an untrusted build on a self-hosted runner gets a docker-container builder of its own"
                   if choice.ephemeral else "build.builder is not set")
            # An untrusted job's own builder on a persistent machine: never the host's network (its services
            # on localhost, a cloud metadata endpoint), whatever build.builder-network says.
            builder_network = "bridge" if choice.ephemeral else network
            _create(client, [client.path, "buildx", "create", "--name", name, "--driver", "docker-container",
                             "--driver-opt", f"network={builder_network}",
                             "--buildkitd-flags", "--allow-insecure-entitlement network.host", "--bootstrap"],
                    env, f"{why}, so ghbuild creates the docker-container builder {name}, "
                         "and docker buildx create failed", fix)
        builder = inspect_builder(client, name, env, bootstrap=True)
        if builder is not None and choice.ephemeral:
            builder = builder._replace(ephemeral=True)
    else:
        name = current_context(client, env)
        builder = inspect_builder(client, name, env, current=name)
    if builder is None:
        raise EngineError(f"builder {name!r} is not usable (`docker buildx inspect {name}` failed); {fix}")
    return builder


def remove_builder(client: DockerClient, builder: Builder, env: Mapping[str, str]) -> str | None:
    """`docker buildx rm --force`: the builder, its container and its state (cache, cache mounts) are gone.
    Returns why it failed, or None."""
    try:
        proc = _run([client.path, "buildx", "rm", "--force", builder.name], env, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["failed"])[-1]


def local_image_id(env: Mapping[str, str], candidates: Sequence[str]) -> str | None:
    """The id the engine knows a built image by: the first candidate it finds (buildx's iidfile holds the
    config digest, which the classic image store uses as the id; the containerd image store uses the
    manifest digest). None when the engine has none of them (an image not loaded)."""
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


def image_history(env: Mapping[str, str], image_id: str) -> list[dict]:
    """The image's history entries, oldest first."""
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


def prune_cache_mounts(client: DockerClient, builder: Builder, env: Mapping[str, str]) -> str | None:
    """Drop the builder's `RUN --mount=type=cache` contents (exec.cachemount records), which no cache key
    covers. Returns why it failed, or None."""
    argv = [client.path, "buildx", "prune", "--builder", builder.name] if builder.context is None else \
        [client.path, "--context", builder.context, "buildx", "prune"]
    try:
        proc = _run([*argv, "--force", "--filter", "type=exec.cachemount"], env, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["failed"])[-1]
