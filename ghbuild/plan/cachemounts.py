"""Where a job's cache mounts (images.<name>.cache-mounts) are read from and written to. Pure: no I/O.

Each mount of each image × arch has one entry per scope in the cache repository (`registries.cache`): an OCI
artifact tagged like the layer cache's refs, `<scope>-<image>-<arch suffix>-mount-<id slug>`. The scopes and
repositories are the layer cache's (planner._job): read own scope first, then the canonical one (from the
canonical owner's repository); written only to this run's write scope, and only by a run that may write the
registry, an untrusted run into its own `-untrusted` repository. So nothing outside the trusted branch can put
bytes into the entry a trusted build restores.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ghbuild import naming
from ghbuild.config.options import CacheMountOptions

_SLUG_BAD = re.compile(r"[^A-Za-z0-9_.-]+")


class CacheMountRef(NamedTuple):
    """One cache mount of a job: what BuildKit knows it by and the artifact refs ghbuild carries it in."""

    id: str
    target: str
    max_size: int
    read: tuple[str, ...]           # refs, own scope first; the first one present is restored
    write: str | None               # None: this run saves nothing
    uid: int | None = None
    gid: int | None = None
    mode: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = self._asdict()
        data["read"] = list(self.read)
        return data


def mount_slug(mount_id: str) -> str:
    """Tag text for a mount id: its tag-safe characters (cut to 24) and a hash of the id, so `/root/.cache/pip`
    and `root.cache.pip` never share a tag."""
    cut = _SLUG_BAD.sub("_", mount_id).strip("_.-")[:24].rstrip("_.-") or "mount"
    return f"{cut}-{naming.short_hash(mount_id, 10)}"


def mount_key(scope: str, image: str, arch_suffix: str, mount_id: str) -> str:
    """The tag of one mount's entry in one scope (the layer cache key's shape, planner._cache_key, plus the mount)."""
    return naming.sanitize_tag(scope, suffix=f"-{image}-{arch_suffix}-mount-{mount_slug(mount_id)}")


def plan_mounts(mounts: tuple[CacheMountOptions, ...], *, image: str, arch_suffix: str,
                read_scopes: tuple[str, ...], canonical_scope: str, write_scope: str | None, registry_write: bool,
                cache_repo: str | None, canonical_cache_repo: str | None) -> tuple[CacheMountRef, ...]:
    """The refs of every mount: `cache_repo` is this run's own repository (already `-untrusted` for an untrusted
    run), `canonical_cache_repo` the canonical owner's, read only for the canonical scope. No cache repository:
    no refs (the build says so)."""
    out = []
    for mount in mounts:
        read: list[str] = []
        write = None
        if cache_repo and canonical_cache_repo:
            for scope in read_scopes:
                repo = canonical_cache_repo if scope == canonical_scope else cache_repo
                read.append(f"{repo}:{mount_key(scope, image, arch_suffix, mount.id)}")
            if write_scope and registry_write:
                write = f"{cache_repo}:{mount_key(write_scope, image, arch_suffix, mount.id)}"
        out.append(CacheMountRef(id=mount.id, target=mount.target, max_size=mount.max_size,
                                 read=tuple(dict.fromkeys(read)), write=write, uid=mount.uid, gid=mount.gid,
                                 mode=mount.mode))
    return tuple(out)
