"""ghbuild's sccache helper image, built from ``docker/sccache-helper/`` and pushed to the staging
registry as a multi-arch index ``127.0.0.1:5000/ghbuild/ghbuild-sccache:1`` (amd64 + arm64).

The local stand-in for the helper that ghbuild's nightly publishes: builds on this machine take it through
``GHBUILD_SCCACHE_HELPER_IMAGE`` (local.env), and ghbuild resolves it to a digest for every build.
Each arch image carries a label with a hash of the context's files and the fetch image's digest; when the
index already lists both arches with that label, nothing is built. The wheel is fetched on the build
platform for each target (no emulation), so both arches build in seconds once pip has the wheels.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path

from . import registry, rocm_standin
from .common import (
    BASE_INDEX_REPO,
    BASE_INDEX_TAG,
    LOOPBACK,
    InfraError,
    docker_env,
    http,
    info,
    logs_dir,
    repo_root,
    run,
)

REPOSITORY = "ghbuild/ghbuild-sccache"
TAG = "1"          # the wrapper's contract version (docker/sccache-helper/ghbuild-sccache)
ARCHES = ("amd64", "arm64")
LABEL_HASH = "org.ghbuild.infra.sccache-helper-sha256"
FORMAT = 1         # bump when the way the helper is built changes outside docker/sccache-helper/
STEP = "sccache-helper"


def ref_for(port: int) -> str:
    return f"{LOOPBACK}:{port}/{REPOSITORY}:{TAG}"


def _labels(port: int, digest: str) -> dict:
    got = registry.get_manifest(port, REPOSITORY, digest)
    if got is None:
        return {}
    config_digest = (json.loads(got[1]).get("config") or {}).get("digest")
    resp = http("GET", f"http://{LOOPBACK}:{port}/v2/{REPOSITORY}/blobs/{config_digest}", timeout=30)
    if resp is None or resp.status != 200:
        raise InfraError(STEP, f"cannot read the image config of {REPOSITORY}@{digest}")
    return (json.loads(resp.body).get("config") or {}).get("Labels") or {}


def _current(port: int, want: str) -> bool:
    platforms = registry.index_platforms(port, REPOSITORY, TAG)
    return (platforms is not None and set(platforms) == set(ARCHES)
            and all(_labels(port, platforms[a]["digest"]).get(LABEL_HASH) == want for a in ARCHES))


def _build_and_push(docker_cli: str, port: int, arch: str, fetch: str, want: str, log) -> dict:
    arch_ref = f"{ref_for(port)}-{arch}"
    context = repo_root() / "docker" / "sccache-helper"
    info(f"sccache-helper: building {arch_ref} from {context} (log: {log})")
    run([docker_cli, "build", "--progress=plain", f"--platform=linux/{arch}", "--network=host",
         "--build-arg", f"FETCH_IMAGE={fetch}", "--label", f"{LABEL_HASH}={want}", "-t", arch_ref, str(context)],
        step_name=f"{STEP}/build-{arch}", env=docker_env(), log=log, timeout=900)
    _check_binary(docker_cli, arch_ref, arch, context, log)
    run([docker_cli, "push", arch_ref], step_name=f"{STEP}/push-{arch}", env=docker_env(), log=log, timeout=600)
    return registry.platform_descriptor(port, REPOSITORY, f"{TAG}-{arch}", arch, STEP, log)


def pinned_binaries(context: Path) -> dict[str, str]:
    """docker/sccache-helper/sccache.sha256: arch -> sha256 of the image's /bin/sccache."""
    pins = {}
    for line in (context / "sccache.sha256").read_text("utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            arch, digest = line.split()
            pins[arch] = digest
    return pins


def _check_binary(docker_cli: str, ref: str, arch: str, context: Path, log) -> None:
    """The built image's /bin/sccache is the binary sccache.sha256 names for `arch`, read out of the image
    (no container runs), before anything is pushed."""
    with tempfile.TemporaryDirectory(prefix="ghbuild-helper-") as tmp:
        created = run([docker_cli, "create", "--platform", f"linux/{arch}", ref, "/bin/sccache"],
                      step_name=f"{STEP}/check-{arch}", env=docker_env(), log=None, timeout=120)
        cid = created.stdout.strip()
        try:
            run([docker_cli, "cp", f"{cid}:/bin/sccache", f"{tmp}/sccache"], step_name=f"{STEP}/check-{arch}",
                env=docker_env(), log=log, timeout=120)
        finally:
            run([docker_cli, "rm", "-f", cid], step_name=f"{STEP}/check-{arch}", env=docker_env(), log=log,
                timeout=120, check=False)
        got = hashlib.sha256(Path(tmp, "sccache").read_bytes()).hexdigest()
    want = pinned_binaries(context).get(arch)
    if got != want:
        raise InfraError(STEP, f"{ref}: /bin/sccache has sha256 {got}, not {want} (docker/sccache-helper/"
                               "sccache.sha256): not pushed")
    info(f"sccache-helper: {ref}: /bin/sccache sha256 {got[:12]}… as pinned")


def ensure(docker_cli: str, port: int, fetch_image: str | None = None) -> str:
    """Build and push the helper unless the registry has it for these inputs. Returns its tag ref."""
    fetch = fetch_image or f"{LOOPBACK}:{port}/{BASE_INDEX_REPO}:{BASE_INDEX_TAG}"
    context = repo_root() / "docker" / "sccache-helper"
    want = rocm_standin.content_hash(context, fetch, rocm_standin.base_digest(fetch), fmt=FORMAT,
                                     platform="+".join(ARCHES))
    ref = ref_for(port)
    if _current(port, want):
        info(f"sccache-helper: {ref} present")
        return ref
    log = logs_dir() / "sccache-helper.log"
    descriptors = [_build_and_push(docker_cli, port, arch, fetch, want, log) for arch in ARCHES]
    registry.put_index(port, REPOSITORY, TAG, descriptors, STEP)
    if not _current(port, want):
        raise InfraError(STEP, f"{ref} does not list {'+'.join(ARCHES)} with {LABEL_HASH}={want[:12]}… after the push")
    info(f"sccache-helper: pushed {ref} ({'+'.join(ARCHES)})")
    return ref
