"""Where the cosign keys live and who signs what (issue 26, findings 2 and 4). A repository secret is readable by
every branch's push runs (any writer's own workflow), so the keys are environment secrets only: `ghbuild-trusted`
for the build, `publish` for publishing, both limited to the default branch; no caller forwards them. The trusted
build (ci.yml's push run) and the release must agree: the release accepts the public key or the keyless identity
of the stable branch's runs, so a build that signs keyless and a publish holding the public key both pass."""

from __future__ import annotations

import re
from pathlib import Path

from ruamel.yaml import YAML

from ghbuild import adopt
from ghbuild.sign import policy

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = REPO / ".github" / "workflows"
COSIGN = re.compile(r"secrets\.COSIGN_\w+")


def load(path: Path) -> dict:
    return YAML(typ="safe", pure=True).load(path.read_text("utf-8"))


def _jobs() -> dict[tuple[str, str], dict]:
    return {(path.name, job_id): job for path in sorted(WORKFLOWS.glob("*.yml"))
            for job_id, job in (load(path).get("jobs") or {}).items()}


def test_no_caller_forwards_a_cosign_secret():
    """A call of a reusable workflow hands on the caller's secrets, which are the repository's: none of them."""
    for (workflow, job_id), job in _jobs().items():
        if "uses" in job:
            assert not COSIGN.search(str(job.get("secrets") or {})), (workflow, job_id)
            assert job.get("secrets") != "inherit", (workflow, job_id)
    caller = adopt.render_workflow(adopt.Pin("ghbuild/ghbuild", "0" * 40, "test"))
    assert "COSIGN" not in caller and "secrets: inherit" not in caller


def test_the_jobs_that_read_the_keys_run_in_their_environments():
    readers = {key: job.get("environment") for key, job in _jobs().items() if COSIGN.search(str(job.get("steps")))}
    assert readers == {("build-images.yml", "build-trusted"): "${{ inputs.trusted-environment }}",
                       ("build-images.yml", "build"): None,          # the same steps; gated on a trusted plan
                       ("nightly.yml", "publish"): "publish", ("release.yml", "release"): "publish"}
    inputs = load(WORKFLOWS / "build-images.yml")["on"]["workflow_call"]["inputs"]
    assert inputs["trusted-environment"]["default"] == "ghbuild-trusted"


def test_no_document_advises_repository_secrets_for_the_keys():
    texts = [*REPO.glob("*.md"), *(REPO / "docs").glob("*.md"), *WORKFLOWS.glob("*.yml"),
             *(REPO / ".github" / "actions").glob("*/action.yml")]
    for path in texts:
        if path.name != "CHANGELOG.md":             # history may name what it no longer advises
            assert "github://" not in path.read_text("utf-8"), path
    trust = (REPO / "docs" / "trust.md").read_text("utf-8")
    assert "environment secrets only" in trust


def test_the_release_accepts_what_cis_build_signs():
    ci = load(WORKFLOWS / "ci.yml")
    images = ci["jobs"]["images"]
    assert images["uses"].endswith("/.github/workflows/build-images.yml") and "push" in ci["on"]
    assert images["permissions"]["id-token"] == "write"        # build-trusted may sign keyless
    release = load(WORKFLOWS / "release.yml")
    job = release["jobs"]["release"]
    assert job["permissions"]["id-token"] == "write"           # the release may verify (and sign) keyless
    assert release["on"]["workflow_call"]["inputs"]["records-from"]["default"] == "ci.yml"
    step = next(s for s in job["steps"] if s.get("uses") == "$/.github/actions/publish")
    assert step["env"]["GHBUILD_VERIFY_KEY"] == ("${{ secrets.COSIGN_PUBLIC_KEY != '' && 'env://COSIGN_PUBLIC_KEY' "
                                                 "|| '' }}")
    # In that job, with a public key in the publish environment, a keyless signature still verifies.
    env = {"GITHUB_ACTIONS": "true", "ACTIONS_ID_TOKEN_REQUEST_URL": "u", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t",
           "GHBUILD_VERIFY_KEY": "env://COSIGN_PUBLIC_KEY"}
    verifier = policy.verifier(env, "owner/project", branch="main")
    assert verifier.mode == "key or keyless"
    # The workflows whose jobs sign are the ones the keyless identity accepts as ghbuild's.
    signing = {name for (name, _), job in _jobs().items() if "GHBUILD_SIGN_KEY" in str(job.get("steps"))}
    assert signing == {"build-images.yml", "nightly.yml", "release.yml"}
    assert signing <= set(policy.SIGNING_WORKFLOWS), signing
