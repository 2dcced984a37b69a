"""What a publish did, per image and for the whole run: filled in as the run goes, read by the reports."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


class PublishResult(SimpleNamespace):
    """What publishing one image did (or would do), filled in as the run goes."""

    def __init__(self, image: str, dry_run: bool, *, tags: dict[str, str] | None = None,
                 index_digest: str | None = None, arch_digests: dict[str, str] | None = None,
                 moved: list[str] | None = None, unchanged: list[str] | None = None,
                 actions: list[str] | None = None, stats: dict[str, int] | None = None) -> None:
        super().__init__(image=image, dry_run=dry_run,
                         tags=tags if tags is not None else {},                      # full tag ref -> digest
                         index_digest=index_digest,
                         arch_digests=arch_digests if arch_digests is not None else {},
                         moved=moved if moved is not None else [],                   # created or re-pointed
                         unchanged=unchanged if unchanged is not None else [],
                         actions=actions if actions is not None else [],             # done (or to do), in order
                         stats=stats if stats is not None else {})

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class PublishRun(SimpleNamespace):
    """What one `ghbuild publish nightly|release` did, for every image."""

    def __init__(self, kind: str, sha: str, results: list[PublishResult], version: Any = None,
                 latest: bool = False, github_release: str | None = None, unchecked: str | None = None) -> None:
        super().__init__(kind=kind, sha=sha, results=results,
                         unchecked=unchecked,               # what was not verified or signed, said loudly
                         version=version,                   # packaging Version, release only
                         latest=latest,
                         github_release=github_release)     # its URL; None: skipped or dry run

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"kind": self.kind, "sha": self.sha, "images": [r.to_dict() for r in self.results],
                                "unchecked": self.unchecked}
        if self.kind == "release" and self.results:
            data.update(version=str(self.version), latest=self.latest, github_release=self.github_release)
        return data
