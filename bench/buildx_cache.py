#!/usr/bin/env python3
"""`ghbuild build` against the plain `docker buildx build` it wraps, on the buildx path, side by side.

Three rows, each run by both tools one after the other in this one process (the machine is noisy), in
`--reps` repetitions (default 2) with fresh repositories and S3 prefixes each, the tools taking turns to go first:
  cold            a pruned builder, no local images, a fresh registry cache ref and a fresh S3 prefix;
  registry cache  `docker builder prune -af` and the local images removed (a fresh runner), then a rebuild that
                  imports a registry cache (mode=max) a cold build exported: the same one for every tool (the
                  first cold build's of the repetition, put in each tool's cache ref before each rebuild).
                  Two cold builds of one Dockerfile do not export the same cache: one held 57 records and 14
                  layers, the other 31 and 10, and the rebuild from the larger spent 0.15 s more importing
                  and exporting it, whichever command ran it;
  sccache only    pruned again and no layer cache at all (no cache flags): every step runs, the compiles
                  served by sccache from the S3 prefix the cold build filled.
"plain" is the command ghbuild itself would run (`ghbuild build --dry-run` prints it), with the same
`ghbuild_sccache` secret, so it is what docker/build-push-action runs with the same cache flags; the ratio
is ghbuild's whole cost around it (planning, S3 preflight, helper pinning, the layer audit, the report).
"ghbuild" runs with ghbuild.toml as it is; "lean" with a copy of it without the two extras that are work of
their own, which the plain command does not do at all: the image's cache mounts (restored before the build,
saved after it) and the budgets on stages outside the final image (each such stage built as its own image to
be measured). The goal is judged on "lean"; the extras' cost is the "ghbuild" column over the "lean" one.
Also printed: each row's per-stage step seconds (from BuildKit's log) and the cache export's share of each
cold build (BuildKit's "exporting cache" steps).

Usage: make infra-up && .venv/bin/python bench/buildx_cache.py [--image cpu] [--arch amd64] [--reps 2]
       [--rows cold,registry cache,sccache only] [--rebuilds 1] [--without-configured]
Goal: ghbuild within 1.05x of the plain command on every row.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
import uuid
from math import nan
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # the development-only infra package

from ghbuild.build import buildlog  # noqa: E402
from infra import localenv  # noqa: E402

GHBUILD = str(ROOT / ".venv/bin/ghbuild")
GOAL = 1.05
ROWS = ("cold", "registry cache", "sccache only")
TOOLS = ("ghbuild", "lean", "plain")


def lean_config(image: str) -> Path:
    """ghbuild.toml without `image`'s cache mounts and its budgets on stages outside the final image, beside
    it (relative paths in a config are relative to its folder). Removed by the caller."""
    import tomllib

    from ghbuild.config import configfile

    options = configfile.load(str(ROOT / "ghbuild.toml"), env={}, cwd=ROOT)
    final = options.images[image].target
    text = (ROOT / "ghbuild.toml").read_text("utf-8")
    raw = tomllib.loads(text)["images"][image]
    lines = []
    section = None
    for line in text.splitlines():
        if line.startswith("["):
            section = line.strip()
        if section == f"[images.{image}]" and line.startswith(("cache-mounts", "stage-budgets")):
            if line.startswith("stage-budgets") and final in raw.get("stage-budgets", {}):
                line = f'stage-budgets = {{ {final} = "{raw["stage-budgets"][final]}" }}'
            else:
                continue
        lines.append(line)
    path = ROOT / f".ghbuild-bench-lean-{uuid.uuid4().hex[:8]}.toml"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def local_env() -> dict[str, str]:
    if not localenv.path().exists():
        sys.exit("bench: .ghbuild/local.env missing: run `make infra-up` first")
    return {**os.environ, **localenv.read()}


def docker(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([env["GHBUILD_DOCKER_CLI"], *args], env=env, capture_output=True, text=True)


def fresh_runner(env: dict[str, str], repos: list[str]) -> None:
    """As on a new runner: no BuildKit cache and none of the images built here in the engine."""
    docker(env, "builder", "prune", "-af")
    listed = docker(env, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
    mine = [ref for ref in listed if any(ref.startswith(repo + ":") for repo in repos)]
    if mine:
        docker(env, "image", "rm", "-f", *mine)


def settle(timeout: float = 60) -> None:
    """Wait for what a configured build leaves running when it exits (the audit stage's previous image removed
    by a detached `docker image rm`), so that the next build, whichever tool's, does not share the engine with
    it: without this, the tool that ran after "ghbuild" paid for its leftovers."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and subprocess.run(["pgrep", "-f", " image rm sha256:"],
                                                         capture_output=True).returncode == 0:
        time.sleep(0.1)


def context_flags(sha: str) -> list[str]:
    return ["--event", "push", "--repository", "ghbuild/ghbuild", "--ref", "main", "--default-branch", "main",
            "--sha", sha]


def export_seconds(log: str) -> float:
    """Seconds of BuildKit's `exporting cache ...` steps in a plain-progress log (a step's first line names it)."""
    names: dict[str, str] = {}
    for m in re.finditer(r"^#(\d+) (.+)$", log, re.M):
        names.setdefault(m.group(1), m.group(2))
    steps = {step for step, name in names.items() if name.startswith("exporting cache")}
    done = {m.group(1): float(m.group(2)) for m in re.finditer(r"^#(\d+) DONE (\d+(?:\.\d+)?)s$", log, re.M)}
    return sum(done.get(step, 0.0) for step in steps)


class Tool:
    """One side of the comparison, with its own registry cache ref, staging repository and S3 prefix."""

    def __init__(self, name: str, env: dict[str, str], run_id: str, image: str, arch: str,
                 config: Path | None = None) -> None:
        self.name, self.image, self.arch = name, image, arch
        staging = env["GHBUILD_LOCAL_STAGING"]
        self.repo = f"{staging}/bench-{run_id}-{name}/{image}"
        self.env = {**env, "GHBUILD_REGISTRIES_STAGING": f"{staging}/bench-{run_id}-{name}/{{image}}",
                    "GHBUILD_REGISTRIES_CACHE": f"{staging}/bench-{run_id}-{name}/cache",
                    "GHBUILD_SCCACHE_KEY_PREFIX": f"bench-{run_id}-{name}"}
        if config is not None:
            self.env["GHBUILD_CONFIG"] = str(config)

    def ghbuild_argv(self, sha: str, *extra: str) -> list[str]:
        # --json also for the dry run would print the report instead of the command line.
        report = [] if "--dry-run" in extra else ["--json"]
        return [GHBUILD, "build", "--image", self.image, "--arch", self.arch, "--push", *report,
                *context_flags(sha), *extra]

    def run(self, row: str, sha: str, workdir: Path) -> tuple[float, str]:
        env = {**self.env, "GHBUILD_REGISTRIES_CACHE": ""} if row == "sccache only" else self.env
        if self.name != "plain":
            argv = self.ghbuild_argv(sha)
        else:
            argv = self.plain_argv(env, sha, workdir)
        start = time.monotonic()
        proc = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, errors="replace")
        seconds = time.monotonic() - start
        if proc.returncode != 0:
            sys.exit(f"bench: {self.name} {row} failed (exit {proc.returncode}): "
                     f"{(proc.stderr.strip().splitlines() or ['(no output)'])[-1]}")
        return seconds, proc.stderr

    @functools.cached_property
    def cache_ref(self) -> tuple[str, str, str]:
        """(host, repository, tag) of the registry cache this tool's builds import and export."""
        dry = subprocess.run([*self.ghbuild_argv(uuid.uuid4().hex + "0" * 8, "--dry-run"), "--json"], env=self.env,
                             cwd=ROOT, capture_output=True, text=True, check=True)
        ref = next(part.removeprefix("ref=") for entry in json.loads(dry.stdout)["cache_from"]
                   if entry.startswith("type=registry") for part in entry.split(",") if part.startswith("ref="))
        host, _, path = ref.partition("/")
        repo, _, tag = path.rpartition(":")
        return host, repo, tag

    def plain_argv(self, env: dict[str, str], sha: str, workdir: Path) -> list[str]:
        """The command ghbuild would run, from its dry run, with a real secret file and output paths."""
        dry = subprocess.run(self.ghbuild_argv(sha, "--dry-run"), env=env, cwd=ROOT, capture_output=True, text=True)
        if dry.returncode != 0:
            sys.exit(f"bench: dry run failed: {dry.stderr.strip().splitlines()[-1:]}")
        argv = shlex.split(dry.stdout.strip().splitlines()[-1])
        secret = workdir / "ghbuild_sccache"
        secret.write_text(sccache_secret(env))
        secret.chmod(0o600)
        out = []
        for arg in argv:
            if arg.startswith("id=ghbuild_sccache,src="):
                arg = f"id=ghbuild_sccache,src={secret}"
            elif arg.endswith("/metadata.json"):
                arg = str(workdir / "metadata.json")
            elif arg.endswith("/iid"):
                arg = str(workdir / "iid")
            out.append(arg)
        return out


class CacheSnapshot:
    """One tool's registry cache as a cold build exported it, put back into any tool's cache ref before a rebuild
    (its blobs mounted across repositories on the one registry), so every rebuild imports the same cache."""

    def __init__(self, source: Tool) -> None:
        from ghbuild.registry.client import Registry

        host, self.repo, self.tag = source.cache_ref
        self.registry = Registry(host, None)
        self.manifest = self.registry.get_manifest(self.repo, self.tag)

    def put(self, tool: Tool) -> None:
        _, repo, tag = tool.cache_ref
        if repo != self.repo:
            for blob in self.manifest.blobs():
                location = self.registry.mount_blob(repo, blob.digest, self.repo)
                if location is not None:
                    sys.exit(f"bench: {blob.digest[:19]} did not mount into {repo}")
        self.registry.put_manifest(repo, tag, self.manifest.raw, self.manifest.media_type)


def sccache_secret(env: dict[str, str]) -> str:
    """The `ghbuild_sccache` secret a trusted build gets (the same preflight ghbuild runs)."""
    from ghbuild.build import sccache
    from ghbuild.config import configfile

    options = configfile.load(env.get("GHBUILD_CONFIG"), env=env, cwd=ROOT)
    return sccache.preflight(options.sccache, None, env).secret_text(with_credentials=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--image", default="cpu")
    parser.add_argument("--arch", default="amd64")
    parser.add_argument("--reps", type=int, default=2, help="repetitions, the tools taking turns to go first")
    parser.add_argument("--rebuilds", type=int, default=1,
                        help="runs of each row after the cold one per repetition, the tools alternating (a 2 s "
                             "rebuild needs many samples on a noisy machine; the cold build needs one)")
    parser.add_argument("--without-configured", action="store_true",
                        help="run only lean and plain, the goal's columns (ghbuild as configured leaves the "
                             "removal of the audit's previous stage image running; the bench waits for it)")
    parser.add_argument("--rows", default=",".join(ROWS),
                        help="rows to run, comma separated (a row other than cold runs after a cold build)")
    args = parser.parse_args()
    rows = [row for row in ROWS if row in args.rows.split(",")]
    tools_run = [name for name in TOOLS if not (args.without_configured and name == "ghbuild")]
    env = local_env()
    results: dict[tuple[str, str], list[float]] = {}
    exports: dict[str, list[float]] = {}
    stage_seconds: dict[tuple[str, str], dict[str, float]] = {}
    lean = lean_config(args.image)
    try:
        with tempfile.TemporaryDirectory(prefix="ghbuild-bench-") as tmp:
            for rep in range(args.reps):
                # Fresh repositories and S3 prefixes for every repetition, so each one starts cold; the tools take
                # turns going first (AB, then BA), since the first build after a prune pays for the network alone.
                run_id = uuid.uuid4().hex[:10]
                tools = [Tool(name, env, run_id, args.image, args.arch, lean if name == "lean" else None)
                         for name in tools_run]
                if rep % 2:
                    tools.reverse()
                repos = [tool.repo for tool in tools]
                snapshot = None
                for row in ("cold", *rows) if "cold" not in rows else rows:
                    times = 1 if row == "cold" else args.rebuilds
                    for tool in [t for n in range(times) for t in (tools if n % 2 == 0 else tools[::-1])]:
                        if row == "registry cache":
                            snapshot = snapshot or CacheSnapshot(tools[0])
                            snapshot.put(tool)
                        fresh_runner(env, repos)
                        sha = uuid.uuid4().hex + uuid.uuid4().hex[:8]
                        seconds, log = tool.run(row, sha, Path(tmp))
                        if tool.name == "ghbuild":
                            settle()
                        results.setdefault((row, tool.name), []).append(seconds)
                        stages = {name: t.seconds for name, t in buildlog.stage_timings(log).items()}
                        for name, value in stages.items():
                            stage_seconds.setdefault((row, tool.name), {}).setdefault(name, 0.0)
                            stage_seconds[(row, tool.name)][name] += value / (args.reps * times)
                        if row == "cold":
                            exports.setdefault(tool.name, []).append(export_seconds(log))
                        print(f"  rep {rep + 1} {row:<15} {tool.name:<8} {seconds:7.1f} s", file=sys.stderr, flush=True)
    finally:
        lean.unlink(missing_ok=True)
    mean = {key: sum(values) / len(values) for key, values in results.items()}
    print(f"image {args.image}/{args.arch} on the engine's own builder; mean of {args.reps} repetitions "
          f"({args.rebuilds} run(s) of each row after the cold one per repetition), "
          "the tools taking turns to go first")
    print(f"{'row':<16}{'ghbuild':>10}{'lean':>10}{'plain':>10}{'lean/plain':>12}{'ghbuild/plain':>15}")
    ok = True
    for row in [row for row in ROWS if (row, "plain") in mean]:
        g, lean_s, p = mean.get((row, "ghbuild"), nan), mean[(row, "lean")], mean[(row, "plain")]
        ok &= lean_s <= p * GOAL
        print(f"{row:<16}{g:>9.1f}s{lean_s:>9.1f}s{p:>9.1f}s{lean_s / p:>11.2f}x{g / p:>14.2f}x")
    best = {key: min(values) for key, values in results.items()}
    print("fastest of the repetitions (what each tool needs when the noisy machine lets it):")
    for row in [row for row in ROWS if (row, "plain") in mean]:
        g, lean_s, p = best.get((row, "ghbuild"), nan), best[(row, "lean")], best[(row, "plain")]
        print(f"{row:<16}{g:>9.1f}s{lean_s:>9.1f}s{p:>9.1f}s{lean_s / p:>11.2f}x{g / p:>14.2f}x")
    for row in [row for row in ROWS if (row, "plain") in mean]:
        for name in tools_run:
            split = sorted(stage_seconds.get((row, name), {}).items())
            stages = ", ".join(f"{k} {v:.1f}" for k, v in split if v >= 0.5)
            print(f"  stages (s) {row:<15} {name:<8} {stages or '-'}")
    for name, values in exports.items():
        seconds, cold = sum(values) / len(values), mean[("cold", name)]
        print(f"cache export in the cold build ({name}): {seconds:.1f} s, {100 * seconds / cold:.0f} % of {cold:.1f} s")
    print(json.dumps({"runs": {f"{r}/{t}": [round(v, 2) for v in values] for (r, t), values in results.items()},
                      "export_seconds": exports}))
    print(f"goal (ghbuild, lean, within {GOAL}x of the plain command on every row): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
