#!/usr/bin/env python3
"""The no-change CI run: ci.yml under act for a push whose every layer is cached, its critical path split
into ghbuild's own time, the engine's and the runner's (act's).

    flock /work/infra.lock bash -c '.venv/bin/python -m infra up && .venv/bin/python bench/ci_nochange.py --runs 3; \
        rc=$?; .venv/bin/python -m infra down; exit $rc'

What it runs: the act setup of the workflow tests (tests/act/harness.py: a throwaway commit of the working
tree, the stand-ins for GitHub's actions, the local engine, registries and S3, ghbuild's setup action
installing from a local wheelhouse), the cpu image only and only its `os-base` stage, smoke-tested with
`python3 --version` (what tests/services/engine/test_90_workflows_act.py runs). A first push run warms
everything (BuildKit's layers, the registry layer cache, the staging tags, the setup action's cache entries);
then --runs measured runs of the same push (same commit, same event) follow.

How it is split. act prints no times, only each step's duration: the harness notes when each line of act's
output arrived. A job starts at its first line and ends at its `Job succeeded` line; the critical path is
the chain that ends with the last job, each job preceded by the one that ended last before it started
(plan -> the slower build job -> summary here). Along it, every second goes to one of:

- ghbuild: steps that run ghbuild's actions (`uses: $/...`: setup, plan, build-image) or a `ghbuild`
  command, minus, in a build step, what ghbuild's build report gives as the engine's time; a composite
  action (setup, plan) as the sum of its own steps, the setup action's actions/cache restore and save
  included (a cost of ghbuild's design, paid on GitHub too);
- engine: the build subprocess (`docker build`/`buildx build`) and the engine backend's push, from the build
  report's timings (the `engine` line ghbuild prints after a build); the smoke test's `docker run` is its
  own column;
- runner: act and GitHub's actions: job set-up and tear-down, checkout, the login and artifact stand-ins,
  act's Pre/Post steps of composite actions, the time act spends between a composite action's steps, the
  gaps between steps and between jobs, act's own start.

What act does differently from GitHub (so what these figures are not): jobs run on this host, not on fresh
VMs (no VM boot, no image pull, no runner download: GitHub's queue and set-up time are not here); actions
come from local folders (no download); the cache and artifact actions are local stand-ins (copies, no
upload or download); both build jobs share this 2-core machine (on GitHub each has its own runner); the
engine is the local dockerd with a warm BuildKit (a GitHub-hosted runner starts with an empty one and pulls
the cached layers from the registry); act runs a composite action's Post step even when it has none.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from act import harness  # noqa: E402
from fakes.oci import RegistryClient  # noqa: E402
from ruamel.yaml import YAML  # noqa: E402

from infra import localenv  # noqa: E402

GOAL = 15.0
WORKFLOW = ".github/workflows/ci.yml"
ACT_RACE_ATTEMPTS = 3      # act's runs-on race (tests/act/harness.py) skips a matrix entry now and then
CATEGORIES = ("ghbuild", "engine", "smoke", "runner")
LINE_RE = re.compile(r"^\[(?P<job>[^\]]+)\]\s+(?P<rest>.*)$")
START_RE = re.compile(r"^⭐ Run (?P<step>.+)$")
END_RE = re.compile(r"^(?:✅|❌)\s+(?:Success|Failure) - (?P<step>.+?)(?: \[(?P<took>[^\]]+)\])?$")
ENGINE_RE = re.compile(r"^\|\s+engine\s+(?P<parts>.+)$")
PART_RE = re.compile(r"(?P<what>\w+) (?P<seconds>[\d.]+) s")


@dataclass
class Step:
    name: str
    start: float
    end: float = 0.0
    depth: int = 0
    category: str = "runner"
    parent: str = ""             # the top-level step a composite action's step belongs to


@dataclass
class Job:
    name: str
    start: float
    end: float = 0.0
    steps: list[Step] = field(default_factory=list)
    engine: float = 0.0          # the build report's engine seconds, printed in this job

    def split(self) -> dict[str, float]:
        """This job's wall time by category: its top-level steps, the engine's share taken out of a
        ghbuild build step, and what no step covers (act's set-up, gaps) to the runner. A composite action
        (setup, plan) counts as the sum of its own steps, the cache restore and save included (ghbuild's
        choice); what act spends between them goes to the runner."""
        out = dict.fromkeys(CATEGORIES, 0.0)
        covered = 0.0
        tops = [s for s in self.steps if not s.depth]
        for step in tops:
            seconds = step.end - step.start
            inner = sum(s.end - s.start for s in self.steps if s.depth == 1 and s.parent == step.name
                        and step.start <= s.start <= step.end)
            if inner and step.category == "ghbuild":
                out["runner"] += seconds - inner
                seconds = inner
            covered += step.end - step.start
            out[step.category] += seconds
        if self.engine:
            engine = min(self.engine, out["ghbuild"])
            out["ghbuild"] -= engine
            out["engine"] += engine
        out["runner"] += max(0.0, (self.end - self.start) - covered)
        return out


def step_categories(tree: Path) -> list[tuple[re.Pattern, str]]:
    """(pattern of the step's name as act prints it, category) for every step of the reusable workflow."""
    rules = []
    workflow = YAML(typ="safe").load((tree / ".github/workflows/build-images.yml").read_text("utf-8"))
    for job in workflow["jobs"].values():
        for step in job.get("steps", []):
            uses, run = str(step.get("uses", "")), str(step.get("run", ""))
            if uses.startswith((harness.SELF_REPOSITORY + "/", "$/", "./")) or re.search(r"(^|\s|&& )ghbuild ", run):
                category = "ghbuild"
            elif "docker run" in run:
                category = "smoke"
            else:
                category = "runner"
            shown = str(step.get("name") or uses or run)
            parts = re.split(r"\$\{\{.*?\}\}", shown)
            rules.append((re.compile("^" + ".*?".join(re.escape(p) for p in parts) + "$", re.S), category))
    return rules


def categorize(name: str, rules: list[tuple[re.Pattern, str]]) -> str:
    stage, _, rest = name.partition(" ")
    if stage != "Main":
        return "runner"          # Set up job, Complete job, act's Pre/Post steps of actions
    return next((category for pattern, category in rules if pattern.match(rest)), "runner")


def timeline(run: harness.ActRun, rules: list[tuple[re.Pattern, str]]) -> dict[str, Job]:
    jobs: dict[str, Job] = {}
    open_steps: dict[str, list[Step]] = {}
    for at, line in run.stamps:
        m = LINE_RE.match(line)
        if not m:
            continue
        name, rest = re.sub(r"-\d+$", "", m.group("job").strip()), m.group("rest").strip()
        job = jobs.setdefault(name, Job(name, at))
        stack = open_steps.setdefault(name, [])
        if started := START_RE.match(rest):
            step = Step(started.group("step"), at, depth=len(stack), parent=stack[0].name if stack else "")
            step.category = categorize(step.name, rules)
            job.steps.append(step)
            stack.append(step)
        elif ended := END_RE.match(rest):
            while stack:
                step = stack.pop()
                step.end = at
                if step.name == ended.group("step"):
                    break
        elif rest.startswith("🏁"):
            job.end = at
        elif engine := ENGINE_RE.match(rest):
            job.engine += sum(float(p.group("seconds")) for p in PART_RE.finditer(engine.group("parts")))
    return jobs


def critical_path(jobs: dict[str, Job]) -> list[Job]:
    done = [j for j in jobs.values() if j.end]
    chain = [max(done, key=lambda j: j.end)]
    while True:
        before = [j for j in done if j.end <= chain[0].start + 0.05 and j not in chain]
        if not before:
            return chain
        chain.insert(0, max(before, key=lambda j: j.end))


@dataclass
class Measured:
    wall: float
    split: dict[str, float]
    chain: list[Job]
    setup: dict[str, list[float]]          # setup action time per job on the path, and its sub-steps
    restored: int
    load: tuple[float, float]


def measure(run: harness.ActRun, rules, load: tuple[float, float]) -> Measured:
    jobs = timeline(run, rules)
    chain = critical_path(jobs)
    split = dict.fromkeys(CATEGORIES, 0.0)
    for job in chain:
        for key, value in job.split().items():
            split[key] += value
    # The runner's share also holds act's own start, the gaps between the jobs and act's exit.
    split["runner"] += run.seconds - sum(j.end - j.start for j in chain)
    setup: dict[str, list[float]] = {}
    for job in chain:
        for step in job.steps:
            if not step.name.startswith("Main"):
                continue
            if not step.depth and "/.github/actions/setup@" in step.name:
                setup.setdefault("setup action", []).append(step.end - step.start)
            elif step.depth == 1 and "/.github/actions/setup@" in step.parent:
                setup.setdefault(short(step.name), []).append(step.end - step.start)
    return Measured(run.seconds, split, chain, setup, run.log.count("cache stand-in: restored"), load)


def short(name: str) -> str:
    name = name.removeprefix("Main ")
    if "setup.py\" --key" in name or name.endswith("--key'"):
        return "  key (setup.py --key)"
    if "setup.py" in name:
        return "  install/relocate (setup.py)"
    if "cache/restore" in name:
        return "  actions/cache/restore"
    if "cache/save" in name:
        return "  actions/cache/save"
    return "  " + name[:40]


def cleanup(local: dict[str, str], namespace: str, sha: str) -> None:
    registry = RegistryClient(local["GHBUILD_LOCAL_STAGING"])
    for repo in (f"{namespace}/cpu", f"{namespace}/cache"):
        try:
            registry.delete_repository_manifests(repo)
        except Exception as exc:
            print(f"bench: cleanup of {repo}: {exc}", file=sys.stderr)
    docker = local.get("GHBUILD_DOCKER_CLI") or "docker"
    env = {**os.environ, "DOCKER_HOST": local.get("DOCKER_HOST", "")}
    ids = subprocess.run([docker, "image", "ls", "-q", "--no-trunc", "--filter",
                          f"label=org.opencontainers.image.revision={sha}"], capture_output=True, text=True,
                         env=env).stdout.split()
    for image_id in sorted(set(ids)):
        subprocess.run([docker, "rmi", "-f", image_id], capture_output=True, env=env)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="measured runs after the warm-up run (default 3)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder (act's logs)")
    ap.add_argument("--runner-environment", choices=("self-hosted", "github-hosted"), default="self-hosted",
                    help="RUNNER_ENVIRONMENT the jobs see (act sets none, which reads as self-hosted): the setup "
                    "action hard-links a restored environment only on GitHub-hosted runners and copies it, "
                    "checked, on self-hosted ones")
    args = ap.parse_args()
    if not localenv.path().exists():
        sys.exit("bench: .ghbuild/local.env is missing: run `python -m infra up` first")
    missing = harness.prerequisites()
    if missing:
        sys.exit("bench: " + "; ".join(missing))
    local = localenv.read()
    sid = uuid.uuid4().hex[:10]
    namespace = f"ghbuild-bench-{sid}-act"
    scratch = Path(tempfile.mkdtemp(prefix=f"ghbuild-bench-ci-{sid}-"))
    # The build matrix runs side by side, as on GitHub (the critical path takes the slower entry); a run in
    # which act's runs-on race skipped an entry is run again instead of being measured.
    tree, sha, rewrites, wheelhouse = harness.ghbuild_checkout(scratch, f"ghbuild no-change CI bench {sid}",
                                                               one_matrix_entry_at_a_time=False)
    sccache = {**local, "GHBUILD_SCCACHE_KEY_PREFIX": f"ghbuild-bench-{sid}"}
    env = harness.project_env(local, sccache, wheelhouse, namespace)
    if args.runner_environment == "github-hosted":
        env["RUNNER_ENVIRONMENT"] = "github-hosted"
    act = harness.Act(tree=tree, sha=sha, scratch=scratch, env=env, variables=dict(harness.PROJECT_VARIABLES),
                      rewrites=rewrites)
    rules = step_categories(tree)
    results: list[Measured] = []
    try:
        for i in range(args.runs + 1):
            label = "warm-up" if i == 0 else f"run {i}"
            for attempt in range(1, ACT_RACE_ATTEMPTS + 1):
                load_before = os.getloadavg()[0]    # of the run that is measured, not of one run again
                run = act.run(("warmup" if i == 0 else f"push-{i}") + (f"-again{attempt}" if attempt > 1 else ""),
                              "push", WORKFLOW, harness.event_payload("push", sha),
                              secrets=harness.trusted_secrets(local, local["AWS_SECRET_ACCESS_KEY"]), timeout=1800)
                if not run.act_errors:
                    break
                print(f"{label}: act could not evaluate the workflow ({'; '.join(run.act_errors)}): not measured, "
                      "run again", file=sys.stderr)
            else:
                sys.exit(f"bench: act {label}: {ACT_RACE_ATTEMPTS} runs with act's own evaluation errors; "
                         f"logs in {scratch}")
            failed = {j: r for j, r in run.jobs.items() if r != "succeeded"}
            if run.rc != 0 or failed:
                print(run.failure_context(), file=sys.stderr)
                sys.exit(f"bench: act {label} exited {run.rc}, failed jobs {failed}; logs in {scratch}")
            m = measure(run, rules, (load_before, os.getloadavg()[0]))
            print(f"{label}: {m.wall:.1f} s, critical path "
                  + " -> ".join(j.name.rsplit("/", 1)[-1] for j in m.chain)
                  + ", " + ", ".join(f"{k} {v:.1f} s" for k, v in m.split.items())
                  + f", setup restored from the cache in {m.restored} job(s), load {m.load[0]:.1f}->{m.load[1]:.1f}",
                  flush=True)
            if i:
                results.append(m)
    finally:
        cleanup(local, namespace, sha)
        harness.remove_setup_stages(scratch)
        if args.keep:
            print(f"bench: logs kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    report(results)
    return 0


def report(results: list[Measured]) -> None:
    med = lambda values: statistics.median(values)  # noqa: E731
    print(f"\nno-change push, ci.yml under act, median of {len(results)} runs (each run's load average "
          f"before->after: {', '.join(f'{m.load[0]:.1f}->{m.load[1]:.1f}' for m in results)})")
    print(f"{'':<34}" + "".join(f"{c:>10}" for c in (*CATEGORIES, "total")))
    total = {c: med([m.split[c] for m in results]) for c in CATEGORIES}
    print(f"{'critical path (s)':<34}" + "".join(f"{total[c]:>10.1f}" for c in CATEGORIES)
          + f"{med([sum(m.split.values()) for m in results]):>10.1f}")
    names = [j.name for j in results[0].chain]
    for idx, name in enumerate(names):
        rows = [m.chain[idx].split() for m in results if len(m.chain) > idx]
        print(f"{'  ' + name.rsplit('/', 1)[-1]:<34}"
              + "".join(f"{med([r[c] for r in rows]):>10.1f}" for c in CATEGORIES)
              + f"{med([sum(r.values()) for r in rows]):>10.1f}")
    print(f"{'  (act start, gaps between jobs)':<34}{'':>30}"
          f"{med([m.wall - sum(j.end - j.start for j in m.chain) for m in results]):>10.1f}")
    print(f"{'whole run (act wall)':<34}{'':>40}{med([m.wall for m in results]):>10.1f}")
    keys = sorted({k for m in results for k in m.setup}, key=lambda k: (k != "setup action", k))
    if keys:
        print("setup action on the critical path (per job, median):")
        for key in keys:
            values = [v for m in results for v in m.setup.get(key, [])]
            print(f"  {key:<34} {med(values):6.2f} s  (n={len(values)})")
    share = total["ghbuild"]
    print(f"goal: ghbuild's own share of the critical path <= {GOAL:.0f} s: "
          f"{'met' if share <= GOAL else 'NOT met'} ({share:.1f} s)")


if __name__ == "__main__":
    raise SystemExit(main())
