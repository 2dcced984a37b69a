"""Signed publishing against the two local registries and cosign 2.5 with a key (keyless needs Fulcio and Rekor,
which this machine does not have): the trusted build signs the staging digest it records, with provenance;
publish verifies it before writing anything and signs what it publishes; `ghbuild verify` checks the result; a
staging image swapped for another with the same labels is refused with nothing written.

One architecture (amd64) keeps it fast: the index, attestation and signature paths are the same per arch.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import pytest

from . import test_70_publish_nightly as nightly
from .enginelib import CONTEXT_FLAGS, REPO, ghbuild_argv

SOURCE = "https://github.com/ghbuild/ghbuild"
hub = nightly.hub      # the hub client fixture: what this module published is removed after it


def cosign(*args: str, env: dict[str, str], cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(["cosign", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def keys(session):
    """A cosign key pair (password-protected) and the environment that signs and verifies with it."""
    folder = Path(tempfile.mkdtemp(prefix="cosign-", dir=session.workdir))   # one per module that uses it
    env = dict(session.base_env, COSIGN_PASSWORD="ghbuild-test-cosign-password")
    made = cosign("generate-key-pair", env=env, cwd=folder)
    assert made.returncode == 0, made.stderr
    session.secrets.add(env["COSIGN_PASSWORD"])
    env.update(GHBUILD_SIGN_KEY=str(folder / "cosign.key"), GHBUILD_VERIFY_KEY=str(folder / "cosign.pub"),
               GHBUILD_IMAGES_CPU_PLATFORMS="linux/amd64", RUNNER_TEMP=str(session.workdir))
    return env


@pytest.fixture(scope="module")
def signed(session, keys):
    """`build --push --record` of the small os-base stage, trusted, signing with the key."""
    sha = session.sha("signed")
    records = session.workdir / "records-signed"
    run = session.ghbuild("signed-amd64", "--target", "os-base", "--push", "--json", "--record",
                          str(records / "cpu-amd64.json"), sha=sha, env=keys, timeout=1200)
    assert run.rc == 0, "\n".join(run.stderr.splitlines()[-30:])
    return sha, json.loads(run.stdout)["digest"], records


def _hub(session, hub, suffix: str) -> tuple[str, str]:
    name = f"ghbuild-test-{session.sid}-signed{suffix}/cpu"
    hub.created.add(name)
    return f"{hub.host}/ghbuild-test-{session.sid}-signed{suffix}/{{image}}", f"{hub.host}/{name}"


def publish(kind: str, env: dict[str, str], template: str, records, *args: str) -> subprocess.CompletedProcess:
    env = dict(env, GHBUILD_REGISTRIES_PUBLISH=template)
    return subprocess.run([*ghbuild_argv(), "publish", kind, "--image", "cpu", *CONTEXT_FLAGS, "--records",
                           str(records), *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def verify(ref: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*ghbuild_argv(), "verify", ref, "--repository", "ghbuild/ghbuild", *args], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=300)


def cosign_verify(ref: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return cosign("verify", "--key", env["GHBUILD_VERIFY_KEY"], "--insecure-ignore-tlog=true", ref, env=env)


def test_the_trusted_build_signs_what_it_records_with_provenance(session, keys, signed):
    sha, digest, records = signed
    record = json.loads((records / "cpu-amd64.json").read_text())
    assert record["digest"] == digest and record["signature"] == "key"
    name = f"ghbuild-test-{session.sid}/cpu"
    index = json.loads(session.registry.manifest(name, digest)[2])
    entries = index["manifests"]
    assert [e["platform"]["architecture"] for e in entries] == ["amd64", "unknown"]
    assert entries[1]["annotations"]["vnd.docker.reference.digest"] == entries[0]["digest"]
    ok = cosign_verify(f"{session.registry.host}/{name}@{digest}", keys)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)[0]["optional"]["org.opencontainers.image.revision"] == sha


def test_nightly_and_release_are_signed_and_verify(session, hub, keys, signed):
    sha, digest, records = signed
    template, repo = _hub(session, hub, "")
    proc = publish("nightly", keys, template, records, "--sha", sha, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"verified {session.registry.host}/ghbuild-test-{session.sid}/cpu@{digest}" in proc.stderr
    (result,) = json.loads(proc.stdout)["images"]
    assert result["arch_digests"] == {"amd64": digest}       # the per-arch tag holds what the build pushed
    index = json.loads(hub.manifest(repo.split("/", 1)[1], "nightly")[2])
    kinds = [(e["platform"]["architecture"], (e.get("annotations") or {}).get("vnd.docker.reference.type"))
             for e in index["manifests"]]
    assert kinds == [("amd64", None), ("unknown", "attestation-manifest")]
    for published in (result["index_digest"], digest):
        ok = cosign_verify(f"{repo}@{published}", keys)
        assert ok.returncode == 0, ok.stderr
    said = verify(f"{repo}:nightly", keys)
    assert said.returncode == 0, said.stderr
    assert said.stdout.strip() == (f"verified {repo}@{result['index_digest']}: signed by cosign key "
                                   f"{keys['GHBUILD_VERIFY_KEY']} for {sha} of {SOURCE}; "
                                   "provenance of linux/amd64 names that commit")
    assert verify(f"{repo}:nightly-x86_64", keys, "--sha", sha).returncode == 0
    # the per-arch tag still runs for `docker pull --platform` (a one-platform index with its attestation)
    run = session.docker_run("run", "--rm", "--platform", "linux/amd64", f"{repo}:nightly-x86_64", "true",
                             timeout=300)
    assert run.returncode == 0, run.stderr
    # a rerun signs nothing twice
    again = publish("nightly", keys, template, records, "--sha", sha)
    assert again.returncode == 0 and "signed already" in again.stderr, again.stderr[-2000:]

    release = publish("release", keys, template, records, "--sha", sha, "--version", "1.0.0",
                      "--no-github-release", "--json")
    assert release.returncode == 0, release.stderr[-3000:]
    assert verify(f"{repo}:v1.0.0", keys, "--sha", sha).returncode == 0


def test_ghbuild_verify_refuses_in_one_line(session, hub, keys, signed):
    _, digest, _ = signed
    staged = f"{session.registry.host}/ghbuild-test-{session.sid}/cpu@{digest}"
    other = session.sha("another-commit")
    cases = {
        "wrong commit": (verify(staged, keys, "--sha", other), "signature not verified"),
        "wrong repository": (subprocess.run([*ghbuild_argv(), "verify", staged, "--repository", "someone/else"],
                                            cwd=REPO, env=keys, capture_output=True, text=True, timeout=300),
                             "signature not verified"),
        "unsigned": (verify(f"{session.registry.host}/base/debian:bookworm", keys), "no signatures found"),
    }
    for case, (proc, why) in cases.items():
        assert proc.returncode == 13, (case, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ghbuild: not verified: ") and why in lines[0], (case, lines)


@pytest.fixture(scope="module")
def forged(session, signed, tmp_path_factory):
    """Someone with a staging write token pushes their own image, labelled as the trusted build's (with
    provenance too), and a record pointing at it: the records folder."""
    sha, _, _ = signed
    work = tmp_path_factory.mktemp("forged")
    name = f"ghbuild-test-{session.sid}/cpu"
    forged_ref = f"{session.registry.host}/{name}:{sha}-forged"
    (work / "Dockerfile").write_text(f"FROM {session.local['GHBUILD_BUILD_BASE_IMAGE']}\nRUN echo evil > /evil\n")
    built = subprocess.run([session.docker, "buildx", "build", "--platform", "linux/amd64", "--provenance=mode=max",
                            "--label", f"org.opencontainers.image.source={SOURCE}",
                            "--label", f"org.opencontainers.image.revision={sha}",
                            "--metadata-file", str(work / "md.json"), "--tag", forged_ref,
                            "--output", "type=image,push=true", str(work)],
                           env=session.base_env, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    digest = json.loads((work / "md.json").read_text())["containerimage.digest"]
    records = work / "records"
    records.mkdir()
    (records / "cpu-amd64.json").write_text(json.dumps({
        "id": "cpu-amd64", "image": "cpu", "arch": "amd64", "platform": "linux/amd64", "digest": digest,
        "ref": f"{session.registry.host}/{name}@{digest}", "sha": sha, "trusted": True, "signature": "key"}))
    return digest, records


def test_a_swapped_staging_image_with_the_same_labels_is_refused(session, hub, keys, signed, forged):
    """The labels and the record agree, the signature does not: exit 13, nothing in the hub."""
    sha, _, _ = signed
    digest, records = forged
    template, repo = _hub(session, hub, "-forged")
    proc = publish("nightly", keys, template, records, "--sha", sha)
    assert proc.returncode == 13, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ghbuild: not verified: ") and digest in last and "no signatures found" in last, last
    assert "Traceback" not in proc.stderr
    assert not hub.tags(repo.split("/", 1)[1])


def test_in_github_actions_a_publish_that_cannot_verify_is_refused(session, hub, keys, signed, forged, tmp_path):
    """The same forged image and record, in a GitHub Actions run whose publish job lacks GHBUILD_VERIFY_KEY and
    `id-token: write`: refused (exit 13) in one line saying what to set, nothing in the hub. Under act, the
    same run goes on with a warning that nothing was verified (and publishes the forgery: that is what the
    refusal in Actions is for)."""
    sha, _, _ = signed
    _, records = forged
    template, repo = _hub(session, hub, "-actions")
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"ref": "refs/heads/main", "after": sha, "repository": {
        "full_name": "ghbuild/ghbuild", "default_branch": "main", "owner": {"login": "ghbuild"}}}))
    env = {k: v for k, v in keys.items() if k not in ("GHBUILD_SIGN_KEY", "GHBUILD_VERIFY_KEY")}
    env.update(GITHUB_ACTIONS="true", GITHUB_EVENT_NAME="push", GITHUB_EVENT_PATH=str(event),
               GITHUB_REPOSITORY="ghbuild/ghbuild", GITHUB_REF="refs/heads/main", GITHUB_SHA=sha,
               GITHUB_SERVER_URL="https://github.com", GHBUILD_REGISTRIES_PUBLISH=template)
    argv = [*ghbuild_argv(), "publish", "nightly", "--image", "cpu", "--records", str(records)]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 13, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ghbuild: not verified: publish nightly: refused in GitHub Actions: cannot verify"), last
    assert "`id-token: write`" in last and "GHBUILD_VERIFY_KEY" in last
    assert not hub.tags(repo.split("/", 1)[1])
    act = subprocess.run(argv, cwd=REPO, env=dict(env, ACT="true"), capture_output=True, text=True, timeout=600)
    assert act.returncode == 0, act.stderr[-2000:]
    assert "NOT VERIFIED and NOT SIGNED" in act.stderr and "can forge" in act.stderr


def test_prune_leaves_no_orphaned_signature_and_keeps_what_a_kept_image_needs(session, hub, keys, signed):
    """Two signed nightlies, then a prune keeping one commit. `nightly-x86_64` moved from the first commit's
    per-arch index to the second's; the per-commit tag `nightly-<sha>-x86_64` still names the first, so it goes
    with its commit, and so do both of its signatures: no `sha256-<hex>.sig` of a deleted manifest remains, and
    every signature of the kept nightly still verifies."""
    first, first_digest, first_records = signed
    second = session.sha("signed-second")
    second_records = session.workdir / "records-signed-second"
    run = session.ghbuild("signed-second-amd64", "--target", "os-base", "--push", "--json", "--record",
                          str(second_records / "cpu-amd64.json"), sha=second, env=keys, timeout=1200)
    assert run.rc == 0, "\n".join(run.stderr.splitlines()[-30:])
    template, repo = _hub(session, hub, "-prune")
    name = repo.split("/", 1)[1]
    results = {}
    for sha, records, when in ((first, first_records, "1700000000"), (second, second_records, "1700086400")):
        proc = publish("nightly", keys, template, records, "--sha", sha, "--commit-time", when, "--json")
        assert proc.returncode == 0, proc.stderr[-3000:]
        (results[sha],) = json.loads(proc.stdout)["images"]
    for tag, digest in (("nightly", results[second]["index_digest"]), ("nightly-x86_64", second_arch := next(
            iter(results[second]["arch_digests"].values()))), (f"nightly-{first}-x86_64", first_digest)):
        assert hub.manifest(name, tag)[1].get("docker-content-digest") == digest, tag
    assert second_arch != first_digest
    old = {results[first]["index_digest"], first_digest}
    kept = {results[second]["index_digest"], *results[second]["arch_digests"].values()}
    signatures = {f"sha256-{d.split(':')[1]}.sig" for d in old | kept}
    assert signatures <= set(hub.tags(name))                 # publish signed all four

    env = dict(keys, GHBUILD_REGISTRIES_PUBLISH=template, GHBUILD_PUBLISH_RETENTION="1")
    pruned = subprocess.run([*ghbuild_argv(), "prune", "--apply", "--image", "cpu", *CONTEXT_FLAGS, "--json"],
                            cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert pruned.returncode == 0, pruned.stderr[-3000:]
    deleted = {tag for entry in json.loads(pruned.stdout)[0]["deleted"] for tag in entry["tags"]}
    left = set(hub.tags(name))
    assert not {f"nightly-{first}", f"nightly-{first}-x86_64"} & left
    orphans = {t for t in left if t.startswith("sha256-")} - {f"sha256-{d.split(':')[1]}.sig" for d in kept}
    assert orphans == set(), orphans                          # no signature of a deleted manifest
    # what nightly-x86_64 held before it moved went by its per-commit tag
    assert {f"nightly-{first}", f"nightly-{first}-x86_64"} <= deleted, deleted
    assert {f"sha256-{d.split(':')[1]}.sig" for d in kept} <= left
    for ref in (f"{repo}:nightly", f"{repo}:nightly-x86_64", f"{repo}:nightly-{second}-x86_64"):
        assert verify(ref, keys, "--sha", second).returncode == 0, ref
    for digest in old:                                        # the old manifests are gone, not just untagged
        assert hub.manifest(name, digest)[0] == 404, digest
