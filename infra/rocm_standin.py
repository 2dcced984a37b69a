"""The CPU stand-in for a ROCm dev image: ``127.0.0.1:5000/base/rocm-standin:6.4`` (amd64 only).

This machine has no AMD GPUs and cannot pull ROCm images, so ``docker/Dockerfile.rocm_base`` and
``docker/Dockerfile.rocm`` are exercised on top of ``docker/rocm-standin/``: the local Debian base
plus g++, python3 and a ``/opt/rocm/bin/hipcc`` shim that compiles HIP sources as C++ for the CPU.
It is not ROCm; its LABEL and ``/opt/rocm/.info/ghbuild-standin`` say so.

``ensure()`` is idempotent and cheap when nothing changed: the image carries a label with a hash of
every file in ``docker/rocm-standin/`` (path, exec bit, content), the base image reference and the
base image's manifest digest. When the registry already has the tag with that label, nothing is built
(one or two HTTP requests). Otherwise it is built with the engine's BuildKit, pushed, and the pushed
image's label and architecture are verified through the registry API.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from .common import (
    BASE_INDEX_REPO,
    BASE_INDEX_TAG,
    InfraError,
    docker_env,
    http,
    info,
    logs_dir,
    repo_root,
    run,
    state_dir,
)

REPOSITORY = "base/rocm-standin"
TAG = "6.4"
PLATFORM = "linux/amd64"
LABEL_HASH = "org.ghbuild.infra.rocm-standin-sha256"
LABEL_STANDIN = "org.ghbuild.rocm-standin"
FORMAT = 1  # bump when the way the stand-in is built changes outside docker/rocm-standin/

_ACCEPT = ", ".join((
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
))
_SINGLE = ("application/vnd.docker.distribution.manifest.v2+json", "application/vnd.oci.image.manifest.v1+json")
STEP = "rocm-standin"


def context_dir() -> Path:
    return repo_root() / "docker" / "rocm-standin"


def ref_for(registry: str) -> str:
    return f"{registry}/{REPOSITORY}:{TAG}"


def content_hash(context: Path, base_image: str, base_digest: str | None, fmt: int = FORMAT,
                 platform: str = PLATFORM) -> str:
    """sha256 over the build's inputs: every file of the context, the base reference and its digest."""
    digest = hashlib.sha256()
    digest.update(json.dumps({"format": fmt, "platform": platform, "base": base_image,
                              "base_digest": base_digest}, sort_keys=True).encode())
    if not context.is_dir():
        raise InfraError(STEP, f"{context} is missing")
    for path in sorted(p for p in context.rglob("*") if not p.is_dir()):
        rel = path.relative_to(context).as_posix()
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            body = b"link:" + os.readlink(path).encode()
        else:
            body = path.read_bytes()
        executable = bool(mode & 0o111)
        digest.update(f"\0{rel}\0{int(executable)}\0{len(body)}\0".encode())
        digest.update(body)
    return digest.hexdigest()


def _scheme(host: str) -> str:
    return "http" if host.startswith(("127.", "localhost")) else "https"


def _manifest(host: str, name: str, reference: str) -> tuple[str, bytes, str] | None:
    """(media type, body, digest) or None when the registry says the manifest is unknown (404)."""
    url = f"{_scheme(host)}://{host}/v2/{name}/manifests/{reference}"
    resp = http("GET", url, headers={"Accept": _ACCEPT}, timeout=30)
    if resp is None:
        raise InfraError(STEP, f"registry {host} does not answer (GET {url})")
    if resp.status == 404:
        return None
    if resp.status != 200:
        raise InfraError(STEP, f"GET {url} answered HTTP {resp.status}")
    media = resp.headers.get("Content-Type", "").split(";")[0].strip()
    return media, resp.body, "sha256:" + hashlib.sha256(resp.body).hexdigest()


def base_digest(base_image: str) -> str | None:
    """The manifest digest of a registry base image (an index for the local Debian base)."""
    # A registry reference `host[:port]/name(:tag|@digest)`; infra never imports ghbuild (its own parser
    # is ghbuild.naming.split_reference, which maps short names to docker.io).
    host, _, rest = base_image.partition("/")
    if not rest or ("." not in host and ":" not in host and host != "localhost"):
        return None  # a Docker Hub short name: not reachable here; the reference alone is hashed
    name, at, reference = rest.partition("@")
    if not at:
        name, _, reference = rest.rpartition(":") if ":" in rest else (rest, "", "latest")
    got = _manifest(host, name, reference)
    if got is None:
        raise InfraError(STEP, f"base image {base_image} is not in its registry (run `make infra-up`)")
    return got[2]


def remote_image(registry: str) -> dict | None:
    """Labels, architecture and digest of the pushed stand-in, or None when the tag is missing."""
    got = _manifest(registry, REPOSITORY, TAG)
    if got is None:
        return None
    media, body, digest = got
    if media not in _SINGLE:
        return {"digest": digest, "labels": {}, "architecture": None}
    config_digest = (json.loads(body).get("config") or {}).get("digest")
    resp = http("GET", f"{_scheme(registry)}://{registry}/v2/{REPOSITORY}/blobs/{config_digest}", timeout=30)
    if resp is None or resp.status != 200:
        raise InfraError(STEP, f"cannot read the image config of {ref_for(registry)} "
                               f"(HTTP {resp.status if resp else 'no answer'})")
    config = json.loads(resp.body)
    return {"digest": digest, "labels": (config.get("config") or {}).get("Labels") or {},
            "architecture": config.get("architecture")}


@contextlib.contextmanager
def _lock() -> Iterator[None]:
    """One builder at a time per checkout (a second caller waits, then finds the image present)."""
    state_dir().mkdir(parents=True, exist_ok=True)
    with open(state_dir() / "rocm-standin.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _current(registry: str, want: str) -> dict | None:
    image = remote_image(registry)
    if image and image["labels"].get(LABEL_HASH) == want and image["architecture"] == "amd64":
        return image
    return None


def ensure(docker_cli: str, registry: str = "127.0.0.1:5000", base_image: str | None = None) -> str:
    """Build and push the stand-in unless the registry has it for these inputs. Returns its tag ref.

    ``base_image`` defaults to the local Debian base index ``<registry>/base/debian:bookworm``.
    Raises InfraError (one line, naming the log) when a step fails.
    """
    base = base_image or f"{registry}/{BASE_INDEX_REPO}:{BASE_INDEX_TAG}"
    ref = ref_for(registry)
    want = content_hash(context_dir(), base, base_digest(base))
    present = _current(registry, want)
    if present:
        info(f"rocm-standin: {ref} present ({present['digest']})")
        return ref
    with _lock():
        present = _current(registry, want)  # another caller may have built it while we waited
        if present:
            info(f"rocm-standin: {ref} present ({present['digest']})")
            return ref
        log = logs_dir() / "rocm-standin.log"
        info(f"rocm-standin: building {ref} from {context_dir()} on {base} (log: {log})")
        run([docker_cli, "build", "--progress=plain", f"--platform={PLATFORM}", "--network=host",
             "--build-arg", f"BASE_IMAGE={base}", "--label", f"{LABEL_HASH}={want}", "-t", ref,
             str(context_dir())],
            step_name=f"{STEP}/build", env=docker_env(), log=log, timeout=1200)
        run([docker_cli, "push", ref], step_name=f"{STEP}/push", env=docker_env(), log=log, timeout=900)
        pushed = remote_image(registry)
        if not pushed or pushed["labels"].get(LABEL_HASH) != want:
            raise InfraError(STEP, f"{ref} in the registry does not carry {LABEL_HASH}={want[:12]}… after the push "
                                   f"(log: {log})")
        if pushed["architecture"] != "amd64" or pushed["labels"].get(LABEL_STANDIN) != "true":
            raise InfraError(STEP, f"{ref}: pushed image is {pushed['architecture']}, labels "
                                   f"{LABEL_STANDIN}={pushed['labels'].get(LABEL_STANDIN)!r}; expected amd64, 'true'")
        info(f"rocm-standin: pushed {ref} ({pushed['digest']})")
        return ref
