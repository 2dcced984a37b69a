"""The job summary and step outputs of `ghbuild publish` (no registry: built from a PublishRun)."""

from __future__ import annotations

import json

from ghbuild.errors import PublishError
from ghbuild.publish import report, results, tag_moves

INDEX, AMD, OLD = "sha256:" + "1" * 64, "sha256:" + "2" * 64, "sha256:" + "3" * 64
SHA = "a" * 40


def outcome() -> results.PublishRun:
    result = results.PublishResult(image="app", dry_run=False, index_digest=INDEX,
                                   tags={f"hub/app:nightly-{SHA}": INDEX, "hub/app:nightly-x86_64": AMD,
                                         "hub/app:nightly": INDEX, "hub/app:nightly-|x": INDEX},
                                   moved=[f"hub/app:nightly-{SHA}", "hub/app:nightly-x86_64"],
                                   unchanged=["hub/app:nightly-|x"],
                                   actions=["leave hub/app:nightly at sha256:0: a newer commit holds it"],
                                   stats={"copied_bytes": 2048, "copied_blobs": 2, "skipped_bytes": 10,
                                          "skipped_blobs": 1, "mounted_bytes": 0, "mounted_blobs": 0})
    return results.PublishRun(kind="nightly", sha=SHA, results=[result])


def test_summary_lists_every_tag_with_its_digest_and_fate():
    text = report.summary(outcome())
    assert f"| `hub/app:nightly-{SHA}` | `{INDEX}` | moved |" in text
    assert "| `hub/app:nightly` | `" + INDEX + "` | left: a newer commit holds it |" in text
    assert "Copied 2,048 bytes in 2 blobs; 10 bytes were already there or mounted (1 blobs)." in text
    # a ref with a pipe cannot break the table
    assert "hub/app:nightly-|x" not in text and "<code>" in text
    dry = report.summary(outcome(), dry_run=True)
    assert "(dry run: nothing pushed)" in dry and "| would move |" in dry and "Copied" not in dry


def test_outputs_carry_digests_tags_and_metadata():
    out = report.outputs(outcome())
    assert json.loads(out["digests"]) == {"app": INDEX}
    assert out["tags"].splitlines()[0] == f"hub/app:nightly-{SHA}" and len(out["tags"].splitlines()) == 4
    assert json.loads(out["metadata"])["images"][0]["index_digest"] == INDEX


def test_subject_checksums_list_every_published_digest_once_for_the_attestation():
    run = outcome()
    run.results[0].arch_digests = {"amd64": AMD}
    # the format actions/attest-build-provenance's subject-checksums reads: hex digest, two spaces, name
    assert report.outputs(run)["subject-checksums"].splitlines() == [f"{'1' * 64}  hub/app", f"{'2' * 64}  hub/app"]
    assert report.subject_checksums(results.PublishRun(kind="nightly", sha=SHA, results=[])) == ""


def test_failure_summary_names_what_was_restored_and_what_was_not():
    phase = tag_moves.TagPhase(restored=[f"nightly-x86_64 (to {OLD})"],
                               unrestored=[f"hub/app:nightly (holds {INDEX}, was {OLD}: HTTP 503)"])
    error = PublishError("moving tags failed (HTTP 503); " + phase.report())
    error.phase = phase
    text = report.failure_summary("nightly", error)
    assert text.startswith("### ghbuild publish nightly: failed")
    assert f"- restored nightly-x86\\_64 (to {OLD})" in text or f"- restored nightly-x86_64 (to {OLD})" in text
    assert f"- **not restored**: hub/app:nightly (holds {INDEX}, was {OLD}: HTTP 503)" in text
