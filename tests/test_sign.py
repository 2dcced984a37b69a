"""The pure parts of signing: the signing decision, cosign's arguments, what provenance names, and retention of
cosign's attachments."""

from __future__ import annotations

from datetime import UTC, datetime

from ghbuild.retention.plan import TagInfo, plan_digests, plan_prune
from ghbuild.sign import policy, provenance

SHA = "a" * 40
URL = "https://github.com/org/project"
IMAGE = "sha256:" + "1" * 64


def test_signing_mode_follows_the_environment():
    assert policy.signer({"GHBUILD_SIGN_KEY": "env://K"}) == policy.Signer("key", "env://K", "cosign key env://K")
    actions = {"GITHUB_ACTIONS": "true", "ACTIONS_ID_TOKEN_REQUEST_URL": "u", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t"}
    assert policy.signer(actions).mode == "keyless"
    assert policy.signer({"GITHUB_ACTIONS": "true"}).mode == "none"          # no id-token: write
    assert "GHBUILD_SIGN_KEY is unset" in policy.signer({}).reason
    assert policy.verifier({}, "org/project").mode == "none"
    assert policy.verifier(actions, "org/project").mode == "keyless"
    assert policy.verifier({}, "org/project", keyless=True).mode == "keyless"
    assert policy.verifier({"GHBUILD_VERIFY_KEY": "k.pub"}, "org/project").key == "k.pub"


def test_cosign_arguments_carry_the_commit_and_never_a_password():
    notes = policy.signed_annotations(URL + "/", SHA)
    key = policy.sign_args(policy.Signer("key", "k.key", ""), notes, "r@d")
    assert key == ["sign", "--yes", "--key", "k.key", "--tlog-upload=false",
                   "-a", f"org.opencontainers.image.revision={SHA}", "-a", f"org.opencontainers.image.source={URL}",
                   "r@d"]
    keyless = policy.verify_args(notes, "r@d", identity=policy.KeylessIdentity("org/project", "main"))
    assert keyless[keyless.index("--certificate-github-workflow-repository") + 1] == "org/project"
    assert keyless[keyless.index("--certificate-github-workflow-ref") + 1] == "refs/heads/main"
    assert keyless[keyless.index("--certificate-oidc-issuer") + 1] == policy.GITHUB_OIDC_ISSUER
    assert f"org.opencontainers.image.revision={SHA}" in keyless


def test_provenance_auto_is_max_only_for_a_trusted_signed_push():
    assert policy.attest_modes("auto", False, None, trusted=True, push=True, signs=True) == ("max", None)
    assert policy.attest_modes("auto", True, None, trusted=False, push=True, signs=True) == ("off", None)
    assert policy.attest_modes("auto", False, None, trusted=True, push=True, signs=False,
                               legacy_provenance=True) == ("min", None)
    assert policy.attest_modes("min", True, "gen:1", trusted=True, push=True, signs=False) == ("min", "gen:1")


def _statement(source=URL, revision=SHA, subject="1" * 64, vcs=None):
    args = {"label:org.opencontainers.image.source": source, "label:org.opencontainers.image.revision": revision}
    return {"predicateType": "https://slsa.dev/provenance/v0.2", "subject": [{"digest": {"sha256": subject}}],
            "predicate": {"invocation": {"parameters": {"args": args if source else {}}},
                          "metadata": {provenance.BUILDKIT_METADATA: {"vcs": vcs or {}}}}}


def test_provenance_names_the_repository_and_commit():
    assert provenance.problem(provenance.claims(_statement()), IMAGE, URL + ".git", SHA) is None
    assert "not " + SHA in provenance.problem(provenance.claims(_statement(revision="b" * 40)), IMAGE, URL, SHA)
    assert "source https://github.com/evil/x" in provenance.problem(
        provenance.claims(_statement(source="https://github.com/evil/x")), IMAGE, URL, SHA)
    assert "about" in provenance.problem(provenance.claims(_statement(subject="2" * 64)), IMAGE, URL, SHA)
    min_mode = _statement(source=None, vcs={"source": "git@github.com:org/project.git", "revision": SHA})
    assert provenance.problem(provenance.claims(min_mode), IMAGE, URL, SHA) is None
    index = {"manifests": [{"digest": IMAGE}, {"digest": "sha256:att", "annotations": {
        provenance.REFERENCE_TYPE: provenance.ATTESTATION_MANIFEST, provenance.REFERENCE_DIGEST: IMAGE}}]}
    assert provenance.attestations(index) == {IMAGE: "sha256:att"}


def _t(name, digest, day=None, children=()):
    return TagInfo(name, digest, datetime(2026, 1, day, tzinfo=UTC) if day else None, tuple(children))


def test_prune_deletes_attachments_with_their_image_and_keeps_shared_ones():
    old, new, shared = (f"sha256:{c * 64}" for c in "abc")
    child_old, child_shared = f"sha256:{'d' * 64}", f"sha256:{'e' * 64}"
    sig = lambda d, kind="sig": _t(f"sha256-{d[7:]}.{kind}", "sha256:" + d[7:8] * 63 + "f")  # noqa: E731
    tags = [_t(f"nightly-{'1' * 40}", old, 1, [child_old, child_shared]), _t(f"nightly-{'2' * 40}", new, 2,
                                                                             [child_shared]),
            _t("nightly", new, 2, [child_shared]), _t("v1.0.0", shared, 1),
            sig(old), sig(old, "att"), sig(child_old), sig(child_shared), sig(new), sig(shared)]
    plan = plan_prune(tags, keep=1)
    deleted = [d.tag for d in plan.delete]
    assert deleted == [f"sha256-{'a' * 64}.att", f"sha256-{'a' * 64}.sig", f"sha256-{'d' * 64}.sig",
                       f"nightly-{'1' * 40}"]                          # attachments first, then the image
    kept = {d.tag for d in plan.keep}
    assert {f"sha256-{c * 64}.sig" for c in "bce"} <= kept             # kept images' and a shared child's
    digests, _ = plan_digests(plan, tags, {old: [child_old, child_shared], new: [child_shared]})
    assert child_shared not in {d.digest for d in digests}


def test_a_moved_per_arch_nightly_goes_with_its_commit_and_its_signature():
    """`nightly-x86_64` moved from the first commit's per-arch index to the second's: the per-commit tag that
    publishing also writes (`nightly-<sha>-x86_64`) keeps the first one a candidate, so its signature goes with it
    instead of staying forever on a manifest no tag and no kept index names."""
    from pathlib import Path

    from ghbuild.config.configfile import from_data
    from ghbuild.publish.plans import nightly_plan

    registries = {"staging": "r.example/{owner}/ci-{image}", "publish": "r.example/{owner}/{image}"}
    options = from_data({"registries": registries,
                         "images": {"cpu": {"dockerfile": "Dockerfile", "platforms": ["linux/amd64", "linux/arm64"]}}},
                        Path("ghbuild.toml"), {})
    nightly = nightly_plan(options, "cpu", SHA, "org")
    assert dict(nightly.commit_arch_tags) == {"amd64": f"nightly-{SHA}-x86_64", "arm64": f"nightly-{SHA}-arm64"}
    assert not set(nightly.commit_arch_tags.values()) & nightly.moving
    first, second = "1" * 40, "2" * 40
    arch1, arch2, index1, index2 = (f"sha256:{c * 64}" for c in "abcd")
    sig = lambda d: _t(f"sha256-{d[7:]}.sig", "sha256:" + d[7:8] * 63 + "f")  # noqa: E731
    tags = [_t(f"nightly-{first}", index1, 1), _t(f"nightly-{first}-x86_64", arch1, 1),
            _t(f"nightly-{second}", index2, 2), _t(f"nightly-{second}-x86_64", arch2, 2),
            _t("nightly", index2, 2), _t("nightly-x86_64", arch2, 2), *map(sig, (arch1, arch2, index1, index2))]
    plan = plan_prune(tags, keep=1)
    assert {d.tag for d in plan.delete} == {f"nightly-{first}", f"nightly-{first}-x86_64",
                                            f"sha256-{'a' * 64}.sig", f"sha256-{'c' * 64}.sig"}
    assert {f"sha256-{c * 64}.sig" for c in "bd"} <= {d.tag for d in plan.keep}


def test_prune_of_two_nightlies_with_one_created_time_keeps_the_one_the_moving_tags_hold():
    """Two nightlies of fully cached builds share `created`; the older commit's sha sorts higher. keep=1 keeps the
    newer, which the moving tags hold, and deletes the older with its signature (issue 26, finding 6)."""
    old, new = "f" * 40, "0" * 40
    d = lambda c: "sha256:" + c * 64  # noqa: E731
    tags = [_t(f"nightly-{old}", d("a"), 5, [d("b")]), _t(f"nightly-{old}-x86_64", d("c"), 5),
            _t(f"nightly-{new}", d("1"), 5, [d("2")]), _t(f"nightly-{new}-x86_64", d("3"), 5),
            _t("nightly", d("1"), 5, [d("2")]), _t("nightly-x86_64", d("3"), 5),
            _t(f"sha256-{'c' * 64}.sig", d("9"), 5)]
    plan = plan_prune(tags, keep=1)
    assert plan.kept_commits == [new]
    assert {x.tag for x in plan.delete} == {f"nightly-{old}", f"nightly-{old}-x86_64", f"sha256-{'c' * 64}.sig"}
