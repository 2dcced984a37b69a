"""ghbuild's sccache helper image, built from ``docker/sccache-helper/`` and pushed to the staging
registry as a multi-arch index ``127.0.0.1:5000/ghbuild/ghbuild-sccache:1`` (amd64 + arm64).

The local stand-in for the helper that ghbuild's nightly publishes: builds on this machine take it through
``GHBUILD_SCCACHE_HELPER_IMAGE`` (local.env), and ghbuild resolves it to a digest for every build.
The image is ``FROM scratch``: the folder's ``fetch_sccache.py`` (loaded by its path, the same code
sccache-helper.yml runs) fetches and checks each arch's sccache into a copy of the folder first. Each arch
image carries a label with a hash of the folder's files; when the index already lists both arches with that
label, nothing is fetched or built.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import shutil
import tempfile
from pathlib import Path
from types import ModuleType

from . import registry, rocm_standin
from .common import (
    LOOPBACK,
    InfraError,
    docker_env,
    info,
    logs_dir,
    repo_root,
    run,
)

REPOSITORY = "ghbuild/ghbuild-sccache"
TAG = "1"          # the wrapper's contract version (docker/sccache-helper/ghbuild-sccache)
ARCHES = ("amd64", "arm64")
LABEL_HASH = "org.ghbuild.infra.sccache-helper-sha256"
FORMAT = 2         # bump when the way the helper is built changes outside docker/sccache-helper/
STEP = "sccache-helper"


def ref_for(port: int) -> str:
    return f"{LOOPBACK}:{port}/{REPOSITORY}:{TAG}"


def _current(port: int, want: str) -> bool:
    return registry.index_labelled(port, REPOSITORY, TAG, ARCHES, LABEL_HASH, want, STEP)


def _fetch_module() -> ModuleType:
    return _load_fetch_module(repo_root() / "docker" / "sccache-helper" / "fetch_sccache.py")


@functools.cache
def _load_fetch_module(path: Path) -> ModuleType:
    """docker/sccache-helper/fetch_sccache.py, by its path (standard library only, like infra)."""
    spec = importlib.util.spec_from_file_location("_ghbuild_fetch_sccache", path)
    if spec is None or spec.loader is None:
        raise InfraError(STEP, f"{path} cannot be loaded")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _copy_context(source: Path, dest: Path) -> Path:
    """The helper's folder without what a fetch or an import leaves there: the label hashes exactly this."""
    if not source.is_dir():
        raise InfraError(STEP, f"{source} is missing")

    def leftovers(folder: str, names: list[str]) -> list[str]:
        return [n for n in names if n == "__pycache__" or (n == "bin" and Path(folder) == source)]

    shutil.copytree(source, dest, ignore=leftovers)
    return dest


def _fetch(context: Path, arch: str) -> None:
    """sccache for `arch` into context/bin/<arch>/, checked against the pins before anything is built."""
    fetcher = _fetch_module()
    try:
        target = fetcher.fetch(arch, context / "bin", context=context)
    except fetcher.FetchError as exc:
        raise InfraError(f"{STEP}/fetch-{arch}", f"fetch_sccache: {exc}") from None
    info(f"sccache-helper: {arch}: sccache fetched and checked ({target.stat().st_size} bytes, sha256 as pinned)")


def _build_and_push(docker_cli: str, port: int, arch: str, context: Path, want: str, log) -> dict:
    arch_ref = f"{ref_for(port)}-{arch}"
    _fetch(context, arch)
    info(f"sccache-helper: building {arch_ref} (log: {log})")
    run([docker_cli, "build", "--progress=plain", f"--platform=linux/{arch}",
         "--label", f"{LABEL_HASH}={want}", "-t", arch_ref, str(context)],
        step_name=f"{STEP}/build-{arch}", env=docker_env(), log=log, timeout=900)
    _check_binary(docker_cli, arch_ref, arch, context, log)
    run([docker_cli, "push", arch_ref], step_name=f"{STEP}/push-{arch}", env=docker_env(), log=log, timeout=600)
    return registry.platform_descriptor(port, REPOSITORY, f"{TAG}-{arch}", arch, STEP, log)


def _check_binary(docker_cli: str, ref: str, arch: str, context: Path, log) -> None:
    """Defence in depth: the built image's /bin/sccache is still the binary sccache.sha256 names for `arch`
    (a Dockerfile change cannot ship another one), read out of the image (no container runs), before the push."""
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
    want = _fetch_module().pinned_binaries(context).get(arch)
    if got != want:
        raise InfraError(STEP, f"{ref}: /bin/sccache has sha256 {got}, not {want} (docker/sccache-helper/"
                               "sccache.sha256): not pushed")
    info(f"sccache-helper: {ref}: /bin/sccache sha256 {got[:12]}… as pinned")


def ensure(docker_cli: str, port: int) -> str:
    """Build and push the helper unless the registry has it for these inputs. Returns its tag ref."""
    ref = ref_for(port)
    with tempfile.TemporaryDirectory(prefix="ghbuild-helper-context-") as tmp:
        context = _copy_context(repo_root() / "docker" / "sccache-helper", Path(tmp) / "context")
        # No base image: the label hashes the folder's files only (the pins, the wrapper, the Dockerfile, the fetch).
        want = rocm_standin.content_hash(context, "scratch", None, fmt=FORMAT, platform="+".join(ARCHES))
        if _current(port, want):
            info(f"sccache-helper: {ref} present")
            return ref
        log = logs_dir() / "sccache-helper.log"
        descriptors = [_build_and_push(docker_cli, port, arch, context, want, log) for arch in ARCHES]
    registry.put_index(port, REPOSITORY, TAG, descriptors, STEP)
    if not _current(port, want):
        raise InfraError(STEP, f"{ref} does not list {'+'.join(ARCHES)} with {LABEL_HASH}={want[:12]}… after the push")
    info(f"sccache-helper: pushed {ref} ({'+'.join(ARCHES)})")
    return ref
