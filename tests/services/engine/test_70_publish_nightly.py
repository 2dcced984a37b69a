"""`ghbuild publish nightly`: staging -> hub, registry to registry, against the two real local registries.

Per-arch images come from the build path (`--target sccache`, a small stage; arm64 through emulation).
Afterwards the hub is checked through its HTTP API: `nightly` is an index with exactly the amd64 and
arm64 entries, whose digests equal the staging images'; per-arch tags match; `nightly-<sha>` exists.
Publishing runs as the trusted push it is (the context flags) and promotes what the build recorded
(`build --record`, handed over with `--records`), never what a staging tag holds by then.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request

import pytest
from fakes.oci import RegistryClient

from .enginelib import CONTEXT_FLAGS, REPO, ghbuild_argv

INDEX_TYPES = ("application/vnd.docker.distribution.manifest.list.v2+json",
               "application/vnd.oci.image.index.v1+json")


def _push_stage(session, name: str, arch: str, sha: str, records=None) -> str:
    """Build and push the small `os-base` stage; with `records`, `build --record` writes its record there."""
    extra = ["--record", str(records / f"cpu-{arch}.json")] if records is not None else []
    # Records are written only inside the working directory or RUNNER_TEMP: the session's folder is the latter.
    env = dict(session.base_env, RUNNER_TEMP=str(session.workdir))
    run = session.ghbuild(f"{name}-{arch}", "--target", "os-base", "--push", "--json", *extra, arch=arch, sha=sha,
                          env=env, timeout=1200)
    assert run.rc == 0, "\n".join(run.stderr.splitlines()[-30:])
    return json.loads(run.stdout)["digest"]


def records_json(session, sha: str, digests: dict[str, str], staging: str | None = None, **changes) -> str:
    """Records as `build --record` writes them (for cases the build cannot make: a proxy, a forged record)."""
    repo = (staging or session.staging_repo).format(image="cpu")
    return json.dumps({f"cpu-{arch}": {"image": "cpu", "arch": arch, "platform": f"linux/{arch}", "digest": digest,
                                       "ref": f"{repo}@{digest}", "sha": sha, "trusted": True, **changes}
                       for arch, digest in digests.items()})


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
    records = session.workdir / "records-publish"
    digests = {arch: _push_stage(session, "publish", arch, sha, records) for arch in ("amd64", "arm64")}
    return sha, digests, records


def publish(session, hub_repo_template: str, *args: str, env=None, records=None):
    """`ghbuild publish nightly` in the trusted push's context, with the build's records (a folder or JSON)."""
    env = dict(env or session.base_env)
    env["GHBUILD_REGISTRIES_PUBLISH"] = hub_repo_template
    with_records = ["--records", str(records)] if records is not None else []
    proc = subprocess.run([*ghbuild_argv(), "publish", "nightly", "--image", "cpu", *CONTEXT_FLAGS, *with_records,
                           *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    return proc


def _hub_template(session, hub, suffix: str) -> tuple[str, str]:
    name = f"ghbuild-test-{session.sid}-hub{suffix}/cpu"
    hub.created.add(name)
    return f"{hub.host}/ghbuild-test-{session.sid}-hub{suffix}/{{image}}", name


def _digest(reg: RegistryClient, name: str, ref: str) -> str | None:
    status, headers, _ = reg.manifest(name, ref, method="HEAD")
    return headers.get("docker-content-digest") if status == 200 else None


def test_nightly_publishes_per_arch_tags_and_indexes(session, hub, staged):
    sha, digests, records = staged
    assert {r["digest"] for r in (json.loads(p.read_text()) for p in records.glob("*.json"))} == set(digests.values())
    template, name = _hub_template(session, hub, "")
    proc = publish(session, template, "--sha", sha, "--json", records=records)
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
    # an OCI index gives each entry its image's `created` (retention on a plain registry reads no config);
    # Docker's manifest list has no annotations
    for entry in entries:
        manifest = json.loads(hub.manifest(name, entry["digest"])[2])
        created = json.loads(hub.request("GET", f"/v2/{name}/blobs/{manifest['config']['digest']}")[2])["created"]
        oci = headers["content-type"].split(";")[0] == INDEX_TYPES[1]
        assert entry.get("annotations") == ({"org.opencontainers.image.created": created} if oci else None)

    # a rerun is idempotent: nothing moves, nothing is copied
    again = publish(session, template, "--sha", sha, "--json", records=records)
    assert again.returncode == 0, again.stderr[-3000:]
    (second,) = json.loads(again.stdout)["images"]
    assert second["moved"] == [] and second["stats"]["copied_bytes"] == 0
    assert second["index_digest"] == result["index_digest"]


def test_dry_run_prints_every_copy_and_tag_and_pushes_nothing(session, hub, staged):
    sha, _, _ = staged
    template, name = _hub_template(session, hub, "-dry")
    proc = publish(session, template, "--sha", sha, "--dry-run")
    assert proc.returncode == 0, proc.stderr[-3000:]
    for text in ("would copy", "would push index", "would tag", ":nightly-x86_64 ->", ":nightly-arm64 ->",
                 f":nightly-{sha} ->", ":nightly ->"):
        assert text in proc.stderr, text
    assert not hub.tags(name)


def test_one_arch_missing_publishes_nothing(session, hub):
    sha = session.sha("publish-amd64-only")
    records = session.workdir / "records-amd64-only"
    _push_stage(session, "publish-amd64-only", "amd64", sha, records)
    template, name = _hub_template(session, hub, "-partial")
    proc = publish(session, template, "--sha", sha, records=records)
    assert proc.returncode == 13, proc.stderr[-2000:]
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ghbuild: publish error: nightly: no build record of cpu for arm64")
    assert "Traceback" not in proc.stderr
    assert not hub.tags(name)


def test_mislabelled_arch_is_refused_before_anything_moves(session, hub, staged):
    """Records that swap the arches (the arm64 image recorded as amd64): refused, the hub untouched."""
    sha, digests, _ = staged
    swapped = {"amd64": digests["arm64"], "arm64": digests["amd64"]}
    template, hub_name = _hub_template(session, hub, "-swapped")
    proc = publish(session, template, "--sha", sha, records=records_json(session, sha, swapped))
    assert proc.returncode == 13, proc.stderr[-2000:]
    assert "claims amd64 but its image config says linux/arm64" in proc.stderr
    assert not hub.tags(hub_name)


def test_a_staging_tag_moved_after_the_trusted_build_is_not_what_gets_published(session, hub, staged):
    """Any job with write access to the staging package can point <sha>-<arch> elsewhere between the trusted
    build and publishing: the recorded digests are published, whatever the tags hold by then."""
    sha, digests, records = staged
    staging, name = session.registry, f"ghbuild-test-{session.sid}/cpu"
    status, headers, body = staging.manifest(name, digests["arm64"])
    assert status == 200
    put = urllib.request.Request(f"{staging.url}/v2/{name}/manifests/{sha}-x86_64", data=body, method="PUT",
                                 headers={"Content-Type": headers["content-type"]})
    with urllib.request.urlopen(put, timeout=30) as resp:
        assert resp.status == 201
    template, hub_name = _hub_template(session, hub, "-moved")
    proc = publish(session, template, "--sha", sha, records=records)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _digest(hub, hub_name, "nightly-x86_64") == digests["amd64"]
    assert _digest(hub, hub_name, "nightly-arm64") == digests["arm64"]


def test_an_image_the_trusted_build_did_not_make_is_refused(session, hub, staged):
    """A record that names this commit but an image built for another one: its revision label says so."""
    sha, digests, _ = staged
    other = session.sha("publish-other-commit")
    foreign = _push_stage(session, "publish-other-commit", "amd64", other)
    template, hub_name = _hub_template(session, hub, "-foreign")
    proc = publish(session, template, "--sha", sha,
                   records=records_json(session, sha, {"amd64": foreign, "arm64": digests["arm64"]}))
    assert proc.returncode == 13, proc.stderr[-2000:]
    assert f"labelled org.opencontainers.image.revision='{other}'" in proc.stderr
    assert not hub.tags(hub_name)
