"""The trust boundary, tried as an attacker with push access to a branch, or with a fork, would.

Every test here runs the CLI as a workflow does, in a project that is not ghbuild (its own Dockerfile and
ghbuild.toml in tmp_path), and checks that an untrusted run gets no canonical write, no write credential
and no self-hosted runner, whatever its checkout says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SHA = "0123456789abcdef0123456789abcdef01234567"
AWS = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEYID0000", "AWS_SECRET_ACCESS_KEY": "attack-me-secret-value"}

CONFIG = """\
[registries]
cache = "ghcr.io/{owner}/cache"
staging = "ghcr.io/{owner}/ci-{image}"

[sccache]
bucket = "shared-sccache"
region = "us-east-1"

[images.app]
dockerfile = "Dockerfile"
platforms = ["linux/amd64"]
"""

# Contexts as flags (local use), each a run GitHub would describe this way.
TRUSTED_PUSH = ["--event", "push", "--repository", "org/project", "--ref", "main", "--default-branch", "main"]
BRANCH_PUSH = ["--event", "push", "--repository", "org/project", "--ref", "feature", "--default-branch", "main"]
SAME_REPO_PR = ["--event", "pull_request", "--repository", "org/project", "--pr", "7", "--base", "main",
                "--head-ref", "feature", "--head-repo", "org/project", "--default-branch", "main"]


def ghbuild(project: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GHBUILD_", "AWS_", "ACTIONS_"))}
    full["GIT_CEILING_DIRECTORIES"] = str(project.parent)
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "ghbuild", *args], cwd=project, env=full, capture_output=True,
                          text=True, timeout=60)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "ghbuild.toml").write_text(CONFIG, "utf-8")
    (root / "Dockerfile").write_text("FROM scratch\nCOPY . /\n", "utf-8")
    return root


def dry_run(project: Path, context: list[str], env: dict[str, str] | None = None) -> dict:
    proc = ghbuild(project, "build", "--image", "app", "--arch", "amd64", "--dry-run", "--json", "--sha", SHA,
                   *context, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# --------------------------------------------------------------------------- S3 write credentials

def test_the_trusted_run_gets_the_s3_credentials(project):
    report = dry_run(project, TRUSTED_PUSH, AWS)
    assert report["sccache"]["mode"] == "read-write"
    assert "id=sccache_aws" in report["command"]


@pytest.mark.parametrize("context", [BRANCH_PUSH, SAME_REPO_PR], ids=["branch push", "same-repository PR"])
def test_untrusted_runs_never_get_s3_write_credentials_even_when_they_are_set(project, context):
    report = dry_run(project, context, AWS)
    assert report["sccache"]["mode"] == "anonymous"
    assert "not a trusted run" in report["sccache"]["reason"]
    assert "sccache_aws" not in report["command"] and AWS["AWS_SECRET_ACCESS_KEY"] not in json.dumps(report)
