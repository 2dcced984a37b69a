"""Cache mounts that survive a fresh runner, on the real engine and the staging registry.

A tiny repository (the local Debian base, one RUN with a cache mount; seconds per build) configures that mount in
`cache-mounts` with a cap of 600 kB. Its RUN prints whether the mount holds the marker an earlier build left, then
writes a marker (this build's nonce), a 400 kB file dated 2020 when there is none and a fresh 400 kB file: so each
save is over the cap, and the 2020 file is the one left out.

1. A trusted build on a pruned builder: no entry yet (a warning), the step finds no marker; the save writes the
   canonical entry, without the 2020 file.
2. `docker builder prune -af`, the same trusted build: the step finds the first build's marker (restored bytes > 0).
3. An untrusted build (another branch) on a pruned builder reads the canonical entry, writes only its own scope in
   the `-untrusted` repository: the canonical tag is unchanged.
4. A corrupt canonical entry, then a missing one (deleted): each a warning, and the build goes on.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import textwrap
import uuid

import pytest

from ghbuild.naming import split_reference

from .enginelib import ghbuild_argv

REPOSITORY = "acme/mounts"
TARGET = "/root/.cache/probe"

DOCKERFILE = """\
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN --mount=type=cache,id={mount_id},target={target} \\
    --mount=type=bind,source=nonce,target=/nonce \\
    set -eu; cd {target}; \\
    if [ -f marker ]; then echo "probe: marker $(cat marker)"; else echo "probe: marker absent"; fi; \\
    cat /nonce > marker; \\
    if [ ! -f old.bin ]; then head -c 400000 /dev/zero > old.bin; touch -d 2020-01-01 old.bin; fi; \\
    head -c 400000 /dev/urandom > new.bin
"""


@pytest.fixture(scope="module")
def project(session):
    root = session.workdir / "mounts"
    root.mkdir()
    mount_id = f"ghbuild-test-{session.sid}-probe"
    (root / "Dockerfile").write_text(DOCKERFILE.replace("{mount_id}", mount_id).replace("{target}", TARGET))
    (root / "ghbuild.toml").write_text(textwrap.dedent(f"""\
        [trust]
        canonical-repository = "{REPOSITORY}"

        [sccache]
        enabled = false

        [images.probe]
        dockerfile = "Dockerfile"
        platforms = ["linux/amd64"]
        cache-mounts = [{{ id = "{mount_id}", target = "{TARGET}", max-size = "600kB" }}]
        """))
    session.created_repos.add(f"ghbuild-test-{session.sid}/cache-untrusted")
    env = {k: v for k, v in session.base_env.items() if not k.startswith("GHBUILD_IMAGES_")}
    env["GHBUILD_CONFIG"] = str(root / "ghbuild.toml")
    return root, env


def _build(session, project, name: str, branch: str = "main", prune: bool = True):
    root, env = project
    if prune:
        proc = session.docker_run("builder", "prune", "-af", timeout=900)
        assert proc.returncode == 0, proc.stderr
    (root / "nonce").write_text(f"{name}-{uuid.uuid4().hex[:8]}\n")
    argv = [*ghbuild_argv(), "build", "--image", "probe", "--arch", "amd64", "--json", "--event", "push",
            "--repository", REPOSITORY, "--ref", f"refs/heads/{branch}", "--default-branch", "main",
            "--sha", session.sha(name)]
    session.used_shas.add(session.sha(name))
    run = session.ghbuild(name, argv=argv, env=env)
    assert run.rc == 0, run.tail(60)
    (mount,) = run.report["cache_mounts"]
    return run, mount, (root / "nonce").read_text().strip()


def _entry(session, ref: str):
    """(manifest digest, member names of its layer) of the entry at `ref`, or None."""
    _host, repo, tag = split_reference(ref)
    manifest = session.registry.get_manifest(repo, tag)
    if manifest is None:
        return None
    layer = manifest.json()["layers"][0]
    blob = session.registry.get_blob(repo, layer["digest"])
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob))) as tar:
        return manifest.digest, sorted(m.name for m in tar.getmembers())


@pytest.fixture(scope="module")
def first(session, project):
    return _build(session, project, "mounts-first")


@pytest.fixture(scope="module")
def second(session, project, first):
    return _build(session, project, "mounts-second")


def test_the_first_build_finds_no_entry_and_saves_one_within_the_cap(session, first):
    run, mount, _nonce = first
    assert mount["restored"]["status"] == "missing"
    assert any("no entry yet" in w for w in run.report["warnings"]), run.report["warnings"]
    assert "probe: marker absent" in run.stderr
    saved = mount["saved"]
    assert saved["status"] == "saved", saved
    assert saved["to"].startswith(f"{session.cache_repo}:main-probe-x86_64-mount-")
    assert (saved["files"], saved["dropped_files"]) == (2, 1), saved          # old.bin left out: the oldest
    _digest, names = _entry(session, saved["to"])
    assert names == ["marker", "new.bin"], names
    assert "  mount    " in run.stderr and "saved " in run.stderr


def test_a_pruned_builder_gets_the_mount_back(first, second):
    _, _, first_nonce = first
    run, mount, _ = second
    restored = mount["restored"]
    assert restored["status"] == "restored", restored
    assert restored["from"] == first[1]["saved"]["to"]
    assert restored["bytes"] > 400_000 and restored["blob_bytes"] > 0 and restored["seconds"] >= 0
    assert f"probe: marker {first_nonce}" in run.stderr
    assert "restored " in run.stderr


def test_an_untrusted_run_reads_the_canonical_entry_and_cannot_write_it(session, project, second):
    canonical = second[1]["saved"]["to"]
    before = _entry(session, canonical)
    run, mount, _ = _build(session, project, "mounts-branch", branch="feature/x")
    assert mount["restored"]["from"] == canonical, mount["restored"]
    assert f"probe: marker {second[2]}" in run.stderr
    own = mount["saved"]["to"]
    assert own.startswith(f"{session.cache_repo}-untrusted:preview-feature_x-"), own
    assert _entry(session, canonical) == before                              # the trusted entry is unchanged
    assert _entry(session, own) is not None


def test_a_corrupt_or_missing_entry_is_a_warning_and_the_build_goes_on(session, project, second):
    canonical = second[1]["saved"]["to"]
    _host, repo, tag = split_reference(canonical)
    garbage = b"this is not gzip"
    layer = session.registry.push_blob(repo, garbage)
    config = session.registry.push_blob(repo, b"{}")
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.ghbuild.cache-mount.config.v1+json", "digest": config,
                           "size": 2},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer,
                            "size": len(garbage)}]}
    session.registry.put_manifest(repo, tag, json.dumps(manifest).encode(), manifest["mediaType"])
    run, mount, _ = _build(session, project, "mounts-corrupt")
    assert mount["restored"]["status"] == "missing"
    assert any("entry not restored" in w and "not a readable tar+gzip" in w for w in run.report["warnings"]), \
        run.report["warnings"]
    assert "probe: marker absent" in run.stderr
    assert mount["saved"]["status"] == "saved"                                # and the good entry is back

    digest, _ = _entry(session, canonical)
    assert session.registry.delete_manifest(repo, digest)
    run, mount, _ = _build(session, project, "mounts-missing")
    assert mount["restored"]["status"] == "missing"
    assert any("no entry yet" in w for w in run.report["warnings"])
