"""`ghbuild publish nightly`: staging -> hub, registry to registry, against the two real local registries.

Per-arch images come from the build path (`--target sccache`, a small stage; arm64 through emulation).
Afterwards the hub is checked through its HTTP API: `nightly` is an index with exactly the amd64 and
arm64 entries, whose digests equal the staging images'; per-arch tags match; `nightly-<sha>` exists.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request

import pytest

from fakes.oci import RegistryClient

from .enginelib import REPO, ghbuild_argv


INDEX_TYPES = ("application/vnd.docker.distribution.manifest.list.v2+json",
               "application/vnd.oci.image.index.v1+json")


def _push_stage(session, name: str, arch: str, sha: str) -> str:
    run = session.ghbuild(f"{name}-{arch}", "--target", "sccache", "--push", "--json", arch=arch, sha=sha,
                          timeout=1200)
    assert run.rc == 0, "\n".join(run.stderr.splitlines()[-30:])
    return json.loads(run.stdout)["digest"]


@pytest.fixture(scope="module")
def hub(session):
    reg = RegistryClient(session.local["GHBUILD_LOCAL_HUB"])
    reg.created = set()
    yield reg
    for name in sorted(reg.created):           # remove what this module published, nothing else
        reg.delete_repository_manifests(name)


@pytest.fixture(scope="module")
def staged(session):
    sha = session.sha("publish")
    digests = {arch: _push_stage(session, "publish", arch, sha) for arch in ("amd64", "arm64")}
    return sha, digests


def publish(session, hub_repo_template: str, *args: str, env=None):
    env = dict(env or session.base_env)
    env["GHBUILD_REGISTRIES_PUBLISH"] = hub_repo_template
    proc = subprocess.run(ghbuild_argv() + ["publish", "nightly", "--image", "cpu", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    return proc


def _hub_template(session, hub, suffix: str) -> tuple[str, str]:
    name = f"ghbuild-test-{session.sid}-hub{suffix}/cpu"
    hub.created.add(name)
    return f"{hub.host}/ghbuild-test-{session.sid}-hub{suffix}/{{image}}", name


def _digest(reg: RegistryClient, name: str, ref: str) -> str | None:
    status, headers, _ = reg.manifest(name, ref, method="HEAD")
    return headers.get("docker-content-digest") if status == 200 else None


def test_nightly_publishes_per_arch_tags_and_indexes(session, hub, staged):
    sha, digests = staged
    template, name = _hub_template(session, hub, "")
    proc = publish(session, template, "--sha", sha, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result,) = json.loads(proc.stdout)["images"]

    status, headers, body = hub.manifest(name, "nightly")
    assert status == 200 and headers["content-type"].split(";")[0] in INDEX_TYPES
    entries = json.loads(body)["manifests"]
    by_arch = {e["platform"]["architecture"]: e["digest"] for e in entries}
    assert by_arch == digests                                         # exactly amd64 + arm64, staging digests
    assert _digest(hub, name, "nightly-x86_64") == digests["amd64"]
    assert _digest(hub, name, "nightly-arm64") == digests["arm64"]
    assert _digest(hub, name, f"nightly-{sha}") == headers["docker-content-digest"] == result["index_digest"]
    assert result["tags"][f"{template.format(image='cpu')}:nightly"] == result["index_digest"]
    # every blob of both images is now in the hub
    for digest in digests.values():
        manifest = json.loads(hub.manifest(name, digest)[2])
        for blob in [manifest["config"], *manifest["layers"]]:
            assert hub.request("HEAD", f"/v2/{name}/blobs/{blob['digest']}")[0] == 200

    # a rerun is idempotent: nothing moves, nothing is copied
    again = publish(session, template, "--sha", sha, "--json")
    assert again.returncode == 0, again.stderr[-3000:]
    (second,) = json.loads(again.stdout)["images"]
    assert second["moved"] == [] and second["stats"]["copied_bytes"] == 0
    assert second["index_digest"] == result["index_digest"]


def test_dry_run_prints_every_copy_and_tag_and_pushes_nothing(session, hub, staged):
    sha, _ = staged
    template, name = _hub_template(session, hub, "-dry")
    proc = publish(session, template, "--sha", sha, "--dry-run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for text in ("would copy", "would push index", "would tag", ":nightly-x86_64 ->", ":nightly-arm64 ->",
                 f":nightly-{sha} ->", ":nightly ->"):
        assert text in proc.stderr, text
    assert not hub.tags(name)


def test_one_arch_missing_publishes_nothing(session, hub):
    sha = session.sha("publish-amd64-only")
    _push_stage(session, "publish-amd64-only", "amd64", sha)
    template, name = _hub_template(session, hub, "-partial")
    proc = publish(session, template, "--sha", sha)
    assert proc.returncode == 13, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ghbuild: publish error: staging image(s) missing:") and f"{sha}-arm64" in last
    assert "Traceback" not in proc.stderr
    assert not hub.tags(name)


def test_mislabelled_arch_is_refused_before_anything_moves(session, hub, staged):
    """Staging tags swapped (the arm64 image under <sha>-x86_64): refused, the hub untouched."""
    sha, digests = staged
    bad = session.sha("publish-swapped")
    staging = session.registry
    name = f"ghbuild-test-{session.sid}/cpu"
    for arch, suffix in (("amd64", "arm64"), ("arm64", "x86_64")):
        status, headers, body = staging.manifest(name, digests[arch])
        assert status == 200
        put = urllib.request.Request(f"{staging.url}/v2/{name}/manifests/{bad}-{suffix}", data=body, method="PUT",
                                     headers={"Content-Type": headers["content-type"]})
        with urllib.request.urlopen(put, timeout=30) as resp:
            assert resp.status == 201
    template, hub_name = _hub_template(session, hub, "-swapped")
    proc = publish(session, template, "--sha", bad)
    assert proc.returncode == 13, proc.stderr[-2000:]
    assert "claims amd64 but its image config says linux/arm64" in proc.stderr
    assert not hub.tags(hub_name)
