"""The reusable workflows' `overrides` input: KEY=VALUE lines checked against the config, then set as
GHBUILD_* variables for the job's later steps (GITHUB_ENV)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ghbuild.config import overrides
from ghbuild.errors import ConfigError

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def project(tmp_path) -> Path:
    shutil.copy(REPO_ROOT / "ghbuild.toml", tmp_path / "ghbuild.toml")
    for name in ("Dockerfile.cpu", "Dockerfile.rocm_base", "Dockerfile.rocm"):
        (tmp_path / "docker").mkdir(exist_ok=True)
        (tmp_path / "docker" / name).write_text("FROM scratch AS runtime\n")
    return tmp_path


def test_config_keys_and_variables_both_map_to_ghbuild_variables():
    text = """
        # a fork publishes its own builds
        trust.canonical-repository = me/project
        GHBUILD_REGISTRIES_PUBLISH=docker.io/me/{image}
        images.cpu.build-args=A=1,B=2
    """
    assert overrides.parse(text) == {"GHBUILD_TRUST_CANONICAL_REPOSITORY": "me/project",
                                     "GHBUILD_REGISTRIES_PUBLISH": "docker.io/me/{image}",
                                     "GHBUILD_IMAGES_CPU_BUILD_ARGS": "A=1,B=2"}


@pytest.mark.parametrize(("text", "message"), [
    ("sccache.bucket", "overrides line 1: expected KEY=VALUE"),
    ("\n\nPATH=/tmp", "no such setting"),
    ("LD_PRELOAD=/x.so", "no such setting"),
    ("sccache.buckett=x",
     "GHBUILD_SCCACHE_BUCKETT: no such setting in ghbuild.toml (did you mean GHBUILD_SCCACHE_BUCKET?)"),
    ("images.gpu.target=x", "GHBUILD_IMAGES_GPU_TARGET: no such setting"),
    ("images.cpu.platforms=linux/s390x", "GHBUILD_IMAGES_CPU_PLATFORMS (overrides images.cpu.platforms[0])"),
    ("$(id)=1", "expected KEY=VALUE"),
])
def test_unknown_keys_and_bad_values_are_refused(project, text, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        overrides.validate(overrides.parse(text), None, {}, project)


def test_the_command_sets_them_for_the_later_steps_and_writes_nothing_on_error(project):
    github_env = project / "github-env"
    github_env.write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GHBUILD_"))}
    env.update(GITHUB_ACTIONS="true", GITHUB_ENV=str(github_env))

    def run(text):
        return subprocess.run([sys.executable, "-m", "ghbuild", "overrides", text], cwd=project, env=env,
                              capture_output=True, text=True, timeout=60)

    bad = run("sccache.bucket=b\nsccache.nope=1")
    assert bad.returncode == 3 and github_env.read_text() == ""
    good = run("sccache.bucket = my-bucket\nimages.cpu.target=sccache\n")
    assert good.returncode == 0, good.stderr
    written = github_env.read_text()
    assert "GHBUILD_SCCACHE_BUCKET<<" in written and "\nmy-bucket\n" in written
    assert "GHBUILD_IMAGES_CPU_TARGET<<" in written and "\nsccache\n" in written
