"""Processes started by ``up``: the state file, a lock, start and stop.

Only processes recorded in ``.ghbuild/infra-state.json`` are ever signalled, and only after
checking that the pid still belongs to the same process (kernel start time + command line).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from .common import AbortWait, InfraError, atomic_write_json, info, last_line_of, state_dir, wait_until

STATE_VERSION = 1


def state_path() -> Path:
    return state_dir() / "infra-state.json"


def load_state() -> dict:
    try:
        data = json.loads(state_path().read_text())
    except (OSError, ValueError):
        return {"version": STATE_VERSION, "processes": []}
    if not isinstance(data, dict) or not isinstance(data.get("processes"), list):
        return {"version": STATE_VERSION, "processes": []}
    return data


def save_state(state: dict) -> None:
    state["version"] = STATE_VERSION
    state["updated"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    atomic_write_json(state_path(), state)


@contextlib.contextmanager
def locked() -> Iterator[None]:
    """Serialise concurrent ``up``/``down`` runs on the same checkout."""
    state_dir().mkdir(parents=True, exist_ok=True)
    with open(state_dir() / "infra.lock", "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            info("another `python -m infra` run holds .ghbuild/infra.lock; waiting for it")
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- /proc


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm may contain spaces and parentheses: split after the last ')'
    return raw[raw.rfind(")") + 2 :].split()


def proc_starttime(pid: int) -> int | None:
    fields = _stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 else None


def proc_state(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def proc_cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [p.decode(errors="replace") for p in raw.split(b"\0") if p]


def is_ours_alive(record: Mapping) -> bool:
    """True when the recorded pid still runs the process we started (not a reused pid)."""
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 1:
        return False
    if proc_state(pid) in (None, "Z", "X"):
        return False
    if proc_starttime(pid) != record.get("starttime"):
        return False
    want = os.path.basename(str((record.get("cmd") or [""])[0]))
    have = " ".join(proc_cmdline(pid))
    return bool(want) and want in have


def find_record(state: dict, role: str) -> dict | None:
    for rec in state.get("processes", []):
        if rec.get("role") == role:
            return rec
    return None


def drop_record(state: dict, role: str) -> None:
    state["processes"] = [r for r in state.get("processes", []) if r.get("role") != role]


# --------------------------------------------------------------------------- start / stop


def spawn(
    role: str,
    cmd: Sequence[str],
    *,
    log: Path,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    extra: Mapping | None = None,
) -> tuple[subprocess.Popen, dict]:
    """Start a long-running server in its own session, output appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as fh:
        fh.write(f"\n==== {time.strftime('%Y-%m-%d %H:%M:%S')} infra starts {role}: {' '.join(cmd)}\n".encode())
        fh.flush()
        popen = subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=fh,
            stderr=subprocess.STDOUT,
            cwd=str(cwd),
            env=dict(env) if env is not None else None,
            start_new_session=True,
            close_fds=True,
        )
    record = {
        "role": role,
        "pid": popen.pid,
        "starttime": None,
        "cmd": list(cmd),
        "log": str(log),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    for _ in range(50):
        record["starttime"] = proc_starttime(popen.pid)
        if record["starttime"] is not None or popen.poll() is not None:
            break
        time.sleep(0.01)
    if extra:
        record.update(extra)
    return popen, record


def _session_members(sid: int) -> list[int]:
    """Live processes whose session id is ``sid`` (our servers run in their own session)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == sid:
            continue
        fields = _stat_fields(int(entry.name))
        if fields and len(fields) > 3 and fields[0] not in ("Z", "X") and int(fields[3]) == sid:
            members.append(int(entry.name))
    return members


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc_state(pid) in (None, "Z", "X"):
            _reap(pid)
            return True
        time.sleep(0.1)
    return proc_state(pid) in (None, "Z", "X")


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def stop(record: Mapping, timeout: float = 20.0) -> str:
    """SIGTERM a process we started, SIGKILL after ``timeout``. Returns what happened."""
    role, pid = record.get("role"), record.get("pid")
    if not is_ours_alive(record):
        return "not running"
    os.kill(pid, signal.SIGTERM)
    outcome = "stopped"
    if not _wait_gone(pid, timeout):
        info(f"{role} (pid {pid}) ignored SIGTERM for {timeout:.0f} s; sending SIGKILL")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _wait_gone(pid, 5)
        outcome = "killed"
    # Leftover children in the session we created for it (e.g. a managed containerd).
    leftovers = _session_members(pid)
    for child in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.1)
        leftovers = [c for c in leftovers if proc_state(c) not in (None, "Z", "X")]
    for child in leftovers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
    return outcome


def start_and_wait(state: dict, step: str, cmd: Sequence[str], *, log: Path, env: Mapping[str, str], port: int,
                   ready, what: str, timeout: float, interval: float, cwd: Path) -> subprocess.Popen:
    """Spawn a service, record it in the state file, and wait until `ready()`; a service that dies or never
    answers is an InfraError naming the step, its last log line and the log file."""
    popen, rec = spawn(step, list(cmd), log=log, cwd=cwd, env=dict(env), extra={"port": port})
    state["processes"].append(rec)
    save_state(state)
    name = Path(cmd[0]).name
    try:
        ok = wait_until(ready, timeout=timeout, interval=interval,
                        abort=lambda: f"{name} exited with {popen.returncode}" if popen.poll() is not None else None)
    except AbortWait as exc:
        drop_record(state, step)
        save_state(state)
        raise InfraError(step, f"{exc}: {last_line_of(log)} (log: {log})") from None
    if not ok:
        raise InfraError(step, f"{what} did not answer within {timeout:.0f} s (log: {log})")
    return popen
