"""`ghbuild ensure-base` against the real staging registry and engine.

A tiny content-addressed base (`tiny`) and an image built on it (`app`) in a git repository of their
own in the session's scratch folder. First run: confirmed miss, build, push, labels checked on the
pushed digest. Second run: found by identity, no build, same digest. A lookup that fails is a failure,
never a miss. Untrusted runs never write the canonical ref. The consumer takes the base only by digest.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from fakes.faultproxy import FaultProxy

from .enginelib import Run, Session, ghbuild_argv

TINY = """\
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE} AS base
COPY inputs/ /opt/tiny/
RUN set -eu; cat /opt/tiny/version.txt > /opt/tiny/built
"""

APP = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE} AS app
RUN set -eu; test -f /opt/tiny/built; echo app > /app
"""

TRUSTED = ("--event", "push", "--repository", "ghbuild/ghbuild", "--ref", "main", "--default-branch", "main")
SAME_REPO_PR = ("--event", "pull_request", "--repository", "ghbuild/ghbuild", "--pr", "7", "--base", "main",
                "--head-ref", "feature", "--head-repo", "ghbuild/ghbuild", "--default-branch", "main")
FORK_PR = ("--event", "pull_request", "--repository", "ghbuild/ghbuild", "--pr", "8", "--base", "main",
           "--head-ref", "feature", "--head-repo", "someone/ghbuild", "--default-branch", "main")


@pytest.fixture(scope="module")
def project(session: Session) -> Path:
    root = session.workdir / "base-project"
    (root / "inputs").mkdir(parents=True)
    (root / "Dockerfile.tiny").write_text(TINY)
    (root / "Dockerfile.app").write_text(APP)
    (root / "inputs" / "version.txt").write_text("tiny 1\n")
    (root / "ghbuild.toml").write_text(f"""\
[trust]
canonical-repository = "ghbuild/ghbuild"

[registries]
gha-cache = false

[sccache]
enabled = false

[images.tiny]
dockerfile = "Dockerfile.tiny"
target = "base"
base-image = "{session.registry.host}/base/debian:bookworm"
identity = {{ version = "1", inputs = ["inputs/**"] }}

[images.app]
dockerfile = "Dockerfile.app"
base = "tiny"
""")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                 ["-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "init"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    session.created_repos.update({f"ghbuild-test-{session.sid}/{name}" for name in
                                  ("tiny", "app", "tiny-untrusted", "app-untrusted")})
    return root


# local.env configures the repository's own rocm-base; this project has no such image.
NOT_OURS = ("GHBUILD_IMAGES_ROCM_BASE_BASE_IMAGE", "GHBUILD_IMAGES_ROCM_BASE_BUILD_ARGS")


def ghb(session: Session, project: Path, name: str, command: str, *args: str, context=TRUSTED,
        env: dict[str, str] | None = None) -> Run:
    env = {k: v for k, v in (env or session.env()).items() if k not in NOT_OURS}
    sha = session.sha(name)
    session.used_shas.add(sha)
    argv = [*ghbuild_argv(), command, "--config", str(project / "ghbuild.toml"), *args, *context, "--sha", sha]
    return session.ghbuild(name, argv=argv, env=env)


def identity_of(session: Session, project: Path, context=TRUSTED, env=None) -> str:
    run = ghb(session, project, "identity", "identity", "--image", "tiny", "--json", context=context, env=env)
    return run.report["identity"]


def tag_digest(session: Session, repo: str, tag: str) -> str | None:
    status, headers, _ = session.registry.manifest(repo, tag, method="HEAD")
    return headers.get("docker-content-digest") if status == 200 else None


@pytest.fixture(scope="module")
def first(session: Session, project: Path) -> Run:
    run = ghb(session, project, "ensure-first", "ensure-base", "--image", "tiny", "--json")
    assert run.rc == 0, run.tail()
    return run


def test_first_run_builds_pushes_and_labels(session: Session, project: Path, first: Run):
    result = first.report
    identity = identity_of(session, project)
    repo = f"ghbuild-test-{session.sid}/tiny"
    assert result["built"] is True and result["identity"] == identity
    assert result["found_at"] == f"{session.registry.host}/{repo}:tiny-{identity}"
    digest = tag_digest(session, repo, f"tiny-{identity}")
    assert digest and result["ref"] == f"{session.registry.host}/{repo}@{digest}"
    # the labels on the pushed image carry the identity
    _status, _, body = session.registry.manifest(repo, digest)
    config = session.registry.blob_json(repo, json.loads(body)["config"]["digest"])
    assert config["config"]["Labels"]["org.ghbuild.identity"] == identity
    assert config["architecture"] == "amd64"


def test_second_run_skips_with_the_same_digest(session: Session, project: Path, first: Run):
    again = ghb(session, project, "ensure-again", "ensure-base", "--image", "tiny", "--json")
    result = again.report
    assert result["built"] is False and result["ref"] == first.report["ref"]
    assert result["build_report"] is None
    assert "present with identity" in again.stderr


def test_the_consumer_takes_the_base_only_by_digest(session: Session, project: Path, first: Run):
    tag_ref = first.report["found_at"]
    refused = ghb(session, project, "app-by-tag", "build", "--image", "app", "--arch", "amd64",
                  "--base-image", tag_ref)
    assert refused.rc == 5, refused.tail()
    assert "not digest-pinned" in refused.stderr and "Traceback" not in refused.stderr
    none = ghb(session, project, "app-no-base", "build", "--image", "app", "--arch", "amd64")
    assert none.rc == 5 and "ensure-base --image tiny" in none.stderr
    built = ghb(session, project, "app", "build", "--image", "app", "--arch", "amd64", "--push", "--json",
                "--base-image", first.report["ref"])
    assert built.rc == 0, built.tail()
    assert built.report["pushed"] and built.report["ref"].split("@")[1].startswith("sha256:")


def test_lookup_only_finds_or_fails_and_never_builds(session: Session, project: Path, first: Run):
    found = ghb(session, project, "lookup-found", "ensure-base", "--image", "tiny", "--lookup-only", "--json")
    assert found.report["ref"] == first.report["ref"] and found.report["built"] is False
    env = session.env(GHBUILD_IMAGES_TINY_IDENTITY_VERSION="lookup")
    identity = identity_of(session, project, env=env)
    missing = ghb(session, project, "lookup-missing", "ensure-base", "--image", "tiny", "--lookup-only", env=env)
    assert missing.rc == 16, missing.tail()
    assert "ghbuild: base missing:" in missing.stderr and "--lookup-only builds nothing" in missing.stderr
    assert "[internal] load build definition" not in missing.stderr
    assert tag_digest(session, f"ghbuild-test-{session.sid}/tiny", f"tiny-{identity}") is None


def test_a_lookup_failure_fails_closed(session: Session, project: Path, first: Run):
    env = session.env(GHBUILD_IMAGES_TINY_IDENTITY_VERSION="fault")   # an identity nobody built: a miss would build
    identity = identity_of(session, project, env=env)
    repo = f"ghbuild-test-{session.sid}/tiny"
    with FaultProxy("http://" + session.registry.host) as proxy:
        proxy.respond("HEAD", rf"/{repo}/manifests/", 503, count=None)   # down for good
        proxy.respond("GET", rf"/{repo}/manifests/", 503, count=None)
        env["GHBUILD_REGISTRIES_STAGING"] = f"{proxy.host}/ghbuild-test-{session.sid}/{{image}}"
        run = ghb(session, project, "ensure-fault", "ensure-base", "--image", "tiny", context=TRUSTED, env=env)
        assert proxy.errors == []
    assert run.rc == 12, run.tail()
    assert "503" in run.stderr and "Traceback" not in run.stderr
    assert "[internal] load build definition" not in run.stderr     # BuildKit never started
    assert tag_digest(session, repo, f"tiny-{identity}") is None     # nothing was built or pushed


def test_untrusted_runs_never_write_the_canonical_ref(session: Session, project: Path, first: Run):
    # An existing canonical identity is reused by a pull request (read: canonical first) ...
    reused = ghb(session, project, "ensure-pr-reuse", "ensure-base", "--image", "tiny", "--json", context=SAME_REPO_PR)
    assert reused.report["built"] is False and reused.report["ref"] == first.report["ref"]
    # ... a changed one is built into the PR's own scope, never under the canonical tag.
    env = session.env(GHBUILD_IMAGES_TINY_IDENTITY_VERSION="pr")
    identity = identity_of(session, project, context=SAME_REPO_PR, env=env)
    built = ghb(session, project, "ensure-pr", "ensure-base", "--image", "tiny", "--json", context=SAME_REPO_PR,
                env=env)
    result = built.report
    repo = f"ghbuild-test-{session.sid}/tiny"
    assert result["built"] is True
    own_tag = result["found_at"].rsplit(":", 1)[1]
    assert own_tag.startswith("pr-7-") and own_tag.endswith(f"-tiny-{identity}")
    # In the untrusted repository, which the trusted build never reads from.
    assert result["found_at"].rsplit(":", 1)[0].endswith(f"{repo}-untrusted")
    assert tag_digest(session, f"{repo}-untrusted", own_tag) == result["digest"]
    assert tag_digest(session, repo, own_tag) is None
    assert tag_digest(session, repo, f"tiny-{identity}") is None
    # A fork's pull request may not push at all: a miss is refused, not built.
    env = session.env(GHBUILD_IMAGES_TINY_IDENTITY_VERSION="fork")
    fork = ghb(session, project, "ensure-fork", "ensure-base", "--image", "tiny", context=FORK_PR, env=env)
    assert fork.rc == 6, fork.tail()
    errors = [line for line in fork.stderr.splitlines() if line.startswith("ghbuild:")]
    assert len(errors) == 1 and "may not push" in errors[0] and "Traceback" not in fork.stderr


def test_a_ref_with_other_labels_is_never_built_over(session: Session, project: Path, first: Run):
    env = session.env(GHBUILD_IMAGES_TINY_IDENTITY_VERSION="squatted")
    identity = identity_of(session, project, env=env)
    repo = f"ghbuild-test-{session.sid}/tiny"
    # someone put the v1 image (labels of another identity) under the new identity's tag
    status, headers, body = session.registry.manifest(repo, first.report["digest"])
    assert status == 200
    put = session.registry.request("PUT", f"/v2/{repo}/manifests/tiny-{identity}", body=body,
                                   headers={"Content-Type": headers["content-type"]})
    assert put[0] == 201, put
    run = ghb(session, project, "ensure-squatted", "ensure-base", "--image", "tiny", env=env)
    assert run.rc == 12, run.tail()
    assert "refusing to use it or to build over it" in run.stderr
    assert tag_digest(session, repo, f"tiny-{identity}") == first.report["digest"]
