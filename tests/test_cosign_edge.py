"""The cosign edge (issue 26): which cosign runs, key-or-keyless verification, the trigger of a keyless
certificate, and `ghbuild verify`'s reference checks. Keyless signatures need Fulcio, which this machine has
not: a stand-in `cosign` answers `verify` with cosign 2's JSON output (the certificate's values in `optional`,
as cosign prints them) and records its arguments; `cosign version --json` with what its `gitVersion` says."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ghbuild.errors import VerificationError
from ghbuild.sign import cosign as cosign_mod
from ghbuild.sign import policy
from ghbuild.sign.cosign import Cosign, version_problem

REF = "hub.example/project@sha256:" + "1" * 64
SHA = "a" * 40
NOTES = policy.signed_annotations("https://github.com/owner/project", SHA)

STAND_IN = textwrap.dedent("""\
    #!{python}
    import json, os, sys
    argv = sys.argv[1:]
    with open(os.environ["STAND_IN_LOG"], "a") as log:
        log.write(json.dumps(argv) + "\\n")
    if argv[:1] == ["version"]:
        print(json.dumps({{"gitVersion": os.environ.get("STAND_IN_VERSION", "v2.5.3")}}))
        sys.exit(0)
    if "--key" in argv:
        if os.environ.get("STAND_IN_KEY_OK") == "1":
            print(json.dumps([{{"optional": {{}}}}]))
            sys.exit(0)
        print("Error: no matching signatures: invalid signature when validating ASN.1 encoded signature",
              file=sys.stderr)
        sys.exit(1)
    trigger = os.environ.get("STAND_IN_TRIGGER", "push")
    optional = {{"Subject": "https://github.com/owner/project/.github/workflows/ci.yml@refs/heads/main",
                "githubWorkflowTrigger": trigger, "1.3.6.1.4.1.57264.1.2": trigger}}
    print(json.dumps([{{"optional": optional}}]))
""")


@pytest.fixture
def stand_in(tmp_path, monkeypatch):
    exe = tmp_path / "bin" / "cosign"
    exe.parent.mkdir()
    exe.write_text(STAND_IN.format(python=sys.executable))
    exe.chmod(0o755)
    log = tmp_path / "argv.jsonl"
    log.touch()
    monkeypatch.setattr(cosign_mod, "_checked", {})
    env = {"PATH": f"{exe.parent}:{os.environ['PATH']}", "STAND_IN_LOG": str(log)}

    def calls() -> list[list[str]]:
        return [json.loads(line) for line in log.read_text().splitlines()]
    return env, calls


def test_cosign_other_than_2_is_refused_once_with_one_line(stand_in):
    env, calls = stand_in
    with pytest.raises(VerificationError) as raised:
        Cosign(dict(env, STAND_IN_VERSION="v3.0.2")).verify(REF, policy.verifier({}, "owner/project", "k.pub"), NOTES)
    message = str(raised.value)
    assert "cosign v3.0.2: ghbuild needs cosign 2.x" in message and "GHBUILD_COSIGN" in message
    assert "\n" not in message
    assert [c[0] for c in calls()] == ["version"]                 # nothing else ran
    assert version_problem('{"gitVersion": "v1.13.1"}') and version_problem("GitVersion:    v3.0.0\n")
    assert version_problem('{"gitVersion": "v2.5.3"}') is None
    assert version_problem("GitVersion:    devel\n") is None       # a distribution's build says no version


def test_the_key_or_the_keyless_identity_verifies(stand_in):
    """A publish holding the public key accepts what a keyless trusted build signed (finding 4)."""
    env, calls = stand_in
    actions = {"GITHUB_ACTIONS": "true", "ACTIONS_ID_TOKEN_REQUEST_URL": "u", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t",
               "GHBUILD_VERIFY_KEY": "env://COSIGN_PUBLIC_KEY"}
    verifier = policy.verifier(actions, "owner/project")
    found = Cosign(env).verify(REF, verifier, NOTES)
    assert "owner/project/.github/workflows/ci.yml@refs/heads/main (push run on refs/heads/main)" in found.signer
    verifies = [c for c in calls() if c[0] == "verify"]
    assert "--key" in verifies[0] and "--certificate-github-workflow-ref" in verifies[1]
    keyed = Cosign(dict(env, STAND_IN_KEY_OK="1")).verify(REF, verifier, NOTES)
    assert keyed.signer == "cosign key env://COSIGN_PUBLIC_KEY"


def test_a_keyless_signature_of_a_pull_request_target_run_is_refused(stand_in):
    env, _ = stand_in
    verifier = policy.verifier({}, "owner/project", keyless=True)
    with pytest.raises(VerificationError) as raised:
        Cosign(dict(env, STAND_IN_TRIGGER="pull_request_target")).verify(REF, verifier, NOTES)
    assert "signed only by runs triggered by pull_request_target, not push, schedule or workflow_dispatch" in str(
        raised.value)


def _ghbuild(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ghbuild", "verify", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})}, cwd=Path(__file__).parent)


@pytest.mark.parametrize("reference", ["", "http://x", "UPPER/Case:tag", "ghcr.io/o/p@sha256:12",
                                       "ghcr.io/o/p:bad tag"])
def test_verify_refuses_a_malformed_reference_before_any_network(reference):
    # A proxy nothing listens on: any request would fail with a network error, not a usage error.
    proc = _ghbuild(reference, "--repository", "owner/project",
                    env={"HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"})
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"ghbuild: usage error: verify: {reference!r} is not an image reference"), line


def test_verify_says_when_the_registry_cannot_be_reached():
    with socket.socket() as s:           # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = _ghbuild(f"127.0.0.1:{port}/owner/project:nightly", "--repository", "owner/project")
    assert proc.returncode == 13, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert f"the registry 127.0.0.1:{port} could not be reached" in line, line


def test_a_staging_source_without_a_recorded_digest_is_refused():
    """publish verifies what the trusted build recorded; a source without a digest could only be read from a
    movable tag: refused, not skipped (finding 9)."""
    from types import SimpleNamespace

    from ghbuild.publish import signing

    verifier = policy.verifier({"GHBUILD_VERIFY_KEY": "k.pub"}, "owner/project")
    trust = signing.Signing(verifier, policy.signer({}), "https://github.com/owner/project", {})
    source = SimpleNamespace(digest=None, ref="ghcr.io/owner/project-cpu:" + SHA + "-x86_64")
    prep = SimpleNamespace(plan=SimpleNamespace(sources=[source], image="cpu", sha=SHA), src=None, s_repo="x")
    with pytest.raises(VerificationError, match=r"cpu: ghcr.io/owner/project-cpu:a+-x86_64: no recorded digest"):
        signing.verify_staging(trust, [prep], lambda m: None)   # type: ignore[list-item]
