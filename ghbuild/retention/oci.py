"""Plain registry backend (a local hub, a self-hosted distribution...): the OCI distribution API through
ghbuild.registry.client.Registry.

A plain registry cannot delete a single tag (only a manifest by digest, which removes every tag on it) and
keeps no push time, so the image config's `created` field is the time (an index: its newest child), a
digest is deleted only when no kept tag shares it, and an image without a real `created` (reproducible
builds set it to the epoch) is kept.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

from ghbuild.errors import AuthError, PruneAbort, PruneError, RegistryError
from ghbuild.registry.client import Registry
from ghbuild.registry.manifest import Manifest
from ghbuild.retention.backend import DeletesDigests
from ghbuild.retention.plan import DigestDeletion, TagInfo, descendants, iso, parse_time

_EPOCH_FLOOR = datetime(1970, 1, 2, tzinfo=UTC)   # a `created` before this is not a real time


class OciBackend(DeletesDigests):
    """The delete loop's view of one repository on a plain registry (a Backend[DigestDeletion]): tags listed
    with their manifests, manifests deleted by digest. `pattern`: the per-commit tags (only their times are
    read)."""

    name = "registry"
    unit = "manifest(s)"

    def __init__(self, reg: Registry, repository: str, path: str, pattern: re.Pattern[str], pace: float = 0.5):
        self.reg, self.repository, self.path, self.pattern = reg, repository, path, pattern
        self.pace = pace
        self.manifests: dict[str, Manifest | None] = {}
        self.created: dict[str, datetime | None] = {}
        self.dangling: dict[str, str] = {}      # missing manifest -> the index that refers to it
        self._listed = 0

    def _manifest(self, digest: str) -> Manifest | None:
        """A manifest by digest (content-addressed: read once); None when the registry has no such manifest."""
        if digest not in self.manifests:
            try:
                self.manifests[digest] = self.reg.get_manifest(self.path, digest)
            except RegistryError as exc:
                if "HTTP 404" not in str(exc):
                    raise
                self.manifests[digest] = None
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

    def _config_created(self, manifest: Manifest) -> datetime | None:
        try:
            config = json.loads(self.reg.read_blob(self.path, manifest.data["config"]["digest"]))
        except (KeyError, TypeError, ValueError):
            return None
        when = parse_time(config.get("created")) if isinstance(config, dict) else None
        return when if when is not None and when >= _EPOCH_FLOOR else None

    def _time_of(self, manifest: Manifest) -> datetime | None:
        """An image's `created`; an index's newest child's (None unless every child has one)."""
        if manifest.digest not in self.created:
            if manifest.is_index:
                times = []
                for child in manifest.platforms().values():
                    image = self._manifest(child.digest)
                    times.append(self._config_created(image) if image is not None and not image.is_index else None)
                known = [t for t in times if t is not None]
                self.created[manifest.digest] = max(known) if known and len(known) == len(times) else None
            else:
                self.created[manifest.digest] = self._config_created(manifest)
        return self.created[manifest.digest]

    def list_tags(self) -> list[TagInfo]:
        try:
            tags: list[TagInfo] = []
            for name in self.reg.list_tags(self.path):
                try:
                    manifest = self.reg.get_manifest(self.path, name)
                except RegistryError as exc:
                    if "HTTP 404" in str(exc):   # deleted since the listing
                        continue
                    raise
                self.manifests[manifest.digest] = manifest
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
