"""Build records: what `ghbuild build --record FILE` writes after a push, and what `ghbuild digests`
collects from the build jobs' artifacts into the workflow's `digests` output."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ghbuild.errors import UsageError

RECORD_KEYS = ("id", "digest", "ref")     # the strings every record must carry


def _within(path: Path, roots: list[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def destination(path: Path, env: Mapping[str, str], cwd: Path) -> Path:
    """Where `--record PATH` writes, checked before anything is built: only inside the working directory
    or RUNNER_TEMP (no absolute path elsewhere, no '..' leading out)."""
    spellings = [p for p in (cwd, env.get("RUNNER_TEMP")) if p and os.path.isabs(str(p))]
    roots = [Path(os.path.normpath(p)) for p in spellings] + [Path(os.path.realpath(p)) for p in spellings]
    target = Path(os.path.normpath(cwd / path))
    if not _within(target, roots):
        raise UsageError(f"--record {path}: outside the working directory and RUNNER_TEMP; write records there")
    return target


def write(path: Path, record: dict[str, Any], env: Mapping[str, str], cwd: Path) -> None:
    """Write one record atomically (the summary job never reads a half-written file), inside the
    working directory or RUNNER_TEMP only: a symlinked folder leading out is refused too."""
    target = destination(path, env, cwd)
    target.parent.mkdir(parents=True, exist_ok=True)
    real_roots = [Path(os.path.realpath(p)) for p in (cwd, env.get("RUNNER_TEMP")) if p and os.path.isabs(str(p))]
    if not _within(Path(os.path.realpath(target.parent)), real_roots):
        raise UsageError(f"--record {path}: a symlink leads out of the working directory and RUNNER_TEMP")
    path = target
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


def load(path: Path) -> dict[str, dict[str, Any]]:
    """Records handed to `publish --records`: a folder of record files, or one JSON object by job id (the
    `digests` output of the build workflow, or what `ghbuild digests` prints)."""
    if path.is_dir():
        return collect(path)
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not JSON"
        raise UsageError(f"--records {path}: {reason}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise UsageError(f"--records {path}: not the records of `ghbuild digests` ({{job id: record}})")
    return data


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
