#!/usr/bin/env python3
"""Cold build versus a rebuild after `docker builder prune -af`, with sccache on S3.

Both builds run in this one process, one after the other, against the local engine, registry and
S3 from `make infra-up`: (1) cold: a fresh S3 key prefix and a pruned builder, so every compile
misses; (2) warm: prune the builder again (layer cache and cache mounts gone, as on a fresh runner),
same S3 prefix. Prints the compile stages' (cpp + rust) seconds for each, the ratio, and the hit rate.
Goal: >= 95 % hits and compile stages >= 5x faster than cold.

Usage: make infra-up && .venv/bin/python bench/sccache_rebuild.py [--image cpu] [--arch amd64]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # the development-only infra package (and tests/fakes)

from infra import localenv  # noqa: E402

COMPILE_STAGES = ("cpp", "rust")


def local_env() -> dict[str, str]:
    if not localenv.path().exists():
        sys.exit("bench: .ghbuild/local.env missing: run `make infra-up` first")
    return {**os.environ, **localenv.read()}


def build(env: dict[str, str], image: str, arch: str) -> tuple[dict, float]:
    subprocess.run([env.get("GHBUILD_DOCKER_CLI", "docker"), "builder", "prune", "-af"], env=env, check=True,
                   capture_output=True)
    cmd = [str(ROOT / ".venv/bin/ghbuild"), "build", "--image", image, "--arch", arch, "--json", "--quiet",
           "--event", "push", "--repository", "ghbuild/ghbuild", "--ref", "main", "--default-branch", "main"]
    start = time.monotonic()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        sys.exit(f"bench: build failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout), seconds


def compile_seconds(report: dict) -> float:
    return sum(report["stages"].get(stage, {}).get("seconds", 0.0) for stage in COMPILE_STAGES)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--image", default="cpu")
    parser.add_argument("--arch", default="amd64")
    args = parser.parse_args()
    env = local_env()
    env["GHBUILD_SCCACHE_KEY_PREFIX"] = f"bench-{uuid.uuid4().hex[:12]}"
    # No registry layer cache: its inline cache would serve the compile stages from layers after the
    # prune, and this measures what sccache saves when the layers are gone (changed sources, new runner).
    env["GHBUILD_REGISTRIES_CACHE"] = ""
    cold, cold_wall = build(env, args.image, args.arch)
    warm, warm_wall = build(env, args.image, args.arch)
    c_cold, c_warm = compile_seconds(cold), compile_seconds(warm)
    sc = warm["sccache"]
    print(f"image {args.image}/{args.arch}, S3 prefix {env['GHBUILD_SCCACHE_KEY_PREFIX']}, builder pruned before each, "
          "no registry layer cache")
    for name, rep in (("cold", cold), ("after prune", warm)):
        cached = [k for k in COMPILE_STAGES if rep["sccache"]["stages"].get(k, {}).get("from_layer_cache")]
        if cached:
            sys.exit(f"bench: {name}: stages {cached} came from the layer cache; the comparison would be void")
    for name, rep, wall, comp in (("cold", cold, cold_wall, c_cold), ("after prune", warm, warm_wall, c_warm)):
        s = rep["sccache"]
        per = ", ".join(f"{k} {rep['stages'].get(k, {}).get('seconds', 0):.1f}s" for k in COMPILE_STAGES)
        print(f"{name:<12} wall {wall:6.1f} s   compile stages {comp:6.1f} s ({per})   "
              f"sccache {s['hits']} hits / {s['misses']} misses")
    ratio = c_cold / c_warm if c_warm else float("inf")
    rate = sc["hit_rate"] or 0.0
    print(f"compile stages: {ratio:.1f}x faster after prune; whole build {cold_wall / warm_wall:.1f}x")
    per_stage = ", ".join(f"{k}: {v['hits']}/{v['hits'] + v['misses']}" for k, v in sc["stages"].items())
    print(f"hit rate after prune: {rate * 100:.1f} % ({per_stage})")
    ok = rate >= 0.95 and ratio >= 5
    print(f"goal (>= 95 % hits, compile stages >= 5x faster): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
