"""The example image, built cold with `ghbuild build --push`: in the registry, runnable, cached in S3."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time

from fakes.oci import MANIFEST_TYPES

from ghbuild.naming import split_reference


def test_report_names_the_pushed_image(first_build, session):
    report = first_build.report
    assert report["pushed"] is True
    assert report["backend"] == "buildx"
    # The engine's own builder: its BuildKit is the engine's, named by the engine's version (buildx inspect, a
    # second Go client before the build, is not run for it).
    engine = subprocess.run([session.docker, "version", "--format", "{{.Server.Version}}"], capture_output=True,
                            text=True, env=session.base_env, check=True).stdout.strip()
    assert report["builder"] == f"default (docker driver, the BuildKit of engine {engine}, containerd image store)"
    assert report["target"] == "runtime"
    assert report["digest"].startswith("sha256:") and len(report["digest"]) == 71
    tag = f"{session.registry.host}/ghbuild-test-{session.sid}/cpu:{session.sha('first')}-x86_64"
    assert report["tags"] == [tag]
    assert report["ref"] == f"{session.registry.host}/ghbuild-test-{session.sid}/cpu@{report['digest']}"
    assert report["budget_failures"] == []
    # The human summary goes to stderr, the JSON alone to stdout.
    assert "ghbuild: built cpu/amd64 (buildx)" in first_build.stderr
    assert report["ref"] in first_build.stderr


def test_registry_serves_the_reported_digest(first_build, session):
    """GET /v2/<name>/manifests/<tag>: Docker-Content-Digest is the report's digest, and is the body's hash."""
    report = first_build.report
    _, name, tag = split_reference(report["tags"][0])
    status, headers, body = session.registry.manifest(name, tag)
    assert status == 200, body[:500]
    assert headers["content-type"] in MANIFEST_TYPES
    assert headers["docker-content-digest"] == report["digest"]
    assert "sha256:" + hashlib.sha256(body).hexdigest() == report["digest"]
    # Single-arch image (provenance off): a manifest, not an index, for linux/amd64.
    manifest = json.loads(body)
    assert "config" in manifest, f"expected an image manifest, got {manifest.get('mediaType')}"
    config = session.registry.blob_json(name, manifest["config"]["digest"])
    assert (config["os"], config["architecture"]) == ("linux", "amd64")
    assert config["config"]["Labels"]["org.opencontainers.image.revision"] == session.sha("first")
    # The digest reference answers as well.
    status, headers, _ = session.registry.manifest(name, report["digest"], method="HEAD")
    assert status == 200 and headers["docker-content-digest"] == report["digest"]


def test_default_command_runs_the_example_selftest(first_build, session):
    proc = session.docker_run("run", "--rm", first_build.report["ref"], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ghbuild-example selftest:" in proc.stdout
    assert " 0 failed" in proc.stdout and " passed" in proc.stdout


def test_nativecore_selftest_runs(first_build, session):
    proc = session.docker_run("run", "--rm", first_build.report["ref"], "nativecore-selftest", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nativecore" in proc.stdout and " 0 failed" in proc.stdout


def test_runtime_image_has_no_compilers_or_sources(first_build, session):
    """Only the artifact leaves the compile stages."""
    proc = session.docker_run(
        "run", "--rm", "--entrypoint", "sh", first_build.report["ref"], "-c",
        "for p in g++ cc cmake rustc cargo sccache; do command -v $p && echo FOUND $p; done; "
        "ls -d /src /tmp/build /tmp/target /out /ghbuild 2>/dev/null | sed 's/^/FOUND /'; true")
    assert proc.returncode == 0, proc.stderr
    assert "FOUND" not in proc.stdout, proc.stdout


def test_cold_build_compiled_everything_and_wrote_s3(first_build, session):
    """A fresh key prefix: no hits, every cacheable compile a miss, and the misses stored in S3."""
    sc = first_build.report["sccache"]
    assert sc["mode"] == "read-write", sc["reason"]
    assert set(sc["stages"]) == {"cpp", "rust"}
    assert sc["hits"] == 0
    assert sc["misses"] > 0
    for name, stage in sc["stages"].items():
        assert stage["mode"] == "read-write", (name, stage)
        assert stage["requested_mode"] == "read-write" and stage["fallbacks"] == []
        assert stage["from_layer_cache"] is False, f"stage {name} did not run in the cold build"
        assert stage["hits"] == 0 and stage["misses"] > 0, (name, stage)
        assert stage["write_errors"] == 0 and stage["read_errors"] == 0, (name, stage)
        assert session.key_prefix in (stage["cache_location"] or ""), stage["cache_location"]
    assert set(sc["stages"]["cpp"]["misses_by_language"]) == {"C/C++"}
    assert set(sc["stages"]["rust"]["misses_by_language"]) == {"Rust"}
    assert sc["misses"] == sum(s["misses"] for s in sc["stages"].values())
    keys = session.s3_keys(session.key_prefix + "/")
    assert len(keys) >= sc["misses"], f"{len(keys)} objects under {session.key_prefix}/ for {sc['misses']} misses"
    assert not any(k.endswith(".ghbuild-write-probe") for k in keys), "the preflight probe was left behind"


def test_report_covers_stages_and_layers(first_build):
    report = first_build.report
    for stage in ("os-base", "cpp", "rust", "wheel", "runtime"):
        assert stage in report["stages"], report["stages"].keys()
    assert report["stages"]["cpp"]["cached"] < report["stages"]["cpp"]["steps"]
    assert report["layers"] and report["size"] == sum(layer["size"] for layer in report["layers"])
    assert report["stages"]["runtime"]["size"] > 0 and report["stages"]["os-base"]["size"] > 0


def test_the_audits_stage_image_is_kept_under_one_local_tag_and_the_previous_one_removed(first_build, session):
    """The `cpp` budget is measured on that stage's own image (outside the final image's chain). The engine keeps
    the latest such image under `ghbuild.local/audit/cpu:cpp-amd64` (its layers serve the next build) and no
    untagged one: each build would otherwise leave the stage's image behind, gigabytes per commit."""
    assert first_build.report["stages"]["cpp"]["size"] > 0
    assert not any("could not be kept" in w for w in first_build.report["warnings"])
    kept = session.image_inspect("ghbuild.local/audit/cpu:cpp-amd64")
    assert kept and kept["Config"]["Labels"]["org.opencontainers.image.revision"] == session.sha("first")
    for _ in range(60):       # the previous image is removed on its own, not waited for by the build
        listed = session.docker_run("image", "ls", "--all", "--no-trunc", "--filter", "dangling=true",
                                    "--filter", "label=org.opencontainers.image.title=cpu",
                                    "--format", "{{.ID}} {{.Label \"org.opencontainers.image.revision\"}}",
                                    check=True)
        if session.sha("first") not in listed.stdout:
            break
        time.sleep(1)
    assert session.sha("first") not in listed.stdout, f"untagged images of this build left: {listed.stdout}"
