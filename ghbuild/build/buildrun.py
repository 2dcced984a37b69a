"""One build as it runs: what its steps share (`BuildRun`), buildx's metadata file and the id the local
engine knows the built image by."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ghbuild.build import buildcmd, images
from ghbuild.config.options import ImageOptions
from ghbuild.plan import dockerfile
from ghbuild.plan.planner import Job


class BuildRun(NamedTuple):
    """What every step of one build shares: the job as built, its options and Dockerfile, the command's
    settings, the scratch folder, the environment the docker client runs in and the values to redact."""

    job: Job
    image: ImageOptions
    stages: list[dockerfile.Stage]
    settings: buildcmd.BuildSettings
    workdir: Path
    env: Mapping[str, str]          # the caller's environment
    run_env: Mapping[str, str]      # with the command's own variables
    redact: tuple[str, ...]
    trusted: bool


def read_metadata(path: Path) -> dict[str, Any]:
    """buildx's --metadata-file (empty when it wrote none)."""
    try:
        data = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def local_image(ctx: BuildRun, iid: Path, metadata: Path, tags: tuple[str, ...] = ()) -> str | None:
    """The id the local engine knows the built image by (docker_client.local_image_id): the iidfile's config
    digest on the classic image store, the manifest digest on the containerd store."""
    written = iid.read_text().strip() if iid.exists() else None
    if not written:
        return None
    return images.local_image_id(ctx.env, [written, str(read_metadata(metadata).get("containerimage.digest") or ""),
                                                  *tags]) or written
