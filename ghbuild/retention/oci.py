"""Plain registry backend (a local hub, a self-hosted distribution...): the OCI distribution API through
ghbuild.registry.client.Registry.

A plain registry cannot delete a single tag (only a manifest by digest, which removes every tag on it) and
keeps no push time, so the image's creation time is the time (an index: its newest child), a digest is
deleted only when no kept tag shares it, and an image without a real `created` (reproducible builds set it
to the epoch) is kept. An image's creation time is its entry's `org.opencontainers.image.created` annotation
in an index that lists it (the indexes ghbuild publishes carry it: no config read), else its config's
`created`. Either is written by whoever may push to the repository, so neither is trusted more.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from ghbuild.errors import AuthError, PruneAbort, PruneError, RegistryError
from ghbuild.registry.client import Registry
from ghbuild.registry.manifest import Manifest
from ghbuild.registry.mediatypes import ANNOTATION_CREATED
from ghbuild.registry.readers import DEFAULT_READERS, Readers
from ghbuild.retention.backend import DeletesDigests
from ghbuild.retention.plan import DigestDeletion, TagInfo, descendants, iso, parse_time

_EPOCH_FLOOR = datetime(1970, 1, 2, tzinfo=UTC)   # a `created` before this is not a real time


class OciBackend(DeletesDigests):
    """The delete loop's view of one repository on a plain registry (a Backend[DigestDeletion]): tags listed
    with their manifests, manifests deleted by digest. `pattern`: the per-commit tags (only their times are
    read).

    The listing reads in rounds, each side by side on up to `readers` clients (ghbuild.registry.readers):
    every tag's manifest, then the children of the indexes found (level by level), then the configs of the
    images whose time no index entry gave. Manifests and configs are content-addressed, so each digest is
    read once per run; the listing again before each delete reads only the tags."""

    name = "registry"
    unit = "manifest(s)"

    def __init__(self, reg: Registry, repository: str, path: str, pattern: re.Pattern[str], pace: float = 0.5,
                 readers: int = DEFAULT_READERS):
        self.reg, self.repository, self.path, self.pattern = reg, repository, path, pattern
        self.pace = pace
        self.readers = Readers(reg, readers)
        self.manifests: dict[str, Manifest | None] = {}
        self.configs: dict[str, datetime | None] = {}    # config digest -> its real `created`, or None
        self.annotated: dict[str, datetime] = {}         # image digest -> the `created` an index entry gives it
        self.created: dict[str, datetime | None] = {}
        self.dangling: dict[str, str] = {}      # missing manifest -> the index that refers to it
        self._listed = 0

    # ----- reading side by side

    def _read_manifest(self, client: Registry, ref: str) -> Manifest | None:
        """A manifest by tag or digest; None when the registry has no such manifest (deleted since the listing)."""
        try:
            return client.get_manifest(self.path, ref)
        except RegistryError as exc:
            if "HTTP 404" not in str(exc):
                raise
            return None

    def _read_created(self, client: Registry, digest: str) -> datetime | None:
        try:
            config = json.loads(client.read_blob(self.path, digest))
        except ValueError:
            return None
        when = parse_time(config.get("created")) if isinstance(config, dict) else None
        return when if when is not None and when >= _EPOCH_FLOOR else None

    def _read_below(self, found: Iterable[Manifest | None]) -> None:
        """Every manifest the indexes in `found` refer to, to any depth, into the cache."""
        level = [m for m in found if m is not None]
        while level:
            wanted = sorted({c.digest for m in level if m.is_index for c in m.children()} - set(self.manifests))
            read = self.readers.map(self._read_manifest, wanted)
            self.manifests.update(zip(wanted, read, strict=True))
            level = [m for m in read if m is not None]

    def _note_entry_times(self) -> None:
        """The times the index entries read so far give their images (the first index to give one wins)."""
        for manifest in list(self.manifests.values()):
            if manifest is not None and manifest.is_index:
                for child in manifest.platforms().values():
                    when = parse_time((child.annotations or {}).get(ANNOTATION_CREATED))
                    if when is not None and when >= _EPOCH_FLOOR:
                        self.annotated.setdefault(child.digest, when)

    def _read_configs(self, timed: Iterable[Manifest]) -> None:
        """The configs of the images whose `created` is a tag's time (an index: its children's) and that no index
        entry gave a time, into the cache."""
        wanted: set[str] = set()
        for manifest in timed:
            images = [self.manifests.get(c.digest) for c in manifest.platforms().values()] if manifest.is_index \
                else [manifest]
            for image in images:
                if image is None or image.is_index or image.digest in self.annotated:
                    continue
                digest = _config_digest(image)
                if digest and digest not in self.configs:
                    wanted.add(digest)
        ordered = sorted(wanted)
        self.configs.update(zip(ordered, self.readers.map(self._read_created, ordered), strict=True))

    # ----- what the loop asks

    def _manifest(self, digest: str) -> Manifest | None:
        """A manifest by digest (content-addressed: read once); None when the registry has no such manifest."""
        if digest not in self.manifests:
            self.manifests[digest] = self._read_manifest(self.reg, digest)
        return self.manifests[digest]

    def _children(self, digest: str) -> tuple[str, ...]:
        manifest = self._manifest(digest)
        if manifest is None or not manifest.is_index:
            return ()
        kids = tuple(c.digest for c in manifest.children())
        for kid in kids:
            if self._manifest(kid) is None:
                self.dangling.setdefault(kid, digest)
        return kids

    def _image_created(self, manifest: Manifest) -> datetime | None:
        """An image's time: what an index entry gives it, else its config's `created`."""
        if manifest.digest in self.annotated:
            return self.annotated[manifest.digest]
        digest = _config_digest(manifest)
        if digest is None:
            return None
        if digest not in self.configs:
            self.configs[digest] = self._read_created(self.reg, digest)
        return self.configs[digest]

    def _time_of(self, manifest: Manifest) -> datetime | None:
        """An image's `created`; an index's newest child's (None unless every child has one)."""
        if manifest.digest not in self.created:
            if manifest.is_index:
                times = []
                for child in manifest.platforms().values():
                    image = self._manifest(child.digest)
                    times.append(self._image_created(image) if image is not None and not image.is_index else None)
                known = [t for t in times if t is not None]
                self.created[manifest.digest] = max(known) if known and len(known) == len(times) else None
            else:
                self.created[manifest.digest] = self._image_created(manifest)
        return self.created[manifest.digest]

    def list_tags(self) -> list[TagInfo]:
        try:
            names = self.reg.list_tags(self.path)
            by_tag = dict(zip(names, self.readers.map(self._read_manifest, names), strict=True))
            for manifest in by_tag.values():
                if manifest is not None:
                    self.manifests[manifest.digest] = manifest
            self._read_below(by_tag.values())
            self._note_entry_times()
            self._read_configs(m for name, m in by_tag.items() if m is not None and self.pattern.fullmatch(name))
            tags: list[TagInfo] = []
            for name, manifest in by_tag.items():
                if manifest is None:     # deleted since the listing
                    continue
                kids = descendants(manifest.digest, self._children) if manifest.is_index else ()
                pushed = self._time_of(manifest) if self.pattern.fullmatch(name) else None
                tags.append(TagInfo(name, manifest.digest, pushed, kids))
        except AuthError as exc:
            raise PruneAbort(f"{self.repository}: the registry refused the credentials: {exc}") from None
        except RegistryError as exc:
            raise PruneError(f"{self.repository}: listing failed: {exc}; refusing to prune from a partial list") \
                from None
        self._listed = len(tags)
        return tags

    def summary(self) -> str:
        return f"{self._listed} tags (a plain registry deletes by digest)"

    def missing(self) -> dict[str, str]:
        """Manifests a listed index refers to that the registry does not have (missing -> index)."""
        return dict(self.dangling)

    def stats(self) -> dict[str, int]:
        return {}

    def entry(self, item: DigestDeletion) -> dict[str, Any]:
        return {"tags": list(item.tags), "digest": item.digest, "pushed": iso(self.created.get(item.digest)),
                "reason": item.reason}

    def label(self, item: DigestDeletion) -> str:
        return f"{self.repository}@{item.digest} ({', '.join(item.tags) or 'untagged'})"

    def delete(self, item: DigestDeletion) -> bool:
        try:
            return self.reg.delete_manifest(self.path, item.digest)
        except AuthError as exc:
            raise PruneAbort(str(exc)) from None
        except RegistryError as exc:
            unsupported = "405" in str(exc) or "UNSUPPORTED" in str(exc)
            hint = " (is storage.delete.enabled set on the registry?)" if unsupported else ""
            raise PruneError(f"{exc}{hint}") from None


def _config_digest(image: Manifest) -> str | None:
    try:
        digest = image.data["config"]["digest"]
    except (KeyError, TypeError):
        return None
    return digest if isinstance(digest, str) else None
