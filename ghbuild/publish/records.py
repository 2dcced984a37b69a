"""Build records: what `ghbuild build --record FILE` writes after a push, and what `ghbuild digests`
collects from the build jobs' artifacts into the workflow's `digests` output."""

from __future__ import annotations

import io
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ghbuild.errors import PublishError, UsageError

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
    _atomic_write(path, json.dumps(record))


def write_all(path: Path, digests: dict[str, dict[str, Any]]) -> None:
    """The collected records as one JSON file (by job id), written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, json.dumps(digests, indent=2))


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    tmp.replace(path)


def collect(folder: Path) -> dict[str, dict[str, Any]]:
    """Every `*.json` record in `folder`, by job id. A missing folder is an error (a mistyped path must not
    read as "nothing was pushed"); an empty one means no job pushed."""
    if not folder.is_dir():
        why = "is not a folder" if folder.exists() else "does not exist"
        raise UsageError(f"records folder {folder} {why} (where the build jobs' `build --record` files were "
                         "downloaded; create it empty when no job pushed)")
    digests: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text("utf-8"))
            if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in RECORD_KEYS):
                raise ValueError
        except ValueError:
            raise UsageError(f"{path}: not a record written by `ghbuild build --record`") from None
        digests[record.pop("id")] = record
    return digests


def load(value: str) -> dict[str, dict[str, Any]]:
    """Records handed to `publish --records`: the JSON object itself (the build workflow's `digests` output,
    by job id), a file holding it (what `ghbuild digests` prints), or a folder of record files."""
    if value.lstrip().startswith("{"):
        try:
            data = json.loads(value)
        except ValueError:
            raise UsageError("--records: not JSON") from None
        return _by_job(data, "--records")
    path = Path(value)
    if path.is_dir():
        return collect(path)
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not JSON"
        raise UsageError(f"--records {path}: {reason}") from None
    return _by_job(data, f"--records {path}")


def _by_job(data: Any, where: str) -> dict[str, dict[str, Any]]:
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise UsageError(f"{where}: not the records of `ghbuild digests` ({{job id: record}})")
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


ARTIFACT = "ghbuild-digests"          # what the build workflow's summary job uploads: the digests JSON
ARTIFACT_FILE = "ghbuild-digests.json"


def _require_on_branch(repo, repository: str, sha: str, branch: str) -> None:
    """PublishError unless `sha` is `branch`'s head or an ancestor of it, and no tag is named like `branch`."""
    from github import GithubException, UnknownObjectException  # PyGithub: only `publish release` loads it

    try:
        status = repo.compare(branch, sha).status
    except UnknownObjectException:
        status = "unknown"
    if status not in ("identical", "behind"):
        raise PublishError(f"records: {sha} is not on {branch} of {repository} (compare {branch}...{sha}: "
                           f"{status}): only a commit of the stable branch is released")
    try:
        repo.get_git_ref(f"tags/{branch}")
    except UnknownObjectException:
        return
    except GithubException as exc:
        raise PublishError(f"records: checking for a tag named {branch!r}: HTTP {exc.status}") from None
    raise PublishError(f"records: a tag named {branch!r} exists in {repository}: GitHub reports its push runs "
                       f"like the branch's (head_branch {branch!r}); delete the tag to release")


def _run_path_is(path: str | None, workflow: str, branch: str) -> bool:
    """The run is of `.github/workflows/<workflow>`; a path that names its ref (`...@refs/heads/x`) names
    the branch."""
    file, _, ref = (path or "").partition("@")
    return file == f".github/workflows/{workflow}" and ref in ("", f"refs/heads/{branch}")


def fetch(env: Mapping[str, str], repository: str, workflow: str, sha: str, branch: str,
          log=lambda message: None) -> dict[str, dict[str, Any]]:
    """The records of the newest successful push run of `workflow` on `branch` of `repository` for commit
    `sha`, from that run's `ghbuild-digests` artifact (GitHub REST API: GITHUB_TOKEN with `actions: read` and
    `contents: read`, GITHUB_API_URL). Artifacts are written only by their own run's jobs. A run's fields say
    the branch by its short name only, which a push of a tag of the same name also carries (with the workflow
    file of the tag's commit), so the commit must be on the branch (the compare API), no tag may be named like
    the branch, and the run must be of `.github/workflows/<workflow>`: a release promotes what trusted CI built,
    never what a tag holds now. Runs whose records an untrusted build wrote are passed over."""
    from github import Auth, Github, GithubException  # PyGithub: only `publish release` loads it

    token = env.get("GITHUB_TOKEN")
    if not token:
        raise PublishError("records: GITHUB_TOKEN is needed to read the build workflow's artifacts (actions: read)")
    api = env.get("GITHUB_API_URL") or "https://api.github.com"
    where = f"{workflow} push runs on {branch} of {repository} for {sha}"
    try:
        repo = Github(base_url=api, auth=Auth.Token(token)).get_repo(repository)
        _require_on_branch(repo, repository, sha, branch)
        runs = repo.get_workflow(workflow).get_runs(branch=branch, event="push", status="success", head_sha=sha)
        candidates = [r for r in runs if r.head_sha == sha and r.event == "push" and r.head_branch == branch
                      and r.conclusion == "success" and _run_path_is(r.path, workflow, branch)]
        if not candidates:
            raise PublishError(f"records: no successful {where}: no trusted build record of {sha}")
        problem = ""
        # Newest first. A push of a tag named like the branch (since deleted) makes a run that looks the same,
        # but its records say an untrusted build wrote them: such a run is passed over, not believed.
        for run in candidates:
            artifact = next((a for a in run.get_artifacts() if a.name == ARTIFACT), None)
            if artifact is None or artifact.expired:
                problem = f"run {run.id} ({where}) has no {'unexpired ' if artifact else ''}{ARTIFACT} artifact"
                continue
            data = _download(artifact.archive_download_url, token, run.id, log)
            if all(record.get("trusted") is True for record in data.values()):
                log(f"records: {ARTIFACT} of run {run.id} ({where})")
                return data
            problem = f"run {run.id} ({where}) holds records of an untrusted build"
            log(f"records: {problem}; trying an older run")
    except GithubException as exc:
        message = (exc.data or {}).get("message") if isinstance(exc.data, dict) else None
        raise PublishError(f"records: GitHub API: HTTP {exc.status} {message or ''} ({where})".strip()) from None
    raise PublishError(f"records: {problem}")


def _download(url: str, token: str, run_id: int, log: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """The records file of a run's artifact: a zip behind a redirect to blob storage, followed without the token
    (the session drops Authorization when the origin changes); 429, 5xx and network errors retried."""
    # Imported here: only `publish release --records-from` downloads, and `build` and `digests` (which import
    # this module) start without loading http.client, ssl and zipfile.
    import zipfile

    from ghbuild.http.retry import RetryingClient

    what = f"records: downloading {ARTIFACT} of run {run_id}"
    client = RetryingClient(url, log=log, timeout=(10.0, 120.0), service="GitHub", unreachable_error=PublishError,
                            rate_limit_error=PublishError, secrets=(token,))
    response = client.request("GET", url, what, headers={"Authorization": f"Bearer {token}"}, follow_redirects=True)
    if response.status_code != 200:
        raise PublishError(f"{what}: HTTP {response.status_code}")
    try:
        with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
            data = json.loads(archive.read(ARTIFACT_FILE).decode("utf-8"))
    except (zipfile.BadZipFile, KeyError, UnicodeDecodeError, ValueError):
        raise PublishError(f"records: {ARTIFACT} of run {run_id} holds no readable {ARTIFACT_FILE}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise PublishError(f"records: {ARTIFACT_FILE} of run {run_id} is not {{job id: record}}")
    return data
