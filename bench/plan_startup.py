#!/usr/bin/env python3
"""Cold-process wall time of `ghbuild plan --json` for a 2-image x 2-arch config.

Runs, interleaved in one loop so machine noise hits both alike:
  - baseline: `python -c pass` (the interpreter's own cold start)
  - ghbuild:  `python -m ghbuild plan --json` for a push to the default branch
and prints the median, p90 and max of each, the ratio, and whether the 0.3 s goal holds.
Also lists which heavy modules (boto3, docker, github, requests) the plan path imported: none is the goal.

Usage: .venv/bin/python bench/plan_startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_SECONDS = 0.3
CONFIG = """
[trust]
canonical-repository = "example/project"
[registries]
cache = "ghcr.io/{owner}/cache"
staging = "ghcr.io/{owner}/ci-{image}"
publish = "docker.io/example/{image}"
[images.cpu]
dockerfile = "docker/Dockerfile.cpu"
platforms = ["linux/amd64", "linux/arm64"]
[images.rocm]
dockerfile = "docker/Dockerfile.rocm"
platforms = ["linux/amd64", "linux/arm64"]
runners.amd64 = ["self-hosted", "linux", "rocm"]
"""
PAYLOAD = {"ref": "refs/heads/main", "after": "1" * 40,
           "repository": {"full_name": "example/project", "default_branch": "main"}}


def timed(cmd: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def summary(samples: list[float]) -> str:
    samples = sorted(samples)
    p90 = samples[int(0.9 * (len(samples) - 1))]
    return (f"median {statistics.median(samples) * 1000:7.1f} ms  p90 {p90 * 1000:7.1f} ms  "
            f"max {samples[-1] * 1000:7.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "ghbuild.toml").write_text(CONFIG)
        event = Path(tmp, "event.json")
        event.write_text(json.dumps(PAYLOAD))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GHBUILD_"))}
        env.update(GITHUB_EVENT_NAME="push", GITHUB_EVENT_PATH=str(event), GITHUB_REPOSITORY="example/project",
                   GITHUB_REF="refs/heads/main", GITHUB_SHA="1" * 40)
        plan_cmd = [sys.executable, "-m", "ghbuild", "plan", "--json"]
        base_cmd = [sys.executable, "-c", "pass"]
        out = subprocess.run(plan_cmd, env=env, cwd=tmp, check=True, capture_output=True, text=True).stdout
        jobs = len(json.loads(out)["jobs"])
        imports = subprocess.run([sys.executable, "-X", "importtime", "-m", "ghbuild", "plan", "--json"], env=env,
                                 cwd=tmp, check=True, capture_output=True, text=True).stderr
        heavy = sorted({line.split("|")[-1].strip().split(".")[0] for line in imports.splitlines()
                        if line.split("|")[-1].strip().split(".")[0] in ("boto3", "botocore", "docker", "github",
                                                                         "requests", "actions_toolkit")})
        timed(plan_cmd, env, tmp), timed(base_cmd, env, tmp)  # warm the page cache once
        plan_s, base_s = [], []
        for _ in range(args.runs):
            base_s.append(timed(base_cmd, env, tmp))
            plan_s.append(timed(plan_cmd, env, tmp))
    med_plan, med_base = statistics.median(plan_s), statistics.median(base_s)
    print(f"config: 2 images x 2 arches -> {jobs} jobs; {args.runs} interleaved cold runs each")
    print(f"python -c pass           {summary(base_s)}")
    print(f"ghbuild plan --json      {summary(plan_s)}")
    print(f"ratio plan/python        {med_plan / med_base:.2f}x; "
          f"ghbuild's own share {1000 * (med_plan - med_base):.1f} ms")
    print(f"heavy imports on the plan path: {', '.join(heavy) or 'none'}")
    ok = med_plan <= GOAL_SECONDS and not heavy
    print(f"goal (median <= {GOAL_SECONDS:.1f} s, no heavy imports): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
