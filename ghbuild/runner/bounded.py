"""Run a command with a hard time bound, for probes that may hang (rocminfo on a sick GPU node, a
wedged Docker engine).

- The command runs in its own session (process group). On timeout the WHOLE group gets SIGKILL, so
  helpers it started die with it.
- Output goes to temporary files, never pipes: a grandchild that keeps a pipe open (or escapes the
  group) cannot make us wait.
- After SIGKILL we wait at most `reap_grace` seconds: a process stuck in uninterruptible sleep (a
  driver call) cannot be killed at all, and waiting for it would break every budget. It is then
  left behind and the result says so.
- A command that is not found is a result (status "not-found"), not an exception.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

MAX_OUTPUT = 1 << 20     # bytes kept per stream (the tail)
REAP_GRACE = 0.2         # seconds to wait for a killed group to be reaped


@dataclass
class Result:
    argv: list[str]
    status: str                      # ok | failed | timeout | not-found | error
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    timeout: float | None = None
    note: str = ""                   # e.g. "killed after 5 s", "still running after SIGKILL"
    truncated: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def last_line(self, limit: int = 300) -> str:
        """The last non-empty line of stderr (else stdout), for one-line messages."""
        for text in (self.stderr, self.stdout):
            lines = [line.strip() for line in text.splitlines() if line.strip()]
            if lines:
                line = " ".join(lines[-1].split())
                return line if len(line) <= limit else line[: limit - 3] + "..."
        return ""


# What the runner checks and the diagnostics take: `run(argv, timeout) -> Result`.
Runner = Callable[[Sequence[str], float], Result]


def _read_tail(fh, limit: int) -> tuple[str, bool]:
    fh.flush()
    size = fh.seek(0, os.SEEK_END)
    fh.seek(max(0, size - limit))
    return fh.read().decode("utf-8", errors="replace"), size > limit


def run(argv: Sequence[str], timeout: float, *, env: Mapping[str, str] | None = None, cwd: str | None = None,
        max_output: int = MAX_OUTPUT, reap_grace: float = REAP_GRACE) -> Result:
    """Run argv for at most `timeout` seconds (then kill its process group). Never raises for the command's sake."""
    argv = [str(a) for a in argv]
    environ = dict(os.environ if env is None else env)
    if not argv:
        return Result(argv, "error", note="empty command")
    exe = argv[0]
    if os.sep not in exe:
        found = shutil.which(exe, path=environ.get("PATH", os.defpath))
        if not found:
            return Result(argv, "not-found", note=f"{exe}: not found on PATH")
    elif not os.access(exe, os.X_OK):
        return Result(argv, "not-found", note=f"{exe}: no such executable")
    timeout = max(0.0, float(timeout))
    start = time.monotonic()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=environ, cwd=cwd,
                                    start_new_session=True, close_fds=True)
        except OSError as exc:
            return Result(argv, "not-found" if isinstance(exc, FileNotFoundError) else "error",
                          note=f"{exe}: {exc.strerror or exc}", seconds=time.monotonic() - start)
        status, note = "ok", ""
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = "timeout"
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            try:
                proc.wait(timeout=reap_grace)
                note = f"killed after {timeout:g} s"
            except subprocess.TimeoutExpired:
                note = f"killed after {timeout:g} s, but pid {proc.pid} is still there (uninterruptible sleep?)"
        seconds = time.monotonic() - start
        stdout, cut_out = _read_tail(out, max_output)
        stderr, cut_err = _read_tail(err, max_output)
    rc = proc.returncode
    if status == "ok" and rc != 0:
        status = "failed"
    return Result(argv, status, rc if status != "timeout" else None, stdout, stderr, round(seconds, 3), timeout,
                  note, [name for name, cut in (("stdout", cut_out), ("stderr", cut_err)) if cut])


def runner(env: Mapping[str, str] | None = None, cwd: str | None = None) -> Runner:
    """A `run(argv, timeout)` callable bound to an environment."""

    def _run(argv: Sequence[str], timeout: float) -> Result:
        return run(argv, timeout, env=env, cwd=cwd)

    return _run


__all__ = ["MAX_OUTPUT", "Result", "Runner", "run", "runner"]
