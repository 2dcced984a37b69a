"""The trust boundary, tried as an attacker with push access to a branch, or with a fork, would.

Every test here runs the CLI as a workflow does, in a project that is not ghbuild (its own Dockerfile and
ghbuild.toml in tmp_path), and checks that an untrusted run gets no canonical write, no write credential
and no self-hosted runner, whatever its checkout says.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_in_process as ghbuild
from conftest import write_project

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


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return write_project(tmp_path, CONFIG)


def dry_run(project: Path, context: list[str], env: dict[str, str] | None = None) -> dict:
    proc = ghbuild(project, "build", "--image", "app", "--arch", "amd64", "--dry-run", "--json", "--sha", SHA,
                   *context, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# --------------------------------------------------------------------------- S3 write credentials

def test_the_trusted_run_gets_the_s3_credentials(project):
    report = dry_run(project, TRUSTED_PUSH, AWS)
    assert report["sccache"]["mode"] == "read-write"
    assert "id=ghbuild_sccache" in report["command"]


@pytest.mark.parametrize("context", [BRANCH_PUSH, SAME_REPO_PR], ids=["branch push", "same-repository PR"])
def test_untrusted_runs_never_get_s3_write_credentials_even_when_they_are_set(project, context):
    report = dry_run(project, context, AWS)
    assert report["sccache"]["mode"] == "anonymous"
    assert "not a trusted run" in report["sccache"]["reason"]
    assert AWS["AWS_SECRET_ACCESS_KEY"] not in json.dumps(report)


@pytest.mark.parametrize("trusted, secrets, creds", [(True, True, True), (False, True, False), (True, False, False)])
def test_the_settings_secret_carries_credentials_only_for_the_trusted_run(tmp_path, trusted, secrets, creds):
    """Every build gets its sccache settings in the secret `ghbuild_sccache`; only the trusted run that may be
    handed secrets finds the credentials there."""
    from types import SimpleNamespace

    from ghbuild.build import buildjob
    from ghbuild.build.sccache import SccacheDecision

    decision = SccacheDecision("read-write", "ok", {"GHBUILD_SCCACHE_MODE": "read-write", "SCCACHE_BUCKET": "b"},
                               f"AWS_ACCESS_KEY_ID=k\nAWS_SECRET_ACCESS_KEY={AWS['AWS_SECRET_ACCESS_KEY']}\n")
    plan = SimpleNamespace(trust=SimpleNamespace(trusted=trusted, secrets=secrets))
    (secret,) = buildjob._secret_files(decision, plan, tmp_path, write=True)
    text = secret.src.read_text()
    assert secret.id == "ghbuild_sccache" and (secret.src.stat().st_mode & 0o777) == 0o600
    assert text.startswith("GHBUILD_SCCACHE_MODE=read-write\nSCCACHE_BUCKET=b\n")
    assert (AWS["AWS_SECRET_ACCESS_KEY"] in text) is creds and ("AWS_ACCESS_KEY_ID" in text) is creds


# --------------------------------------------------------------------------- paths out of the repository

@pytest.mark.parametrize("key, value, why", [
    ("dockerfile", "/etc/hostname", "an absolute path"),
    ("dockerfile", "../../../../etc/hostname", "'..' leads out"),
    ("context", "../../../..", "'..' leads out"),
    ("context", "/root", "an absolute path"),
    ("dockerfile", "home/Dockerfile", "a symlink leads out"),
    ("context", "home", "a symlink leads out"),
    ("identity.inputs", ["../secrets/**"], "'..' leads out"),
    ("identity.inputs", ["/etc/*"], "an absolute path"),
    ("identity.inputs", ["src/**/../../../../etc/*"], "'..' leads out"),
    ("identity.inputs", ["home/**"], "a symlink leads out"),
])
def test_paths_that_lead_out_of_the_repository_are_refused(project, key, value, why):
    """A same-repository pull request must not send the runner's home (a docker login's config.json) into
    its build context, nor build from a file outside the checkout."""
    (project / ".git").mkdir()
    (project / "home").symlink_to(Path.home())
    lines = CONFIG.replace('dockerfile = "Dockerfile"\n', "")
    if key == "identity.inputs":
        setting = f'dockerfile = "Dockerfile"\nidentity = {{ version = "1", inputs = {json.dumps(value)} }}\n'
    else:
        setting = ('dockerfile = "Dockerfile"\n' if key != "dockerfile" else "") + f"{key} = {json.dumps(value)}\n"
    (project / "ghbuild.toml").write_text(lines + setting, "utf-8")
    proc = ghbuild(project, "plan", "--sha", SHA, *TRUSTED_PUSH)
    assert proc.returncode == 3, proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert f"images.app.{key}" in line and "outside the git repository" in line and why in line


def test_a_path_override_from_the_environment_is_refused_naming_the_variable(project):
    (project / ".git").mkdir()
    proc = ghbuild(project, "plan", "--sha", SHA, *TRUSTED_PUSH, env={"GHBUILD_IMAGES_APP_CONTEXT": "/"})
    assert proc.returncode == 3 and "GHBUILD_IMAGES_APP_CONTEXT (overrides images.app.context)" in proc.stderr


def test_paths_inside_the_repository_stay_accepted(project):
    (project / ".git").mkdir()
    (project / "sub").mkdir()
    (project / "sub" / "ghbuild.toml").write_text(CONFIG.replace('"Dockerfile"', '"../Dockerfile"')
                                                  + 'context = ".."\n', "utf-8")
    proc = ghbuild(project / "sub", "plan", "--json", "--sha", SHA, *TRUSTED_PUSH)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("record", ["/etc/ghbuild-record.json", "../../outside.json"])
def test_a_record_outside_the_workspace_and_runner_temp_is_refused_before_the_build(project, record):
    proc = ghbuild(project, "build", "--image", "app", "--arch", "amd64", "--record", record, "--sha", SHA,
                   *TRUSTED_PUSH)
    assert proc.returncode == 2 and f"--record {record}: outside the working directory" in proc.stderr
    assert "load build definition" not in proc.stderr       # nothing was built


def test_a_record_behind_a_symlink_that_leads_out_is_refused(project, tmp_path):
    from ghbuild import errors
    from ghbuild.publish import records

    (tmp_path / "elsewhere").mkdir()
    (project / "out").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(errors.UsageError, match="a symlink leads out"):
        records.write(Path("out/r.json"), {"id": "x", "digest": "d", "ref": "r"}, {}, project)
    assert list((tmp_path / "elsewhere").iterdir()) == []
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    records.write(runner_temp / "d" / "r.json", {"id": "x", "digest": "d", "ref": "r"},
                  {"RUNNER_TEMP": str(runner_temp)}, project)
    assert json.loads((runner_temp / "d" / "r.json").read_text())["id"] == "x"


# --------------------------------------------------------------------------- GitHub Actions cache

def test_a_run_that_may_not_write_the_gha_cache_gets_no_gha_ref_at_all(project, tmp_path):
    """pull_request_target from a fork: reading type=gha needs the runtime token, which could write the
    base branch's cache, so neither cache-from nor cache-to names it."""
    events = Path(__file__).parent / "fixtures" / "events"
    env = {k: v for k, v in (line.split("=", 1) for line in (events / "pull_request_target.env").read_text().split("\n")
                             if "=" in line)}
    env["GITHUB_EVENT_PATH"] = str(events / "pull_request_target.json")
    plan = json.loads(ghbuild(project, "plan", "--json", env=env).stdout)
    assert plan["context"]["gha_write"] is False
    for job in plan["jobs"]:
        assert not [ref for ref in job["cache_from"] + job["cache_to"] if ref.startswith("type=gha")], job
        assert job["gha_scope"] is None
    trusted = json.loads(ghbuild(project, "plan", "--json", "--sha", SHA, *TRUSTED_PUSH).stdout)
    assert any(ref.startswith("type=gha") for job in trusted["jobs"] for ref in job["cache_from"])


# --------------------------------------------------------------------------- job summaries

HOSTILE = "x | <img src=x onerror=alert(1)> [click](https://evil.example) `code` **bold**\n## forged heading"


def test_what_an_image_says_about_itself_is_escaped_in_the_job_summary():
    """Stage names and modes come from the sccache wrapper's lines in the build log: the built code writes them."""
    from ghbuild import render
    from ghbuild.build.report import BuildReport

    stage = {"mode": HOSTILE, "requested_mode": "read-write", "fallbacks": [], "hits": 1, "misses": 1,
             "hit_rate": 0.5, "hits_by_language": {HOSTILE: 1}, "misses_by_language": {}, "not_cacheable": 0,
             "not_cached_reasons": {}, "write_errors": 0, "read_errors": 0, "compile_requests": 2, "seconds": 1,
             "from_layer_cache": False, "cache_location": None}
    report = BuildReport(image="app", arch="amd64", platform="linux/amd64", backend="buildx", target=None,
                               command="docker build", ref="r/app@sha256:" + "a" * 64,
                               warnings=[f"sccache in stage {HOSTILE}: fell back"],
                               sccache={"mode": HOSTILE, "hits": 1, "misses": 1, "hit_rate": 0.5,
                                        "stages": {HOSTILE: stage}},
                               stages={HOSTILE: {"steps": 1, "cached": 0, "seconds": 1.0, "size": 5_000_000}})
    summary = render.build_summary(report)
    assert "<img" not in summary and "[click](" not in summary and "\n## forged" not in summary
    assert "\\[click\\](https://evil.example)" in summary           # shown, as text
    for line in summary.splitlines():
        if line.startswith("| ") and not line.startswith("|---"):
            cells = line.count("|") - line.count("\\|")
            assert cells in (3, 6, 9), line          # no cell was split by a stage name's pipe
        if line.startswith('    "'):                 # mermaid pie entries: nothing ends the label early
            assert line.count('"') == 2, line


def test_records_and_refs_are_escaped_in_the_digests_summary():
    from ghbuild import render

    text = render.digests_summary(HOSTILE, [{"id": HOSTILE, "platform": "linux/amd64"}],
                                  {HOSTILE: {"ref": HOSTILE, "platform": "linux/amd64"}})
    assert "<img" not in text and "\n## forged" not in text
    row = next(line for line in text.splitlines() if line.startswith("| x"))
    assert row.count("|") - row.count("\\|") == 4 and "[click](" not in text


# --------------------------------------------------------------------------- cache mounts on persistent runners

FAKE_DOCKER = """#!/bin/sh
printf '%s\n' "$*" >> "$FAKE_DOCKER_LOG"
made="$FAKE_DOCKER_LOG.builders"
case "$*" in
  "version --format {{.Client.Version}}"*"{{.Server.Version}}"*) printf '%s\n%s\n' 27.3.1 27.3.1 ;;
  "buildx version") echo "github.com/docker/buildx v0.17.0" ;;
  "context show") echo default ;;
  "--context default info"*) echo '[["driver-type","io.containerd.snapshotter.v1"]]' ;;
  "buildx create --name "*) set -- $*; echo "$4" >> "$made" ;;
  "buildx inspect default") printf 'Name: default\nDriver: docker\nBuildKit version: v0.16.0\n' ;;
  "buildx inspect "*) set -- $*; name=$(eval echo \\${$#})
     grep -qx "$name" "$made" 2>/dev/null || exit 1
     printf 'Name: %s\nDriver: docker-container\nBuildKit version: v0.17.0\n' "$name" ;;
esac
exit 0
"""


@pytest.mark.parametrize("context, runner, builder, pruned", [
    (TRUSTED_PUSH, "self-hosted", "default", False),
    (BRANCH_PUSH, "self-hosted", "default", True),
    (SAME_REPO_PR, "self-hosted", "default", True),
    (TRUSTED_PUSH, "github-hosted", "ghbuild", False),
    (BRANCH_PUSH, "github-hosted", "ghbuild-untrusted", False),
], ids=["trusted", "branch", "same-repo PR", "hosted trusted", "hosted branch"])
def test_untrusted_builds_never_leave_cache_mounts_for_trusted_ones(project, tmp_path, context, runner, builder,
                                                                     pruned):
    """GitHub-hosted: one docker-container builder per trust level (the runner is thrown away after the job).
    Self-hosted: the engine's own builder, which every build on that engine shares, so an untrusted build's
    cache mounts are pruned when it ends."""
    fake = tmp_path / "docker"
    fake.write_text(FAKE_DOCKER)
    fake.chmod(0o755)
    log = tmp_path / "docker.log"
    env = {"GHBUILD_DOCKER_CLI": str(fake), "FAKE_DOCKER_LOG": str(log), "RUNNER_ENVIRONMENT": runner,
           "GHBUILD_SCCACHE_ENABLED": "false"}
    proc = ghbuild(project, "build", "--image", "app", "--arch", "amd64", "--sha", SHA, *context, env=env)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    created = [c for c in calls if c.startswith("buildx create")]
    if builder == "default":
        assert created == [], calls
    else:
        assert [c.split()[3] for c in created] == [builder] and "--driver docker-container" in created[0], calls
    assert any(c.startswith("buildx build") and f"--builder {builder}" in c for c in calls), calls
    prune = f"buildx prune --builder {builder} --force --filter type=exec.cachemount"
    assert (prune in calls) is pruned, calls


# --------------------------------------------------------------------------- publishing and retention

PUBLISH_CONFIG = CONFIG.replace('staging = "ghcr.io/{owner}/ci-{image}"',
                                'staging = "127.0.0.1:9/{owner}/ci-{image}"\npublish = "127.0.0.1:9/{owner}/{image}"')
UNTRUSTED_RUNS = {
    "branch push": BRANCH_PUSH,
    "same-repository PR": SAME_REPO_PR,
    "fork PR": ["--event", "pull_request", "--repository", "org/project", "--pr", "8", "--base", "main",
                "--head-ref", "main", "--head-repo", "someone/project", "--default-branch", "main"],
    "tag push": ["--event", "push", "--repository", "org/project", "--ref", "refs/tags/v1", "--default-branch", "main"],
    "merge queue": ["--event", "merge_group", "--repository", "org/project", "--base", "main",
                    "--ref", "refs/heads/gh-readonly-queue/main/pr-1-" + "a" * 40, "--default-branch", "main"],
    "unprotected self-named stable branch": ["--event", "push", "--repository", "org/project", "--ref", "feature",
                                             "--default-branch", "main", "--ref-protected", "false"],
    "another repository": ["--event", "push", "--repository", "someone/project", "--ref", "main",
                           "--default-branch", "main"],
}


@pytest.mark.parametrize("command", [["publish", "nightly"], ["publish", "release", "--version", "1.0.0"],
                                     ["prune", "--apply"]], ids=["nightly", "release", "prune"])
@pytest.mark.parametrize("run", list(UNTRUSTED_RUNS))
def test_publishing_and_deleting_tags_is_refused_outside_a_trusted_run(project, run, command):
    (project / "ghbuild.toml").write_text(PUBLISH_CONFIG.replace("[registries]", '[trust]\ncanonical-repository = '
                                                                 '"org/project"\nstable-branch = "feature"\n\n'
                                                                 "[registries]"), "utf-8")
    proc = ghbuild(project, *command, "--sha", SHA, *UNTRUSTED_RUNS[run])
    assert proc.returncode == 6, proc.stderr
    what = " ".join(command[:2]) if command[0] == "publish" else "prune --apply"
    assert proc.stderr.startswith(f"ghbuild: refused: {what}: ")
    assert "127.0.0.1:9" not in proc.stderr          # refused before any registry was asked


@pytest.mark.parametrize("command", [["publish", "nightly"], ["prune", "--apply"]], ids=["nightly", "prune"])
@pytest.mark.parametrize("run", ["fork PR", "unprotected self-named stable branch"])
def test_overrides_in_a_callers_workflow_cannot_make_its_run_trusted(project, run, command):
    """The reusable workflows' `overrides` input becomes GHBUILD_* variables (`ghbuild overrides`), and a pull
    request's or a feature branch's caller workflow is its own: naming its branch stable and the repository
    canonical, in any spelling, still gets publishing refused. (A fork's own repository, on its own stable
    branch, is trusted for its own tags: that is how forks publish their nightlies.)"""
    from ghbuild.config import overrides

    (project / "ghbuild.toml").write_text(PUBLISH_CONFIG, "utf-8")
    env = overrides.parse("trust.canonical-repository=org/project\nGHBUILD_TRUST_STABLE_BRANCH=feature\n"
                          "Trust.Stable-Branch=main")
    proc = ghbuild(project, *command, "--sha", SHA, *UNTRUSTED_RUNS[run], env=env)
    assert proc.returncode == 6, proc.stderr
    assert "127.0.0.1:9" not in proc.stderr          # refused before any registry was asked


def test_a_trusted_run_and_dry_runs_get_past_the_trust_check(project):
    """The same commands in the trusted run (and a dry run anywhere) go on to ask the registry: here an empty
    one, which answers 404 to everything."""
    from fakes.httpserver import FakeServer

    with FakeServer() as empty:
        config = PUBLISH_CONFIG.replace("127.0.0.1:9", empty.host)
        trusted = _nightly(project, {"app-amd64": _record(ref=f"{empty.host}/org/ci-app@sha256:" + "b" * 64)},
                           config=config)
        assert trusted.returncode == 13 and "staging image(s) missing" in trusted.stderr, trusted.stderr
        asked = len(empty.requests)
        assert asked > 0
        dry = ghbuild(project, "prune", "--sha", SHA, *BRANCH_PUSH)
        assert dry.returncode == 0, dry.stderr
        assert len(empty.requests) > asked


def _nightly(project: Path, records: dict | None, *extra: str,
             config: str = PUBLISH_CONFIG) -> subprocess.CompletedProcess:
    (project / "ghbuild.toml").write_text(config, "utf-8")
    args = []
    if records is not None:
        (project / "records.json").write_text(json.dumps(records), "utf-8")
        args = ["--records", "records.json"]
    return ghbuild(project, "publish", "nightly", "--sha", SHA, *args, *extra, *TRUSTED_PUSH)


def _record(**changes) -> dict:
    digest = "sha256:" + "b" * 64
    record = {"image": "app", "arch": "amd64", "platform": "linux/amd64", "digest": digest,
              "ref": f"127.0.0.1:9/org/ci-app@{digest}", "sha": SHA, "trusted": True}
    record.update(changes)
    return record


@pytest.mark.parametrize("records, message", [
    (None, "no build records (--records): only what the trusted build"),
    ({}, f"no trusted build record of {SHA}"),
    ({"app-amd64": _record(trusted=False)}, "written by an untrusted build"),
    ({"app-amd64": _record(sha="f" * 40)}, f"is of commit {'f' * 40}, not {SHA}"),
    ({"app-amd64": _record(ref="127.0.0.1:9/someone/else@sha256:" + "b" * 64)}, "is not in the staging repository"),
    ({"app-amd64": _record(digest="sha256:" + "c" * 64)}, "do not agree"),
    ({"app-amd64": _record(arch="arm64")}, "names app/arm64"),
])
def test_a_nightly_publishes_only_what_the_trusted_build_recorded(project, records, message):
    """The staging tag `<sha>-<arch>` can be moved by any job with write access to the staging package:
    publishing takes the digest from the trusted build's record, and refuses anything less, before it
    asks a registry."""
    proc = _nightly(project, records)
    assert proc.returncode == 13, proc.stderr
    assert message in proc.stderr
    assert "retry" not in proc.stderr                 # refused before any registry was asked


def test_release_records_come_only_from_a_successful_push_run_of_the_stable_branch():
    """`publish release --records-from ci.yml`: a pull request's run, a branch's run, another commit's run or a
    failed run of the same workflow never supply the records, even when they carry the artifact."""
    from fakes import github as github_fake

    from ghbuild import errors
    from ghbuild.publish import records

    sha = "a" * 40
    good = json.dumps({"cpu-amd64": {"digest": "sha256:" + "1" * 64, "trusted": True}}).encode()
    forged = json.dumps({"cpu-amd64": {"digest": "sha256:" + "6" * 64, "trusted": True}}).encode()
    with github_fake.start(tokens=("t",)) as gh:
        env = {"GITHUB_TOKEN": "t", "GITHUB_API_URL": gh.url}
        gh.add_commits("org/project", "main", ["b" * 40, sha, "9" * 40])
        for event, branch, head, conclusion in (("pull_request", "main", sha, "success"),
                                                ("push", "feature", sha, "success"),
                                                ("push", "main", "b" * 40, "success"),
                                                ("push", "main", sha, "failure")):
            gh.add_workflow_run("org/project", "ci.yml", head_sha=head, branch=branch, event=event,
                                conclusion=conclusion, artifacts={records.ARTIFACT: {records.ARTIFACT_FILE: forged}})
        with pytest.raises(errors.PublishError, match=f"no trusted build record of {sha}"):
            records.fetch(env, "org/project", "ci.yml", sha, "main")
        gh.add_workflow_run("org/project", "ci.yml", head_sha=sha, branch="main", event="push",
                            artifacts={records.ARTIFACT: {records.ARTIFACT_FILE: good}})
        assert records.fetch(env, "org/project", "ci.yml", sha, "main") == json.loads(good)
        with pytest.raises(errors.PublishError, match="GITHUB_TOKEN"):
            records.fetch({"GITHUB_API_URL": gh.url}, "org/project", "ci.yml", sha, "main")


def test_release_records_are_refused_from_a_tag_named_like_the_branch_or_a_commit_off_it():
    """A push of a tag named `main` makes a run GitHub reports with head_branch `main`, its workflow file taken
    from the tag's commit (the tag pusher's own): neither its commit nor its run may supply release records."""
    from fakes import github as github_fake

    from ghbuild import errors
    from ghbuild.publish import records

    on_main, off_main = "a" * 40, "c" * 40
    forged = json.dumps({"cpu-amd64": {"digest": "sha256:" + "6" * 64}}).encode()
    artifact = {records.ARTIFACT: {records.ARTIFACT_FILE: forged}}
    with github_fake.start(tokens=("t",)) as gh:
        env = {"GITHUB_TOKEN": "t", "GITHUB_API_URL": gh.url}
        gh.add_commits("org/project", "main", ["b" * 40, on_main])
        gh.add_tag("org/project", "main", off_main)
        gh.add_workflow_run("org/project", "ci.yml", head_sha=off_main, branch="main", artifacts=artifact)
        with pytest.raises(errors.PublishError, match=f"{off_main} is not on main of org/project"):
            records.fetch(env, "org/project", "ci.yml", off_main, "main")
        # On the branch, but while a tag of that name exists no run of the branch can be told from one of the tag.
        gh.add_workflow_run("org/project", "ci.yml", head_sha=on_main, branch="main", artifacts=artifact)
        with pytest.raises(errors.PublishError, match="a tag named 'main' exists in org/project"):
            records.fetch(env, "org/project", "ci.yml", on_main, "main")


def test_a_newer_run_of_a_deleted_tag_named_like_the_branch_neither_blocks_nor_supplies_the_release():
    """A tag `main` pushed at a commit of main (its run: head_branch `main`, records of an untrusted build),
    then deleted: the newest matching run is the tag's. It is passed over; the branch's own run supplies."""
    from fakes import github as github_fake

    from ghbuild import errors
    from ghbuild.publish import records

    sha = "a" * 40
    trusted = json.dumps({"cpu-amd64": {"digest": "sha256:" + "1" * 64, "trusted": True}}).encode()
    untrusted = json.dumps({"cpu-amd64": {"digest": "sha256:" + "6" * 64, "trusted": False}}).encode()
    with github_fake.start(tokens=("t",)) as gh:
        env = {"GITHUB_TOKEN": "t", "GITHUB_API_URL": gh.url}
        gh.add_commits("org/project", "main", [sha])
        gh.add_workflow_run("org/project", "ci.yml", head_sha=sha, branch="main",
                            artifacts={records.ARTIFACT: {records.ARTIFACT_FILE: trusted}})
        gh.add_workflow_run("org/project", "ci.yml", head_sha=sha, branch="main",       # the tag's, newer
                            artifacts={records.ARTIFACT: {records.ARTIFACT_FILE: untrusted}})
        seen: list[str] = []
        assert records.fetch(env, "org/project", "ci.yml", sha, "main", log=seen.append) == json.loads(trusted)
        assert any("holds records of an untrusted build; trying an older run" in line for line in seen)
        only_tag = "b" * 40
        gh.add_commits("org/project", "main", [only_tag])
        gh.add_workflow_run("org/project", "ci.yml", head_sha=only_tag, branch="main",
                            artifacts={records.ARTIFACT: {records.ARTIFACT_FILE: untrusted}})
        with pytest.raises(errors.PublishError, match="holds records of an untrusted build"):
            records.fetch(env, "org/project", "ci.yml", only_tag, "main")


@pytest.mark.parametrize("version", ["1!2.0", "0." + "1" * 130])
def test_a_release_version_that_makes_no_valid_tag_is_refused_before_any_write(project, version):
    """PEP 440 allows what a tag cannot hold (an epoch's `!`, 128 characters): every final tag is checked when the
    release is planned, before the first image is copied, not when its tag is pushed."""
    from ghbuild import errors
    from ghbuild.config import configfile
    from ghbuild.publish import plans

    (project / "ghbuild.toml").write_text(PUBLISH_CONFIG, "utf-8")
    options = configfile.load(str(project / "ghbuild.toml"), env={}, cwd=project)
    parsed = plans.parse_version(version)
    with pytest.raises(errors.PublishError, match=r"--version: .* makes the tag '.*', which a registry refuses"):
        plans.release_plan(options, "app", SHA, "org", parsed, [])


def _actions_push(project: Path, ref: str, **extra: str) -> dict[str, str]:
    """The variables GitHub sets for a push of `ref` in org/project (default branch main)."""
    payload = project.parent / "push.json"
    payload.write_text(json.dumps({"ref": ref, "after": SHA, "repository": {"full_name": "org/project",
                                                                              "default_branch": "main"}}), "utf-8")
    return {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": str(payload),
            "GITHUB_REPOSITORY": "org/project", "GITHUB_REF": ref, "GITHUB_REF_NAME": ref.rsplit("/", 1)[-1],
            "GITHUB_SHA": SHA, "RUNNER_ENVIRONMENT": "github-hosted", **extra}


def test_inside_actions_the_branchs_config_does_not_make_it_trusted(project):
    """A branch names itself stable in its own ghbuild.toml; a ruleset on the branch (any ruleset: a name pattern
    blocking deletion) makes GitHub report it protected. Inside Actions the file's trust.* is not read: the run
    stays untrusted and gets no S3 credentials. The same value from a variable (the caller's overrides) counts."""
    (project / "ghbuild.toml").write_text(CONFIG + '\n[trust]\nstable-branch = "feature"\n'
                                          'self-hosted-for-forks = true\n\n[build]\nbuilder = "tcp://10.0.0.9:1234"\n')
    env = {**_actions_push(project, "refs/heads/feature", GITHUB_REF_PROTECTED="true"), **AWS}
    proc = ghbuild(project, "build", "--image", "app", "--arch", "amd64", "--dry-run", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert all(":main-" not in ref for ref in report["cache_to"]), report["cache_to"]
    assert "--builder ghbuild-untrusted " in report["command"] and "ghbuild-remote" not in report["command"]
    plan = ghbuild(project, "plan", "--json", env=env)
    assert plan.returncode == 0 and json.loads(plan.stdout)["context"]["trusted"] is False, plan.stdout
    text = " ".join(json.loads(plan.stdout)["warnings"])
    for key in ("trust.stable-branch", "trust.self-hosted-for-forks"):
        assert f"{key} in the config file ignored inside GitHub Actions" in text, key
    # build.builder stays in the file (a trusted run's checkout is the trusted branch's); untrusted builds ignore it.
    assert "build.builder in the config file" not in text
    from_variable = ghbuild(project, "plan", "--json", env={**env, "GHBUILD_TRUST_STABLE_BRANCH": "feature"})
    assert json.loads(from_variable.stdout)["context"]["trusted"] is True
    # Outside Actions (a developer's machine) the file is what there is.
    local = ghbuild(project, "plan", "--json", *BRANCH_PUSH, "--ref-protected", "true", "--sha", SHA)
    assert json.loads(local.stdout)["context"]["trusted"] is True


@pytest.mark.parametrize("flags", [["--ref", "main"], ["--repository", "org/project"], ["--default-branch", "feature"],
                                   ["--ref-protected", "true"], ["--event-path", "other.json"],
                                   ["--pr", "7", "--head-repo", "org/project"]])
def test_inside_actions_context_flags_cannot_redescribe_the_run(project, flags):
    """A step that passes --ref main on a branch's push (or is handed it) must not plan a trusted run: inside
    GitHub Actions only GitHub's own variables and payload say what the run is."""
    env = {**_actions_push(project, "refs/heads/feature"), **AWS}
    proc = ghbuild(project, "plan", "--json", *flags, env=env)
    assert proc.returncode == 6 and proc.stdout == ""
    assert proc.stderr.strip().splitlines()[-1].endswith(
        "context flags are for local use; inside GitHub Actions the run's repository, ref and pull request come "
        "from GitHub (GITHUB_* and the event payload)")
    assert flags[0] in proc.stderr
