"""Cache mounts that survive a fresh runner: a job's `RUN --mount=type=cache` contents (images.<name>.cache-mounts)
restored into the builder before the build and saved after it, as OCI artifacts in the cache repository.

Restore: the first entry of the plan's refs that is there (own scope, then the canonical one) is downloaded (its
digest checked), checked member by member (only relative paths that stay inside the mount) into a plain tar, and
a throwaway build on the same builder extracts it into the cache mount of the same id. Save (only when the plan
gives a write ref): a throwaway build copies the mount's files into a stage that `--output type=tar` writes out;
ghbuild leaves out the oldest files over the cap, writes one deterministic tar+gzip layer and pushes it, unless it
is the entry just restored. Every failure here is a warning: the build goes on with the mount as it is.
The Dockerfiles and the cap are in ghbuild.build.mountfiles.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import tarfile
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ghbuild import naming
from ghbuild.build import buildcmd, engine, mountfiles
from ghbuild.errors import GhbuildError
from ghbuild.plan.cachemounts import CacheMountRef

CHUNK = 1 << 20
GZIP_LEVEL = 3          # caches are mostly compressed already (wheels, .debs, crates): speed over ratio
_TAR_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error, ValueError)


class MountRun(NamedTuple):
    """What the restore and save steps of one build share."""

    settings: buildcmd.BuildSettings     # the build's docker client and builder
    platform: str
    image: str                           # where the steps run (sh, tar, cp)
    workdir: Path
    env: Mapping[str, str]
    redact: tuple[str, ...]
    registries: Callable[[str], Any]     # host -> ghbuild.registry.client.Registry
    namespace: str | None = None         # BUILDKIT_CACHE_MOUNT_NS of the build, if it passes one


class _Unusable(Exception):
    """An entry that is there but cannot be restored (wrong content, corrupt, over the cap)."""


def restore(run: MountRun | None, mounts: tuple[CacheMountRef, ...], warnings: list[str]) -> list[dict[str, Any]]:
    """Each mount's entry into the builder; one result per mount for the report (none without a MountRun)."""
    if run is None:
        return []
    return [_restore_one(run, mount, index, warnings) for index, mount in enumerate(mounts)]


def save(run: MountRun | None, mounts: tuple[CacheMountRef, ...], results: list[dict[str, Any]],
         warnings: list[str]) -> None:
    """Each mount with a write ref out of the builder into its entry; adds `saved` to its result."""
    if run is None:
        return
    for index, (mount, result) in enumerate(zip(mounts, results, strict=True)):
        if not mount.write:
            result["saved"] = {"status": "not written (this run may not write its cache scope)"}
            continue
        start = time.monotonic()
        try:
            result["saved"] = _save_one(run, mount, index, result.get("restored") or {})
        except (GhbuildError, _Unusable, *_TAR_ERRORS) as exc:
            warnings.append(f"cache mount {mount.id}: not saved to {mount.write}: {_why(exc)}")
            result["saved"] = {"status": "failed", "to": mount.write}
        result["saved"]["seconds"] = round(time.monotonic() - start, 2)


def _why(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0][:300]


# --------------------------------------------------------------------------- restore

def _restore_one(run: MountRun, mount: CacheMountRef, index: int, warnings: list[str]) -> dict[str, Any]:
    result: dict[str, Any] = {"id": mount.id, "target": mount.target, "max_size": mount.max_size}
    start = time.monotonic()
    work = run.workdir / f"mount-{index}"
    problems: list[str] = []
    for ref in mount.read:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        try:
            found = _fetch(run, ref, mount, work)
            if found is None:
                continue
            status = _run_step(run, mountfiles.restore_dockerfile(mount, run.image), work / "context", "type=cacheonly",
                               work / "restore.log")
        except (GhbuildError, _Unusable, *_TAR_ERRORS) as exc:
            problems.append(f"{ref}: {_why(exc)}")
            continue
        finally:
            (work / "entry.tar.gz").unlink(missing_ok=True)
        kept = mountfiles.step_said(status) == mountfiles.KEPT
        result["restored"] = {**found, "from": ref, "seconds": round(time.monotonic() - start, 2),
                              "status": "kept (the builder had it)" if kept else "restored"}
        if kept:
            result["restored"]["bytes"] = 0
        break
    else:
        result["restored"] = {"status": "missing", "bytes": 0, "seconds": round(time.monotonic() - start, 2)}
        for problem in problems:
            warnings.append(f"cache mount {mount.id}: entry not restored: {problem}")
        if not problems:
            warnings.append(f"cache mount {mount.id}: no entry yet ({', '.join(mount.read) or 'no registries.cache'}); "
                            "the build starts with the mount as the builder has it")
    shutil.rmtree(work / "context", ignore_errors=True)
    return result


def _fetch(run: MountRun, ref: str, mount: CacheMountRef, work: Path) -> dict[str, Any] | None:
    """The entry at `ref` as a checked plain tar in work/context (None: the registry says there is none)."""
    host, repo, tag = naming.split_reference(ref)
    registry = run.registries(host)
    found = registry.find_manifest(repo, tag)
    if found is None:
        return None
    try:
        digest, size = mountfiles.entry_layer(found.data, max_blob=mount.max_size + (mount.max_size >> 3) + (1 << 20))
    except ValueError as exc:
        raise _Unusable(str(exc)) from None
    blob = work / "entry.tar.gz"
    sha = hashlib.sha256()
    with registry.open_blob(repo, digest) as response, open(blob, "wb") as out:
        for chunk in response.iter_content(CHUNK):
            sha.update(chunk)
            out.write(chunk)
            if out.tell() > size:
                break
    if f"sha256:{sha.hexdigest()}" != digest or blob.stat().st_size != size:
        raise _Unusable(f"layer {digest[:19]}: the bytes read are not the digest's ({blob.stat().st_size} bytes)")
    context = work / "context"
    context.mkdir()
    files, total = _checked_tar(blob, context / mountfiles.ENTRY_FILE, mount.max_size)
    (context / "nonce").write_text(uuid.uuid4().hex)    # the step runs every time, never from the layer cache
    return {"digest": digest, "blob_bytes": size, "bytes": total, "files": files}


def _checked_tar(blob: Path, out: Path, cap: int) -> tuple[int, int]:
    """gzip tar -> plain tar of its safe members; over the cap (beyond an eighth) it is refused."""
    files = total = 0
    try:
        with tarfile.open(blob, "r|gz") as source, tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as target:
            for member in source:
                kind = _kind(member)
                link = member.linkname if member.issym() or member.islnk() else None
                if not mountfiles.safe_member(member.name, kind, link):
                    raise _Unusable(f"member {member.name[:80]!r} ({kind}) would land outside the mount")
                if member.isfile():
                    files += 1
                    total += member.size
                    if total > cap + (cap >> 3):
                        raise _Unusable(f"more than the cap of {cap} bytes")
                target.addfile(member, source.extractfile(member) if member.isfile() else None)
    except _Unusable:
        raise
    except _TAR_ERRORS as exc:
        raise _Unusable(f"not a readable tar+gzip ({_why(exc)})") from None
    return files, total


def _kind(member: tarfile.TarInfo) -> str:
    return ("file" if member.isfile() else "dir" if member.isdir() else "symlink" if member.issym()
            else "hardlink" if member.islnk() else "other")


# --------------------------------------------------------------------------- save

def _save_one(run: MountRun, mount: CacheMountRef, index: int, restored: Mapping[str, Any]) -> dict[str, Any]:
    assert mount.write
    work = run.workdir / f"mount-save-{index}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "context").mkdir(parents=True)
    (work / "context" / "nonce").write_text(uuid.uuid4().hex)
    exported = work / "mount.tar"
    try:
        _run_step(run, mountfiles.save_dockerfile(mount, run.image), work / "context",
                  f"type=tar,dest={exported}", work / "save.log")
        layer = work / "layer.tar.gz"
        selection = _capped_layer(exported, layer, mount.max_size)
        exported.unlink()
        digest, size = _digest(layer)
        saved = {"to": mount.write, "digest": digest, "blob_bytes": size, "bytes": selection.bytes,
                 "files": selection.files, "dropped_files": selection.dropped_files,
                 "dropped_bytes": selection.dropped_bytes}
        if restored.get("digest") == digest and restored.get("from") == mount.write:
            return {**saved, "status": "unchanged"}
        _push(run, mount, layer, digest, size, mountfiles.config(mount, run.platform, selection))
        return {**saved, "status": "saved"}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _capped_layer(exported: Path, layer: Path, cap: int) -> mountfiles.Selection:
    """The exported files within the cap as a tar+gzip that is the same bytes for the same files (gzip mtime 0,
    members in the export's order), so an unchanged mount is not pushed again."""
    with tarfile.open(exported, "r:") as source:
        members = source.getmembers()
        selection = mountfiles.select_within(
            (mountfiles.FileEntry(m.name, m.size if m.isfile() else 0, m.mtime, m.isfile(),
                                  m.linkname if m.islnk() else None) for m in members), cap)
        with open(layer, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                     compresslevel=GZIP_LEVEL) as packed, \
                tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as target:
            for member in members:
                if member.name in selection.keep:
                    target.addfile(member, source.extractfile(member) if member.isfile() else None)
    return selection


def _digest(path: Path) -> tuple[str, int]:
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            sha.update(chunk)
    return f"sha256:{sha.hexdigest()}", path.stat().st_size


def _chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as fh:
        yield from iter(lambda: fh.read(CHUNK), b"")


def _push(run: MountRun, mount: CacheMountRef, layer: Path, digest: str, size: int, config: bytes) -> None:
    from ghbuild.registry.manifest import Descriptor, sha256_digest  # the registry layer: only when saving

    assert mount.write
    host, repo, tag = naming.split_reference(mount.write)
    registry = run.registries(host)
    config_digest = sha256_digest(config)
    if not registry.blob_exists(repo, digest):
        registry.upload_stream(repo, Descriptor(mountfiles.LAYER_TYPE, digest, size), _chunks(layer))
    if not registry.blob_exists(repo, config_digest):
        registry.upload_stream(repo, Descriptor(mountfiles.CONFIG_TYPE, config_digest, len(config)), [config])
    registry.put_manifest(repo, tag, mountfiles.manifest(config, config_digest, digest, size), mountfiles.MANIFEST_TYPE)


# --------------------------------------------------------------------------- the steps' builds

def _run_step(run: MountRun, dockerfile: str, context: Path, output: str, log_path: Path) -> str:
    """One throwaway build on the job's builder; returns its log. Fails (EngineError) with its last line."""
    from ghbuild.errors import EngineError

    path = context.parent / "Dockerfile"
    path.write_text(dockerfile)
    settings = run.settings
    argv = [settings.docker, *(["--context", settings.context] if settings.context else []), "buildx", "build"]
    if settings.builder and not settings.context:
        argv += ["--builder", settings.builder]
    argv += ["--progress", "plain", "--platform", run.platform, "--file", str(path), "--output", output,
             "--provenance=false"]
    if run.namespace:
        argv += ["--build-arg", f"BUILDKIT_CACHE_MOUNT_NS={run.namespace}"]
    rc, _seconds = engine.run_streaming([*argv, str(context)], run.env, log_path, echo=False, redact=run.redact)
    text = log_path.read_text("utf-8", errors="replace")
    if rc != 0:
        tail = [line for line in text.splitlines() if line.strip()][-1:] or ["(no output)"]
        raise EngineError(f"the cache-mount step's build failed (exit {rc}): {tail[0][:300]}")
    return text
