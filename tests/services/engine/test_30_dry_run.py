"""`ghbuild build --dry-run`: prints the exact command, with no secret value, and runs nothing."""

from __future__ import annotations

import itertools
import re
import shlex
import time

import pytest

from .enginelib import REPO


def _normalise(command: str) -> str:
    """What legitimately differs between two runs: the work folder and the creation time label."""
    command = re.sub(r"/ghbuild-build-[^/\s]+/", "/ghbuild-build-X/", command)
    command = re.sub(r"/run\d+-[^/\s]+/tmp/", "/TMP/", command)
    return re.sub(r"org\.opencontainers\.image\.created=\S+", "org.opencontainers.image.created=T", command)


@pytest.fixture(scope="module")
def fresh_dry_run(session):
    """A dry run into a repository, tag and S3 prefix that nothing else in this session uses."""
    repo = f"{session.registry.host}/ghbuild-test-{session.sid}-dry/{{image}}"
    prefix = f"ghbuild-test-{session.sid}-dry"
    session.created_repos.add(f"ghbuild-test-{session.sid}-dry/cpu")
    session.s3_prefixes.add(prefix + "/")
    env = session.env(GHBUILD_REGISTRIES_STAGING=repo, GHBUILD_SCCACHE_KEY_PREFIX=prefix)
    start = time.monotonic()
    run = session.ghbuild("dry", "--push", "--dry-run", env=env)
    return run, time.monotonic() - start, prefix


def test_dry_run_prints_one_command_line(fresh_dry_run, session):
    run, _seconds, _prefix = fresh_dry_run
    assert run.rc == 0, run.tail()
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1, run.stdout
    argv = shlex.split(lines[0])
    assert argv[:5] == [session.docker, "buildx", "build", "--builder", "default"]
    tag = f"{session.registry.host}/ghbuild-test-{session.sid}-dry/cpu:{session.sha('dry')}-x86_64"
    pairs = list(itertools.pairwise(argv))
    assert ("--tag", tag) in pairs
    assert ("--platform", "linux/amd64") in pairs and ("--target", "runtime") in pairs
    assert ("--network", "host") in pairs
    # The helper pinned to its digest, as a build would get it; the settings only in the secret.
    helper = session.local["GHBUILD_SCCACHE_HELPER_IMAGE"].rsplit(":", 1)[0]
    assert any(a == "--build-arg" and b.startswith(f"GHBUILD_SCCACHE_IMAGE={helper}@sha256:") for a, b in pairs), pairs
    assert "SCCACHE_S3_KEY_PREFIX" not in lines[0] and "GHBUILD_SCCACHE_MODE" not in lines[0]
    assert any(a == "--secret" and b.startswith("id=ghbuild_sccache,src=") for a, b in pairs)
    assert argv[-1] == str(REPO)


def test_dry_run_shows_no_secret(fresh_dry_run, session):
    run, _, _ = fresh_dry_run
    for secret in session.secrets:
        assert secret not in run.stdout and secret not in run.stderr
    # Credentials are a BuildKit secret file, never a build argument or an environment value.
    assert "AWS_SECRET_ACCESS_KEY" not in run.stdout and "AWS_SESSION_TOKEN" not in run.stdout


def test_dry_run_runs_nothing(fresh_dry_run, session):
    run, seconds, prefix = fresh_dry_run
    tag = f"{session.registry.host}/ghbuild-test-{session.sid}-dry/cpu:{session.sha('dry')}-x86_64"
    tags = session.registry.tags(f"ghbuild-test-{session.sid}-dry/cpu")
    assert tags is None, f"the registry has the repository (HTTP 200, tags {tags})"   # None: HTTP 404
    status, _, _ = session.registry.manifest(f"ghbuild-test-{session.sid}-dry/cpu", tag.rsplit(":", 1)[1])
    assert status == 404, f"GET manifest of the dry run's tag: HTTP {status}"
    assert session.image_inspect(tag) is None, "the dry run created a local image"
    assert session.s3_keys(prefix + "/") == [], "the dry run wrote to S3"
    # No credentials file was written (and no work folder left behind).
    assert list(run.tmpdir.rglob("*")) == [], list(run.tmpdir.rglob("*"))
    assert seconds < 60, f"a dry run took {seconds:.0f} s"
    assert "#1 [internal]" not in run.stderr, "BuildKit output in a dry run"


def test_dry_run_json_matches_the_real_build(session, first_build):
    """The dry run's command is the one the real build ran (same inputs, same sha)."""
    run = session.ghbuild("dry-json", "--push", "--dry-run", "--json", sha=session.sha("first"))
    assert run.rc == 0, run.tail()
    report = run.report
    assert report["sccache"]["mode"] == "read-write" and "not probed" in report["sccache"]["reason"]
    assert report["pushed"] is False and report["digest"] is None
    assert _normalise(report["command"]) == _normalise(first_build.report["command"])
    for secret in session.secrets:
        assert secret not in run.stdout and secret not in run.stderr
