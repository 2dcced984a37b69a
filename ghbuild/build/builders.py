"""BuildKit builders: which one a build gets (the engine's own, a named or remote one, an untrusted build's own),
creating, inspecting and removing them.
"""

from __future__ import annotations

import hashlib
import secrets
import socket
import subprocess
from collections.abc import Mapping
from typing import NamedTuple

from ghbuild.build.engine import DockerClient, EngineBuilderAnswer, _last_line, _run, configured_context, image_store
from ghbuild.errors import ConfigError, EngineError
from ghbuild.github.gha import runner_kind

# The builder ghbuild creates on GitHub-hosted runners (docker/setup-buildx-action's kind), one per trust level.
CONTAINER_BUILDER = "ghbuild"


REMOTE_BUILDER = "ghbuild-remote"


class Builder(NamedTuple):
    """The buildx builder a build runs on, as `docker buildx inspect` describes it."""
    name: str                   # what `--builder` gets (a builder or a docker context)
    driver: str                 # docker, docker-container, remote, kubernetes, ...
    buildkit: str | None        # the version its node reports ("v0.13.2"; Debian's build: "v0.0.0+unknown");
                                # None: not asked (the engine's own builder: its BuildKit is the engine's)
    image_store: str | None = None   # the docker driver's engine: "containerd" or "classic"
    context: str | None = None       # a docker context other than the current one (docker driver): buildx
                                     # reaches its builder only as `docker --context NAME buildx ...`
    docker_host: str | None = None   # that context's engine, where the built image is read for the audit
    ephemeral: bool = False          # made for this job alone and removed after it (remove_builder)
    engine: str | None = None        # the engine's version (the docker driver), when the probe heard it

    @property
    def cache_export_problem(self) -> str | None:
        """Why this builder cannot export any cache (the docker driver on the classic image store)."""
        if self.driver == "docker" and self.image_store != "containerd":
            return (f"builder {self.name!r} (docker driver) exports no cache without the containerd image store "
                    "(dockerd's features.containerd-snapshotter), or set build.builder to another builder")
        return None

    def describe(self) -> str:
        store = f", {self.image_store} image store" if self.image_store else ""
        buildkit = f"the BuildKit of engine {self.engine}" if self.buildkit is None and self.engine else \
            f"BuildKit {self.buildkit or 'unknown'}"
        return f"{self.name} ({self.driver} driver, {buildkit}{store})"


def inspect_builder(client: DockerClient, name: str, env: Mapping[str, str], bootstrap: bool = False,
                    current: str | None = None) -> Builder | None:
    """The builder (or docker context) `name` as buildx sees it; None when there is none of that name.
    `current`: the current docker context, when the caller knows it already: `name` is then a docker context
    (docker driver), whose engine's image store is asked beside `buildx inspect`, not after it."""
    argv = [client.path, "buildx", "inspect", *(["--bootstrap"] if bootstrap else []), name]
    store_question = _start_image_store(client, name, env) if name == current else None
    try:
        proc = _run(argv, env, timeout=300 if bootstrap else 60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        _finish_image_store(store_question, timeout=0)
        raise EngineError(f"docker buildx inspect {name}: {exc}") from None
    if proc.returncode != 0:
        _finish_image_store(store_question, timeout=0)
        return None
    builder = _described(name, proc.stdout)
    if builder.driver == "docker":
        store = _finish_image_store(store_question or _start_image_store(client, name, env)) or "classic"
        builder = builder._replace(image_store=store)
    else:
        _finish_image_store(store_question, timeout=0)
    if builder.driver == "docker" and name != (current or current_context(client, env)):
        host = _run([client.path, "context", "inspect", name, "--format", "{{.Endpoints.docker.Host}}"], env)
        builder = builder._replace(context=name, docker_host=host.stdout.strip() or None)
    return builder


def _described(name: str, inspect: str) -> Builder:
    """The builder `docker buildx inspect NAME` printed (its image store not known from that)."""
    fields: dict[str, str] = {}
    for line in inspect.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() and key.strip() not in fields:
            fields[key.strip().lower()] = value.strip()
    buildkit = fields.get("buildkit version") or fields.get("buildkit") or ""
    return Builder(name=name, driver=fields.get("driver", ""), buildkit=buildkit)


def _start_image_store(client: DockerClient, context: str, env: Mapping[str, str]) -> subprocess.Popen | None:
    """Ask the engine behind a docker context for its storage driver; the answer is read by _finish_image_store."""
    try:
        return subprocess.Popen([client.path, "--context", context, "info", "--format", "{{json .DriverStatus}}"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=dict(env))
    except OSError:
        return None


def _finish_image_store(question: subprocess.Popen | None, timeout: float = 30) -> str | None:
    """The image store of that engine: "containerd" (the containerd snapshotter) or "classic" (a graph driver,
    or no answer). `timeout=0`: the answer is not wanted; the question is stopped. None without a question."""
    return None if question is None else image_store(_close_question(question, timeout))


def current_context(client: DockerClient, env: Mapping[str, str]) -> str:
    """The docker context the CLI talks to now (`default` with DOCKER_HOST): its builder is the engine's own.
    Read as the CLI reads it (engine.configured_context), not asked: `docker context show` is a process of its
    own. Only a config file that exists but cannot be read is left to the CLI, which then says what is wrong."""
    configured = configured_context(env)
    if configured is not None:
        return configured
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
                    env: Mapping[str, str], answered: EngineBuilderAnswer | None = None) -> Builder:
    """The builder a build runs on (choose_builder's rules), created when it must be:
    - `build.builder` a name: that buildx builder or docker context, which must exist;
    - `build.builder` a tcp://, unix:// or ssh:// address: a Docker engine there through a docker context
      ghbuild creates (`ghbuild-engine-<hash>`), else a BuildKit daemon through the `remote` driver;
    - a docker-container builder (`ghbuild`, `ghbuild-untrusted`, as docker/setup-buildx-action does, or one
      of an untrusted job's own), created once;
    - else the engine's own BuildKit, the builder of the current docker context (`answered`: what the client
      probe already heard of it, engine.ClientProbe)."""
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
        if answered is not None and answered.context == name:
            # A docker context's builder is its engine's own (the docker driver, BuildKit built into dockerd):
            # `buildx inspect`, a Go client and its plugin, would add only the BuildKit version, tens of
            # milliseconds of CPU before the build; it is asked when a decision needs it (with_buildkit).
            builder = Builder(name, "docker", None, answered.image_store, engine=answered.engine)
        else:
            builder = inspect_builder(client, name, env, current=name)
    if builder is None:
        raise EngineError(f"builder {name!r} is not usable (`docker buildx inspect {name}` failed); {fix}")
    return builder


def with_buildkit(client: DockerClient, builder: Builder, env: Mapping[str, str], timeout: float = 60) -> Builder:
    """The builder with the BuildKit version `docker buildx inspect` reports ("": no answer, or a failed one)."""
    try:
        asked = subprocess.Popen([client.path, "buildx", "inspect", builder.name], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True, env=dict(env))
    except OSError:
        return builder._replace(buildkit="")
    out = _close_question(asked, timeout)
    return builder._replace(buildkit=_described(builder.name, out).buildkit if out else "")


def _close_question(asked: subprocess.Popen | None, timeout: float) -> str:
    """What the process printed when it succeeded within `timeout` seconds (0: stop it now), else ""."""
    if asked is None:
        return ""
    try:
        if timeout == 0:
            asked.kill()
        out, _ = asked.communicate(timeout=timeout or None)
    except subprocess.TimeoutExpired:
        asked.kill()
        asked.communicate()
        return ""
    return out if asked.returncode == 0 else ""


def remove_builder(client: DockerClient, builder: Builder, env: Mapping[str, str]) -> str | None:
    """`docker buildx rm --force`: the builder, its container and its state (cache, cache mounts) are gone.
    Returns why it failed, or None."""
    try:
        proc = _run([client.path, "buildx", "rm", "--force", builder.name], env, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if proc.returncode == 0 else (proc.stderr.strip().splitlines() or ["failed"])[-1]


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
