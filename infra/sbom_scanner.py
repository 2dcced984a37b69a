"""ghbuild's local SBOM generator, built from ``docker/sbom-scanner/`` and pushed to the staging registry as a
multi-arch index ``127.0.0.1:5000/ghbuild/ghbuild-sbom-scanner:1`` (amd64 + arm64).

BuildKit's default SBOM generator (docker/buildkit-syft-scanner) is on Docker Hub, which this machine cannot
reach; this one speaks the same protocol (BUILDKIT_SCAN_SOURCE in, ``<name>.spdx.json`` in-toto statements out)
and lists the Debian packages dpkg says are installed. ``.ghbuild/local.env`` names it by digest as
``build.sbom-generator`` (GHBUILD_BUILD_SBOM_GENERATOR), so an image with ``attest.sbom = true`` gets an SBOM here.

Each arch image is FROM the local Debian base by digest and carries a label with a hash of the folder's files and
that digest; when the index already lists both arches with that label, nothing is built. The Dockerfile runs
nothing (COPY only), so the arm64 image needs no emulation.
"""

from __future__ import annotations

from pathlib import Path

from . import registry, rocm_standin
from .common import (
    BASE_INDEX_REPO,
    BASE_INDEX_TAG,
    LOOPBACK,
    InfraError,
    docker_env,
    info,
    logs_dir,
    repo_root,
    run,
)

REPOSITORY = "ghbuild/ghbuild-sbom-scanner"
TAG = "1"          # the scanner's output format (docker/sbom-scanner/scan.sh's TOOL)
ARCHES = ("amd64", "arm64")
LABEL_HASH = "org.ghbuild.infra.sbom-scanner-sha256"
FORMAT = 1         # bump when the way the scanner is built changes outside docker/sbom-scanner/
STEP = "sbom-scanner"


def context_dir() -> Path:
    return repo_root() / "docker" / "sbom-scanner"


def ref_for(port: int) -> str:
    return f"{LOOPBACK}:{port}/{REPOSITORY}:{TAG}"


def _current(port: int, want: str) -> str | None:
    """The index digest when the registry has the scanner for these inputs, else None."""
    if not registry.index_labelled(port, REPOSITORY, TAG, ARCHES, LABEL_HASH, want, STEP):
        return None
    got = registry.get_manifest(port, REPOSITORY, TAG)
    return got[2] if got else None


def _build_and_push(docker_cli: str, port: int, arch: str, base: str, want: str, log: Path) -> dict:
    arch_ref = f"{ref_for(port)}-{arch}"
    info(f"sbom-scanner: building {arch_ref} (log: {log})")
    run([docker_cli, "build", "--progress=plain", f"--platform=linux/{arch}", "--build-arg", f"BASE_IMAGE={base}",
         "--label", f"{LABEL_HASH}={want}", "-t", arch_ref, str(context_dir())],
        step_name=f"{STEP}/build-{arch}", env=docker_env(), log=log, timeout=600)
    run([docker_cli, "push", arch_ref], step_name=f"{STEP}/push-{arch}", env=docker_env(), log=log, timeout=600)
    return registry.platform_descriptor(port, REPOSITORY, f"{TAG}-{arch}", arch, STEP, log)


def ensure(docker_cli: str, port: int) -> str:
    """Build and push the scanner unless the registry has it for these inputs. Returns its ref by digest
    (``…:1@sha256:…``): builds resolve exactly the generator infra checked."""
    index = f"{LOOPBACK}:{port}/{BASE_INDEX_REPO}:{BASE_INDEX_TAG}"
    base_digest = rocm_standin.base_digest(index)
    base = f"{index}@{base_digest}"
    want = rocm_standin.content_hash(context_dir(), base, base_digest, fmt=FORMAT, platform="+".join(ARCHES))
    digest = _current(port, want)
    if digest:
        info(f"sbom-scanner: {ref_for(port)} present ({digest})")
        return f"{ref_for(port)}@{digest}"
    log = logs_dir() / "sbom-scanner.log"
    descriptors = [_build_and_push(docker_cli, port, arch, base, want, log) for arch in ARCHES]
    registry.put_index(port, REPOSITORY, TAG, descriptors, STEP)
    digest = _current(port, want)
    if not digest:
        raise InfraError(STEP, f"{ref_for(port)} does not list {'+'.join(ARCHES)} with {LABEL_HASH}={want[:12]}… "
                               f"after the push (log: {log})")
    info(f"sbom-scanner: pushed {ref_for(port)} ({'+'.join(ARCHES)}, {digest})")
    return f"{ref_for(port)}@{digest}"
