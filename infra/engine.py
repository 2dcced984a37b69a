"""The Docker engine (trixie's dockerd 26 with the containerd image store, BuildKit in the engine, the buildx
plugin) and arm64 emulation (binfmt_misc)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from . import procs
from .common import (
    DOCKER_CLI,
    AbortWait,
    InfraError,
    atomic_write_json,
    docker_env,
    info,
    last_line_of,
    logs_dir,
    repo_root,
    run,
    state_dir,
    wait_until,
)

DOCKERD_START_TIMEOUT = 60.0
# The engine the tests need: buildx's default `docker` driver exports every cache backend (registry mode=max,
# gha, local) only on the containerd image store, which is also what GitHub's runners' engines move to.
MIN_ENGINE_MAJOR = 26
CONTAINERD_SNAPSHOTTER = "io.containerd.snapshotter.v1"
DAEMON_CONFIG = {"features": {"containerd-snapshotter": True}}
BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")


def docker(*args: str, step_name: str, timeout: float = 120, check: bool = True, log: Path | None = None):
    return run([DOCKER_CLI, *args], step_name=step_name, env=docker_env(), timeout=timeout, check=check, log=log)


def docker_answers(timeout: float = 10) -> bool:
    try:
        proc = subprocess.run(
            [DOCKER_CLI, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True, text=True, env=docker_env(), timeout=timeout, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and bool(proc.stdout.strip())


def docker_info() -> dict:
    proc = docker("info", "--format", "{{json .}}", step_name="dockerd", timeout=30)
    return json.loads(proc.stdout)


def buildx_version() -> str | None:
    """The buildx plugin's version as the engine's client runs it, or None."""
    try:
        proc = subprocess.run([DOCKER_CLI, "buildx", "version"], capture_output=True, text=True,
                              env=docker_env(), timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = proc.stdout.split()
    return words[1] if proc.returncode == 0 and len(words) >= 2 else None


def daemon_config_path() -> Path:
    """dockerd's own config file for this checkout (the system's /etc/docker/daemon.json is left alone)."""
    return state_dir() / "dockerd" / "daemon.json"


def engine_problem(data: dict) -> str | None:
    """Why an answering engine is not the one the tests need, or None."""
    version = str(data.get("ServerVersion") or "")
    major = int(version.split(".")[0]) if version.split(".")[0].isdigit() else 0
    if major < MIN_ENGINE_MAJOR:
        return f"dockerd {version or '(unknown)'} is older than {MIN_ENGINE_MAJOR}"
    status = dict(tuple(pair) for pair in data.get("DriverStatus") or [] if len(pair) == 2)
    if status.get("driver-type") != CONTAINERD_SNAPSHOTTER:
        return f"dockerd {version} does not use the containerd image store (driver {data.get('Driver')})"
    return None


def _pidfile_alive(path: Path = Path("/var/run/docker.pid")) -> int | None:
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if procs.proc_state(pid) not in (None, "Z", "X") else None


STALE_PIDFILES = (Path("/var/run/docker.pid"), Path("/var/run/docker/containerd/containerd.pid"))


def _remove_stale_pidfiles() -> None:
    """After a crash dockerd refuses to start while its pid file names a process that still has a
    /proc entry, and here pid 1 reaps orphans only every few seconds (zombies linger)."""
    for path in STALE_PIDFILES:
        if path.exists() and _pidfile_alive(path) is None:
            info(f"dockerd: removing stale {path}")
            path.unlink(missing_ok=True)


def ensure_dockerd(state: dict) -> None:
    if not os.path.exists(DOCKER_CLI):
        raise InfraError("dockerd", f"{DOCKER_CLI} missing (package docker.io not installed?)")
    rec = procs.find_record(state, "dockerd")
    if rec and not procs.is_ours_alive(rec):
        procs.drop_record(state, "dockerd")
        rec = None
    if docker_answers():
        problem = engine_problem(docker_info())
        if problem and rec:
            # Ours, from before the engine was upgraded (bookworm's 20.10): start the current one instead.
            info(f"dockerd: {problem}; restarting ours (pid {rec['pid']})")
            procs.stop(rec, timeout=40.0)
            procs.drop_record(state, "dockerd")
            procs.save_state(state)
            rec = None
        elif problem:
            raise InfraError("dockerd", f"a dockerd not started by us answers, but {problem}: stop it, and "
                                        f"`python -m infra up` starts trixie's with {daemon_config_path()}")
        else:
            if rec:
                info(f"dockerd: running (started by us, pid {rec['pid']})")
            else:
                state["dockerd_external"] = True
                info("dockerd already running (not started by us)")
            _report_driver()
            return
    if rec is None:
        other = _pidfile_alive()
        if other:
            info(f"dockerd: pid {other} (not ours) is alive but not answering; "
                 f"waiting up to {DOCKERD_START_TIMEOUT:.0f} s")
            if wait_until(docker_answers, timeout=DOCKERD_START_TIMEOUT, interval=1):
                state["dockerd_external"] = True
                info("dockerd: answering now (not started by us)")
                _report_driver()
                return
            raise InfraError("dockerd", f"a dockerd not started by us (pid {other}) does not answer `docker info`")
        _remove_stale_pidfiles()
        log = logs_dir() / "dockerd.log"
        dockerd = "/usr/sbin/dockerd" if os.path.exists("/usr/sbin/dockerd") else "dockerd"
        atomic_write_json(daemon_config_path(), DAEMON_CONFIG)
        # --ip: ports published with -p bind to loopback unless an address is given explicitly.
        cmd = [dockerd, f"--config-file={daemon_config_path()}", "--host=unix:///var/run/docker.sock",
               "--ip=127.0.0.1"]
        env = dict(os.environ)
        for k in ("DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
            env.pop(k, None)
        popen, rec = procs.spawn("dockerd", cmd, log=log, cwd=repo_root(), env=env)
        state["processes"].append(rec)
        state.pop("dockerd_external", None)
        procs.save_state(state)
        info(f"dockerd: started pid {popen.pid} (log: {log})")
        abort = lambda: f"dockerd exited with {popen.returncode}" if popen.poll() is not None else None  # noqa: E731
    else:
        popen = None
        info(f"dockerd: ours (pid {rec['pid']}) is alive but not answering yet; waiting")
        log = Path(rec.get("log") or logs_dir() / "dockerd.log")
        abort = lambda: "dockerd exited" if not procs.is_ours_alive(rec) else None  # noqa: E731
    try:
        ok = wait_until(docker_answers, timeout=DOCKERD_START_TIMEOUT, interval=0.5, abort=abort)
    except AbortWait as exc:
        procs.drop_record(state, "dockerd")
        procs.save_state(state)
        raise InfraError("dockerd", f"{exc}: {last_line_of(log)} (log: {log})") from None
    if not ok:
        raise InfraError("dockerd", f"`docker info` did not answer within {DOCKERD_START_TIMEOUT:.0f} s (log: {log})")
    problem = engine_problem(docker_info())
    if problem:
        raise InfraError("dockerd", f"started, but {problem} (log: {log})")
    _report_driver()


def _report_driver() -> None:
    try:
        data = docker_info()
    except InfraError:
        return
    driver = data.get("Driver")
    store = dict(tuple(p) for p in data.get("DriverStatus") or [] if len(p) == 2).get("driver-type", "classic")
    info(f"dockerd: server {data.get('ServerVersion')}, storage driver {driver} ({store}), "
         f"cgroup {data.get('CgroupVersion')}")
    if driver == "vfs":
        info("dockerd: WARNING storage driver vfs (no overlay support): builds will be slow and disk-hungry")


# --------------------------------------------------------------------------- binfmt / qemu


def binfmt_entry() -> dict:
    path = BINFMT_DIR / "qemu-aarch64"
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    entry = {"enabled": bool(lines) and lines[0].strip() == "enabled"}
    for line in lines[1:]:
        key, _, value = line.partition(" ")
        entry[key] = value.strip()
    return entry


def ensure_binfmt() -> dict:
    if not (BINFMT_DIR / "status").exists():
        info("binfmt: mounting binfmt_misc")
        run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT_DIR)], step_name="binfmt", timeout=30)
    entry = binfmt_entry()
    if not entry.get("enabled"):
        info("binfmt: enabling qemu-aarch64")
        run(["update-binfmts", "--enable", "qemu-aarch64"], step_name="binfmt", timeout=60)
        entry = binfmt_entry()
    if not entry.get("enabled"):
        raise InfraError("binfmt", "qemu-aarch64 is not enabled in /proc/sys/fs/binfmt_misc after update-binfmts")
    flags = entry.get("flags:", "")
    interp = entry.get("interpreter", "")
    if not os.path.exists(interp):
        raise InfraError("binfmt", f"qemu-aarch64 interpreter {interp!r} does not exist")
    if "F" not in flags:
        # Without the fix-binary flag the interpreter is looked up inside each container's root.
        info(f"binfmt: WARNING qemu-aarch64 flags {flags!r} lack F; arm64 containers may fail to start")
    else:
        info(f"binfmt: qemu-aarch64 enabled (interpreter {interp}, flags {flags})")
    return entry
