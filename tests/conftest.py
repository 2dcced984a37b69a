"""Shared test fixtures: real GitHub event payloads (and variants of them) and a small config.

The payloads in tests/fixtures/events/ are real ones recorded by docker/metadata-action
(docker/test-docker-action, default branch `master`; the pull request is #15 from the fork
crazy-max/test-docker-action, branch `test-pr`). Each `<name>.json` comes with `<name>.env`,
the GITHUB_* variables GitHub set for that run.

Variants (a second fork, another base branch, a same-repository PR, a deleted fork, a merge
queue entry...) are derived in code from those payloads: a deep copy, a few edits that follow
GitHub's documented shape, written to tmp_path. The originals are never modified.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ghbuild.config import configfile
from ghbuild.config.options import Options
from ghbuild.github import context
from ghbuild.plan import planner

EVENTS_DIR = Path(__file__).parent / "fixtures" / "events"

# The names in the recorded payloads.
BASE_REPO = "docker/test-docker-action"
BASE_REPO_ID = 285789493
FORK_REPO = "crazy-max/test-docker-action"
FORK_REPO_ID = 385013169
PR_NUMBER = 15
PR_HEAD_REF = "test-pr"

FIXTURE_NAMES = ("push_master", "push_dev", "pull_request", "pull_request_target", "schedule",
                 "workflow_dispatch")


def read_env_file(path: Path) -> dict[str, str]:
    env: dict[str, str] = {}
    for line in path.read_text("utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            env[key.strip()] = value
    return env


@dataclass
class Event:
    """One GitHub event: its payload and the GITHUB_* variables of the run. Edits return copies."""

    name: str
    payload: dict[str, Any]
    env: dict[str, str]
    directory: Path
    # Where the recorded payload lives; None for an edited or built one.
    source: Path | None = None
    _counter: list[int] = field(default_factory=lambda: [0])

    # ------------------------------------------------------------------ plumbing

    def edited(self, payload: dict[str, Any] | None = None, **env: str) -> Event:
        new_payload = copy.deepcopy(self.payload if payload is None else payload)
        return Event(self.name, new_payload, {**self.env, **env}, self.directory, None, self._counter)

    def environ(self, **extra: str) -> dict[str, str]:
        """The env of the run, GITHUB_EVENT_PATH pointing at this payload as it is now (written to a file)."""
        self._counter[0] += 1
        path = self.directory / f"{self.name}-{self._counter[0]}.json"
        path.write_text(json.dumps(self.payload), "utf-8")
        env = {**self.env, "GITHUB_EVENT_PATH": str(path)}
        env.update(extra)
        return {k: v for k, v in env.items() if v is not None}

    def context(self, overrides: context.ContextFlags | None = None, **extra: str) -> context.GitHubContext:
        return context.from_environment(self.environ(**extra), overrides, cwd=self.directory)

    # ------------------------------------------------------------------ pull request variants

    def _pr(self) -> dict[str, Any]:
        assert self.name in ("pull_request", "pull_request_target"), f"{self.name} is not a pull request event"
        return self.payload["pull_request"]

    def second_fork(self, number: int = 16, owner: str = "octo-contrib", repo_id: int = 499999999) -> Event:
        """Another fork, another PR number, the SAME head branch name as the recorded fork."""
        new = self.edited()
        pr = new._pr()
        new.payload["number"] = pr["number"] = number
        head_repo = pr["head"]["repo"]
        name = head_repo["name"]
        head_repo.update(id=repo_id, full_name=f"{owner}/{name}", node_id=f"R_{repo_id}",
                         html_url=f"https://github.com/{owner}/{name}")
        head_repo["owner"] = {**head_repo["owner"], "login": owner, "id": repo_id + 1}
        pr["head"]["label"] = f"{owner}:{pr['head']['ref']}"
        pr["head"]["user"] = {**pr["head"]["user"], "login": owner}
        pr["head"]["sha"] = "5" * 40
        if self.name == "pull_request":
            new.env["GITHUB_REF"] = f"refs/pull/{number}/merge"
            new.env["GITHUB_REF_NAME"] = f"{number}/merge"
            new.env["GITHUB_SHA"] = "6" * 40
        return new

    def with_number(self, number: int) -> Event:
        new = self.edited()
        new.payload["number"] = new._pr()["number"] = number
        if self.name == "pull_request":
            new.env["GITHUB_REF"] = f"refs/pull/{number}/merge"
            new.env["GITHUB_REF_NAME"] = f"{number}/merge"
        return new

    def into_base(self, branch: str) -> Event:
        """The PR targets `branch` (not necessarily the default branch)."""
        new = self.edited()
        base = new._pr()["base"]
        base["ref"] = branch
        base["label"] = f"{base['repo']['owner']['login']}:{branch}"
        new.env["GITHUB_BASE_REF"] = branch
        if self.name == "pull_request_target":
            # pull_request_target runs on the base branch: GITHUB_REF is the base branch.
            new.env["GITHUB_REF"] = f"refs/heads/{branch}"
            new.env["GITHUB_REF_NAME"] = branch
        return new

    def head_branch(self, branch: str) -> Event:
        new = self.edited()
        head = new._pr()["head"]
        head["ref"] = branch
        head["label"] = f"{head['label'].split(':')[0]}:{branch}"
        new.env["GITHUB_HEAD_REF"] = branch
        return new

    def same_repo(self, branch: str = "feature") -> Event:
        """The head branch lives in the base repository (same repository id): not a fork."""
        new = self.edited()
        pr = new._pr()
        pr["head"]["repo"] = copy.deepcopy(pr["base"]["repo"])
        pr["head"]["ref"] = branch
        pr["head"]["label"] = f"{pr['base']['repo']['owner']['login']}:{branch}"
        pr["head"]["user"] = copy.deepcopy(pr["base"]["user"])
        new.env["GITHUB_HEAD_REF"] = branch
        return new

    def deleted_fork(self) -> Event:
        """The fork was deleted after the PR was opened: GitHub sends head.repo = null."""
        new = self.edited()
        new._pr()["head"]["repo"] = None
        return new

    # ------------------------------------------------------------------ repository variants

    def default_branch(self, branch: str) -> Event:
        """The repository's default branch is `branch` (everywhere the payload states it)."""
        new = self.edited()
        for repo in _repositories(new.payload):
            repo["default_branch"] = branch
            if "master_branch" in repo:
                repo["master_branch"] = branch
        return new

    def on_branch(self, branch: str) -> Event:
        """push / workflow_dispatch / schedule on `branch` (payload ref and GITHUB_REF)."""
        assert self.name not in ("pull_request", "pull_request_target", "merge_group")
        new = self.edited()
        ref = f"refs/heads/{branch}"
        if "ref" in new.payload:
            new.payload["ref"] = ref
        new.env["GITHUB_REF"] = ref
        new.env["GITHUB_REF_NAME"] = branch
        return new

    def in_repository(self, slug: str, repo_id: int) -> Event:
        """The workflow runs in another repository (e.g. a push in a fork, to the fork itself)."""
        assert self.name not in ("pull_request", "pull_request_target")
        new = self.edited()
        owner, name = slug.split("/")
        repo = new.payload.get("repository")
        if isinstance(repo, dict):
            repo.update(id=repo_id, full_name=slug, name=name, fork=True,
                        html_url=f"https://github.com/{slug}", url=f"https://github.com/{slug}")
            repo["owner"] = {**repo["owner"], "login": owner, "name": owner, "id": repo_id + 1}
        new.env["GITHUB_REPOSITORY"] = slug
        new.env["GITHUB_REPOSITORY_OWNER"] = owner
        return new


def _repositories(payload: dict[str, Any]):
    if isinstance(payload.get("repository"), dict):
        yield payload["repository"]
    pr = payload.get("pull_request")
    if isinstance(pr, dict):
        for side in ("base", "head"):
            repo = (pr.get(side) or {}).get("repo")
            if isinstance(repo, dict):
                yield repo


def merge_group_event(push: Event, base: str | None = None, pr: int = PR_NUMBER,
                      head_sha: str = "9" * 40) -> Event:
    """A merge_group event in GitHub's documented shape, built around a real push payload's repository.

    https://docs.github.com/en/webhooks/webhook-events-and-payloads#merge_group
    """
    src = push.payload
    base = base or src["repository"]["default_branch"]
    base_sha = src["after"]
    head_ref = f"refs/heads/gh-readonly-queue/{base}/pr-{pr}-{base_sha}"
    payload = {
        "action": "checks_requested",
        "merge_group": {
            "head_sha": head_sha,
            "head_ref": head_ref,
            "base_sha": base_sha,
            "base_ref": f"refs/heads/{base}",
            "head_commit": {
                "id": head_sha,
                "tree_id": "8" * 40,
                "message": f"Merge pull request #{pr} from crazy-max/test-pr",
                "timestamp": "2022-04-19T11:04:39+02:00",
                "author": copy.deepcopy(src["head_commit"]["author"]),
                "committer": copy.deepcopy(src["head_commit"]["committer"]),
            },
        },
        "repository": copy.deepcopy(src["repository"]),
        "organization": copy.deepcopy(src["organization"]),
        "sender": copy.deepcopy(src["sender"]),
    }
    env = {**push.env, "GITHUB_EVENT_NAME": "merge_group", "GITHUB_REF": head_ref,
           "GITHUB_REF_NAME": head_ref.removeprefix("refs/heads/"), "GITHUB_SHA": head_sha,
           "GITHUB_BASE_REF": "", "GITHUB_HEAD_REF": ""}
    return Event("merge_group", payload, env, push.directory, None, push._counter)


def event_loader(directory: Path):
    """`load(name)`: a recorded event (fresh copy), or a merge_group event built from push_master.

    Edited payloads are written to `directory`.
    """
    directory.mkdir(parents=True, exist_ok=True)
    counter = [0]

    def load(name: str) -> Event:
        if name == "merge_group":
            return merge_group_event(load("push_master"))
        payload = json.loads((EVENTS_DIR / f"{name}.json").read_text("utf-8"))
        env = read_env_file(EVENTS_DIR / f"{name}.env")
        return Event(name, payload, env, directory, EVENTS_DIR / f"{name}.json", counter)

    return load


@pytest.fixture
def event(tmp_path):
    """`event("pull_request")`: a recorded event (payload + env); `event("merge_group")` builds one."""
    return event_loader(tmp_path / "events")


# --------------------------------------------------------------------------- configuration

CONFIG_TEMPLATE = """\
{trust}
[registries]
cache = "ghcr.io/{{owner}}/ci-cache"
staging = "ghcr.io/{{owner}}/ci-{{image}}"
publish = "docker.io/example/{{image}}"
gha-cache = true
cache-mode = "max"

[images.cpu]
dockerfile = "docker/Dockerfile.cpu"
platforms = ["linux/amd64", "linux/arm64"]

[images.rocm]
dockerfile = "docker/Dockerfile.rocm"
platforms = ["linux/amd64", "linux/arm64"]
runners.amd64 = ["self-hosted", "linux", "rocm"]
{extra}"""


def write_options(folder: Path, canonical: str | None = BASE_REPO, stable: str | None = None,
                  extra: str = "") -> Options:
    """Write folder/ghbuild.toml (2 images x 2 arches, registries set) and load it like ghbuild does.

    `canonical` defaults to the recorded payloads' repository; None leaves trust.canonical-repository
    unset. `stable` sets trust.stable-branch. `extra` is appended TOML.
    """
    # These planner tests cover every event with the ROCm image's self-hosted runner too; the default
    # (forks' pull requests never planned on self-hosted runners) has its own tests.
    lines = ["[trust]", "self-hosted-for-forks = true"]
    if canonical is not None or stable is not None:
        if canonical is not None:
            lines.append(f"canonical-repository = {json.dumps(canonical)}")
        if stable is not None:
            lines.append(f"stable-branch = {json.dumps(stable)}")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "ghbuild.toml"
    path.write_text(CONFIG_TEMPLATE.format(trust="\n".join(lines) + "\n", extra=extra), "utf-8")
    return configfile.load(str(path), env={}, cwd=folder)


@pytest.fixture
def make_options(tmp_path):
    """`make_options(canonical=..., stable=..., extra=...)`: Options from a ghbuild.toml in tmp_path."""
    counter = [0]

    def make(canonical: str | None = BASE_REPO, stable: str | None = None, extra: str = "") -> Options:
        counter[0] += 1
        return write_options(tmp_path / f"project-{counter[0]}", canonical, stable, extra)

    return make


@pytest.fixture
def options(make_options) -> Options:
    return make_options()


@pytest.fixture
def plan_for(options):
    """`plan_for(event, options=None)`: the plan for an Event (or a GitHubContext)."""

    def make(ev: Event | context.GitHubContext, opts: Options | None = None) -> planner.Plan:
        ctx = ev.context() if isinstance(ev, Event) else ev
        return planner.plan(ctx, opts or options)

    return make


# What gha.set_output writes (actions-toolkit's heredoc form, one random delimiter per value).
HEREDOC = re.compile(r"(?P<name>[^\n<]+)<<(?P<delim>ghadelimiter_[0-9a-f-]{36})\n(?P<value>.*?)\n(?P=delim)\n", re.S)


def read_outputs(text: str) -> dict[str, str]:
    """The step outputs in a GITHUB_OUTPUT file's text, by name."""
    return {m["name"]: m["value"] for m in HEREDOC.finditer(text)}


def run_in_process(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`ghbuild ARGS` in `project`, as a workflow step runs it, but in this process (a fresh interpreter per
    case cost a second each): the environment holds no GITHUB_*, GHBUILD_*, AWS_* or ACTIONS_* variable but
    those given, and stdout, stderr and the exit code are what the command wrote and returned."""
    from ghbuild import cli

    full = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GHBUILD_", "AWS_", "ACTIONS_"))}
    full["GIT_CEILING_DIRECTORIES"] = str(project.parent)
    full.update(env or {})
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.clear()
        os.environ.update(full)
        os.chdir(project)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(list(args))
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["ghbuild", *args], code, out.getvalue(), err.getvalue())


def write_project(tmp_path: Path, config_text: str) -> Path:
    """A project folder that is not ghbuild: its own ghbuild.toml and a Dockerfile."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "ghbuild.toml").write_text(config_text, "utf-8")
    (root / "Dockerfile").write_text("FROM scratch\nCOPY . /\n", "utf-8")
    return root
