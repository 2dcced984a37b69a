"""Who may sign keyless (issue 26): the checks ghbuild.sign.policy asks cosign for, matched the way cosign 2
matches them against a Fulcio certificate of a GitHub Actions job. The SAN is the job's job_workflow_ref (for a
job of a reusable workflow, the *called* workflow); the repository, ref, sha and trigger extensions are the
caller run's. `--certificate-identity-regexp` is a Go regexp matched against the SAN (the patterns ghbuild
writes use only syntax Go and Python read alike), `--certificate-github-workflow-*` compare for equality; the
trigger is checked on cosign's answer (`policy.trusted_trigger`)."""

from __future__ import annotations

import re

import pytest

from ghbuild.sign import policy

REPO = "owner/project"
URL = f"https://github.com/{REPO}"
TRUSTED, FEATURE, HEAD = "a" * 40, "b" * 40, "c" * 40
IDENTITY = policy.KeylessIdentity(REPO, "main")


def cert(workflow_ref: str, *, ref: str, sha: str, trigger: str, repository: str = REPO) -> dict[str, str]:
    """What Fulcio puts in a GitHub Actions job's certificate, in the names cosign's JSON output uses."""
    return {"Subject": f"https://github.com/{workflow_ref}", "Issuer": policy.GITHUB_OIDC_ISSUER,
            "githubWorkflowRepository": repository, "githubWorkflowRef": ref, "githubWorkflowSha": sha,
            "githubWorkflowTrigger": trigger}


def cosign_accepts(identity: policy.KeylessIdentity, c: dict[str, str], annotations: dict[str, str] | None = None,
                   signed: dict[str, str] | None = None) -> bool:
    """cosign verify with ghbuild's arguments (the certificate checks and the signed annotations), then
    ghbuild's trigger check on what cosign printed."""
    argv = policy.verify_args(annotations or {policy.LABEL_SOURCE: URL}, "r@sha256:" + "0" * 64, identity=identity)
    flags = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--certificate")}
    wanted = dict(argv[i + 1].split("=", 1) for i in range(len(argv) - 1) if argv[i] == "-a")
    if not re.search(flags["--certificate-identity-regexp"], c["Subject"]):
        return False
    if flags["--certificate-oidc-issuer"] != c["Issuer"]:
        return False
    extension = {"repository": "githubWorkflowRepository", "ref": "githubWorkflowRef", "sha": "githubWorkflowSha",
                 "trigger": "githubWorkflowTrigger", "name": "githubWorkflowName"}
    for name, key in extension.items():
        value = flags.get(f"--certificate-github-workflow-{name}")
        if value is not None and value != c.get(key):
            return False
    signed = signed if signed is not None else {policy.LABEL_SOURCE: URL, policy.LABEL_REVISION: TRUSTED}
    if any(signed.get(k) != v for k, v in wanted.items()):
        return False
    kept, _ = policy.trusted_trigger([{"optional": {**signed, **c}}])
    return bool(kept)


STABLE_PUSH = cert(f"{REPO}/.github/workflows/ci.yml@refs/heads/main", ref="refs/heads/main", sha=TRUSTED,
                   trigger="push")


def test_a_push_to_the_stable_branch_signs():
    assert cosign_accepts(IDENTITY, STABLE_PUSH)
    for trigger in ("schedule", "workflow_dispatch"):
        assert cosign_accepts(IDENTITY, {**STABLE_PUSH, "githubWorkflowTrigger": trigger})


@pytest.mark.parametrize("case", [
    # a pusher's own workflow on a feature branch, granted id-token: write
    cert(f"{REPO}/.github/workflows/evil.yml@refs/heads/evil", ref="refs/heads/evil", sha=FEATURE, trigger="push"),
    # a same-repository pull request
    cert(f"{REPO}/.github/workflows/ci.yml@refs/pull/7/merge", ref="refs/pull/7/merge", sha=FEATURE,
         trigger="pull_request"),
    # pull_request_target / issue_comment / workflow_run run on the default branch, often with a PR's code
    cert(f"{REPO}/.github/workflows/preview.yml@refs/heads/main", ref="refs/heads/main", sha=TRUSTED,
         trigger="pull_request_target"),
    cert(f"{REPO}/.github/workflows/bot.yml@refs/heads/main", ref="refs/heads/main", sha=TRUSTED,
         trigger="issue_comment"),
    # a branch pushed at the trusted commit
    cert(f"{REPO}/.github/workflows/ci.yml@refs/heads/copy-of-main", ref="refs/heads/copy-of-main", sha=TRUSTED,
         trigger="push"),
    # a tag pushed at the trusted commit (anyone with write access)
    cert(f"{REPO}/.github/workflows/ci.yml@refs/tags/v9", ref="refs/tags/v9", sha=TRUSTED, trigger="push"),
    # another repository's workflow (the SAN), even if the repository extension were the canonical one
    cert("attacker/tools/.github/workflows/sign.yml@refs/heads/main", ref="refs/heads/main", sha=TRUSTED,
         trigger="push"),
    # a workflow of the canonical repository from another ref, called from the stable branch
    cert(f"{REPO}/.github/workflows/sign.yml@refs/heads/evil", ref="refs/heads/main", sha=TRUSTED, trigger="push"),
    # the stable branch's name as a prefix of another branch's
    cert(f"{REPO}/.github/workflows/ci.yml@refs/heads/main-evil", ref="refs/heads/main-evil", sha=TRUSTED,
         trigger="push"),
    # a fork's run (the repository extension)
    cert("someone/project/.github/workflows/ci.yml@refs/heads/main", ref="refs/heads/main", sha=TRUSTED,
         trigger="push", repository="someone/project"),
], ids=["feature-branch", "same-repo-pr", "pull_request_target", "issue_comment", "other-branch", "tag",
        "other-repository-san", "own-workflow-other-ref", "branch-prefix", "fork"])
def test_no_other_run_of_the_repository_signs(case):
    assert not cosign_accepts(IDENTITY, case)


def test_ghbuilds_reusable_workflows_sign_for_an_adopter_on_its_stable_branch():
    """An adopter's ci.yml on main calls ghbuild's build-images.yml: the SAN is ghbuild's workflow, the
    repository/ref/trigger extensions the adopter's run."""
    for called in ("build-images.yml@0123456789abcdef0123456789abcdef01234567", "nightly.yml@refs/tags/v1.2.0",
                   "release.yml@refs/heads/main"):
        adopter = cert(f"ghbuild/ghbuild/.github/workflows/{called}", ref="refs/heads/main", sha=TRUSTED,
                       trigger="push")
        assert cosign_accepts(IDENTITY, adopter), called
    other = cert("ghbuild/ghbuild/.github/workflows/lint.yml@refs/heads/main", ref="refs/heads/main", sha=TRUSTED,
                 trigger="push")
    feature = cert("ghbuild/ghbuild/.github/workflows/build-images.yml@refs/heads/main", ref="refs/heads/evil",
                   sha=FEATURE, trigger="push")
    assert not cosign_accepts(IDENTITY, other) and not cosign_accepts(IDENTITY, feature)
    fork = policy.verifier({policy.WORKFLOWS_REPOSITORY_VAR: "me/ghbuild-fork"}, REPO, keyless=True).identity
    assert fork is not None and cosign_accepts(fork, cert(
        "me/ghbuild-fork/.github/workflows/build-images.yml@refs/heads/main", ref="refs/heads/main", sha=TRUSTED,
        trigger="push"))


def test_another_stable_branch_is_pinned_exactly():
    identity = policy.KeylessIdentity(REPO, "release/1.x")
    ok = cert(f"{REPO}/.github/workflows/ci.yml@refs/heads/release/1.x", ref="refs/heads/release/1.x", sha=TRUSTED,
              trigger="push")
    assert cosign_accepts(identity, ok)
    assert not cosign_accepts(identity, {**ok, "githubWorkflowRef": "refs/heads/release/1yx"})
    assert not cosign_accepts(identity, STABLE_PUSH)


def test_a_release_of_an_older_commit_verifies_by_its_signed_revision():
    """release.yml dispatched on main (head HEAD) with sha=TRUSTED: its certificate's commit is HEAD, the
    signature's revision annotation TRUSTED; the release notes' `--sha TRUSTED` must accept it."""
    release_job = cert(f"{REPO}/.github/workflows/release.yml@refs/heads/main", ref="refs/heads/main", sha=HEAD,
                       trigger="workflow_dispatch")
    wanted = policy.signed_annotations(URL, TRUSTED)
    assert cosign_accepts(IDENTITY, release_job, wanted)
    assert not cosign_accepts(IDENTITY, release_job, wanted, signed=policy.signed_annotations(URL, FEATURE))
    argv = policy.verify_args(wanted, "r@d", identity=IDENTITY)
    assert "--certificate-github-workflow-sha" not in argv


def test_a_signer_cannot_claim_a_trigger_in_an_annotation():
    """cosign writes the certificate's trigger over an annotation of the same name; a certificate without one
    does not count."""
    assert not policy.trusted_trigger([{"optional": {"githubWorkflowTrigger": "pull_request_target"}}])[0]
    assert policy.trusted_trigger([{"optional": {}}]) == ([], ["(no trigger)"])
    assert policy.trusted_trigger([{"optional": {"1.3.6.1.4.1.57264.1.2": "schedule"}}])[1] == []


def test_the_verifier_takes_the_key_or_the_keyless_identity():
    actions = {"GITHUB_ACTIONS": "true", "ACTIONS_ID_TOKEN_REQUEST_URL": "u", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t"}
    both = policy.verifier({**actions, "GHBUILD_VERIFY_KEY": "env://K"}, REPO, branch="trunk")
    assert both.mode == "key or keyless" and both.key == "env://K" and both.identity is not None
    assert both.identity.ref == "refs/heads/trunk"
    assert policy.verifier(actions, REPO).identity == policy.KeylessIdentity(REPO, "main")
    explicit = policy.verifier(actions, REPO, "cosign.pub", keyless=True)      # `ghbuild verify --key`
    assert explicit.mode == "key" and explicit.identity is None
