"""The ROCm images on the CPU stand-in: rocm-standin -> rocm-base -> rocm, through `ghbuild build`.

This machine has no AMD GPUs and cannot pull ROCm images, so the chain runs on the stand-in
(docker/rocm-standin, built by infra/rocm_standin.py: Debian + g++ + a hipcc shim that compiles
HIP as C++ for the CPU). What that exercises: both Dockerfiles' stage structure on a non-Ubuntu base,
the digest-pinned hand-over from rocm-base to rocm (--require-digest-base), sccache on S3 in the
`native` compile stage through CMAKE_CXX_COMPILER_LAUNCHER (the stand-in's hipcc path) with its
per-stage stats reported by ghbuild, the wheel, and the runtime's self-test entrypoint with kernels
running on the CPU. Not exercised: the real HIP path (enable_language(HIP), ROCm's clang,
CMAKE_HIP_COMPILER_LAUNCHER, device code), PyTorch for ROCm, GPUs.

The images are the repository's own (ghbuild.toml: rocm-base content-addressed, rocm on it); the
local environment points rocm-base at the stand-in with a small framework (numpy) for PyTorch.
rocm-base comes from `ghbuild ensure-base` (a fresh staging repository per session: built once).
"""

from __future__ import annotations

import json
import time

import pytest

from infra import rocm_standin

from .enginelib import COLD_BUILD_TIMEOUT, CONTEXT_FLAGS, ghbuild_argv

FRAMEWORK = "numpy==1.26.4"


@pytest.fixture(scope="module")
def repos(session):
    session.created_repos.update({f"ghbuild-test-{session.sid}/rocm-base", f"ghbuild-test-{session.sid}/rocm"})


@pytest.fixture(scope="module")
def standin(session) -> dict:
    start = time.monotonic()
    ref = rocm_standin.ensure(session.docker, session.registry.host)
    first = time.monotonic() - start
    start = time.monotonic()
    again = rocm_standin.ensure(session.docker, session.registry.host)
    return {"ref": ref, "again": again, "first_seconds": first, "again_seconds": time.monotonic() - start}


def _ghbuild(session, name: str, command: str, image: str, *extra: str):
    sha = session.sha(name)
    session.used_shas.add(sha)
    argv = [*ghbuild_argv(), command, "--image", image, "--arch", "amd64", *CONTEXT_FLAGS, "--sha", sha, *extra]
    return session.ghbuild(name, argv=argv, timeout=COLD_BUILD_TIMEOUT)


@pytest.fixture(scope="module")
def rocm_base(session, repos, standin):
    """`ensure-base`: a confirmed miss in this session's repository, so it builds, pushes and checks labels."""
    run = _ghbuild(session, "rocm-base", "ensure-base", "rocm-base", "--json")
    assert run.rc == 0, f"ensure-base rocm-base failed (exit {run.rc}):\n{run.tail(60)}"
    assert run.report["built"] is True
    return run


@pytest.fixture(scope="module")
def rocm(session, rocm_base):
    run = _ghbuild(session, "rocm", "build", "rocm", "--base-image", rocm_base.report["ref"], "--push", "--json")
    assert run.rc == 0, f"rocm build failed (exit {run.rc}):\n{run.tail(60)}"
    return run


# --------------------------------------------------------------------------- the stand-in

def test_standin_is_pushed_labelled_and_idempotent(session, standin):
    assert standin["ref"] == standin["again"] == f"{session.registry.host}/base/rocm-standin:6.4"
    assert standin["again_seconds"] < 5, f"second ensure() took {standin['again_seconds']:.1f} s: it rebuilt"
    image = rocm_standin.remote_image(session.registry.host)
    assert image["architecture"] == "amd64"
    assert image["labels"]["org.ghbuild.rocm-standin"] == "true"
    assert len(image["labels"][rocm_standin.LABEL_HASH]) == 64
    proc = session.docker_run("run", "--rm", standin["ref"], "sh", "-c",
                              "hipcc --version | head -n 1; cat /opt/rocm/.info/version; ls /opt/rocm/.info")
    assert proc.returncode == 0, proc.stderr
    assert "ghbuild-standin" in proc.stdout and "6.4.1" in proc.stdout and "ghbuild-standin" in proc.stdout.split()


# --------------------------------------------------------------------------- rocm-base

def test_rocm_base_is_pushed_by_digest_with_its_stages(session, rocm_base):
    result = rocm_base.report
    report = result["build_report"]
    assert report["pushed"] is True and report["target"] == "base"
    assert result["ref"] == f"{session.registry.host}/ghbuild-test-{session.sid}/rocm-base@{result['digest']}"
    assert result["found_at"].endswith(f"/rocm-base:rocm-base-{result['identity']}")
    for stage in ("toolchain", "framework", "python-deps", "base"):
        assert stage in report["stages"], report["stages"].keys()
    # No compile stage in the base: nothing for sccache to report.
    assert report["sccache"]["stages"] == {}
    assert "ghbuild: built rocm-base/amd64 (buildx)" in rocm_base.stderr


def test_rocm_base_has_toolchain_framework_and_manifest(session, rocm_base):
    proc = session.docker_run(
        "run", "--rm", rocm_base.report["ref"], "sh", "-c",
        "set -eu; for t in cmake ninja g++ hipcc; do command -v $t >/dev/null; done; "
        "if command -v sccache; then echo 'sccache in the base: the helper image brings it'; exit 1; fi; "
        "python -c 'import json, numpy, setuptools, wheel; d = json.load(open(\"/usr/share/ghbuild/rocm-base.json\")); "
        "print(json.dumps({k: d[k] for k in (\"rocm_version\", \"rocm_standin\", \"framework_spec\")}))'",
        timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"rocm_version": "6.4.1", "rocm_standin": True,
                                                                "framework_spec": FRAMEWORK}


# --------------------------------------------------------------------------- rocm

def test_rocm_base_is_found_again_without_a_build(session, rocm_base):
    again = _ghbuild(session, "rocm-base-again", "ensure-base", "rocm-base", "--json")
    assert again.report["built"] is False and again.report["ref"] == rocm_base.report["ref"]


def test_rocm_refuses_a_mutable_base(session, standin):
    run = _ghbuild(session, "rocm-tag-base", "build", "rocm", "--base-image", standin["ref"], "--json")
    assert run.rc == 5, run.tail()
    assert "is not digest-pinned (name@sha256:<64 hex>); refusing a mutable base" in run.stderr
    assert "--- build" not in run.stderr, "nothing may be built on a mutable base"


def test_rocm_compiles_hip_through_sccache_and_reports_it(session, rocm):
    report = rocm.report
    assert report["pushed"] is True and report["target"] == "runtime"
    sc = report["sccache"]
    assert sc["mode"] == "read-write", sc["reason"]
    assert set(sc["stages"]) == {"native"}
    native = sc["stages"]["native"]
    assert native["from_layer_cache"] is False
    assert native["mode"] == "read-write" and native["fallbacks"] == []
    # Five .hip kernels and the host selftest, compiled by the stand-in's hipcc as C++, and CMake's compiler
    # check (the wrapper's launcher variables reach it through the environment): a fresh key prefix.
    assert native["misses"] == 7 and native["hits"] == 0, native
    assert native["misses_by_language"] == {"C/C++": 7}
    assert native["write_errors"] == 0 and session.key_prefix in (native["cache_location"] or "")
    assert sc["misses"] == 7
    assert "native     read-write hits    0  misses    7" in rocm.stderr


def test_rocm_runtime_selftest_runs_kernels(session, rocm):
    proc = session.docker_run("run", "--rm", rocm.report["ref"], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ghbuild-rocm selftest: hipcc-standin: 9 passed, 0 failed" in proc.stdout
    assert "device 0: ghbuild CPU stand-in (not a GPU) [cpu-standin]" in proc.stdout
    proc = session.docker_run("run", "--rm", rocm.report["ref"], "ghbuild-hip-selftest", timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ghbuild-hip-selftest: hipcc-standin on ghbuild CPU stand-in (not a GPU) [cpu-standin]: 7 passed, 0 failed" \
        in proc.stdout


def test_stand_in_image_never_passes_a_gpu_smoke_test(session, rocm):
    proc = session.docker_run("run", "--rm", rocm.report["ref"], "ghbuild-rocm-selftest", "--require-gpu", "--json",
                              timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["compile_path"] == "hipcc-standin" and result["failed"] == 1
    assert result["checks"][0] == {"check": "compiled as hipcc-standin", "ok": False,
                                   "why": "built for the CPU stand-in, not for a GPU"}


def test_rocm_runtime_has_no_build_tree_stats_or_helper(session, rocm):
    proc = session.docker_run("run", "--rm", "--entrypoint", "sh", rocm.report["ref"], "-c",
                              "ls -d /src /tmp/build /out /ghbuild /opt/ghbuild /usr/share/ghbuild/build-stats "
                              "2>/dev/null | sed 's/^/FOUND /'; true")
    assert proc.returncode == 0, proc.stderr
    assert "FOUND" not in proc.stdout, proc.stdout
