#!/usr/bin/env python3
"""Start-up of every ghbuild command: time from exec to its first byte of output, over `python3 -c pass`.

Each command runs in a fresh interpreter (as in a job step) from the installed `ghbuild` package, in a
temporary folder holding a two-image config and a push event, with nothing listening where the config's
registries point: what is measured is ghbuild's own start-up (interpreter, imports, config, argument
parsing, planning) up to the moment it prints its first line on stdout or stderr, not the network. The
process is killed as soon as that first byte arrives, so a command that would go on to talk to a registry
costs nothing more. Runs are interleaved with `python3 -c pass` (same interpreter, -c pass prints nothing:
its time is its whole life), median of --runs each, and the heavy modules each command imports before its
first output are listed (from -X importtime of one more run).

Goal (issue 14): every command's first output within 0.1 s of the bare interpreter's start-up.

With --before REF, the package as it was at git REF (extracted to a temporary folder and put first on
PYTHONPATH) runs interleaved with the current one, so a change is measured before and after in one run.

Usage: .venv/bin/python bench/startup.py [--runs 15] [--only plan,publish] [--before main] [--python PATH | --installed]
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_SECONDS = 0.1
HEAVY = ("boto3", "botocore", "docker", "github", "requests", "urllib3", "jsonschema", "actions_toolkit",
         "packaging")
SHA = "1" * 40
CONFIG = """
[trust]
canonical-repository = "example/project"
[registries]
cache = "127.0.0.1:9/{owner}/cache"
staging = "127.0.0.1:9/{owner}/ci-{image}"
publish = "127.0.0.1:9/example/{image}"
[images.cpu]
dockerfile = "Dockerfile"
platforms = ["linux/amd64", "linux/arm64"]
[images.rocm]
dockerfile = "Dockerfile"
platforms = ["linux/amd64", "linux/arm64"]
runners.amd64 = ["self-hosted", "linux", "rocm"]
"""
PAYLOAD = {"ref": "refs/heads/main", "after": SHA,
           "repository": {"full_name": "example/project", "default_branch": "main"}}
# name -> arguments after `ghbuild`. Each is a command as the workflows call it; the ones that talk to a
# registry are measured up to their first log line (they print it before any request).
COMMANDS = {
    "--version": ["--version"],
    "plan --json": ["plan", "--json"],
    "plan": ["plan"],
    "matrix": ["matrix"],
    "schema": ["schema"],
    "build --dry-run": ["build", "--image", "cpu", "--arch", "amd64", "--dry-run"],
    "publish nightly": ["publish", "nightly", "--image", "cpu", "--sha", SHA],
    "prune": ["prune", "--image", "cpu"],
    "digests": ["digests", "records"],
    "container-flags": ["container-flags", "--gid", "109"],
}


def first_output(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """(wall, CPU) seconds from start to the first byte on stdout or stderr (or to exit, if it prints nothing).

    CPU is the process's user + system time up to the moment it is killed (from wait4), subprocesses it
    waited for included: on a busy machine the wall time grows with the load, the CPU time much less."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready, _, _ = select.select([proc.stdout, proc.stderr], [], [], 30)
        elapsed = time.perf_counter() - start
        if not ready:
            raise SystemExit(f"{' '.join(cmd)}: no output within 30 s")
    finally:
        os.kill(proc.pid, signal.SIGKILL)   # not proc.kill(): it may reap the child, and wait4 needs to
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        proc.stdout.close()
        proc.stderr.close()
    return elapsed, usage.ru_utime + usage.ru_stime


def heavy_imports(cmd: list[str], env: dict[str, str], cwd: str) -> list[str]:
    """Heavy top-level packages imported before the first output (importtime lines precede it on stderr)."""
    proc = subprocess.Popen([cmd[0], "-X", "importtime", *cmd[1:]], env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    found: set[str] = set()
    try:
        for line in proc.stderr:
            if not line.startswith("import time:"):
                break
            name = line.split("|")[-1].strip().split(".")[0]
            if name in HEAVY:
                found.add(name)
    finally:
        proc.kill()
        proc.communicate()
    return sorted(found)


def _extract(ref: str, into: str) -> None:
    """The ghbuild package as committed at `ref` (plus the generated _version.py, which git does not hold)."""
    repo = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "-C", str(repo), "archive", ref, "ghbuild"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    shutil.copy(repo / "ghbuild" / "_version.py", Path(into, "ghbuild", "_version.py"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--only", help="comma-separated command names (default: all)")
    parser.add_argument("--before", metavar="REF", help="also run the package as it was at this git ref")
    parser.add_argument("--python", metavar="PATH", default=sys.executable,
                        help="the interpreter of the environment to time, e.g. <RUNNER_TEMP>/ghbuild/venv/bin/python "
                             "as the setup action installs it (default: this one, the development venv, whose "
                             "editable install adds its import hook to every start)")
    parser.add_argument("--installed", action="store_true",
                        help="first install ghbuild as the setup action does (the light install, into a folder of "
                             "the bench's own) and time that environment")
    args = parser.parse_args()
    names = args.only.split(",") if args.only else list(COMMANDS)
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as old, \
            tempfile.TemporaryDirectory() as installed:
        if args.installed:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from setup_action import install_like_the_action

            args.python = str(install_like_the_action(Path(installed)))
        if args.before:
            _extract(args.before, old)
        Path(tmp, "ghbuild.toml").write_text(CONFIG)
        Path(tmp, "Dockerfile").write_text("FROM scratch\n")
        Path(tmp, "records").mkdir()
        Path(tmp, "event.json").write_text(json.dumps(PAYLOAD))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GHBUILD_", "PYTHON"))}
        env.update(GITHUB_EVENT_NAME="push", GITHUB_EVENT_PATH=str(Path(tmp, "event.json")),
                   GITHUB_REPOSITORY="example/project", GITHUB_REF="refs/heads/main", GITHUB_SHA=SHA)
        old_env = {**env, "PYTHONPATH": old}
        ghbuild = [args.python, "-m", "ghbuild"]
        base = [args.python, "-c", "pass"]
        for name in names:   # once each: bytecode written, page cache warm
            first_output([*ghbuild, *COMMANDS[name]], env, tmp)
            if args.before:
                first_output([*ghbuild, *COMMANDS[name]], old_env, tmp)
        first_output(base, env, tmp)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in ["python -c pass", *names]}
        before: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
        for _ in range(args.runs):
            samples["python -c pass"].append(first_output(base, env, tmp))
            for name in names:
                if args.before:
                    before[name].append(first_output([*ghbuild, *COMMANDS[name]], old_env, tmp))
                samples[name].append(first_output([*ghbuild, *COMMANDS[name]], env, tmp))
        heavy = {name: heavy_imports([*ghbuild, *COMMANDS[name]], env, tmp) for name in names}

    def med(runs: list[tuple[float, float]], which: int) -> float:
        return statistics.median(run[which] for run in runs) * 1000

    bare, bare_cpu = med(samples["python -c pass"], 0), med(samples["python -c pass"], 1)
    print(f"{args.runs} interleaved runs each; until the first byte of output, medians in ms: wall (over bare "
          f"python) and CPU (over bare python){'; before = the package at ' + args.before if args.before else ''}")
    was = f" {'before: wall':>16} {'cpu':>14} |" if args.before else ""
    print(f"{'command':<24}{was} {'wall':>16} {'cpu':>14}   heavy imports before it")
    print(f"{'python -c pass':<24}{' ' * len(was)} {bare:7.1f}{'':>9} {bare_cpu:6.1f}")
    worst = 0.0
    for name in names:
        wall, cpu = med(samples[name], 0), med(samples[name], 1)
        worst = max(worst, (wall - bare) / 1000)
        then = ""
        if args.before:
            old_wall, old_cpu = med(before[name], 0), med(before[name], 1)
            then = f" {old_wall:7.1f} ({old_wall - bare:+6.1f}) {old_cpu:6.1f} ({old_cpu - bare_cpu:+6.1f}) |"
        print(f"{'ghbuild ' + name:<24}{then} {wall:7.1f} ({wall - bare:+6.1f}) {cpu:6.1f} ({cpu - bare_cpu:+6.1f})   "
              f"{', '.join(heavy[name]) or '-'}")
    ok = worst <= GOAL_SECONDS
    print(f"goal (every command <= {GOAL_SECONDS * 1000:.0f} ms over bare python): {'met' if ok else 'NOT met'} "
          f"(worst {worst * 1000:+.1f} ms)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
