"""The workflows themselves, run by act (host mode) against the local engine, registries and S3.

Six runs on one throwaway commit of the working tree (tests/act/harness.py), each checked in the
registries (tags, digests, architectures), not only by act's exit code:

1. ci.yml, push to the default branch: plan, cpu on amd64 and arm64 (smoke-tested), summary. Staging
   must hold `<sha>-x86_64` and `<sha>-arm64`, each really that architecture, and the reusable
   workflow's `digests` output must name exactly those digests. Both build jobs logged in.
2. ci.yml, pull request from a fork (the recorded payload, renamed): no secrets, as on GitHub. Green,
   nothing pushed (no new tag in staging), no login, `digests` is `{}`.
3. nightly.yml, schedule: builds again, then the hub must have `nightly` as an index of exactly amd64 +
   arm64 whose digests equal the staging tags', `nightly-x86_64`, `nightly-arm64`, `nightly-<sha>`;
   prune ran for real and kept them. The repository variable GHBUILD_SCCACHE_HELPER_IMAGE names the local
   helper: the nightly publishes no sccache helper of its own and builds with that one.
4. release.yml, workflow_dispatch --input version=...: `v<V>`, `v<V>-x86_64`, `v<V>-arm64` and `latest`
   on the hub with the staged digests, and the GitHub release created (tests/fakes/github.py, reached
   through GITHUB_API_URL).
5. the README's caller workflow ("The caller workflow"), verbatim, in another repository (a fork, no secrets) calling
   `ghbuild/ghbuild/.github/workflows/build-images.yml@<sha>`: green, only its own preview tag pushed.
6. ci.yml for the ROCm images on this GPU-less machine: the base job stops at `ghbuild runner-check`,
   the diagnostics are kept as an artifact, nothing is built or pushed.

Only the `cpu` image is built in 1-4 (`--var GHBUILD_IMAGES=cpu`, the repository variable the workflows
read), and only its `os-base` stage (GHBUILD_IMAGES_CPU_TARGET=os-base, a config override given as the
runner's environment): the workflows, not the compile, are under test here; the full image is the
engine tests' job, and a cold arm64 compile under emulation takes over ten minutes. That stage is also
what test_60/test_70 build, so in a full run its layers are in the BuildKit cache already. The smoke
test runs `python3 --version` in each built image (`--var GHBUILD_SMOKE_TEST`), arm64 under emulation.
"""
from __future__ import annotations

import json
import re
import sys
import uuid
from dataclasses import dataclass, field

import pytest
from act import harness
from fakes import github as github_fake
from fakes.oci import RegistryClient
from ruamel.yaml import YAML

VERSION = "1.2.3"
INDEX_TYPES = {"application/vnd.docker.distribution.manifest.list.v2+json",
               "application/vnd.oci.image.index.v1+json"}
IMAGE_TYPES = {"application/vnd.docker.distribution.manifest.v2+json", "application/vnd.oci.image.manifest.v1+json"}
ARCH_SUFFIX = {"amd64": "x86_64", "arm64": "arm64"}
ACT_TIMEOUT = 1500      # one act run; cold arm64 layers under emulation included


@dataclass
class Suite(harness.Act):
    """The act setup of this module, with where its runs write and what they were given."""

    namespace: str = ""
    staging: RegistryClient | None = None
    hub: RegistryClient | None = None
    local: dict[str, str] = field(default_factory=dict)
    aws_secret: str = ""
    secret_values: set[str] = field(default_factory=set)


@pytest.fixture(scope="module")
def act(session):
    scratch = session.workdir / "act"
    tree, sha, rewrites, wheelhouse = harness.ghbuild_checkout(scratch, f"ghbuild act test, session {session.sid}")
    namespace = f"ghbuild-test-{session.sid}-act"
    local = session.local
    # The project's registries, pointed at the local services (a session namespace).
    env = harness.project_env(local, session.base_env, wheelhouse, namespace)
    runner = Suite(tree=tree, sha=sha, scratch=scratch, env=env, rewrites=rewrites,
                   # GHBUILD_SCCACHE_HELPER_IMAGE: the helper the nightly builds with instead of publishing its
                   # own (no ghcr.io here, and no buildx for sccache-helper.yml): the one `make infra-up` pushed.
                   variables={**harness.PROJECT_VARIABLES,
                              "GHBUILD_SCCACHE_HELPER_IMAGE": local["GHBUILD_SCCACHE_HELPER_IMAGE"]},
                   namespace=namespace, staging=session.registry, hub=RegistryClient(local["GHBUILD_LOCAL_HUB"]),
                   local=local, aws_secret=session.base_env["AWS_SECRET_ACCESS_KEY"])
    session.created_repos.update({f"{namespace}/{name}{kind}" for name in ("cpu", "rocm-base", "rocm", "cache")
                                  for kind in ("", "-untrusted")})
    session.used_shas.add(sha)
    session.secrets.add(runner.aws_secret)
    try:
        yield runner
    finally:
        runner.hub.delete_repository_manifests(f"{namespace}/cpu")
        print("\nact runs: " + ", ".join(f"{r.name} {r.seconds:.0f} s (exit {r.rc})" for r in runner.runs),
              file=sys.stderr)


def trusted_secrets(act) -> dict[str, str]:
    """What GitHub gives a push or schedule run of the canonical repository."""
    secrets = harness.trusted_secrets(act.local, act.aws_secret)
    act.secret_values.update({secrets["GITHUB_TOKEN"], secrets["DOCKERHUB_TOKEN"], act.aws_secret})
    return secrets


def digest_of(reg: RegistryClient, name: str, ref: str) -> str | None:
    status, headers, _ = reg.manifest(name, ref, method="HEAD")
    return headers.get("docker-content-digest") if status == 200 else None


def architecture(reg: RegistryClient, name: str, ref: str) -> str:
    status, headers, body = reg.manifest(name, ref)
    assert status == 200, f"{name}:{ref}: HTTP {status}"
    assert headers["content-type"].split(";")[0] in IMAGE_TYPES, headers["content-type"]
    config = reg.blob_json(name, json.loads(body)["config"]["digest"])
    return f"{config['os']}/{config['architecture']}"


def staged(act) -> dict[str, str]:
    """arch -> digest of `<sha>-<suffix>` in staging (only the ones present)."""
    name = f"{act.namespace}/cpu"
    found = {}
    for arch, suffix in ARCH_SUFFIX.items():
        digest = digest_of(act.staging, name, f"{act.sha}-{suffix}")
        if digest:
            found[arch] = digest
    return found


def digests_output(run) -> dict:
    value = run.outputs("/summary").get("digests")
    assert value is not None, f"{run.name}: the summary job set no digests output:\n{run.tail()}"
    return json.loads(value)


# --------------------------------------------------------------------------- the runs


@pytest.fixture(scope="module")
def push_run(act):
    payload = harness.event_payload("push", act.sha)
    return act.run("ci-push", "push", ".github/workflows/ci.yml", payload, secrets=trusted_secrets(act),
                   timeout=ACT_TIMEOUT)


@pytest.fixture(scope="module")
def fork_pr_run(act, push_run):
    payload = harness.event_payload("pull_request", act.sha)
    tags_before = set(act.staging.tags(f"{act.namespace}/cpu") or [])
    # GitHub gives a fork's pull request no secrets, only a read-only token.
    run = act.run("ci-fork-pr", "pull_request", ".github/workflows/ci.yml", payload,
                  secrets={"GITHUB_TOKEN": f"ghs_readonly{uuid.uuid4().hex}"}, timeout=ACT_TIMEOUT)
    run.tags_before = tags_before
    return run


@pytest.fixture(scope="module")
def nightly_run(act, push_run):
    payload = harness.event_payload("schedule", act.sha)
    return act.run("nightly-schedule", "schedule", ".github/workflows/nightly.yml", payload,
                   secrets=trusted_secrets(act), timeout=ACT_TIMEOUT)


@pytest.fixture(scope="module")
def gh():
    with github_fake.start(tokens=("ghs_release_token_for_act",)) as fake:
        yield fake


@pytest.fixture(scope="module")
def release_run(act, push_run, nightly_run, gh):
    # What GitHub keeps of ci.yml's trusted push run of the commit: release.yml reads its ghbuild-digests
    # artifact through the REST API (act's artifact server has no such API; the fake serves it).
    gh.add_commits(harness.SELF_REPOSITORY, "main", [act.sha])    # the commit is on the stable branch
    gh.add_workflow_run(harness.SELF_REPOSITORY, "ci.yml", head_sha=act.sha, branch="main", event="push",
                        artifacts={"ghbuild-digests": {"ghbuild-digests.json": json.dumps(digests_output(push_run))}})
    payload = harness.event_payload("workflow_dispatch", act.sha, version=VERSION)
    secrets = {**trusted_secrets(act), "GITHUB_TOKEN": "ghs_release_token_for_act"}
    return act.run("release-dispatch", "workflow_dispatch", ".github/workflows/release.yml", payload,
                   secrets=secrets, env={"GITHUB_API_URL": gh.url}, inputs={"version": VERSION},
                   timeout=ACT_TIMEOUT)


# --------------------------------------------------------------------------- the tests


def test_the_tree_act_runs_uses_self_repository_references(act):
    """The workflows use `$/` (rewritten for act only); a workflow that drops it would be noticed."""
    assert act.rewrites.get(".github/workflows/build-images.yml", 0) >= 6, act.rewrites
    for name in ("ci.yml", "nightly.yml", "release.yml"):
        assert act.rewrites.get(f".github/workflows/{name}", 0) >= 1, act.rewrites
    # Every matrix of build-images.yml runs one entry at a time under act (its runs-on race): bases, build and
    # their -trusted twins (same steps through YAML aliases, their own strategy blocks), read as act reads them.
    assert act.rewrites.get(".github/workflows/build-images.yml#max-parallel") == 4, act.rewrites
    jobs = YAML(typ="safe").load((act.tree / ".github" / "workflows" / "build-images.yml").read_text("utf-8"))["jobs"]
    serial = {name: job["strategy"].get("max-parallel") for name, job in jobs.items() if "strategy" in job}
    assert serial == dict.fromkeys(("bases", "bases-trusted", "build", "build-trusted"), 1), serial


def test_push_to_the_default_branch_stages_both_arches(act, push_run):
    harness.assert_green(push_run, {"/plan", "/cpu-amd64", "/cpu-arm64", "/summary"})
    digests = staged(act)
    assert set(digests) == {"amd64", "arm64"}, f"staging tags: {act.staging.tags(f'{act.namespace}/cpu')}"
    name = f"{act.namespace}/cpu"
    for arch, suffix in ARCH_SUFFIX.items():
        assert architecture(act.staging, name, f"{act.sha}-{suffix}") == f"linux/{arch}"
    smoke = [line for line in push_run.log.splitlines() if "Success - Main Smoke test (command)" in line]
    assert len(smoke) == 2, "the smoke test must have run in both build jobs"
    out = digests_output(push_run)
    assert set(out) == {"cpu-amd64", "cpu-arm64"}, out
    for arch in ARCH_SUFFIX:
        entry = out[f"cpu-{arch}"]
        assert entry["digest"] == digests[arch] and entry["arch"] == arch and entry["platform"] == f"linux/{arch}"
        assert entry["ref"] == f"{act.staging.host}/{name}@{digests[arch]}"
        assert entry["sha"] == act.sha and entry["trusted"] is True
        # A trusted build signs what it records; act gives no OIDC token and no cosign key is set here, so it
        # records none and says why (publish requires a signature only on GitHub itself, not under act).
        assert entry["signature"] == "none", entry
    assert push_run.log.count("not signed: GHBUILD_SIGN_KEY is unset and this job has no GitHub OIDC token") == 2


def test_push_logged_in_with_the_job_token_and_reported_the_gha_cache(act, push_run):
    logins = [r for r in push_run.records if r["action"] == "login"]
    assert len(logins) == 2 and {r["registry"] for r in logins} == {"ghcr.io"}, logins
    assert all(r["username"] == "ghbuild-act" and r["password_set"] for r in logins)
    # act hands the steps a runtime token and its cache server (the legacy cache API) as a runner does: the
    # build step gives them to ghbuild alone, and buildx exports each arch's layers to its trusted scope there.
    handed = "ACTIONS_RUNTIME_TOKEN and ACTIONS_RESULTS_URL and ACTIONS_CACHE_URL handed to this ghbuild run only"
    assert push_run.log.count(handed) == 2, push_run.failure_context()
    assert not re.search(r"cache-(from|to) type=gha,\S*: skipped:", push_run.log)
    assert {"main-cpu-x86_64", "main-cpu-arm64"} <= push_run.gha_scopes(), push_run.gha_indexes


def test_fork_pull_request_reads_the_trusted_gha_cache_and_writes_only_its_own(act, push_run, fork_pr_run):
    """The second run of the session imports the layers the push exported (from the trusted scope), and writes
    only its own pull request's scope: no index of the trusted scope is added or replaced."""
    assert re.search(r"importing cache manifest from gha:", fork_pr_run.log), fork_pr_run.failure_context()
    assert "failed to configure gha cache importer" not in fork_pr_run.log
    trusted = {key for key in fork_pr_run.gha_indexes if key.startswith("index-main-")}
    assert trusted == {key for key in push_run.gha_indexes if key.startswith("index-main-")}
    new = fork_pr_run.gha_scopes() - push_run.gha_scopes()
    assert new and all(scope.startswith("pr-") and scope.endswith(("-cpu-x86_64", "-cpu-arm64")) for scope in new), new


def test_fork_pull_request_is_green_and_pushes_nothing(act, fork_pr_run):
    harness.assert_green(fork_pr_run, {"/plan", "/cpu-amd64", "/cpu-arm64", "/summary"})
    assert set(act.staging.tags(f"{act.namespace}/cpu") or []) == fork_pr_run.tags_before
    assert digests_output(fork_pr_run) == {}
    assert fork_pr_run.records == [], "a fork's pull request must not log in anywhere"
    assert "--push ignored" in fork_pr_run.log
    plan_outputs = fork_pr_run.outputs("/plan")
    assert plan_outputs.get("trusted") == "false", plan_outputs
    # The second run of the session: every job's setup restored the environment the push run saved (one key per
    # extras, whatever each job's RUNNER_TEMP, which act makes new for every job), nothing installed or saved.
    assert fork_pr_run.log.count("restored from the GitHub Actions cache") == 4, fork_pr_run.failure_context()
    assert "pip install ghbuild into" not in fork_pr_run.log and "cache stand-in: saved" not in fork_pr_run.log


def test_nightly_publishes_both_arches_from_staging(act, nightly_run):
    harness.assert_green(nightly_run, {"/plan", "/cpu-amd64", "/cpu-arm64", "/summary", "/publish"})
    digests = staged(act)
    assert set(digests) == {"amd64", "arm64"}
    hub, name = act.hub, f"{act.namespace}/cpu"
    status, headers, body = hub.manifest(name, "nightly")
    assert status == 200 and headers["content-type"].split(";")[0] in INDEX_TYPES, (status, headers)
    by_arch = {m["platform"]["architecture"]: m["digest"] for m in json.loads(body)["manifests"]}
    assert by_arch == digests, "nightly must be exactly amd64 + arm64, with the staged digests"
    assert digest_of(hub, name, "nightly-x86_64") == digests["amd64"]
    assert digest_of(hub, name, "nightly-arm64") == digests["arm64"]
    assert digest_of(hub, name, f"nightly-{act.sha}") == headers["docker-content-digest"]
    # prune ran for real (not its dry run) and kept this nightly
    assert "::group::prune cpu\n" in nightly_run.log and "prune cpu (dry run)" not in nightly_run.log
    assert f"nightly-{act.sha}  commit #1 of the newest" in nightly_run.log
    logins = [r for r in nightly_run.records if r["action"] == "login"]
    assert {r["registry"] for r in logins} == {"ghcr.io", "docker.io"}, logins


def test_nightly_with_a_configured_helper_publishes_none_and_builds_with_it(act, nightly_run):
    """The repository variable GHBUILD_SCCACHE_HELPER_IMAGE names the sccache helper: sccache-helper.yml is not
    called (nothing of it ran), and every build job was handed that helper as its sccache.helper-image."""
    assert not any("sccache helper" in job or "/helper " in job for job in nightly_run.jobs), nightly_run.jobs
    helper = act.local["GHBUILD_SCCACHE_HELPER_IMAGE"]
    handed = [line for line in nightly_run.log.splitlines()
              if line.rstrip().endswith(f"GHBUILD_SCCACHE_HELPER_IMAGE={helper}")]
    assert len(handed) >= 3, "plan and both build jobs must set the configured helper (ghbuild overrides)"


def test_release_promotes_the_staged_digests_and_creates_the_github_release(act, push_run, release_run, gh):
    harness.assert_green(release_run, {f"/release {VERSION}"})
    # What ci.yml's trusted push run recorded (the nightly rebuilt the commit since and moved its staging tags):
    # a release promotes the records of that run, never what a tag holds by then.
    digests = {arch: record["digest"] for arch, record in
               ((r["arch"], r) for r in digests_output(push_run).values())}
    hub, name = act.hub, f"{act.namespace}/cpu"
    assert digest_of(hub, name, f"v{VERSION}-x86_64") == digests["amd64"]
    assert digest_of(hub, name, f"v{VERSION}-arm64") == digests["arm64"]
    index = digest_of(hub, name, f"v{VERSION}")
    assert index and digest_of(hub, name, "latest") == index
    entries = json.loads(hub.manifest(name, f"v{VERSION}")[2])["manifests"]
    assert {e["platform"]["architecture"]: e["digest"] for e in entries} == digests
    created = [r for r in gh.requests if r[0] == "POST" and r[1].endswith(f"/repos/{harness.SELF_REPOSITORY}/releases")]
    assert len(created) == 1, gh.requests
    releases = gh_get(gh, f"/repos/{harness.SELF_REPOSITORY}/releases/tags/v{VERSION}")
    assert releases["target_commitish"] == act.sha
    for digest in (*digests.values(), index):
        assert digest in releases["body"]


def gh_get(gh, path: str) -> dict:
    import urllib.request

    req = urllib.request.Request(gh.url + path, headers={"Authorization": "Bearer ghs_release_token_for_act"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


# --------------------------------------------------------------------------- another repository


FORK_REPOSITORY = "someone/native-app"
FORK_CONFIG = """# A fork keeps upstream's config: it is not the canonical repository, so it writes only its own scope.
[trust]
canonical-repository = "upstream/native-app"

[images.cpu]
dockerfile = "Dockerfile"
platforms = ["linux/amd64"]
"""
FORK_DOCKERFILE = """ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN echo "built by the fork's own workflow" > /etc/native-app
"""


def doc_caller_workflow(sha: str) -> str:
    """The caller workflow of the README ("The caller workflow"), pinned to this session's ghbuild commit."""
    text = (harness.REPO / "README.md").read_text("utf-8").split("## The caller workflow", 1)[1]
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    pinned, n = re.subn(r"(build-images\.yml@)\S+", rf"\g<1>{sha}", block)
    assert n == 1, "the doc's caller must call build-images.yml once"
    return pinned


@pytest.fixture(scope="module")
def fork_caller_run(act, session):
    """The README's fork workflow, verbatim, in another repository without secrets (only the job
    token): ghbuild's reusable workflow and its `$/` actions come from ghbuild's commit, the project
    from the fork's checkout."""
    tree = act.scratch / "fork-repo"
    sha = harness.make_repository(tree, {".github/workflows/images.yml": doc_caller_workflow(act.sha),
                                         "ghbuild.toml": FORK_CONFIG, "Dockerfile": FORK_DOCKERFILE},
                                  FORK_REPOSITORY, f"fork of native-app, session {session.sid}")
    namespace = f"{act.namespace}-fork"
    staging = f"{session.local['GHBUILD_LOCAL_STAGING']}/{namespace}"
    session.created_repos.update({f"{namespace}/{name}"
                                  for name in ("cpu", "cache", "cpu-untrusted", "cache-untrusted")})
    session.used_shas.add(sha)
    env = {"GHBUILD_IMAGES_CPU_TARGET": None,      # the fork's cpu image has no os-base stage
           "GHBUILD_REGISTRIES_STAGING": f"{staging}/{{image}}", "GHBUILD_REGISTRIES_CACHE": f"{staging}/cache",
           "GHBUILD_REGISTRIES_PUBLISH": None}
    run = act.run("fork-caller-push", "push", ".github/workflows/images.yml",
                  harness.event_payload("push", sha, repository=FORK_REPOSITORY),
                  secrets={"GITHUB_TOKEN": f"ghs_fork{uuid.uuid4().hex}"}, env=env, tree=tree, timeout=ACT_TIMEOUT)
    run.sha, run.namespace = sha, namespace
    return run


def test_the_documented_caller_builds_in_a_fork_without_secrets(act, fork_caller_run):
    run = fork_caller_run
    harness.assert_green(run, {"/plan", "/cpu-amd64", "/summary"})
    name = f"{run.namespace}/cpu-untrusted"      # not the canonical repository: its untrusted repository
    tags = act.staging.tags(name) or []
    own = [t for t in tags if re.fullmatch(rf"preview-main-[0-9a-f]{{12}}-{run.sha}-x86_64", t)]
    assert len(own) == 1 and len(tags) == 1, f"only its own preview tag, got {tags}"
    assert not act.staging.tags(f"{run.namespace}/cpu")
    digest = digest_of(act.staging, name, own[0])
    assert digests_output(run) == {"cpu-amd64": {"image": "cpu", "arch": "amd64", "platform": "linux/amd64",
                                                 "digest": digest, "ref": f"{act.staging.host}/{name}@{digest}",
                                                 "sha": run.sha, "trusted": False, "signature": "none"}}
    assert architecture(act.staging, name, own[0]) == "linux/amd64"
    # ghbuild's actions came from ghbuild's commit (outside the fork's workspace), not from the fork.
    assert f"ghbuild-ghbuild-.github-actions-setup@{act.sha}" in run.log
    assert not (act.scratch / "fork-repo" / ".github" / "actions").exists()
    # No AWS secrets: sccache degrades, the build does not fail; the job token logs in to ghcr.io.
    assert re.search(r"sccache (anonymous|local)", run.log), "the degraded sccache mode must be reported"
    assert [(r["registry"], r["password_set"]) for r in run.records] == [("ghcr.io", True)]


# --------------------------------------------------------------------------- ROCm on a runner without GPUs


@pytest.fixture(scope="module")
def rocm_run(act, push_run):
    """ci.yml for the ROCm images on this machine: the self-hosted labels mapped to the host, rocm-base
    on the CPU stand-in (the machine's GHBUILD_IMAGES_ROCM_BASE_* settings), and no AMD GPU."""
    env = {key: act.local[key] for key in ("GHBUILD_IMAGES_ROCM_BASE_BASE_IMAGE", "GHBUILD_IMAGES_ROCM_BASE_BUILD_ARGS")
           if key in act.local}
    saved = dict(act.variables)
    act.variables["GHBUILD_IMAGES"] = "rocm"
    # The runner check's disk floor through the repository variable: this test must not depend on the
    # host's free space (the default, 50GB, is what a ROCm build needs, not what a CPU stand-in does).
    act.variables["GHBUILD_RUNNER_MIN_FREE_DISK"] = "1GB"
    try:
        return act.run("ci-push-rocm", "push", ".github/workflows/ci.yml", harness.event_payload("push", act.sha),
                       secrets=trusted_secrets(act), env=env, timeout=ACT_TIMEOUT)
    finally:
        act.variables.clear()
        act.variables.update(saved)


def test_rocm_base_is_ensured_and_the_gpu_job_stops_at_the_runner_check(act, rocm_run):
    """The plan asks for rocm-base first (its identity computed in the plan job). The base job runs on
    the `[self-hosted, linux, rocm]` labels, checks the runner without GPUs (`--gpus 0`: a build needs
    none) and finds or builds rocm-base on the CPU stand-in with `ensure-base`, tagged by identity. The
    rocm job wants a GPU smoke test: `ghbuild runner-check` finds no /dev/kfd and fails before anything
    is built, `ghbuild diagnose` writes its bounded report, kept as an artifact; nothing of rocm is pushed."""
    run = rocm_run
    assert run.rc != 0
    bases = json.loads(run.outputs("/plan")["bases"])["include"]
    assert [(b["image"], b["runs_on"]) for b in bases] == [("rocm-base", ["self-hosted", "linux", "rocm"])]
    identity = bases[0]["identity"]
    assert re.fullmatch(r"[0-9a-f]{64}", identity), bases
    jobs = run.jobs
    assert jobs.get("images/build images/base rocm-base amd64") == "succeeded", jobs
    assert f"rocm-base-{identity}" in (act.staging.tags(f"{act.namespace}/rocm-base") or [])
    assert jobs.get("images/build images/rocm-amd64") == "failed", jobs
    assert jobs.get("images/build images/summary") == "succeeded", jobs
    assert "FAIL  kfd: /dev/kfd does not exist" in run.log
    assert re.search(r"ok +disk: .* free on .*, need 1\.00 GB", run.log), "the variable sets the disk floor"
    assert "Failure - Main Check the self-hosted runner" in run.log
    assert "Build rocm for linux/amd64" not in run.log.split("Failure - Main Check the self-hosted runner")[1]
    report = run.artifacts / "ghbuild-diagnose-rocm-amd64"
    assert (report / "index.json").is_file() and (report / "summary.md").is_file(), list(report.glob("*"))
    assert digests_output(run) == {}
    assert not act.staging.tags(f"{act.namespace}/rocm")


def test_no_secret_in_any_act_log(act, push_run, fork_pr_run, nightly_run, release_run, fork_caller_run, rocm_run):
    """Last: no secret value handed to any act run is in its log (act masks the ones it knows, ghbuild
    masks the AWS key with ::add-mask::; this catches a value printed in a form neither would catch)."""
    leaks = [f"{run.name}: line {n}" for run in act.runs for n, line in enumerate(run.log.splitlines(), 1)
             if any(secret in line for secret in act.secret_values) and not line.lstrip().startswith("::add-mask::")]
    assert leaks == []
