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
from typing import IO, Any, NamedTuple, cast

from ghbuild import naming
from ghbuild.build import buildcmd, engine, mountfiles
from ghbuild.errors import GhbuildError
from ghbuild.plan.cachemounts import CacheMountRef

CHUNK = 1 << 20
GZIP_LEVEL = 3          # caches are mostly compressed already (wheels, .debs, crates): speed over ratio
# MemoryError too: a hostile entry that still gets tarfile to hold too much is a warning, not a traceback.
_TAR_ERRORS = (tarfile.TarError, EOFError, OSError, zlib.error, ValueError, MemoryError)
_SET_ID_BITS = 0o6000   # setuid, setgid: never carried into a mount a later step may run as root
_Unusable = mountfiles.Unusable


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


def restore(run: MountRun | None, mounts: tuple[CacheMountRef, ...], warnings: list[str]) -> list[dict[str, Any]]:
    """Each mount's entry into the builder; one result per mount for the report (none without a MountRun). The
    steps' image is pinned to a digest first (`image` in each result: the save runs the same)."""
    if run is None:
        return []
    try:
        image = _step_image(run, warnings)
    except (GhbuildError, *_TAR_ERRORS) as exc:
        why = f"the steps' image {run.image} was not pinned to a digest ({_why(exc)})"
        warnings.append(f"cache mounts: not restored or saved: {why}")
        return [{"id": mount.id, "target": mount.target, "max_size": mount.max_size, "image": None,
                 "restored": {"status": f"not restored ({why})", "bytes": 0, "seconds": 0}} for mount in mounts]
    pinned = run._replace(image=image)
    return [{**_restore_one(pinned, mount, index, warnings), "image": image} for index, mount in enumerate(mounts)]


def _step_image(run: MountRun, warnings: list[str]) -> str:
    """The image the steps run in (`sh`, `tar`, `cp`, with the trusted mount writable) as name@sha256: as
    written when it is one, else its tag resolved now (as the sccache helper's), with a warning to pin it."""
    if naming.is_digest_ref(run.image):
        return run.image
    from ghbuild.registry.lookup import registry_lookup

    digest = registry_lookup(run.registries)(run.image)
    if digest is None:
        raise GhbuildError(f"{run.image} does not exist in its registry")
    image = naming.pinned(run.image, digest)
    warnings.append(f"cache mounts: the steps' image {run.image} is a tag, resolved now to {image}; set "
                    "build.cache-mount-image to a name@sha256:... reference so that what runs beside the mounts "
                    "is fixed")
    return image


def save(run: MountRun | None, mounts: tuple[CacheMountRef, ...], results: list[dict[str, Any]],
         warnings: list[str]) -> None:
    """Each mount with a write ref out of the builder into its entry; adds `saved` to its result."""
    if run is None:
        return
    for index, (mount, result) in enumerate(zip(mounts, results, strict=True)):
        if not mount.write:
            result["saved"] = {"status": "not written (this run may not write its cache scope)"}
            continue
        if not result.get("image"):
            result["saved"] = {"status": "not saved (the steps' image was not pinned)", "to": mount.write}
            continue
        start = time.monotonic()
        try:
            result["saved"] = _save_one(run._replace(image=result["image"]), mount, index,
                                        result.get("restored") or {})
        except (GhbuildError, _Unusable, *_TAR_ERRORS) as exc:
            warnings.append(f"cache mount {mount.id}: not saved to {mount.write}: {_why(exc)}")
            result["saved"] = {"status": "failed", "to": mount.write}
        if result["saved"].get("dropped_links"):
            warnings.append(f"cache mount {mount.id}: {result['saved']['dropped_links']} symlink(s) pointing "
                            "outside the mount (absolute or escaping targets) left out of the saved entry")
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
        elif found["skipped_links"]:
            warnings.append(f"cache mount {mount.id}: {found['skipped_links']} symlink(s) of {ref} pointing outside "
                            "the mount (absolute or escaping targets) left out of the restore")
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
        digest, size = mountfiles.entry_layer(found.data, max_blob=mountfiles.read_limit(mount.max_size))
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
    files, total, skipped = _checked_tar(blob, context / mountfiles.ENTRY_FILE, mount.max_size)
    (context / "nonce").write_text(uuid.uuid4().hex)    # the step runs every time, never from the layer cache
    return {"digest": digest, "blob_bytes": size, "bytes": total, "files": files, "skipped_links": skipped}


class _Bounded:
    """An entry's decompressed bytes, refused past `limit`: a small gzip can hold a huge tar (or one huge PAX
    header that tarfile would read whole)."""

    def __init__(self, raw: Any, limit: int):
        self.raw, self.limit, self.count = raw, limit, 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(size if size >= 0 else self.limit + 1 - self.count)
        self.count += len(data)
        if self.count > self.limit:
            raise _Unusable(f"more than {self.limit} bytes once decompressed (the cap and an eighth)")
        return data


class _Members:
    """The restore's check, member by member in the tar's order. Every member costs its header (512 bytes)
    and its file bytes against the cap, and counts against MAX_MEMBERS. A member named outside the mount, a
    device, or one under a symlink refuses the entry; symlinks are held back (written last, so nothing is
    extracted through one) and, like hard links, left out when they could lead outside (counted)."""

    def __init__(self, cap: int):
        self.cap = cap
        self.files = self.bytes = self.members = self.skipped = 0
        self.held: dict[str, tarfile.TarInfo] = {}     # symlinks by path, the last one of a path wins
        self.used: set[str] = set()                    # every other member's path and the folders above it

    def admit(self, member: tarfile.TarInfo) -> bool:
        """True: copy it now; False: held back (a symlink) or left out (a hard link that could lead out)."""
        self.members += 1
        kind, path = _kind(member), mountfiles.member_path(member.name)
        if self.members > mountfiles.MAX_MEMBERS:
            raise _Unusable(f"more than {mountfiles.MAX_MEMBERS} members")
        if kind not in ("file", "dir", "symlink", "hardlink") or not mountfiles.safe_member(member.name, "dir", None):
            raise _Unusable(f"member {member.name[:80]!r} ({kind}) would land outside the mount")
        if mountfiles.through_link(path, self.held):
            raise _Unusable(f"member {member.name[:80]!r} ({kind}) is below a symlink of the entry")
        self.bytes += member.size if member.isfile() else 0
        self.files += member.isfile()
        if self.bytes + mountfiles.MEMBER_BYTES * self.members > self.cap + (self.cap >> 3):
            raise _Unusable(f"more than the cap of {self.cap} bytes (files and {mountfiles.MEMBER_BYTES} bytes "
                            "a member)")
        if member.issym():
            self.held[path] = member
            return False
        if member.islnk():
            target = mountfiles.member_path(member.linkname)
            if (not mountfiles.safe_member(member.name, "hardlink", member.linkname) or target in self.held
                    or mountfiles.through_link(target, self.held)):
                self.skipped += 1
                return False
        self.used.update(mountfiles.folders_of(path) if path else ())
        return True

    def links(self) -> list[tarfile.TarInfo]:
        """The held symlinks that stay inside the mount, in the tar's order; the rest counted as skipped."""
        kept = mountfiles.kept_links({path: m.linkname for path, m in self.held.items()}, self.used)
        self.skipped += len(self.held) - len(kept)
        return [member for path, member in self.held.items() if path in kept]


def _cleared(member: tarfile.TarInfo) -> tarfile.TarInfo:
    member.mode &= ~_SET_ID_BITS        # owners stay: the restore keeps them
    return member


def _checked_tar(blob: Path, out: Path, cap: int) -> tuple[int, int, int]:
    """gzip tar -> plain tar of its safe members, setuid/setgid bits cleared, symlinks last; over the cap (beyond
    an eighth) it is refused. Returns (files, their bytes, links left out)."""
    check = _Members(cap)
    try:
        with gzip.open(blob, "rb") as raw, \
                tarfile.open(fileobj=cast(IO[bytes], _Bounded(raw, mountfiles.read_limit(cap))), mode="r|") as source, \
                tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as target:
            for member in source:
                if check.admit(member):
                    target.addfile(_cleared(member), source.extractfile(member) if member.isfile() else None)
            for member in check.links():
                target.addfile(_cleared(member))
    except _Unusable:
        raise
    except MemoryError:
        raise _Unusable("too big to check (out of memory)") from None
    except _TAR_ERRORS as exc:
        raise _Unusable(f"not a readable tar+gzip ({_why(exc)})") from None
    return check.files, check.bytes, check.skipped


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
                 "dropped_bytes": selection.dropped_bytes, "dropped_links": selection.dropped_links}
        if restored.get("digest") == digest and restored.get("from") == mount.write:
            return {**saved, "status": "unchanged"}
        _push(run, mount, layer, digest, size, mountfiles.config(mount, run.platform, selection))
        return {**saved, "status": "saved"}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _capped_layer(exported: Path, layer: Path, cap: int) -> mountfiles.Selection:
    """The exported files within the cap as a tar+gzip that is the same bytes for the same files (gzip mtime 0,
    members in the export's order), so an unchanged mount is not pushed again. Symlinks that could lead out of
    the mount are left out (the restore would skip them), counted in `dropped_links`."""
    with tarfile.open(exported, "r:") as source:
        members = source.getmembers()
        if len(members) > mountfiles.MAX_MEMBERS:
            raise _Unusable(f"more than {mountfiles.MAX_MEMBERS} members in the mount")
        links = {mountfiles.member_path(m.name): m.linkname for m in members if m.issym()}
        used = {folder for m in members if not m.issym() and mountfiles.member_path(m.name)
                for folder in mountfiles.folders_of(mountfiles.member_path(m.name))}
        inside = mountfiles.kept_links(links, used)
        members = [m for m in members if not m.issym() or mountfiles.member_path(m.name) in inside]
        selection = mountfiles.select_within(
            (mountfiles.FileEntry(m.name, m.size if m.isfile() else 0, m.mtime, m.isfile(),
                                  m.linkname if m.islnk() else None, _stored(m)) for m in members), cap)
        with open(layer, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0,
                                                     compresslevel=GZIP_LEVEL) as packed, \
                tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as target:
            for member in members:
                if member.name in selection.keep:
                    target.addfile(member, source.extractfile(member) if member.isfile() else None)
    return selection._replace(dropped_links=len(links) - len(inside))


def _stored(member: tarfile.TarInfo) -> int:
    """The bytes a member takes in the saved tar: its header(s) as written, its data padded to 512."""
    header = member.tobuf(tarfile.PAX_FORMAT, tarfile.ENCODING, "surrogateescape")
    return len(header) + (-(-member.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE if member.isfile() else 0)


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
