"""Shared helpers for ``infra``: paths, progress output, errors, commands, HTTP.

Standard library only: ``up`` must work before the project's own dependencies are installed.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

# The engine's own client (trixie's docker-cli 26, with the buildx plugin from docker-buildx).
DOCKER_CLI = "/usr/bin/docker"
DOCKER_HOST = "unix:///var/run/docker.sock"

DEFAULT_STAGING_PORT = 5000
DEFAULT_HUB_PORT = 5001
DEFAULT_S3_PORT = 5002
LOOPBACK = "127.0.0.1"

SCCACHE_BUCKET = "ghbuild-sccache"
S3_REGION = "us-east-1"
# Fixed fake credentials for the local moto S3 endpoint (moto accepts any key pair).
FAKE_AWS_ACCESS_KEY_ID = "ghbuildlocaltestkey"
FAKE_AWS_SECRET_ACCESS_KEY = "ghbuild-local-test-secret-not-a-real-key"

BASE_SUITE = "bookworm"
BASE_ARCHES = ("amd64", "arm64")
LOCAL_IMAGE_REPO = "ghbuild-local/debian"
BASE_INDEX_REPO = "base/debian"
BASE_INDEX_TAG = "bookworm"


class InfraError(Exception):
    """A step failed; printed as one line ``infra: error: [step] message``."""

    def __init__(self, step: str, message: str) -> None:
        super().__init__(message)
        self.step = step
        self.message = one_line(message)

    def __str__(self) -> str:
        return f"[{self.step}] {self.message}"


def one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_INFO_LOCK = threading.Lock()


def info(message: str) -> None:
    """A progress line on stderr (one write per line: the debootstrap threads print too)."""
    with _INFO_LOCK:
        sys.stderr.write(f"infra: {message}\n")
        sys.stderr.flush()


@contextlib.contextmanager
def step(name: str) -> Iterator[None]:
    """Turn any unexpected exception inside the block into an InfraError naming the step."""
    try:
        yield
    except InfraError:
        raise
    except (KeyboardInterrupt, SystemExit):
        raise
    except subprocess.TimeoutExpired as exc:
        cmd = exc.cmd if isinstance(exc.cmd, str) else " ".join(map(str, exc.cmd))
        raise InfraError(name, f"timed out after {exc.timeout:.0f} s: {cmd}") from exc
    except Exception as exc:
        raise InfraError(name, f"{type(exc).__name__}: {exc}") from exc


# --------------------------------------------------------------------------- paths


def repo_root() -> Path:
    """The checkout this ``infra`` package lives in (it is never installed), else the cwd."""
    override = os.environ.get("GHBUILD_INFRA_ROOT")
    if override:
        return Path(override).resolve()
    candidate = Path(__file__).resolve().parent.parent
    if (candidate / "pyproject.toml").is_file() or (candidate / ".git").exists():
        return candidate
    return Path.cwd().resolve()


def state_dir() -> Path:
    return repo_root() / ".ghbuild"


def logs_dir() -> Path:
    path = state_dir() / "logs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    return Path(os.environ.get("GHBUILD_INFRA_CACHE_DIR", "/var/cache/ghbuild"))


def port_from_env(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= 65535:
        raise InfraError("config", f"{name}={raw!r} is not a TCP port (1-65535)")
    return int(raw)


def ports() -> dict[str, int]:
    chosen = {
        "staging": port_from_env("GHBUILD_INFRA_STAGING_PORT", DEFAULT_STAGING_PORT),
        "hub": port_from_env("GHBUILD_INFRA_HUB_PORT", DEFAULT_HUB_PORT),
        "s3": port_from_env("GHBUILD_INFRA_S3_PORT", DEFAULT_S3_PORT),
    }
    if len(set(chosen.values())) != len(chosen):
        raise InfraError("config", f"staging, hub and s3 ports must differ, got {chosen}")
    return chosen


def atomic_write(path: Path, text: str, mode: int = 0o644) -> bool:
    """Write ``text`` to ``path`` via temp file + rename. Returns False when unchanged."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        if path.read_text() == text:
            return False
    except OSError:
        pass
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return True


def atomic_write_json(path: Path, data: object) -> None:
    atomic_write(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


# --------------------------------------------------------------------------- commands


def docker_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env["DOCKER_HOST"] = DOCKER_HOST
    env["DOCKER_BUILDKIT"] = "1"
    # buildx adds a provenance attestation by default, which turns a single-platform image into an index;
    # infra's images are plain per-arch manifests that it assembles into indexes itself.
    env["BUILDX_NO_DEFAULT_ATTESTATIONS"] = "1"
    env.pop("DOCKER_CONTEXT", None)
    env.pop("DOCKER_TLS_VERIFY", None)
    if extra:
        env.update(extra)
    return env


def last_line_of(path: Path, max_bytes: int = 65536) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    lines = [ln.strip() for ln in data.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def run(
    cmd: Sequence[str],
    *,
    step_name: str,
    env: Mapping[str, str] | None = None,
    timeout: float | None = 600,
    log: Path | None = None,
    check: bool = True,
    input_text: str | None = None,
) -> subprocess.CompletedProcess:
    """Run a command. With ``log`` its output is appended there, else captured as text.

    On failure (``check``) raise InfraError with the last line of output (and the log path).
    """
    cmd = [str(c) for c in cmd]
    try:
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "ab") as fh:
                fh.write(f"\n$ {shlex.join(cmd)}   # {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
                fh.flush()
                proc = subprocess.run(
                    cmd,
                    stdin=subprocess.DEVNULL if input_text is None else None,
                    input=input_text.encode() if input_text is not None else None,
                    stdout=fh,
                    stderr=subprocess.STDOUT,
                    env=dict(env) if env is not None else None,
                    timeout=timeout,
                    check=False,
                )
        else:
            proc = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL if input_text is None else None,
                input=input_text,
                capture_output=True,
                text=True,
                env=dict(env) if env is not None else None,
                timeout=timeout,
                check=False,
            )
    except FileNotFoundError as exc:
        raise InfraError(step_name, f"command not found: {cmd[0]}") from exc
    except subprocess.TimeoutExpired as exc:
        where = f" (log: {log})" if log else ""
        raise InfraError(step_name, f"timed out after {timeout:.0f} s: {shlex.join(cmd)}{where}") from exc
    if check and proc.returncode != 0:
        if log is not None:
            detail = last_line_of(log)
            where = f" (full log: {log})"
        else:
            text = (proc.stderr or "").strip() or (proc.stdout or "").strip()
            lines = [ln for ln in text.splitlines() if ln.strip()]
            detail = lines[-1] if lines else ""
            where = ""
        raise InfraError(
            step_name,
            f"`{one_line(shlex.join(cmd), 160)}` exited {proc.returncode}: {detail}{where}",
        )
    return proc


class AbortWait(Exception):
    """Raised by wait_until when ``abort`` reports a reason (e.g. the process died)."""


def wait_until(
    predicate: Callable[[], bool],
    *,
    timeout: float,
    interval: float = 0.25,
    abort: Callable[[], str | None] | None = None,
) -> bool:
    """Poll ``predicate`` until true or ``timeout``. ``abort`` returns a reason to stop early."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if abort is not None:
            reason = abort()
            if reason:
                raise AbortWait(reason)
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


# --------------------------------------------------------------------------- network (loopback only)

# Never use a proxy for loopback requests, whatever http_proxy says.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class HttpResult:
    def __init__(self, status: int, headers: Mapping[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> object:
        return json.loads(self.body.decode("utf-8"))


def http(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    data: bytes | None = None,
    timeout: float = 10,
) -> HttpResult | None:
    """One HTTP request; returns None when nothing answers (refused, reset, timeout)."""
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return HttpResult(resp.status, dict(resp.headers.items()), resp.read())
    except urllib.error.HTTPError as exc:
        body = b""
        with contextlib.suppress(Exception):
            body = exc.read()
        return HttpResult(exc.code, dict(exc.headers.items()) if exc.headers else {}, body)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def port_open(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def listener_description(port: int) -> str:
    """Best effort: which process listens on 127.0.0.1/0.0.0.0:port (for error messages)."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) > 9 and parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(parts[9])
    if not inodes:
        return "unknown process"
    for pid_dir in Path("/proc").iterdir():
        if not pid_dir.name.isdigit():
            continue
        try:
            for fd in (pid_dir / "fd").iterdir():
                target = os.readlink(fd)
                if target.startswith("socket:[") and target[8:-1] in inodes:
                    cmd = (pid_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    return f"pid {pid_dir.name} ({one_line(cmd, 120)})"
        except OSError:
            continue
    return "unknown process"
