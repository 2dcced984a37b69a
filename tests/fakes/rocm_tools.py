"""Fake `rocminfo`, `amd-smi` and `docker` executables for the runner-check and diagnose tests.

They are real executables (POSIX sh) written into a folder that the tests put first on PATH, so the
code under test starts real processes, with real exit codes, output and hangs. Every fake appends
its argv to `calls.log` in its folder and, when it hangs, writes the pids of itself and of the
child it started to `<name>.pids`, so a test can check that the whole process group was killed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# rocminfo output of a node with one CPU agent and two MI300X GPUs (trimmed; the layout is rocminfo's).
ROCMINFO_2_GPUS = """\
ROCk module version 6.8.5 is loaded
=====================
HSA System Attributes
=====================
Runtime Version:         1.15
System Endianness:       LITTLE

==========
HSA Agents
==========
*******
Agent 1
*******
  Name:                    AMD EPYC 9654 96-Core Processor
  Uuid:                    CPU-XX
  Marketing Name:          AMD EPYC 9654 96-Core Processor
  Vendor Name:             CPU
  Device Type:             CPU
  ISA Info:
*******
Agent 2
*******
  Name:                    gfx942
  Uuid:                    GPU-4a7a2cbe7e1d8c3b
  Marketing Name:          AMD Instinct MI300X
  Vendor Name:             AMD
  Device Type:             GPU
  Compute Unit:            304
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-
      Machine Models:          HSA_MACHINE_MODEL_LARGE
*******
Agent 3
*******
  Name:                    gfx942
  Uuid:                    GPU-9b1f0c2d3e4f5a6b
  Marketing Name:          AMD Instinct MI300X
  Vendor Name:             AMD
  Device Type:             GPU
  Compute Unit:            304
  ISA Info:
    ISA 1
      Name:                    amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-
      Machine Models:          HSA_MACHINE_MODEL_LARGE
*** Done ***
"""

ROCMINFO_CPU_ONLY = ROCMINFO_2_GPUS.split("*******\nAgent 2")[0] + "*** Done ***\n"

ROCMINFO_ERROR = ("ROCk module is loaded\n"
                  "hsa api call failure at: /longer_pathname_so_that_rpms_can_support_packaging_the_debug_info/"
                  "rocminfo/rocminfo.cc:1306\n"
                  "Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary "
                  "resources. This error may also occur when the core runtime library needs to spawn threads or "
                  "create internal OS-specific events.\n")


@dataclass
class FakeBin:
    """A folder of fake executables."""

    path: Path

    @property
    def log(self) -> Path:
        return self.path / "calls.log"

    def calls(self, name: str | None = None) -> list[list[str]]:
        if not self.log.exists():
            return []
        rows = [line.split() for line in self.log.read_text().splitlines() if line.strip()]
        return [r[1:] for r in rows if name is None or r[0] == name]

    def pids(self, name: str) -> list[int]:
        f = self.path / f"{name}.pids"
        return [int(x) for x in f.read_text().split()] if f.exists() else []

    def _write(self, name: str, body: str) -> Path:
        script = self.path / name
        log = shlex.quote(str(self.log))
        script.write_text("#!/bin/sh\n" f"echo {shlex.quote(name)} \"$*\" >> {log}\n" + body)
        script.chmod(0o755)
        return script

    def ok(self, name: str, stdout: str = "", stderr: str = "") -> Path:
        """Prints stdout (and stderr), exits 0."""
        out = self.path / f"{name}.out"
        out.write_text(stdout)
        err = self.path / f"{name}.err"
        err.write_text(stderr)
        return self._write(name, f"cat {shlex.quote(str(out))}\ncat {shlex.quote(str(err))} >&2\nexit 0\n")

    def fail(self, name: str, stderr: str, code: int = 1, stdout: str = "") -> Path:
        out = self.path / f"{name}.out"
        out.write_text(stdout)
        err = self.path / f"{name}.err"
        err.write_text(stderr)
        return self._write(name, f"cat {shlex.quote(str(out))}\ncat {shlex.quote(str(err))} >&2\nexit {code}\n")

    def hang(self, name: str, seconds: int = 60) -> Path:
        """Starts `sleep` in the background (same process group), records both pids, waits for it."""
        pids = shlex.quote(str(self.path / f"{name}.pids"))
        return self._write(name, f"sleep {seconds} &\necho \"$$ $!\" >> {pids}\nwait\n")

    def script(self, name: str, body: str) -> Path:
        return self._write(name, body)


def fake_docker(fb: FakeBin, *, ps_lines: list[str] = (), root_dir: str = "/var/lib/docker",
                rm_code: int = 0) -> Path:
    """`docker ps` prints ps_lines (tab-separated as for the runner check's --format), `docker info`
    prints root_dir for {{.DockerRootDir}}, `docker rm -f` exits rm_code."""
    ps = fb.path / "docker.ps"
    ps.write_text("".join(line + "\n" for line in ps_lines))
    return fb.script("docker", f"""case "$1" in
  ps) cat {shlex.quote(str(ps))} ;;
  info) case "$*" in
          *DockerRootDir*) echo {shlex.quote(root_dir)} ;;
          *) echo "Server Version: 20.10.24 (fake)" ;;
        esac ;;
  rm) exit {rm_code} ;;
  *) echo "fake docker: unsupported: $*" >&2; exit 2 ;;
esac
""")


def survivors(pids, within: float = 2.0) -> list[int]:
    """The pids still alive `within` seconds from now (SIGKILL to a group is delivered asynchronously: on a
    busy machine a killed process can still be running for a moment after killpg returns)."""
    deadline = time.monotonic() + within
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


def alive(pid: int) -> bool:
    """True while the pid exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def clean_env(bin_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a CLI run: no GitHub/ghbuild/runner variables, the fakes first on PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "GHBUILD_", "RUNNER_", "ACTIONS_", "INPUT_", "DOCKER_"))}
    env["PATH"] = f"{bin_dir}:/usr/local/bin:/usr/bin:/bin"
    env.update(extra)
    return env


def cli_argv() -> list[str]:
    return [sys.executable, "-m", "ghbuild"]


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("ghbuild: ")]


def run_cli(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 120,
            prefix: list[str] | None = None, command: list[str] | None = None) -> CliResult:
    import time

    start = time.monotonic()
    proc = subprocess.run([*(prefix or []), *(command or cli_argv()), *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)
    return CliResult(proc.returncode, proc.stdout, proc.stderr, time.monotonic() - start)
