"""The pure parts of carrying cache mounts between runs (ghbuild.build.cachemounts does the I/O): the throwaway
Dockerfiles that put a tar into a BuildKit cache mount and take its files out, the cap (the oldest files by mtime
left out), and the OCI artifact an entry is stored as. No I/O.

BuildKit knows a cache mount by its id (the Dockerfile frontend's default: the target path) and, when the
Dockerfile sets them, uid, gid and mode (they make the mount's base directory); sharing does not matter. So the
restore and save steps mount exactly the id, uid, gid and mode the user's Dockerfile does, and BUILDKIT_CACHE_MOUNT_NS
when the build passes one. They are builds of their own (a separate Dockerfile and context): the user's build
gets no new input, so no layer cache key changes.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Container, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from ghbuild.plan.cachemounts import CacheMountRef

ARTIFACT_TYPE = "application/vnd.ghbuild.cache-mount.v1"
CONFIG_TYPE = "application/vnd.ghbuild.cache-mount.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
ENTRY_FILE = "entry.tar"          # the restore context's tar (plain: the step needs no gzip)
IN_DIR = "/ghbuild-cache-in"
OUT_DIR = "/ghbuild-cache-out"
# The restore step's answer in the build log: whether it filled the mount or found it filled already.
RESTORED, KEPT = "ghbuild-cache-mount: restored", "ghbuild-cache-mount: kept"
MEMBER_BYTES = 512                # a tar header: what every member costs against the cap, files or not
MAX_MEMBERS = 1_000_000           # members of one entry (names are held in memory while it is checked)
MAX_LINK_HOPS = 40                # symlinks followed while resolving one target (the kernel's ELOOP bound)


# A line the step printed, as BuildKit's plain progress shows it (`#6 0.135 ...`); the command's own text, which
# the log shows too, never matches.
_STEP_LINE = re.compile(rf"^#\d+ \d+(?:\.\d+)? ({re.escape(RESTORED)}|{re.escape(KEPT)})\s*$", re.M)


def step_said(log_text: str) -> str | None:
    """What the restore step printed (RESTORED or KEPT), from the build log; None: neither."""
    found = _STEP_LINE.findall(log_text)
    return found[-1] if found else None


class Unusable(Exception):
    """An entry that is there but cannot be restored (wrong content, corrupt, over the cap)."""


class FileEntry(NamedTuple):
    """A member of a mount's tar as the cap sees it."""

    name: str
    size: int           # bytes of content (0 for folders, links)
    mtime: float
    is_file: bool
    link: str | None = None     # a hard link's target member
    stored: int | None = None   # bytes it takes in the entry's tar (headers, padded data); None: size + 512


class Selection(NamedTuple):
    keep: frozenset[str]
    files: int
    bytes: int
    dropped_files: int
    dropped_bytes: int
    dropped_links: int = 0      # symlinks that could lead out of the mount (the save leaves them out)


def _stored(entry: FileEntry) -> int:
    return entry.stored if entry.stored is not None else entry.size + MEMBER_BYTES


def select_within(entries: Iterable[FileEntry], cap: int) -> Selection:
    """The members to save: all of them when what they take in the tar (files' bytes, every member's header)
    fits `cap`, else the oldest files (by mtime, then name) left out until the rest fits, with every hard link
    to a left-out file. Folders and symlinks stay. So a saved entry always passes the restore's cap."""
    entries = list(entries)
    files = sorted((e for e in entries if e.is_file), key=lambda e: (e.mtime, e.name))
    stored = sum(_stored(e) for e in entries)
    total = sum(e.size for e in files)
    dropped: set[str] = set()
    dropped_bytes = 0
    for entry in files:
        if stored <= cap:
            break
        dropped.add(entry.name)
        stored -= _stored(entry)
        total -= entry.size
        dropped_bytes += entry.size
    keep = frozenset(e.name for e in entries if e.name not in dropped and not (e.link and e.link in dropped))
    return Selection(keep=keep, files=len(files) - len(dropped), bytes=total, dropped_files=len(dropped),
                     dropped_bytes=dropped_bytes)


def read_limit(cap: int) -> int:
    """The most bytes a restore reads from an entry of `cap`, compressed or not: the cap, an eighth more (another
    tool's tar may pad differently), 1 MB for the end blocks."""
    return cap + (cap >> 3) + (1 << 20)


def mount_flag(mount: CacheMountRef, target: str | None = None) -> str:
    """`--mount=type=cache,...` naming the same cache as the Dockerfile's mount (id, uid, gid, mode)."""
    parts = [f"type=cache,id={mount.id},target={target or mount.target},sharing=locked"]
    parts += [f"{key}={value}" for key, value in (("uid", mount.uid), ("gid", mount.gid), ("mode", mount.mode))
              if value is not None]
    return "--mount=" + ",".join(parts)


def restore_dockerfile(mount: CacheMountRef, image: str) -> str:
    """Extract the context's tar into the mount unless it holds files already (a warm builder keeps its own)."""
    target = shlex.quote(mount.target)
    return (f"FROM {image}\n"
            f"RUN {mount_flag(mount)} --mount=type=bind,source=.,target={IN_DIR} \\\n"
            f"    set -eu; if [ -n \"$(ls -A {target})\" ]; then echo '{KEPT}'; else "
            f"tar -xf {IN_DIR}/{ENTRY_FILE} -C {target}; echo '{RESTORED}'; fi\n")


def save_dockerfile(mount: CacheMountRef, image: str) -> str:
    """Copy the mount's files into a stage of their own; `--output type=tar` then writes them (mtimes, owners
    and modes kept) to the host. The bind mount carries the nonce that keeps the step from the layer cache."""
    target = shlex.quote(mount.target)
    return (f"FROM {image} AS copy\n"
            f"RUN {mount_flag(mount)} --mount=type=bind,source=.,target={IN_DIR} \\\n"
            f"    set -eu; mkdir -p {OUT_DIR}; cp -a {target}/. {OUT_DIR}/\n"
            f"FROM scratch\nCOPY --from=copy {OUT_DIR}/ /\n")


def manifest(config: bytes, config_digest: str, layer_digest: str, layer_size: int) -> bytes:
    """The entry as an OCI artifact: ghbuild's config (what the mount held) and one tar+gzip layer."""
    doc = {"schemaVersion": 2, "mediaType": MANIFEST_TYPE, "artifactType": ARTIFACT_TYPE,
           "config": {"mediaType": CONFIG_TYPE, "digest": config_digest, "size": len(config)},
           "layers": [{"mediaType": LAYER_TYPE, "digest": layer_digest, "size": layer_size}]}
    return json.dumps(doc, indent=2).encode()


def config(mount: CacheMountRef, platform: str, selection: Selection) -> bytes:
    return json.dumps({"id": mount.id, "target": mount.target, "platform": platform, "files": selection.files,
                       "bytes": selection.bytes, "dropped_files": selection.dropped_files,
                       "dropped_bytes": selection.dropped_bytes}, sort_keys=True).encode()


def entry_layer(data: dict[str, Any], max_blob: int) -> tuple[str, int]:
    """(digest, size) of an entry's layer from its manifest; ValueError says why it is not one of ghbuild's."""
    if data.get("mediaType") not in (MANIFEST_TYPE, None) or (data.get("config") or {}).get("mediaType") != CONFIG_TYPE:
        raise ValueError("not a ghbuild cache-mount artifact (config media type)")
    layers = data.get("layers")
    if not isinstance(layers, list) or len(layers) != 1 or layers[0].get("mediaType") != LAYER_TYPE:
        raise ValueError("not one tar+gzip layer")
    digest, size = layers[0].get("digest"), layers[0].get("size")
    if not isinstance(digest, str) or not digest.startswith("sha256:") or not isinstance(size, int) or size < 0:
        raise ValueError("layer descriptor without a sha256 digest and size")
    if size > max_blob:
        raise ValueError(f"layer of {size} bytes is over the cap ({max_blob} bytes)")
    return digest, size


def member_path(name: str) -> str:
    """A member name as the path it lands on (`./a//b` -> `a/b`); "" is the mount itself."""
    return "/".join(p for p in name.split("/") if p not in ("", "."))


def through_link(path: str, links: Container[str]) -> bool:
    """Whether a folder on the way to `path` (not `path` itself) is one of the symlinks."""
    parts = path.split("/")
    return any("/".join(parts[:i]) in links for i in range(1, len(parts)))


def link_inside(name: str, target: str, links: Mapping[str, str]) -> bool:
    """Whether the symlink `name` -> `target` ends inside the mount once extracted: the target followed part by
    part as the kernel does, through every other symlink of the entry (`links`: path -> target), so `d -> .`
    then `x -> d/d/..` is out. Absolute targets, loops and more than MAX_LINK_HOPS hops are out too."""
    resolved = name.split("/")[:-1]
    pending = list(reversed(target.split("/")))
    hops = 0
    if target.startswith("/"):
        return False
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if not resolved:
                return False
            resolved.pop()
            continue
        resolved.append(part)
        followed = links.get("/".join(resolved))
        if followed is not None:
            hops += 1
            if hops > MAX_LINK_HOPS or followed.startswith("/"):
                return False
            resolved.pop()
            pending.extend(reversed(followed.split("/")))
    return True


def safe_member(name: str, kind: str, link: str | None) -> bool:
    """A member that can only land inside the mount: a relative path without `..`, a file, folder or link whose
    target stays inside too (no devices, fifos, absolute or escaping link targets)."""
    parts = name.split("/")
    if name.startswith("/") or ".." in parts or kind not in ("file", "dir", "symlink", "hardlink"):
        return False
    if link is None:
        return kind in ("file", "dir")
    if link.startswith("/"):
        return False
    base = parts[:-1] if kind == "symlink" else []
    depth = len([p for p in base if p not in ("", ".")])
    for part in link.split("/"):
        depth += -1 if part == ".." else (0 if part in ("", ".") else 1)
        if depth < 0:
            return False
    return True


def folders_of(path: str) -> Iterator[str]:
    """The folders a member's path goes through, and the path itself."""
    parts = path.split("/")
    return ("/".join(parts[:i]) for i in range(1, len(parts) + 1))


def kept_links(links: Mapping[str, str], used: Container[str]) -> set[str]:
    """The symlinks (path -> target) an entry keeps: each at a path no other member takes or goes through
    (`used`), not below another symlink, its target ending inside the mount through the symlinks kept; checked
    again until none more goes, since leaving one out changes where the others lead."""
    kept = {path: target for path, target in links.items()
            if path and path not in used and safe_member(path, "symlink", target)}
    while True:
        out = [path for path, target in kept.items()
               if through_link(path, kept) or not link_inside(path, target, kept)]
        if not out:
            return set(kept)
        for path in out:
            del kept[path]
