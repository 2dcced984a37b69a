"""The Docker edge: every call to the docker client and the Docker engine's API goes through here.

Find a client that can build, pick (or create) the buildx builder and run builds; read built images
(history, files) through the Docker SDK, which speaks the engine API with `docker.from_env()` semantics.

Which client: GHBUILD_DOCKER_CLI if set, else `docker` on PATH, else /usr/bin/docker; the first one with the
buildx plugin against a reachable engine. Every build is `docker buildx build` (the path GitHub's runners
take); a client without the plugin is passed over with the reason. Which builder: see `resolve_builder`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from ghbuild.errors import EngineError
from ghbuild.http import unix
from ghbuild.registry.credentials import docker_config_file, read_docker_config


class DockerClient(NamedTuple):
    path: str
    version: str         # "" when not asked (the engine was asked through its socket)
    buildx: bool

    @property
    def backend(self) -> str:
        return "buildx"




def _run(argv: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout,
                          env=dict(env) if env is not None else None)



# One `docker version` for both sides: the server line stays empty when the engine does not answer.
_VERSION_FORMAT = '{{.Client.Version}}{{"\\n"}}{{if .Server}}{{.Server.Version}}{{end}}'

# `docker info` for the context probe: the client's version, the engine's (empty: it does not answer), its storage.
_INFO_FORMAT = '{{.ClientInfo.Version}}{{"\\n"}}{{.ServerVersion}}{{"\\n"}}{{json .DriverStatus}}'


def image_store(driver_status: str) -> str:
    """The image store `docker info`'s DriverStatus (as JSON) describes: "containerd" (the containerd
    snapshotter) or "classic" (a graph driver)."""
    return "containerd" if "io.containerd.snapshotter" in driver_status else "classic"


class EngineBuilderAnswer(NamedTuple):
    """What a client answered of a docker context's builder (the engine's own), asked by ClientProbe."""
    context: str
    image_store: str      # "containerd" or "classic"
    engine: str           # the engine's version: its BuildKit is the one built into it


def configured_context(env: Mapping[str, str]) -> str | None:
    """The docker context the CLI talks to, by the CLI's own rules (docker/cli's resolveContextName):
    DOCKER_HOST set means `default`, then DOCKER_CONTEXT, then the config file's currentContext, else
    `default`. None when only the CLI can tell: a config file that exists but cannot be read."""
    if env.get("DOCKER_HOST"):
        return "default"
    if env.get("DOCKER_CONTEXT"):
        return env["DOCKER_CONTEXT"]
    path = docker_config_file(env)
    config = read_docker_config(path)
    if config is None and os.path.exists(path):
        return None
    current = (config or {}).get("currentContext")
    return current if isinstance(current, str) and current else "default"


DEFAULT_SOCKET = "/var/run/docker.sock"


def local_socket(env: Mapping[str, str]) -> str | None:
    """The unix socket DOCKER_HOST names (the default socket when unset), as docker.from_env reaches the engine;
    None for another endpoint (tcp, ssh, TLS)."""
    host = env.get("DOCKER_HOST") or f"unix://{DEFAULT_SOCKET}"
    return host.removeprefix("unix://") if host.startswith("unix://") else None


def engine_socket(env: Mapping[str, str], context: str | None) -> str | None:
    """The unix socket of the engine the CLI reaches directly: the `default` context's local socket. Other
    contexts are left to the CLI."""
    return local_socket(env) if context == "default" else None


class SocketInfo:
    """The engine's `GET /info` through its unix socket, asked on a thread of its own: what the CLI's `docker
    info` tells a build on the engine's own builder (the engine answers, its version, its image store) without a
    Go client that first runs every CLI plugin's metadata command (tens of milliseconds of CPU)."""

    def __init__(self, path: str, timeout: float = 10) -> None:
        self.info: dict | None = None
        self._thread = threading.Thread(target=self._ask, args=(path, timeout), daemon=True,
                                        name="ghbuild-engine-info")
        self._thread.start()

    def _ask(self, path: str, timeout: float) -> None:
        try:
            status, info = unix.get_json(path, "/info", timeout)
        except OSError:
            return
        self.info = info if status == 200 and isinstance(info, dict) else None

    def answer(self) -> tuple[str, str] | None:
        """(engine version, DriverStatus as JSON), or None when the engine did not answer."""
        self._thread.join()
        info = self.info or {}
        version = info.get("ServerVersion")
        return (version, json.dumps(info.get("DriverStatus"))) if isinstance(version, str) and version else None


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


def _start_context_probe(path: str, env: Mapping[str, str], context: str) -> list[subprocess.Popen]:
    """`info` of one docker context: the client's version, the engine's, its image store (ClientProbe)."""
    return [subprocess.Popen([path, "--context", context, "info", "--format", _INFO_FORMAT], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=dict(env))]


def _close(started: list[subprocess.Popen], timeout: float = 60) -> list[str]:
    """Each process's output, waiting up to `timeout` seconds for all of them (0: stop them now); what has
    not ended by then is killed (its output is then what it printed so far)."""
    deadline = time.monotonic() + timeout
    outputs = []
    for proc in started:
        if not timeout and proc.poll() is None:
            proc.kill()
        try:
            out, _ = proc.communicate(timeout=max(deadline - time.monotonic(), 0.001) if timeout else None)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        outputs.append(out or "")
    return outputs


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
    """The questions to the candidate clients: the preferred one's asked when the probe starts (each client run
    costs tens of milliseconds, so a command starts the probe first and does its own work while it answers),
    the others' only when it cannot be used; `client()` reads the answers in order of preference. Always
    `close()` it (or use it as a context manager): the processes of candidates not needed are stopped there.

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
        # The preferred client is asked what a build on the current context's builder (the engine's own) needs
        # anyway: `info` (the engine answers; its image store). With the buildx plugin where the CLI finds it,
        # a good answer makes the classic questions needless; `answers` keeps it.
        self.context = configured_context(self.env) if engine else None
        self.answers: dict[str, EngineBuilderAnswer] = {}
        self._context_probes: dict[str, list[subprocess.Popen]] = {}
        # The engine behind a local socket is asked directly; another context's through the client.
        socket_path = engine_socket(self.env, self.context) if self.candidates else None
        self._socket_info = SocketInfo(socket_path) if socket_path else None
        if self._socket_info is None and self.candidates and self.context is not None:
            try:
                self._context_probes[self.candidates[0]] = _start_context_probe(self.candidates[0], self.env,
                                                                                self.context)
            except OSError:
                pass       # asked again the classic way, which says what is wrong
        elif self._socket_info is None and self.candidates:
            self._start(self.candidates[0])

    @property
    def preferred(self) -> str | None:
        """The client chosen when its answers are good: work that needs a client may start with it early."""
        return self.candidates[0] if self.candidates else None

    def _start(self, path: str) -> list[subprocess.Popen] | OSError:
        # Only the preferred client is asked at once; the others when it cannot be used (each client run is
        # tens of milliseconds of CPU, which a build's start would otherwise share with every candidate).
        if path not in self.probes:
            try:
                self.probes[path] = _start_probe(path, self.env, self.engine)
            except OSError as exc:
                self.probes[path] = exc
        return self.probes[path]

    def _context_answer(self, path: str) -> DockerClient | None:
        """The client, when its answers to the context questions are good (else None: ask the classic way)."""
        if self.context is None:
            return None
        if self._socket_info is not None and path == self.preferred:
            answered, self._socket_info = self._socket_info.answer(), None
            client, (server, status) = "", answered or ("", "")
        else:
            started = self._context_probes.pop(path, None)
            if started is None:
                return None
            info, = _close(started)
            client, server, status = ([*info.split("\n"), "", "", ""])[:3]
            server = server if started[0].returncode == 0 else ""
        if not server.strip() or buildx_plugin(self.env) is None:
            return None
        self.answers[path] = EngineBuilderAnswer(self.context, image_store(status), server.strip())
        return DockerClient(path=path, version=client.strip(), buildx=True)

    def client(self, backend: str | None = None) -> DockerClient:
        """The first client with the buildx plugin whose engine answers (`backend`: only "buildx" exists)."""
        if not self.candidates:
            raise EngineError("no docker client found (install Docker, or set GHBUILD_DOCKER_CLI)")
        reasons = []
        has_plugin = not self.engine and buildx_plugin(self.env) is not None    # the same folders for every client
        try:
            for path in self.candidates:
                answered = self._context_answer(path)
                if answered is not None:
                    return answered
                started = self._start(path)
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
        context_probes, self._context_probes = self._context_probes, {}
        for started in [*probes.values(), *context_probes.values()]:
            if isinstance(started, list):
                _close(started, timeout=0)

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
        self._log = open(log_path, "w", encoding="utf-8", errors="replace")  # noqa: SIM115 - closed by wait()
        try:
            self._proc = subprocess.Popen(list(argv), env=dict(env), stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1)
        except OSError as exc:
            # The client is not run before a build on a local engine (ClientProbe asks the engine's socket).
            self._log.close()
            raise EngineError(f"cannot run {argv[0]}: {exc.strerror or exc}") from None
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




def _last_line(proc: subprocess.CompletedProcess, default: str = "failed") -> str:
    return ((proc.stderr or "").strip().splitlines() or (proc.stdout or "").strip().splitlines() or [default])[-1]
