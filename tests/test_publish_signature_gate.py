"""A publish that can neither verify the staging signatures nor sign fails closed in GitHub Actions.

The pure decision (ghbuild.sign.policy.unchecked_publish) per case, then the CLI as a workflow step runs it: in
Actions (a push to the default branch, the trusted run) without GHBUILD_VERIFY_KEY and without an OIDC token, a
nightly whose record points at a staging image is refused before any registry is asked; act and a laptop go on,
saying plainly that nothing was verified; GHBUILD_REQUIRE_SIGNATURE=false goes on and says so in the summary.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_in_process as ghbuild
from conftest import write_project
from fakes.httpserver import FakeServer

from ghbuild.errors import ConfigError
from ghbuild.sign import policy

SHA = "0123456789abcdef0123456789abcdef01234567"
OIDC = {"ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.example/x", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t"}
ACTIONS = {"GITHUB_ACTIONS": "true"}
ACT = {"GITHUB_ACTIONS": "true", "ACT": "true"}


def decide(env: dict[str, str], dry_run: bool = False) -> policy.Unchecked | None:
    return policy.unchecked_publish(env, policy.verifier(env, "org/project"), policy.signer(env), "publish nightly",
                                    dry_run)


@pytest.mark.parametrize("env", [
    {**ACTIONS, **OIDC},                                                     # keyless both ways
    {**ACTIONS, "GHBUILD_VERIFY_KEY": "k.pub", "GHBUILD_SIGN_KEY": "env://K"},
    {"GHBUILD_VERIFY_KEY": "k.pub", "GHBUILD_SIGN_KEY": "k.key"},            # a laptop with the keys
], ids=["keyless", "key in actions", "key locally"])
def test_a_publish_that_verifies_and_signs_passes(env):
    assert decide(env) is None


def test_in_actions_without_a_key_or_token_it_is_refused_saying_what_to_set():
    refused = decide(ACTIONS)
    assert refused is not None and refused.refuse
    assert "cannot verify the staging images' signatures" in refused.message
    assert "`id-token: write`" in refused.message and "GHBUILD_VERIFY_KEY" in refused.message
    assert "nothing was written" in refused.message and "\n" not in refused.message
    # a verify key alone: the staging images verify, but what is published could not be signed
    unsigned = decide({**ACTIONS, "GHBUILD_VERIFY_KEY": "k.pub"})
    assert unsigned is not None and unsigned.refuse and "GHBUILD_SIGN_KEY" in unsigned.message
    assert "cannot sign what it publishes" in unsigned.message and "VERIFY" not in unsigned.message


@pytest.mark.parametrize("env, dry_run", [({}, False), (ACT, False), (ACTIONS, True)],
                         ids=["laptop", "act", "dry run in actions"])
def test_outside_actions_and_in_dry_runs_it_warns_that_nothing_was_verified(env, dry_run):
    warned = decide(env, dry_run)
    assert warned is not None and not warned.refuse
    assert warned.message.startswith("publish nightly: NOT VERIFIED and NOT SIGNED: ")
    assert "can forge" in warned.message
    assert ("would refuse" in warned.message) is dry_run


def test_the_opt_out_comes_from_the_variable_and_is_loud():
    opted = decide({**ACTIONS, policy.REQUIRE_SIGNATURE: "False"})
    assert opted is not None and not opted.refuse
    assert "NOT VERIFIED and NOT SIGNED" in opted.message and "GHBUILD_REQUIRE_SIGNATURE=false" in opted.message
    assert decide({**ACTIONS, policy.REQUIRE_SIGNATURE: "true"}).refuse      # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="GHBUILD_REQUIRE_SIGNATURE='no': expected true or false"):
        decide({**ACTIONS, policy.REQUIRE_SIGNATURE: "no"})


# --------------------------------------------------------------------------- the CLI, as the publish job runs it

CONFIG = """\
[trust]
canonical-repository = "org/project"

[registries]
cache = "{host}/org/cache"
staging = "{host}/{{owner}}/ci-{{image}}"
publish = "{host}/{{owner}}/{{image}}"

[images.app]
dockerfile = "Dockerfile"
platforms = ["linux/amd64"]
"""


def _actions_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The trusted run as GitHub describes it: a push to the default branch of the canonical repository."""
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"ref": "refs/heads/main", "after": SHA, "repository": {
        "full_name": "org/project", "default_branch": "main", "owner": {"login": "org"}}}), "utf-8")
    summary = tmp_path / "summary.md"
    summary.touch()
    return {**ACTIONS, "GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": str(event), "GITHUB_REPOSITORY": "org/project",
            "GITHUB_REF": "refs/heads/main", "GITHUB_SHA": SHA, "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_STEP_SUMMARY": str(summary), **extra}


@pytest.fixture
def staging(tmp_path: Path):
    """An empty registry (404 to everything) and a project whose record points at an image there: what an
    untrusted job with a staging write token could have pushed, labelled, and had recorded."""
    with FakeServer() as registry:
        project = write_project(tmp_path, CONFIG.format(host=registry.host))
        digest = "sha256:" + "b" * 64
        (project / "records.json").write_text(json.dumps({"app-amd64": {
            "image": "app", "arch": "amd64", "platform": "linux/amd64", "digest": digest,
            "ref": f"{registry.host}/org/ci-app@{digest}", "sha": SHA, "trusted": True}}), "utf-8")
        yield project, registry


def test_in_actions_a_publish_without_key_or_token_is_refused_before_any_request(staging, tmp_path):
    project, registry = staging
    proc = ghbuild(project, "publish", "nightly", "--records", "records.json", env=_actions_env(tmp_path))
    assert proc.returncode == 13, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ghbuild: not verified: publish nightly: refused in GitHub Actions: "), last
    assert "`id-token: write`" in last and "GHBUILD_VERIFY_KEY" in last
    assert "Traceback" not in proc.stderr
    assert registry.requests == []                      # nothing read, nothing written
    assert "refused in GitHub Actions" in (tmp_path / "summary.md").read_text()


@pytest.mark.parametrize("extra, said", [({"ACT": "true"}, "outside GitHub Actions publishing goes on"),
                                         ({policy.REQUIRE_SIGNATURE: "false"}, "opted out of signatures")],
                         ids=["act", "opt-out"])
def test_act_and_the_opt_out_go_on_and_say_so(staging, tmp_path, extra, said):
    project, registry = staging
    proc = ghbuild(project, "publish", "nightly", "--records", "records.json", env=_actions_env(tmp_path, **extra))
    # past the gate: the (empty) staging registry is asked, and answers that the image is missing
    assert proc.returncode == 13 and "staging image(s) missing" in proc.stderr, proc.stderr
    assert registry.requests
    assert "NOT VERIFIED and NOT SIGNED" in proc.stderr and said in proc.stderr


def test_the_summary_shows_what_was_not_checked_as_a_warning():
    from ghbuild.publish import report
    from ghbuild.publish.results import PublishRun

    opted = decide({**ACTIONS, policy.REQUIRE_SIGNATURE: "false"})
    assert opted is not None
    text = report.summary(PublishRun(kind="nightly", sha=SHA, results=[], unchecked=opted.message))
    assert "> [!WARNING]\n> publish nightly: NOT VERIFIED and NOT SIGNED: " in text
    assert "[!WARNING]" not in report.summary(PublishRun(kind="nightly", sha=SHA, results=[]))
