"""Build records: what `ghbuild build --record FILE` writes after a push, and what `ghbuild digests`
collects from the build jobs' artifacts into the workflow's `digests` output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ghbuild.errors import UsageError

RECORD_KEYS = ("id", "digest", "ref")     # the strings every record must carry


def write(path: Path, record: dict[str, Any]) -> None:
    """Write one record atomically: the summary job never reads a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record) + "\n", encoding="utf-8")
    tmp.replace(path)


def collect(folder: Path) -> dict[str, dict[str, Any]]:
    """Every `*.json` record in `folder`, by job id (a missing folder: none)."""
    digests: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(path.read_text("utf-8"))
            if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in RECORD_KEYS):
                raise ValueError
        except ValueError:
            raise UsageError(f"{path}: not a record written by `ghbuild build --record`") from None
        digests[record.pop("id")] = record
    return digests


def planned_jobs(matrix: str | None) -> list[dict[str, Any]]:
    """The jobs of `ghbuild matrix`'s JSON ({"include": [...]}), to list those that pushed nothing."""
    try:
        planned = json.loads(matrix)["include"] if matrix else []
        if not isinstance(planned, list) or not all(isinstance(job, dict) and isinstance(job.get("id"), str)
                                                    for job in planned):
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise UsageError("--matrix: not the JSON matrix of `ghbuild matrix` ({\"include\": [...]})") from None
    return planned
