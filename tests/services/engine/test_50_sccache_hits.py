"""A fresh builder (`docker builder prune -af`) rebuilds the unchanged sources from sccache on S3:
every cacheable compile of the first build is a hit (cache mounts die with the builder,
only a remote compiler cache survives a fresh runner; hits reported per stage and language).

Two rebuilds after a prune:
- with the registry layer cache the first build pushed: every step comes from the layer cache,
  nothing compiles, and the report must not count the old stats as this build's;
- without a layer cache (GHBUILD_REGISTRIES_CACHE="", as when the layers are gone or do not match):
  the compile stages run, and every compile is an sccache hit.
"""

from __future__ import annotations

import json

import pytest

from ghbuild.naming import split_reference


def prune(session):
    proc = session.docker_run("builder", "prune", "-af", timeout=900)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="session")
def layer_cached_build(session, first_build):
    _ = first_build.report  # the first build must have succeeded before its caches are worth anything
    prune(session)
    run = session.ghbuild("layer-cached", "--push", "--json")
    assert run.rc == 0, run.tail(60)
    return run


@pytest.fixture(scope="session")
def second_build(session, first_build, layer_cached_build):
    prune(session)
    run = session.cold_build("second", "--push", "--json", env=session.env(GHBUILD_REGISTRIES_CACHE=""))
    assert run.rc == 0, run.tail(60)
    return run


def test_pruned_builder_reads_the_registry_layer_cache(layer_cached_build, first_build):
    report = layer_cached_build.report
    assert report["cache_from"] == first_build.report["cache_from"]
    for name in ("cpp", "rust", "runtime"):
        stage = report["stages"][name]
        assert stage["cached"] == stage["steps"] > 0, (name, stage)
    sc = report["sccache"]
    for name, stage in sc["stages"].items():
        assert stage["from_layer_cache"] is True, (name, stage)
    # The wrapped steps did not run: nothing compiled, nothing counted as this build's hits or misses.
    assert (sc["hits"], sc["misses"], sc["hit_rate"]) == (0, 0, None), sc
    assert "(layer cache)" in layer_cached_build.stderr


def test_compile_stages_ran_again(second_build):
    """No layer cache could serve them: this is the fresh-runner case, not a layer-cache hit."""
    report = second_build.report
    assert not any("type=registry" in ref for ref in report["cache_from"]), report["cache_from"]
    for name, stage in report["sccache"]["stages"].items():
        assert stage["from_layer_cache"] is False, f"stage {name} came from the layer cache"
    for name in ("cpp", "rust"):
        assert report["stages"][name]["cached"] < report["stages"][name]["steps"], report["stages"][name]


def test_every_cacheable_compile_is_a_hit(first_build, second_build):
    first, second = first_build.report["sccache"], second_build.report["sccache"]
    assert second["mode"] == "read-write", second["reason"]
    assert second["misses"] == 0, second
    assert second["hits"] == first["misses"] > 0
    assert second["hit_rate"] == 1.0
    assert set(second["stages"]) == set(first["stages"]) == {"cpp", "rust"}
    for name in first["stages"]:
        before, after = first["stages"][name], second["stages"][name]
        assert after["mode"] == "read-write" and after["fallbacks"] == [], (name, after)
        assert after["misses"] == 0, (name, after)
        assert after["hits"] == before["misses"], (name, before, after)
        # Per language: what missed in the cold build hits now, language by language.
        assert after["hits_by_language"] == before["misses_by_language"], (name, before, after)
        assert after["misses_by_language"] == {}, (name, after)
        assert after["read_errors"] == 0 and after["write_errors"] == 0, (name, after)
        # What sccache cannot cache (Rust cdylib, linking) stays the same, and is not a miss.
        assert after["not_cacheable"] == before["not_cacheable"], (name, before, after)


def test_summary_line_reports_the_hits(second_build):
    sc = second_build.report["sccache"]
    assert f"sccache  read-write: {sc['hits']} hits, 0 misses (100.0 %)" in second_build.stderr


def test_rebuilt_image_is_pushed_and_works(session, second_build):
    report = second_build.report
    _, name, tag = split_reference(report["tags"][0])
    status, headers, body = session.registry.manifest(name, tag)
    assert status == 200 and headers["docker-content-digest"] == report["digest"]
    # The layer audit stored the cpp stage's image uncompressed on the same builder beside this build (no cache
    # export ran): none of those blobs may be what was pushed.
    media_types = {layer["mediaType"] for layer in json.loads(body)["layers"]}
    assert media_types <= {"application/vnd.oci.image.layer.v1.tar+gzip",
                           "application/vnd.docker.image.rootfs.diff.tar.gzip"}, media_types
    assert "cpp" in report["stages"] and report["stages"]["cpp"].get("size", 0) > 0, report["stages"].get("cpp")
    proc = session.docker_run("run", "--rm", report["ref"], timeout=300)
    assert proc.returncode == 0 and " 0 failed" in proc.stdout, proc.stdout + proc.stderr
    proc = session.docker_run("run", "--rm", report["ref"], "nativecore-selftest", timeout=300)
    assert proc.returncode == 0 and " 0 failed" in proc.stdout, proc.stdout + proc.stderr


def test_the_audits_previous_stage_image_is_removed_once_a_newer_one_is_kept(session, first_build, second_build):
    """Each build of another commit tags its own `cpp` stage image and removes the one the tag held before."""
    import time

    kept = session.image_inspect("ghbuild.local/audit/cpu:cpp-amd64")
    assert kept and kept["Config"]["Labels"]["org.opencontainers.image.revision"] == session.sha("second")
    earlier = [session.sha("first"), session.sha("layer-cached")]
    for _ in range(60):       # removed on its own, not waited for by the build
        listed = session.docker_run("image", "ls", "--all", "--no-trunc", "--filter", "dangling=true",
                                    "--filter", "label=org.opencontainers.image.title=cpu",
                                    "--format", '{{.Label "org.opencontainers.image.revision"}}', check=True)
        if not any(sha in listed.stdout for sha in earlier):
            break
        time.sleep(1)
    assert not any(sha in listed.stdout for sha in earlier), f"earlier stage images left: {listed.stdout}"
