"""Bounded failure diagnostics for self-hosted ROCm runners.

`collect(out_dir)` runs a fixed list of commands (rocminfo, amd-smi, rocm-smi, dmesg, df, free,
uname, docker ps/info, the GPU device nodes, id), one after another, and writes one file per
command plus `index.json` and `summary.md` into out_dir. Bounds:

- each command gets at most `per_command` seconds (default 5), then its whole process group is
  killed (ghbuild.runner.bounded);
- all of it stays within `total_budget` seconds (default 25): a command gets
  min(per_command, what is left), and commands not started when the budget is spent are recorded
  as `skipped`, not run.

Where it writes (the rule):

1. out_dir may not contain a `..` component (relative or absolute), and may not be empty.
2. It must lie inside an allowed root: the current directory, or RUNNER_TEMP when that is set (on
   GitHub runners). A relative out_dir is relative to the current directory; an absolute one must
   name a folder under one of the roots.
3. No symlinks between the root and out_dir: each existing component must be a real directory
   (opened with O_NOFOLLOW, one component at a time, relative to its parent), missing ones are
   created the same way. A symlink anywhere on the way is refused, so the output cannot be sent
   elsewhere, even by a link planted while we run.
4. Files are created inside out_dir through its directory descriptor, with O_NOFOLLOW | O_EXCL
   after removing any old entry of the same name: a planted symlink is removed, never followed.
   File names come from command names, which must match [A-Za-z0-9][A-Za-z0-9._-]*.

Secrets: the commands run with an environment stripped of secret-looking variables (tokens, keys,
passwords, ACTIONS_RUNTIME_*), and their output is scrubbed of the values of those
variables and of credentials in URLs (`scheme://user:pass@`) before anything is written.
"""

from __future__ import annotations

import datetime as _dt
import errno
import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ghbuild.errors import DiagnosePathError
from ghbuild.markdown import code, md
from ghbuild.runner import bounded

DEFAULT_TOTAL_BUDGET = 25.0
DEFAULT_PER_COMMAND = 5.0
KILL_GRACE = bounded.REAP_GRACE       # kept free at the end of the budget for reaping a killed command
MIN_SLICE = 0.05                      # less than this left: do not start another command
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_SECRET_NAME_RE = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_KEY|_KEY$|"
                             r"^ACTIONS_RUNTIME|^ACTIONS_ID_TOKEN|AUTH|COOKIE|SESSION", re.I)
_URL_CREDS_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/\s:@]+(?::[^/\s@]*)?@")


@dataclass(frozen=True)
class DiagCommand:
    name: str                      # file stem: [A-Za-z0-9][A-Za-z0-9._-]*
    argv: tuple[str, ...]
    tail_lines: int | None = None  # keep only the last N lines of stdout (dmesg)


DEFAULT_COMMANDS: tuple[DiagCommand, ...] = (
    DiagCommand("rocminfo", ("rocminfo",)),
    DiagCommand("amd-smi-list", ("amd-smi", "list")),
    DiagCommand("amd-smi-metric", ("amd-smi", "metric")),
    DiagCommand("rocm-smi", ("rocm-smi",)),
    DiagCommand("dmesg", ("dmesg",), tail_lines=300),
    DiagCommand("docker-ps", ("docker", "ps", "-a", "--no-trunc")),
    DiagCommand("docker-info", ("docker", "info")),
    DiagCommand("df", ("df", "-h")),
    DiagCommand("free", ("free", "-m")),
    DiagCommand("devices", ("ls", "-ln", "/dev/kfd", "/dev/dri")),
    DiagCommand("id", ("id",)),
    DiagCommand("uname", ("uname", "-a")),
)


@dataclass
class Entry:
    name: str
    argv: list[str]
    status: str                    # ok | failed | timeout | not-found | error | skipped
    returncode: int | None = None
    seconds: float = 0.0
    timeout: float | None = None
    file: str | None = None
    bytes: int = 0
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Diagnostics:
    out_dir: Path
    entries: list[Entry] = field(default_factory=list)
    seconds: float = 0.0
    total_budget: float = DEFAULT_TOTAL_BUDGET
    per_command: float = DEFAULT_PER_COMMAND

    def counts(self) -> dict[str, int]:
        result: dict[str, int] = {}
        for e in self.entries:
            result[e.status] = result.get(e.status, 0) + 1
        return result

    def to_dict(self) -> dict[str, Any]:
        return {"version": 1, "out_dir": str(self.out_dir), "seconds": round(self.seconds, 3),
                "total_budget": self.total_budget, "per_command": self.per_command, "counts": self.counts(),
                "commands": [e.to_dict() for e in self.entries]}

    def line(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(self.counts().items()))
        return f"{len(self.entries)} commands in {self.seconds:.1f} s ({counts}) -> {self.out_dir}"

    def markdown(self) -> str:
        rows = [f"### Runner diagnostics ({self.seconds:.1f} s of {self.total_budget:g} s)", "",
                f"Written to {code(self.out_dir)}.", "", "| command | status | seconds | file |", "|---|---|---|---|"]
        for e in self.entries:
            status = e.status + (f" (exit {e.returncode})" if e.status == "failed" else "")
            rows.append(f"| {code(' '.join(e.argv))} | {md(status)} | {e.seconds:.2f} | {md(e.file or '-')} |")
        return "\n".join(rows) + "\n"


# --------------------------------------------------------------------------- where to write

def _refuse(message: str) -> DiagnosePathError:
    return DiagnosePathError(f"diagnose --out: {message}")


def allowed_roots(env: Mapping[str, str], cwd: Path) -> list[tuple[Path, set[str]]]:
    """(real path, spellings) of each allowed root: the cwd, and RUNNER_TEMP when set."""
    roots: list[tuple[Path, set[str]]] = []
    for path in (cwd, env.get("RUNNER_TEMP")):
        if not path or not os.path.isabs(str(path)) or not os.path.isdir(path):
            continue
        real = Path(os.path.realpath(path))
        if any(real == r for r, _ in roots):
            continue
        roots.append((real, {str(real), os.path.normpath(str(path))}))
    return roots


def _components_below(out_dir: str, roots: Sequence[tuple[Path, set[str]]]) -> tuple[Path, list[str]]:
    """(root, components of out_dir below it), or refuse."""
    names = " or ".join(str(r) for r, _ in roots)
    if not out_dir or "\0" in out_dir:
        raise _refuse("empty or invalid folder name")
    parts = Path(out_dir).parts
    if ".." in parts:
        raise _refuse(f"{out_dir!r} has a '..' component; give a folder inside {names}")
    if not os.path.isabs(out_dir):
        return roots[0][0], [p for p in parts if p not in (".", "")]
    normalized = os.path.normpath(out_dir)
    for real, spellings in roots:
        for form in sorted(spellings, key=len, reverse=True):
            if normalized == form or normalized.startswith(form.rstrip("/") + "/"):
                return real, [p for p in Path(os.path.relpath(normalized, form)).parts if p not in (".", "")]
    raise _refuse(f"{out_dir} is outside the allowed folders ({names}); write diagnostics under the working "
                  "directory or RUNNER_TEMP")


def open_out_dir(out_dir: str | Path, *, env: Mapping[str, str] | None = None,
                 cwd: Path | None = None) -> tuple[int, Path]:
    """Open (creating as needed) out_dir by the rule above. Returns (directory fd, its real path)."""
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else Path(cwd)
    roots = allowed_roots(env, cwd)
    if not roots:
        raise _refuse(f"the working directory {cwd} is not a folder")
    root, components = _components_below(str(out_dir), roots)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    walked = root
    try:
        for comp in components:
            walked = walked / comp
            try:
                nfd = os.open(comp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                try:
                    os.mkdir(comp, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
                nfd = os.open(comp, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    kind = "a symlink" if os.path.islink(walked) else "not a folder"
                    raise _refuse(f"{walked} is {kind}; refusing to follow it out of {root}") from None
                raise _refuse(f"cannot open {walked}: {exc.strerror}") from None
            os.close(fd)
            fd = nfd
        real = Path(os.path.realpath(f"/proc/self/fd/{fd}")) if os.path.isdir("/proc/self/fd") else walked
        if real != root and root not in real.parents:
            raise _refuse(f"{out_dir} resolves to {real}, outside {root}")
        return fd, real
    except BaseException:
        os.close(fd)
        raise


def _write(dir_fd: int, name: str, data: bytes) -> None:
    if not _NAME_RE.fullmatch(name) or name in (".", ".."):
        raise _refuse(f"file name {name!r} is not allowed")
    try:
        os.unlink(name, dir_fd=dir_fd)       # removes a planted symlink itself, never its target
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        raise _refuse(f"{name} exists as a folder in the output folder") from None
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


# --------------------------------------------------------------------------- secrets

def secret_names(env: Mapping[str, str]) -> list[str]:
    return [k for k in env if _SECRET_NAME_RE.search(k)]


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    """The environment for diagnostic commands: no secret-looking variables."""
    drop = set(secret_names(env))
    return {k: v for k, v in env.items() if k not in drop}


def scrubber(env: Mapping[str, str]):
    values = sorted({env[k] for k in secret_names(env) if len(env[k]) >= 6}, key=len, reverse=True)

    def scrub(text: str) -> str:
        for value in values:
            text = text.replace(value, "***")
        return _URL_CREDS_RE.sub(r"\1***@", text)

    return scrub


# --------------------------------------------------------------------------- collect

def _validate(commands: Sequence[DiagCommand]) -> None:
    seen: set[str] = set()
    for cmd in commands:
        if not _NAME_RE.fullmatch(cmd.name):
            raise _refuse(f"command name {cmd.name!r} is not a safe file name ([A-Za-z0-9][A-Za-z0-9._-]*)")
        if cmd.name in seen:
            raise ValueError(f"diagnose: command name {cmd.name!r} appears twice")
        if not cmd.argv:
            raise ValueError(f"diagnose: command {cmd.name!r} has no argv")
        seen.add(cmd.name)


def _render(cmd: DiagCommand, argv: list[str], res: bounded.Result, scrub) -> bytes:
    stdout = res.stdout
    if cmd.tail_lines is not None:
        lines = stdout.splitlines()
        if len(lines) > cmd.tail_lines:
            stdout = "\n".join(lines[-cmd.tail_lines:]) + "\n"
    head = [f"$ {' '.join(argv)}", f"# status: {res.status}" + (f", exit {res.returncode}" if res.returncode is not None
                                                                 else "") + f", {res.seconds:.2f} s"]
    if res.note:
        head.append(f"# {res.note}")
    if res.truncated:
        head.append(f"# kept the last {bounded.MAX_OUTPUT} bytes of: {', '.join(res.truncated)}")
    body = "\n".join(head) + "\n\n" + stdout
    if res.stderr.strip():
        body += ("" if body.endswith("\n") else "\n") + "--- stderr ---\n" + res.stderr
    return scrub(body).encode("utf-8", errors="replace")


def collect(out_dir: str | Path, *, total_budget: float = DEFAULT_TOTAL_BUDGET,
            per_command: float = DEFAULT_PER_COMMAND, commands: Sequence[DiagCommand] = DEFAULT_COMMANDS,
            env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Diagnostics:
    """Run the commands within the budgets; write `<name>.txt` per command, index.json and summary.md."""
    if total_budget <= 0 or per_command <= 0:
        raise ValueError("budgets must be positive")
    _validate(commands)
    env = dict(os.environ if env is None else env)
    start = time.monotonic()
    deadline = start + total_budget
    dir_fd, real = open_out_dir(out_dir, env=env, cwd=cwd)
    result = Diagnostics(real, total_budget=total_budget, per_command=per_command)
    scrub = scrubber(env)
    run_env = child_env(env)
    docker = env.get("GHBUILD_DOCKER_CLI") or "docker"
    try:
        for cmd in commands:
            argv = [docker if i == 0 and a == "docker" else a for i, a in enumerate(cmd.argv)]
            left = deadline - time.monotonic() - KILL_GRACE
            if left < MIN_SLICE:
                result.entries.append(Entry(cmd.name, argv, "skipped",
                                            note=f"not started: the total budget of {total_budget:g} s was spent"))
                continue
            timeout = min(per_command, left)
            res = bounded.run(argv, timeout, env=run_env, cwd=str(real))
            data = _render(cmd, argv, res, scrub)
            file_name = f"{cmd.name}.txt"
            _write(dir_fd, file_name, data)
            result.entries.append(Entry(cmd.name, argv, res.status, res.returncode, res.seconds, round(timeout, 3),
                                        file_name, len(data), scrub(res.note)))
        result.seconds = time.monotonic() - start
        _write(dir_fd, "index.json", (json.dumps({**result.to_dict(), "created": _dt.datetime.now(
            _dt.UTC).replace(microsecond=0).isoformat()}, indent=2) + "\n").encode())
        _write(dir_fd, "summary.md", result.markdown().encode())
    finally:
        os.close(dir_fd)
    return result
