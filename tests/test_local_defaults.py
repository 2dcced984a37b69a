"""Outside GitHub Actions every command plans a push of the checked-out branch of the `origin`
repository, says so, and flags still choose another run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ghbuild.errors import ContextError
from ghbuild.github.context import LOCAL_PUSH_NOTE, ContextFlags, from_environment

REPO_ROOT = Path(__file__).resolve().parents[1]
GIT_IDENT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
             "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_IDENT}).stdout.strip()


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A clone-like checkout: branch feature/x, origin on GitHub (SSH form), one commit, ghbuild's config."""
    work = tmp_path / "widgets"
    work.mkdir()
    shutil.copy(REPO_ROOT / "ghbuild.toml", work / "ghbuild.toml")
    for dockerfile in ("Dockerfile.cpu", "Dockerfile.rocm_base", "Dockerfile.rocm"):
        (work / "docker").mkdir(exist_ok=True)
        (work / "docker" / dockerfile).write_text("FROM scratch AS runtime\n")
    _git(work, "init", "-q", "-b", "feature/x")
    _git(work, "remote", "add", "origin", "git@github.com:Acme/widgets.git")
    _git(work, "add", "-A")
    _git(work, "commit", "-q", "--no-gpg-sign", "-m", "init")
    return work


def _ghbuild(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GHBUILD_", "INPUT_"))}
    clean["GIT_CEILING_DIRECTORIES"] = str(cwd.parent)
    return subprocess.run([sys.executable, "-m", "ghbuild", *args], cwd=cwd, env={**clean, **env},
                          capture_output=True, text=True, timeout=60)


def test_outside_actions_the_run_is_a_push_of_the_checked_out_branch(checkout):
    ctx = from_environment({}, ContextFlags(), checkout)
    assert (ctx.event, ctx.ref, ctx.repository) == ("push", "refs/heads/feature/x", "acme/widgets")
    assert ctx.sha == _git(checkout, "rev-parse", "HEAD")
    assert LOCAL_PUSH_NOTE in ctx.notes


def test_flags_still_choose_another_run(checkout):
    ctx = from_environment({}, ContextFlags(event="schedule", ref="main", repository="org/project"), checkout)
    assert (ctx.event, ctx.ref, ctx.repository) == ("schedule", "refs/heads/main", "org/project")
    assert LOCAL_PUSH_NOTE not in ctx.notes


def test_inside_actions_a_missing_event_is_still_an_error(checkout):
    with pytest.raises(ContextError, match="GITHUB_EVENT_NAME is not set"):
        from_environment({"GITHUB_ACTIONS": "true"}, ContextFlags(), checkout)


def test_a_detached_head_needs_ref(checkout):
    _git(checkout, "checkout", "-q", "--detach")
    with pytest.raises(ContextError, match=r"not on a branch .*--ref"):
        from_environment({}, ContextFlags(), checkout)


def test_build_needs_no_flags_and_says_what_it_assumed(checkout):
    result = _ghbuild(["build", "--image", "cpu", "--arch", "amd64", "--dry-run", "--json"], checkout)
    assert result.returncode == 0, result.stderr
    assert f"ghbuild: note: {LOCAL_PUSH_NOTE}" in result.stderr.splitlines()
    sha = _git(checkout, "rev-parse", "HEAD")
    tags = json.loads(result.stdout)["tags"]
    # No default branch known locally: not trusted, so only the branch's own preview scope is written.
    assert tags and all(t.startswith("ghcr.io/acme/ghbuild-cpu-untrusted:preview-feature_x-")
                        and t.endswith(f"{sha}-x86_64") for t in tags), tags


def test_plan_json_carries_the_note_and_the_table_shows_it_once(checkout):
    data = json.loads(_ghbuild(["plan", "--json"], checkout).stdout)
    assert data["context"]["event"] == "push" and LOCAL_PUSH_NOTE in data["context"]["notes"]
    table = _ghbuild(["plan"], checkout)
    assert table.returncode == 0, table.stderr
    assert table.stdout.count(LOCAL_PUSH_NOTE) == 1 and "ghbuild: note:" not in table.stderr
