"""`ghbuild publish release`: promote the staged images of one commit to v<V>, per-arch tags and latest,
then create the GitHub release (through PyGithub, against the GitHub fake that speaks the REST API).
The digests come from the trusted build's records: `--records`, or `--records-from ci.yml` (the
artifact of the trusted push run of the commit, read through the GitHub API)."""

from __future__ import annotations

import json
import subprocess

import pytest
from fakes import github as github_fake
from fakes.oci import RegistryClient

from .enginelib import CONTEXT_FLAGS, REPO, ghbuild_argv
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
    records = session.workdir / "records-release"
    return sha, {arch: _push_stage(session, "release", arch, sha, records) for arch in ("amd64", "arm64")}, records


@pytest.fixture()
def gh():
    with github_fake.start(tokens=("ghs_test",)) as fake:
        yield fake


def release(session, hub, suffix: str, *args: str, gh=None, extra_env=None, records=None):
    template = f"{hub.host}/ghbuild-test-{session.sid}-rel{suffix}/{{image}}"
    hub.created.add(f"ghbuild-test-{session.sid}-rel{suffix}/cpu")
    env = dict(session.base_env, GHBUILD_REGISTRIES_PUBLISH=template, GITHUB_REPOSITORY="ghbuild/ghbuild")
    if gh is not None:
        env.update(GITHUB_API_URL=gh.url, GITHUB_TOKEN="ghs_test")
    env.update(extra_env or {})
    with_records = ["--records", str(records)] if records is not None else []
    proc = subprocess.run([*ghbuild_argv(), "publish", "release", "--image", "cpu", *CONTEXT_FLAGS, *with_records,
                           *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    return proc, f"ghbuild-test-{session.sid}-rel{suffix}/cpu"


def test_release_publishes_version_arch_tags_latest_and_the_github_release(session, hub, staged, gh):
    sha, digests, records = staged
    proc, name = release(session, hub, "", "--version", "1.2.0", "--sha", sha, "--json", gh=gh, records=records)
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
    # unsigned here (no key, not in GitHub Actions): the notes say so instead of offering `ghbuild verify`
    assert "### Verify" in body["body"] and "These images are not signed" in body["body"]

    # an older version published later never takes `latest`; a pre-release neither
    older, _ = release(session, hub, "", "--version", "1.1.5", "--sha", sha, "--json", gh=gh, records=records)
    assert older.returncode == 0, older.stderr[-2000:]
    assert json.loads(older.stdout)["latest"] is False and _digest(hub, name, "latest") == index
    pre, _ = release(session, hub, "", "--version", "1.3.0rc1", "--sha", sha, "--json", gh=gh, records=records)
    assert pre.returncode == 0 and json.loads(pre.stdout)["latest"] is False
    status, body = gh_get(gh, "/repos/ghbuild/ghbuild/releases/tags/v1.3.0rc1")
    assert status == 200 and body["prerelease"] is True

    # a rerun is idempotent: no tag moves, the release is found, not duplicated
    again, _ = release(session, hub, "", "--version", "1.2.0", "--sha", sha, "--json", gh=gh, records=records)
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
    sha, _, records = staged
    proc, name = release(session, hub, "-bad", "--version", version, "--sha", sha, "--no-github-release",
                         records=records)
    assert proc.returncode == 13, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert (len(lines) == 1 and lines[0].startswith("ghbuild: publish error: --version:")
            and "Traceback" not in proc.stderr)
    assert not hub.tags(name)


def test_no_trusted_build_record_of_the_commit_is_refused(session, hub, staged):
    """A release promotes only what trusted CI built and recorded for that commit."""
    sha, _digests, records = staged
    other = session.sha("release-none")
    proc, name = release(session, hub, "-none", "--version", "2.0.0", "--sha", other, "--no-github-release",
                         records=records)
    assert proc.returncode == 13 and f"is of commit {sha}, not {other}" in proc.stderr
    empty = session.workdir / "records-none"
    empty.mkdir(exist_ok=True)
    proc, _ = release(session, hub, "-none", "--version", "2.0.0", "--sha", other, "--no-github-release",
                      records=empty)
    assert proc.returncode == 13 and f"no trusted build record of {other}" in proc.stderr
    assert not hub.tags(name)


def test_exactly_one_arch_recorded_fails(session, hub):
    sha = session.sha("release-one")
    records = session.workdir / "records-release-one"
    _push_stage(session, "release-one", "amd64", sha, records)
    proc, name = release(session, hub, "-one", "--version", "2.0.0", "--sha", sha, "--no-github-release",
                         records=records)
    assert proc.returncode == 13
    assert "has amd64 but not arm64" in proc.stderr.strip().splitlines()[-1]
    assert not hub.tags(name)


def test_records_from_the_trusted_ci_run_of_the_commit(session, hub, staged, gh):
    """release.yml: `--records-from ci.yml` reads the ghbuild-digests artifact of the newest successful push
    run of the commit on the stable branch; runs of other events, branches or commits never count."""
    sha, digests, records = staged
    digests_json = json.dumps({p.stem: {k: v for k, v in json.loads(p.read_text()).items() if k != "id"}
                               for p in sorted(records.glob("*.json"))}).encode()
    forged = json.dumps({"cpu-amd64": {}}).encode()
    never_built = session.sha("never-built")
    gh.add_commits("ghbuild/ghbuild", "main", [sha, never_built])
    for event, branch, head in (("pull_request", "main", sha), ("push", "feature", sha), ("push", "main", "f" * 40)):
        gh.add_workflow_run("ghbuild/ghbuild", "ci.yml", head_sha=head, branch=branch, event=event,
                            artifacts={"ghbuild-digests": {"ghbuild-digests.json": forged}})
    gh.add_workflow_run("ghbuild/ghbuild", "ci.yml", head_sha=sha, branch="main", event="push",
                        artifacts={"ghbuild-digests": {"ghbuild-digests.json": digests_json}})
    proc, name = release(session, hub, "-from-ci", "--version", "4.0.0", "--sha", sha, "--records-from", "ci.yml",
                         "--no-github-release", gh=gh)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _digest(hub, name, "v4.0.0-x86_64") == digests["amd64"]
    assert _digest(hub, name, "v4.0.0-arm64") == digests["arm64"]
    missing, _ = release(session, hub, "-from-ci", "--version", "4.0.1", "--sha", never_built,
                         "--records-from", "ci.yml", "--no-github-release", gh=gh)
    assert missing.returncode == 13 and "no successful ci.yml push runs on main" in missing.stderr


def test_missing_github_token_fails_before_anything_is_pushed(session, hub, staged):
    sha, _, records = staged
    proc, name = release(session, hub, "-notoken", "--version", "3.0.0", "--sha", sha, records=records)
    assert proc.returncode == 2 and "GITHUB_TOKEN" in proc.stderr
    assert not hub.tags(name)
