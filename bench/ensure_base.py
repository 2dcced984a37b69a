"""`ghbuild ensure-base` with nothing changed vs a fully cached rebuild of the same base, side by side.

    make infra-up && .venv/bin/python bench/ensure_base.py [--image rocm-base] [--runs 5]

Uses the local services (.ghbuild/local.env: engine, staging registry, S3) and the repository's
ghbuild.toml. A first `ensure-base` makes sure the base exists (it builds it if not); then, alternating
in one run:

- skip:    `ghbuild ensure-base --image IMAGE` (identity from git + registry lookup + label check);
- rebuild: `ghbuild build --image IMAGE --arch amd64 --base-image <the same pinned base>`: every step
  CACHED in the local BuildKit (the cheapest rebuild there is: warm builder, nothing pushed), plus
  ghbuild's usual report work;
- rebuild+push: the same with `--push` to a scratch tag, as a CI that rebuilds on every run does;
- fresh-runner rebuild+push: the same after `docker builder prune -af` and removing every local image
  ghbuild built (they hold the base's layers) and the base, as on a GitHub-hosted runner: every step still
  CACHED, from the registry layer cache (this prunes the engine's whole build cache: skip it with
  --no-fresh-runner on a shared engine).

Prints medians and the skip's share of each rebuild (goal: at most 5 %).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ghbuild.naming import pinned  # noqa: E402
from infra import localenv  # noqa: E402

CONTEXT = ["--event", "push", "--repository", "ghbuild/ghbuild", "--ref", "main", "--default-branch", "main"]


def local_env() -> dict[str, str]:
    if not localenv.path().exists():
        sys.exit("bench: .ghbuild/local.env is missing: run `make infra-up` first")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GHBUILD_", "ACTIONS_", "RUNNER_"))}
    env.update(localenv.read())
    return env


def run(argv: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    start = time.perf_counter()
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"bench: {' '.join(argv[:4])} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return seconds, proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--image", default="rocm-base")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--no-fresh-runner", action="store_true",
                    help="skip the fresh-runner rebuild (it prunes the engine's whole build cache)")
    args = ap.parse_args()
    env = local_env()
    ghbuild = str(Path(sys.executable).with_name("ghbuild"))
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    ensure = [ghbuild, "ensure-base", "--image", args.image, "--json", "--quiet", *CONTEXT, "--sha", sha]

    seconds, first = run(ensure, env)
    result = json.loads(first.stdout)
    print(f"base {args.image}: {result['ref']} ({'built' if result['built'] else 'present'} in {seconds:.1f} s)")
    # The rebuild uses exactly the base digest the identity hashed (as ensure-base's own build does).
    detail = json.loads(run([ghbuild, "identity", "--image", args.image, "--json", *CONTEXT, "--sha", sha],
                            env)[1].stdout)
    pinned_bases = [pinned(ref, digest) for ref, digest in detail["bases"].items()]

    def rebuild(commit: str, push: bool) -> list[str]:
        argv = [ghbuild, "build", "--image", args.image, "--arch", "amd64", "--quiet", "--json", *CONTEXT,
                "--sha", commit]
        return argv + (["--base-image", pinned_bases[0]] if pinned_bases else []) + (["--push"] if push else [])

    run(rebuild("0" * 40, False), env)   # warm the builder for exactly this build

    docker = env.get("GHBUILD_DOCKER_CLI") or "docker"

    def fresh_runner() -> None:
        # What a GitHub-hosted runner starts with: no build cache and no local images of this build;
        # the rebuild gets every layer from the registry cache (all steps still CACHED).
        subprocess.run([docker, "builder", "prune", "-af"], env=env, capture_output=True, check=True)
        # every image ghbuild built (they carry the title label): an image built FROM the base (rocm) still
        # holds the base's layers, and a fresh runner has none of them
        ids = subprocess.run([docker, "images", "-q", "--filter", "label=org.opencontainers.image.title"],
                             env=env, capture_output=True, text=True).stdout.split()
        refs = [*ids, *(pinned_bases[:1])]
        subprocess.run([docker, "image", "rm", "-f", *refs], env=env, capture_output=True)

    times: dict[str, list[float]] = {"skip": [], "rebuild": [], "rebuild+push": []}
    if not args.no_fresh_runner:
        times["fresh-runner rebuild+push"] = []
    for i in range(args.runs):
        t, proc = run(ensure, env)
        assert json.loads(proc.stdout)["built"] is False, "ensure-base rebuilt an unchanged base"
        times["skip"].append(t)
        t, proc = run(rebuild("0" * 40, False), env)
        stages = json.loads(proc.stdout)["stages"].values()
        # every step CACHED but a stage's FROM of an external image (BuildKit reports that one as DONE)
        assert all(s["cached"] >= s["steps"] - 1 for s in stages if "steps" in s), "rebuild not fully cached"
        times["rebuild"].append(t)
        t, _ = run(rebuild(f"{i + 1:040d}", True), env)
        times["rebuild+push"].append(t)
        if not args.no_fresh_runner:
            fresh_runner()
            t, proc = run(rebuild(f"{i + 101:040d}", True), env)
            stages = json.loads(proc.stdout)["stages"].values()
            assert all(s["cached"] >= s["steps"] - 1 for s in stages if "steps" in s), "not cached from the registry"
            times["fresh-runner rebuild+push"].append(t)
    skip = statistics.median(times["skip"])
    for name, values in times.items():
        med = statistics.median(values)
        share = "" if name == "skip" else f"   skip = {skip / med * 100:.1f} % of it ({med / skip:.0f}x)"
        print(f"{name:26s} median {med:6.2f} s  (runs: {', '.join(f'{v:.2f}' for v in values)}){share}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
