"""The GitHub release's notes, from what `publish release` published: every digest and the command that checks it."""

from __future__ import annotations

from packaging.version import Version

from ghbuild.publish.report import release_notes
from ghbuild.publish.results import PublishResult, PublishRun

SHA = "0123456789abcdef0123456789abcdef01234567"
INDEX, AMD, ARM = ("sha256:" + c * 64 for c in "abc")
REPO = "127.0.0.1:5001/org/cpu"       # a host with a port: the tag separator is the last colon


def _run() -> PublishRun:
    result = PublishResult("cpu", False, index_digest=INDEX, arch_digests={"arm64": ARM, "amd64": AMD},
                           tags={f"{REPO}:v1.2.0": INDEX, f"{REPO}:v1.2.0-x86_64": AMD,
                                 f"{REPO}:v1.2.0-arm64": ARM, f"{REPO}:latest": INDEX})
    return PublishRun("release", SHA, [result], version=Version("1.2.0"), latest=True)


def test_the_notes_list_every_digest_and_the_keyless_verify_command():
    notes = release_notes(_run(), "org/project", "keyless")
    assert notes.startswith(f"Images for v1.2.0 of org/project, built from commit {SHA}.\n")
    assert f"| `{REPO}:v1.2.0-arm64` | `{ARM}` |" in notes
    assert f"| `{REPO}@{AMD}` (amd64 alone) | `{AMD}` |" in notes
    assert f"| `{REPO}@{ARM}` (arm64 alone) | `{ARM}` |" in notes
    assert "signed keyless by a GitHub Actions workflow of org/project" in notes
    assert f"```sh\nghbuild verify {REPO}@{INDEX} --repository org/project --sha {SHA}\n```" in notes


def test_key_signed_notes_name_the_key_and_unsigned_ones_offer_no_command():
    keyed = release_notes(_run(), "org/project", "key")
    assert f"ghbuild verify {REPO}@{INDEX} --repository org/project --key cosign.pub --sha {SHA}" in keyed
    unsigned = release_notes(_run(), "org/project", "none")
    assert "ghbuild verify" not in unsigned and "not signed" in unsigned
    assert f"`{INDEX}`" in unsigned                      # the digests are listed all the same


def test_a_stable_branch_other_than_main_is_named_in_the_keyless_command():
    notes = release_notes(_run(), "org/project", "keyless", "release/2.x")
    assert f"ghbuild verify {REPO}@{INDEX} --repository org/project --branch release/2.x --sha {SHA}" in notes
    assert "--branch" not in release_notes(_run(), "org/project", "keyless", "main")
    assert "--branch" not in release_notes(_run(), "org/project", "key", "release/2.x")
