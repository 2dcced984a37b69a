"""Self-hosted ROCm runner checks: run before a GPU job, so a sick runner fails in seconds
with the reason, instead of a job failing an hour later with an unrelated-looking error.

Checks, each a `Check` with one line saying what is wrong and how to fix it:
  gpus        GPU agents in `rocminfo` output (agents whose `Name:` is gfx*), at least N; a hanging
              rocminfo is killed after its timeout and reported as such
  kfd         /dev/kfd exists and this user can read and write it
  render-gid  the numeric gid of the render group (the gid of /dev/dri/renderD*, else the `render`
              entry of /etc/group): containers need `--group-add <gid>`, a name means nothing inside
  disk        free space on a path (default: the Docker data root, else the current directory)
  containers  running containers left by earlier jobs (labelled org.ghbuild.runner by
              `container_flags`); `clean=True` removes them; other running containers are listed
              as a warning and left alone

`container_flags(gid)` is the one place that makes the GPU container flags.

Pure logic behind small edges, so tests drive it with real processes and a fake filesystem: a
`Host` carries the filesystem root, the environment, the docker CLI and the `run(argv, timeout)`
callable (ghbuild.runner.bounded.run by default).
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ghbuild.errors import RunnerCheckError
from ghbuild.markdown import md
from ghbuild.runner import bounded
from ghbuild.sizes import format_size, parse_size

# Containers started with container_flags() carry this label; leftovers with it are removed by --clean.
CONTAINER_LABEL = "org.ghbuild.runner"
CONTAINER_LABEL_VALUE = "smoke-test"
DEFAULT_MIN_FREE_DISK = "50GB"
DEFAULT_SHM_SIZE = "16g"
_SHM_RE = re.compile(r"[1-9][0-9]*[bkmgBKMG]?")
_AGENT_RE = re.compile(r"^\s*Agent\s+\d+\s*$")
_NAME_RE = re.compile(r"^\s*Name:\s*(\S.*?)\s*$")
_GFX_RE = re.compile(r"gfx[0-9a-f]+", re.I)


# --------------------------------------------------------------------------- results

@dataclass
class Check:
    name: str
    ok: bool
    message: str                       # one line: what was found, or what is wrong and how to fix it
    details: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def line(self) -> str:
        return f"{self.name}: {self.message}"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "message": self.message, "details": self.details,
                "warnings": list(self.warnings)}


@dataclass
class Report:
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def get(self, name: str) -> Check | None:
        return next((c for c in self.checks if c.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "failed": [c.name for c in self.failures],
                "checks": [c.to_dict() for c in self.checks]}

    def text(self) -> str:
        lines = []
        for c in self.checks:
            lines.append(f"  {'ok' if c.ok else 'FAIL':<5} {c.line()}")
            lines += [f"  {'warn':<5} {c.name}: {w}" for w in c.warnings]
        return "\n".join(lines)

    def markdown(self) -> str:
        head = "passed" if self.ok else f"FAILED ({', '.join(c.name for c in self.failures)})"
        rows = ["### ROCm runner check: " + head, "", "| check | result | details |", "|---|---|---|"]
        for c in self.checks:
            text = md(c.message) + "".join(f"<br>warning: {md(w)}" for w in c.warnings)
            rows.append(f"| {md(c.name)} | {'ok' if c.ok else '**FAIL**'} | {text} |")
        return "\n".join(rows) + "\n"


# --------------------------------------------------------------------------- the host

class Host:
    """What the checks look at. Defaults: this machine; the docker CLI is GHBUILD_DOCKER_CLI, else `docker`."""

    def __init__(self, root: str | Path = Path("/"), env: Mapping[str, str] | None = None,
                 run: bounded.Runner | None = None, docker: str | None = None, cwd: Path | None = None):
        self.root = Path(root)
        self.env: Mapping[str, str] = dict(os.environ) if env is None else env
        self.run: bounded.Runner = run or bounded.runner(self.env)
        self.docker: str = docker or self.env.get("GHBUILD_DOCKER_CLI") or "docker"
        self.cwd: Path = cwd or Path.cwd()

    def path(self, absolute: str) -> Path:
        """A path of the inspected system (under root)."""
        return self.root / absolute.lstrip("/")

    def which(self, name: str, fallbacks: Sequence[str] = ()) -> str | None:
        found = shutil.which(name, path=(self.env or {}).get("PATH", os.defpath))
        if found:
            return found
        for candidate in fallbacks:
            p = self.path(candidate)
            if p.is_file() and os.access(p, os.X_OK):
                return str(p)
        return None


def _user() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return f"uid {os.getuid()}"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# --------------------------------------------------------------------------- gpus

def parse_rocminfo(text: str) -> list[str]:
    """The gfx names of the GPU agents in `rocminfo` output, one entry per agent, in order.

    An agent is a GPU when the first `Name:` line of its `Agent N` section is gfx* (CPU agents are
    named after the CPU; ISA entries further down the section, `amdgcn-amd-amdhsa--gfx942...`,
    are not the agent's name). Output without `Agent N` headers: every `Name: gfx*` line counts.
    """
    agents: list[str] = []
    in_agent = seen_name = False
    has_headers = False
    for line in text.splitlines():
        if _AGENT_RE.match(line):
            in_agent, seen_name, has_headers = True, False, True
            continue
        m = _NAME_RE.match(line)
        if not m:
            continue
        name = m.group(1)
        if has_headers:
            if in_agent and not seen_name:
                seen_name = True
                if _GFX_RE.fullmatch(name):
                    agents.append(name.lower())
        elif _GFX_RE.fullmatch(name):
            agents.append(name.lower())
    return agents


def _describe(agents: list[str]) -> str:
    counts: dict[str, int] = {}
    for a in agents:
        counts[a] = counts.get(a, 0) + 1
    return ", ".join(f"{name} x{n}" for name, n in counts.items()) or "none"


def check_gpus(host: Host, minimum: int = 1, timeout: float = 30.0) -> Check:
    if minimum <= 0:
        return Check("gpus", True, "skipped (--gpus 0)", {"skipped": True})
    exe = host.which("rocminfo", ["/opt/rocm/bin/rocminfo"])
    if not exe:
        return Check("gpus", False, "rocminfo not found (not on PATH, not in /opt/rocm/bin): install ROCm's "
                                    "rocminfo package, or add /opt/rocm/bin to the runner service's PATH")
    res = host.run([exe, ], timeout)
    details: dict[str, Any] = {"rocminfo": exe, "seconds": res.seconds}
    if res.status == "timeout":
        return Check("gpus", False, f"rocminfo did not finish within {timeout:g} s and was killed: the GPU driver "
                                    "may be hung; check `dmesg | grep -i amdgpu`, drain this runner and reboot it",
                     details)
    if res.status == "not-found":
        return Check("gpus", False, f"rocminfo could not be started ({res.note}): reinstall ROCm's rocminfo package",
                     details)
    if res.status != "ok":
        why = res.last_line() or "no output"
        return Check("gpus", False, f"rocminfo failed (exit {res.returncode}): {why}: check that the amdgpu driver is "
                                    "loaded (`dmesg | grep -i amdgpu`) and that this user can open /dev/kfd "
                                    "(groups render and video)", details)
    agents = parse_rocminfo(res.stdout)
    details.update({"count": len(agents), "agents": agents, "minimum": minimum})
    found = f"rocminfo sees {_plural(len(agents), 'GPU')} ({_describe(agents)})"
    if len(agents) < minimum:
        return Check("gpus", False, f"{found}, expected at least {minimum}: a GPU is missing or hung; check "
                                    "`amd-smi list` and `dmesg | grep -i amdgpu`, or lower --gpus", details)
    return Check("gpus", True, f"{found}, need at least {minimum}", details)


# --------------------------------------------------------------------------- /dev/kfd

def _group_name(gid: int, root: Path) -> str | None:
    for entry in _read_groups(root):
        if entry[1] == gid:
            return entry[0]
    return None


def _read_groups(root: Path) -> list[tuple[str, int, list[str]]]:
    try:
        text = (root / "etc" / "group").read_text("utf-8", errors="replace")
    except OSError:
        return []
    groups = []
    for line in text.splitlines():
        parts = line.split(":")
        if len(parts) >= 3 and parts[2].strip().isdigit():
            members = [m for m in (parts[3].split(",") if len(parts) > 3 else []) if m]
            groups.append((parts[0], int(parts[2]), members))
    return groups


def check_kfd(host: Host) -> Check:
    kfd = host.path("/dev/kfd")
    if not os.path.lexists(kfd):
        return Check("kfd", False, "/dev/kfd does not exist: the amdgpu kernel driver is not loaded (install "
                                   "amdgpu-dkms, then `modprobe amdgpu`), or this runner has no AMD GPU")
    try:
        st = os.stat(kfd)
    except OSError as exc:
        return Check("kfd", False, f"/dev/kfd cannot be inspected: {exc.strerror}: check the device node")
    details = {"path": str(kfd), "mode": oct(stat.S_IMODE(st.st_mode)), "gid": st.st_gid}
    if not os.access(kfd, os.R_OK | os.W_OK):
        group = _group_name(st.st_gid, host.root) or f"gid {st.st_gid}"
        user = _user()
        return Check("kfd", False, f"/dev/kfd is not readable and writable by {user} (uid {os.getuid()}; the device "
                                   f"is mode {oct(stat.S_IMODE(st.st_mode))}, group {group}): add the user to the "
                                   f"groups that own the GPU devices (`sudo usermod -aG render,video {user}`) and "
                                   "restart the runner service", details)
    return Check("kfd", True, "/dev/kfd is readable and writable", details)


# --------------------------------------------------------------------------- render gid

def find_render_gid(root: Path | str = "/") -> tuple[int | None, str, list[str]]:
    """(gid, where it came from, notes). The devices' gid wins over /etc/group: it is what access needs."""
    root = Path(root)
    notes: list[str] = []
    group_gid = next((gid for name, gid, _ in _read_groups(root) if name == "render"), None)
    dri = root / "dev" / "dri"
    device_gids: dict[str, int] = {}
    try:
        for entry in sorted(dri.iterdir()):
            if entry.name.startswith("renderD"):
                device_gids[entry.name] = os.stat(entry).st_gid
    except OSError:
        pass
    if device_gids:
        first, gid = next(iter(device_gids.items()))
        if len(set(device_gids.values())) > 1:
            notes.append("render devices belong to different groups: " +
                         ", ".join(f"{k}={v}" for k, v in device_gids.items()) + f"; using {gid} ({first})")
        if group_gid is not None and group_gid != gid:
            notes.append(f"/etc/group has render={group_gid} but /dev/dri/{first} belongs to gid {gid}; "
                         "using the device's gid")
        return gid, f"/dev/dri/{first}", notes
    if group_gid is not None:
        return group_gid, "/etc/group", notes
    return None, "", notes


def check_render_gid(host: Host) -> Check:
    gid, source, notes = find_render_gid(host.root)
    if gid is None:
        return Check("render-gid", False, "no render group: /etc/group has no `render` entry and there is no "
                                          "/dev/dri/renderD* device: install the amdgpu driver (it creates both), or "
                                          "pass the gid explicitly (container-flags --gid N)")
    return Check("render-gid", True, f"render gid {gid} (from {source})", {"gid": gid, "source": source},
                 warnings=notes)


# --------------------------------------------------------------------------- disk

def docker_root_dir(host: Host, timeout: float = 15.0) -> tuple[Path | None, str]:
    """The engine's data root (`docker info`), or (None, why not)."""
    res = host.run([host.docker, "info", "--format", "{{.DockerRootDir}}"], timeout)
    if res.status == "ok" and res.stdout.strip().startswith("/"):
        return host.path(res.stdout.strip()), ""
    if res.status == "timeout":
        return None, f"docker info did not answer within {timeout:g} s"
    return None, f"docker info: {res.note or res.last_line() or res.status}"


def check_disk(host: Host, minimum: int | str = DEFAULT_MIN_FREE_DISK, path: str | Path | None = None,
               docker_timeout: float = 15.0) -> Check:
    need = parse_size(minimum)
    warnings: list[str] = []
    if path is not None:
        target, what = Path(path), "--disk-path"
    else:
        root, why = docker_root_dir(host, docker_timeout)
        target, what = (root, "the Docker data root") if root is not None else (host.cwd, "the current directory")
        if root is None:
            warnings.append(f"{why}; measured the current directory instead")
    try:
        usage = shutil.disk_usage(target)
    except OSError as exc:
        return Check("disk", False, f"cannot measure free disk on {target} ({what}): {exc.strerror}: pass an "
                                    "existing folder with --disk-path", {"path": str(target)}, warnings)
    details = {"path": str(target), "free": usage.free, "total": usage.total, "minimum": need}
    if usage.free < need:
        return Check("disk", False, f"only {format_size(usage.free)} free on {target} ({what}), need "
                                    f"{format_size(need)}: remove unused images and build cache (`docker image prune "
                                    "-af`, `docker builder prune -af`) or enlarge the disk", details, warnings)
    return Check("disk", True, f"{format_size(usage.free)} free on {target} ({what}), need {format_size(need)}",
                 details, warnings)


# --------------------------------------------------------------------------- leftover containers

def list_running(host: Host, timeout: float = 15.0) -> tuple[list[dict[str, str]] | None, str]:
    fmt = "{{.ID}}\t{{.Names}}\t{{.Image}}\t{{.RunningFor}}\t{{.Label \"" + CONTAINER_LABEL + "\"}}"
    res = host.run([host.docker, "ps", "--no-trunc", "--format", fmt], timeout)
    if res.status == "timeout":
        return None, (f"`docker ps` did not answer within {timeout:g} s and was killed: the Docker engine is hung; "
                      "restart it (`sudo systemctl restart docker`)")
    if res.status == "not-found":
        return None, (f"docker CLI not found ({res.note}): install Docker, or set GHBUILD_DOCKER_CLI to the client")
    if res.status != "ok":
        return None, (f"`docker ps` failed (exit {res.returncode}): {res.last_line() or 'no output'}: start the Docker "
                      "engine, or add the runner user to the docker group")
    containers = []
    for line in res.stdout.splitlines():
        if not line.strip():
            continue
        parts = (line.split("\t") + [""] * 5)[:5]
        containers.append({"id": parts[0], "name": parts[1], "image": parts[2], "running_for": parts[3],
                           "label": parts[4]})
    return containers, ""


def check_containers(host: Host, clean: bool = False, timeout: float = 15.0) -> Check:
    containers, error = list_running(host, timeout)
    if containers is None:
        return Check("containers", False, error)
    ours = [c for c in containers if c["label"]]
    others = [c for c in containers if not c["label"]]
    warnings = []
    if others:
        warnings.append(f"{_plural(len(others), 'other running container')} not started through ghbuild, left alone: "
                        + ", ".join(c["name"] or c["id"][:12] for c in others[:10]))
    details: dict[str, Any] = {"leftover": ours, "other": others}
    if not ours:
        return Check("containers", True, "no leftover containers from earlier jobs", details, warnings)
    names = ", ".join(f"{c['name'] or c['id'][:12]} (up {c['running_for']})" for c in ours[:10])
    if not clean:
        return Check("containers", False, f"{_plural(len(ours), 'leftover container')} from earlier jobs still "
                                          f"running: {names}: they hold GPUs and memory; rerun with "
                                          "--clean-containers, or `docker rm -f` them", details, warnings)
    res = host.run([host.docker, "rm", "-f", *[c["id"] for c in ours]], timeout)
    if res.status != "ok":
        why = "timed out" if res.status == "timeout" else (res.last_line() or f"exit {res.returncode}")
        return Check("containers", False, f"could not remove {_plural(len(ours), 'leftover container')} ({names}): "
                                          f"{why}: remove them by hand (`docker rm -f`)", details, warnings)
    details["removed"] = [c["id"] for c in ours]
    return Check("containers", True, f"removed {_plural(len(ours), 'leftover container')}: {names}", details,
                 warnings)


# --------------------------------------------------------------------------- all checks

def check(*, gpus: int = 1, min_free_disk: int | str = DEFAULT_MIN_FREE_DISK, disk_path: str | Path | None = None,
          rocminfo_timeout: float = 30.0, docker_timeout: float = 15.0, clean_containers: bool = False,
          host: Host | None = None) -> Report:
    """Every runner check, in order. Raises ValueError for a bad size or timeout (a usage error)."""
    need = parse_size(min_free_disk)
    if rocminfo_timeout <= 0 or docker_timeout <= 0:
        raise ValueError("timeouts must be positive")
    host = host or Host()
    if gpus == 0:
        # A job that uses no GPU (building, not smoke-testing) needs neither the devices nor the group.
        gpu_checks = [Check(name, True, "skipped (--gpus 0)", {"skipped": True})
                      for name in ("gpus", "kfd", "render-gid")]
    else:
        gpu_checks = [check_gpus(host, gpus, rocminfo_timeout), check_kfd(host), check_render_gid(host)]
    return Report([*gpu_checks, check_disk(host, need, disk_path, docker_timeout),
                   check_containers(host, clean_containers, docker_timeout)])


# --------------------------------------------------------------------------- container flags

def container_flags(gid: int, *, shm_size: str = DEFAULT_SHM_SIZE,
                    label: str | None = CONTAINER_LABEL_VALUE) -> list[str]:
    """The flags a GPU container needs, in one place:

    --device /dev/kfd --device /dev/dri --group-add <numeric render gid> --security-opt seccomp=unconfined
    --shm-size 16g, plus --label org.ghbuild.runner=<label> (None: no label) so that the runner check
    can find containers a cancelled job left running.
    """
    if isinstance(gid, bool) or not isinstance(gid, int) or gid < 0:
        raise ValueError(f"render gid must be a non-negative integer, not {gid!r}")
    if not isinstance(shm_size, str) or not _SHM_RE.fullmatch(shm_size):
        raise ValueError(f"shm size {shm_size!r} is not a docker size (e.g. 16g, 512m)")
    flags = ["--device", "/dev/kfd", "--device", "/dev/dri", "--group-add", str(gid),
             "--security-opt", "seccomp=unconfined", "--shm-size", shm_size]
    if label is not None:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", label):
            raise ValueError(f"container label value {label!r} must match [A-Za-z0-9][A-Za-z0-9._-]*")
        flags += ["--label", f"{CONTAINER_LABEL}={label}"]
    return flags


def detect_render_gid(root: Path | str = "/") -> int:
    gid, _, _ = find_render_gid(root)
    if gid is None:
        raise RunnerCheckError("no render group: /etc/group has no `render` entry and there is no /dev/dri/renderD* "
                               "device: install the amdgpu driver, or pass --gid N")
    return gid
