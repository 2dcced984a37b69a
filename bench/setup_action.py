#!/usr/bin/env python3
"""The setup action's install in a fresh job: cold (nothing cached) and warm (environment restored from the cache).

Runs .github/actions/setup/setup.py as the action runs it, each time in a new, empty RUNNER_TEMP with
PIP_NO_CACHE_DIR=1 and no uv on PATH (as on a fresh GitHub-hosted runner; UV_CACHE_DIR lives in that
RUNNER_TEMP):

- cold, full (extras `all`) and light (extras ""): uv fetched from the package index with the interpreter's
  pip, the environment resolved, downloaded and installed by uv.
- warm: the stage folder a cold run left (~/.cache/ghbuild-setup/<key>: the environment and its manifest,
  what the action saves; HOME is a folder of the bench) is packed the way actions/cache packs it (tar with
  zstd, when zstd is on PATH, else gzip), then each sample removes the stage, unpacks it again (what the
  restore step does after its download) and runs setup.py with the restore's cache hit in a RUNNER_TEMP at
  another path than the cold run's, so it relocates the environment there and installs nothing. The download
  from GitHub's cache service itself cannot be measured here (no such service locally); the archive size is
  printed so that it can be estimated.

Goals (issue 14): cold <= 8 s, warm <= 3 s (median). The cold figure depends on this machine's path to the
package index: the bench prints the bytes uv downloaded.

Usage: .venv/bin/python bench/setup_action.py [--cold-runs 1] [--warm-runs 5] [--python python3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETUP = ROOT / ".github" / "actions" / "setup" / "setup.py"
COLD_GOAL, WARM_GOAL = 8.0, 3.0


def job_env(runner_temp: Path, extras: str, restored: str = "false") -> dict[str, str]:
    path = ":".join(p for p in os.environ.get("PATH", "").split(":") if not (Path(p) / "uv").exists())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "UV_", "PYTHONDONTWRITE"))}
    out = runner_temp / "github_output"
    out.touch()
    env.update(PATH=path, RUNNER_TEMP=str(runner_temp), PIP_NO_CACHE_DIR="1", GITHUB_OUTPUT=str(out),
               GITHUB_PATH=str(runner_temp / "github_path"), GHBUILD_SETUP_EXTRAS=extras,
               GITHUB_ACTION_PATH=str(SETUP.parent), HOME=str(runner_temp.parent / "home"),
               GITHUB_EVENT_NAME="push", GHBUILD_SETUP_CACHE="true", GHBUILD_SETUP_RESTORED=restored)
    return env


def install_like_the_action(folder: Path, extras: str = "") -> Path:
    """ghbuild as a job gets it: setup.py's install (`extras`: "" is the light one) into `folder`/rt, a
    RUNNER_TEMP of the caller's own (`folder`/home is its HOME). Returns the environment's interpreter."""
    (folder / "rt").mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, str(SETUP)], env=job_env(folder / "rt", extras), capture_output=True,
                          text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"setup.py failed ({proc.returncode}): {(proc.stdout + proc.stderr)[-2000:]}")
    return folder / "rt" / "ghbuild" / "venv" / "bin" / "python"


def setup(python: str, runner_temp: Path, extras: str, restored: str = "false") -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([python, str(SETUP)], env=job_env(runner_temp, extras, restored), capture_output=True,
                          text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"setup.py failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return elapsed, proc.stdout + proc.stderr


def label_key(runner_temp: Path) -> str:
    """The cache key's tail (the fingerprint) of the environment a cold run in runner_temp staged."""
    stamp = json.loads((runner_temp / "ghbuild" / "setup.json").read_text("utf-8"))
    return stamp["fingerprint"][:40]


def du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold-runs", type=int, default=1)
    parser.add_argument("--warm-runs", type=int, default=5)
    parser.add_argument("--python", default="python3")
    args = parser.parse_args()
    compressor = ["zstd", "-T0"] if shutil.which("zstd") else ["gzip", "-1"]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        archives = {}
        for extras, label in (("all", "full"), ("", "light")):
            samples = []
            for _ in range(args.cold_runs):
                rt = tmp / f"runner-temp-{label}"   # one path per variant, as RUNNER_TEMP on a hosted runner
                shutil.rmtree(rt, ignore_errors=True)
                rt.mkdir()
                elapsed, log = setup(args.python, rt, extras)
                samples.append(elapsed)
                size = du(rt / "ghbuild" / "venv")
            shown = extras or '""'
            rows.append((f"cold, {label} (extras {shown})", samples, f"venv {size / 1e6:.0f} MB"))
            archive = tmp / f"{label}.tar"
            stage = next((tmp / "home" / ".cache" / "ghbuild-setup").glob(f"ghbuild-venv-*{label_key(rt)}"))
            start = time.perf_counter()
            subprocess.run(f"tar -C {tmp / 'home'} -cf - {stage.relative_to(tmp / 'home')} | {' '.join(compressor)} "
                           f"> {archive}", shell=True, check=True)
            archives[label] = (archive, time.perf_counter() - start)
        for label, (archive, pack_s) in archives.items():
            unpack, total = [], []
            for _ in range(args.warm_runs):
                rt = tmp / f"warm-runner-temp-{label}"   # a fresh job, RUNNER_TEMP elsewhere than the cold run's
                shutil.rmtree(rt, ignore_errors=True)
                rt.mkdir()
                shutil.rmtree(tmp / "home" / ".cache" / "ghbuild-setup", ignore_errors=True)
                start = time.perf_counter()
                subprocess.run(f"{' '.join(compressor)} -dc {archive} | tar -C {tmp / 'home'} -xf -", shell=True,
                               check=True)
                unpack.append(time.perf_counter() - start)
                elapsed, log = setup(args.python, rt, "all" if label == "full" else "", restored="true")
                if "restored from the GitHub Actions cache" not in log:
                    raise SystemExit(f"warm run installed something:\n{log[-2000:]}")
                total.append(unpack[-1] + elapsed)
            rows.append((f"warm, {label}: unpack + setup.py (relocate)", total,
                         f"archive {archive.stat().st_size / 1e6:.0f} MB ({compressor[0]}), unpack median "
                         f"{statistics.median(unpack):.2f} s, packing took {pack_s:.1f} s"))
    print(f"setup.py in a fresh RUNNER_TEMP, PIP_NO_CACHE_DIR=1, no uv on PATH ({args.python})")
    for name, samples, note in rows:
        print(f"{name:<38} median {statistics.median(samples):6.2f} s  "
              f"(min {min(samples):.2f}, max {max(samples):.2f}, n={len(samples)})  {note}")
    cold = min(statistics.median(r[1]) for r in rows if r[0].startswith("cold"))
    warm = max(statistics.median(r[1]) for r in rows if r[0].startswith("warm"))
    print(f"goal cold <= {COLD_GOAL:.0f} s (light): {'met' if cold <= COLD_GOAL else 'NOT met'} ({cold:.2f} s); "
          f"warm <= {WARM_GOAL:.0f} s: {'met' if warm <= WARM_GOAL else 'NOT met'} ({warm:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
