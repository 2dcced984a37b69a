"""`ghbuild publish release`: promote the staged images of one commit to v<V>, per-arch tags and latest,
then create the GitHub release (through PyGithub, against the GitHub fake that speaks the REST API)."""

from __future__ import annotations

import json
import subprocess

import pytest
from fakes import github as github_fake

from fakes.oci import RegistryClient

from .enginelib import REPO, ghbuild_argv
from .test_70_publish_nightly import _digest, _push_stage


@pytest.fixture(scope="module")
def hub(session):
    reg = RegistryClient(session.local["GHBUILD_LOCAL_HUB"])
    reg.created = set()
    yield reg
    for name in sorted(reg.created):
        reg.delete_repository_manifests(name)


@pytest.fixture(scope="module")
def staged(session):
    sha = session.sha("release")
    return sha, {arch: _push_stage(session, "release", arch, sha) for arch in ("amd64", "arm64")}


@pytest.fixture()
def gh():
    with github_fake.start(tokens=("ghs_test",)) as fake:
        yield fake


def release(session, hub, suffix: str, *args: str, gh=None, extra_env=None):
    template = f"{hub.host}/ghbuild-test-{session.sid}-rel{suffix}/{{image}}"
    hub.created.add(f"ghbuild-test-{session.sid}-rel{suffix}/cpu")
    env = dict(session.base_env, GHBUILD_REGISTRIES_PUBLISH=template, GITHUB_REPOSITORY="ghbuild/ghbuild")
    if gh is not None:
        env.update(GITHUB_API_URL=gh.url, GITHUB_TOKEN="ghs_test")
    env.update(extra_env or {})
    proc = subprocess.run(ghbuild_argv() + ["publish", "release", "--image", "cpu", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    return proc, f"ghbuild-test-{session.sid}-rel{suffix}/cpu"


def test_release_publishes_version_arch_tags_latest_and_the_github_release(session, hub, staged, gh):
    sha, digests = staged
    proc, name = release(session, hub, "", "--version", "1.2.0", "--sha", sha, "--json", gh=gh)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["version"] == "1.2.0" and out["latest"] is True
    assert _digest(hub, name, "v1.2.0-x86_64") == digests["amd64"]
    assert _digest(hub, name, "v1.2.0-arm64") == digests["arm64"]
    index = _digest(hub, name, "v1.2.0")
    assert index and _digest(hub, name, "latest") == index
    entries = json.loads(hub.manifest(name, "v1.2.0")[2])["manifests"]
    assert {e["platform"]["architecture"]: e["digest"] for e in entries} == digests
    # the GitHub release exists, targets the commit, and its notes carry every digest
    rel = [r for r in gh.requests if r[0] == "POST" and r[1].endswith("/repos/ghbuild/ghbuild/releases")]
    assert len(rel) == 1
    status, body = gh_get(gh, "/repos/ghbuild/ghbuild/releases/tags/v1.2.0")
    assert status == 200 and body["target_commitish"] == sha and body["prerelease"] is False
    for digest in (*digests.values(), index):
        assert digest in body["body"]

    # an older version published later never takes `latest`; a pre-release neither
    older, _ = release(session, hub, "", "--version", "1.1.5", "--sha", sha, "--json", gh=gh)
    assert older.returncode == 0, older.stderr[-2000:]
    assert json.loads(older.stdout)["latest"] is False and _digest(hub, name, "latest") == index
    pre, _ = release(session, hub, "", "--version", "1.3.0rc1", "--sha", sha, "--json", gh=gh)
    assert pre.returncode == 0 and json.loads(pre.stdout)["latest"] is False
    status, body = gh_get(gh, "/repos/ghbuild/ghbuild/releases/tags/v1.3.0rc1")
    assert status == 200 and body["prerelease"] is True

    # a rerun is idempotent: no tag moves, the release is found, not duplicated
    again, _ = release(session, hub, "", "--version", "1.2.0", "--sha", sha, "--json", gh=gh)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["images"][0]["moved"] == []
    assert len([r for r in gh.requests if r[0] == "POST" and "/releases" in r[1]]) == 3


def gh_get(gh, path):
    import urllib.error
    import urllib.request

    req = urllib.request.Request(gh.url + path, headers={"Authorization": "Bearer ghs_test"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, {}


@pytest.mark.parametrize("version", ["", "   ", "banana", "1.0.0+local", "1..2"])
def test_bad_versions_fail_before_anything_is_pushed(session, hub, staged, version):
    sha, _ = staged
    proc, name = release(session, hub, "-bad", "--version", version, "--sha", sha, "--no-github-release")
    assert proc.returncode == 13, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ghbuild: publish error: --version:") and "Traceback" not in proc.stderr
    assert not hub.tags(name)


def test_no_arch_staged_warns_and_skips(session, hub):
    proc, name = release(session, hub, "-none", "--version", "2.0.0", "--sha", session.sha("release-none"),
                         "--no-github-release", "--json")
    assert proc.returncode == 0, proc.stderr
    assert "no staging image of cpu" in proc.stderr and json.loads(proc.stdout)["images"] == []
    assert not hub.tags(name)


def test_exactly_one_arch_staged_fails(session, hub):
    sha = session.sha("release-one")
    _push_stage(session, "release-one", "amd64", sha)
    proc, name = release(session, hub, "-one", "--version", "2.0.0", "--sha", sha, "--no-github-release")
    assert proc.returncode == 13
    assert "has amd64 but not arm64" in proc.stderr.strip().splitlines()[-1]
    assert not hub.tags(name)


def test_missing_github_token_fails_before_anything_is_pushed(session, hub, staged):
    sha, _ = staged
    proc, name = release(session, hub, "-notoken", "--version", "3.0.0", "--sha", sha)
    assert proc.returncode == 2 and "GITHUB_TOKEN" in proc.stderr
    assert not hub.tags(name)
