"""The GitHub context: what GitHub set for this run, read once into a typed object.

Sources, strongest first: command-line flags (for local use), the event payload at
GITHUB_EVENT_PATH, then the GITHUB_* variables, then (outside Actions) the git checkout: a push of
its branch, in the repository its `origin` remote names. Fork detection comes from the payload
(head and base repository ids), never from names or guesses; `--head-repo` can make a pull
request a fork, never turn a head the payload's ids prove to be a fork into a branch of ours.
Every error names the variable, flag or payload the bad value came from.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ghbuild import naming
from ghbuild.errors import ContextError, InvalidReferenceError, TrustError
from ghbuild.github.event import EVENTS, PR_EVENTS, GitHubContext
from ghbuild.github.git import git_output

_ZERO_SHA = "0" * 40
LOCAL_PUSH_NOTE = ("event: a push of the checked-out branch of the 'origin' repository (outside GitHub Actions "
                   "without --event; --event, --ref, --repository and --default-branch choose another run)")


class ContextFlags(NamedTuple):
    """Command-line flags for local use; each one beats what GitHub set."""

    event: str | None = None
    event_path: str | None = None
    repository: str | None = None
    ref: str | None = None
    sha: str | None = None
    pr: int | None = None
    base: str | None = None
    head_ref: str | None = None
    head_repo: str | None = None
    default_branch: str | None = None
    ref_protected: bool | None = None


def _get(payload: Mapping[str, Any], dotted: str) -> Any:
    node: Any = payload
    for part in dotted.split("."):
        if not isinstance(node, Mapping):
            return None
        node = node.get(part)
    return node


def _require(payload: Mapping[str, Any], dotted: str, event: str, where: str) -> Any:
    value = _get(payload, dotted)
    if value in (None, ""):
        raise ContextError(f"{where}: {event} payload has no {dotted}")
    return value


def _full_ref(ref: str) -> str:
    return ref if ref.startswith("refs/") else f"refs/heads/{ref}"


def load_payload(path: str, where: str) -> dict[str, Any]:
    try:
        data = json.loads(Path(path).read_text("utf-8"))
    except FileNotFoundError:
        raise ContextError(f"{where}: {path} does not exist") from None
    except OSError as exc:
        raise ContextError(f"{where}: {path}: cannot read: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ContextError(f"{where}: {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ContextError(f"{where}: {path}: the event payload must be a JSON object")
    return data


# Flags that describe the run for local use. Inside GitHub Actions the run is what GitHub says it is: a flag
# would let a workflow step (or what it was handed) decide the repository, ref or pull request trust is read
# from. --event is refused only when it differs (steps may repeat it); --sha names the commit a publish or a
# build is about and decides no trust (a release checks that it is on the stable branch).
_LOCAL_ONLY_FLAGS = {"event_path": "--event-path", "repository": "--repository", "ref": "--ref", "pr": "--pr",
                     "base": "--base", "head_ref": "--head-ref", "head_repo": "--head-repo",
                     "default_branch": "--default-branch", "ref_protected": "--ref-protected"}


def _refuse_context_flags(o: ContextFlags) -> None:
    given = [flag for field, flag in _LOCAL_ONLY_FLAGS.items() if getattr(o, field) is not None]
    if given:
        raise TrustError(f"{', '.join(given)}: context flags are for local use; inside GitHub Actions the run's "
                         "repository, ref and pull request come from GitHub (GITHUB_* and the event payload)")


class _PullRequestFields(NamedTuple):
    """What a pull_request or merge_group event adds to the context."""

    pull_request: int | None = None
    base_ref: str | None = None
    head_ref: str | None = None
    head_repository: str | None = None
    head_sha: str | None = None
    is_fork: bool | None = None


def from_environment(env: Mapping[str, str] | None = None, flags: ContextFlags | None = None,
                     cwd: Path | None = None) -> GitHubContext:
    """Build the context from GITHUB_* variables, the event payload and flags."""
    env = os.environ if env is None else env
    o = flags or ContextFlags()
    cwd = cwd or Path.cwd()
    notes: list[str] = []

    event = _event(env, o, notes)
    payload: dict[str, Any] = {}
    where = "--event-path" if o.event_path else "GITHUB_EVENT_PATH"
    payload_path = o.event_path or env.get("GITHUB_EVENT_PATH")
    # A payload written for another event would be misread: only use GitHub's when the event is GitHub's.
    if payload_path and (o.event_path or not o.event or o.event == env.get("GITHUB_EVENT_NAME")):
        payload = load_payload(payload_path, where)
    repository = _repository(env, o, payload, where, cwd, notes)

    ref = o.ref and _full_ref(o.ref)
    sha, sha_src = o.sha, "--sha"
    if event in PR_EVENTS:
        fields = _pull_request(event, env, o, payload, where, repository, notes)
        if not ref:
            ref = env.get("GITHUB_REF") or (
                f"refs/pull/{fields.pull_request}/merge" if event == "pull_request"
                else _full_ref(fields.base_ref or ""))
    elif event == "merge_group":
        fields = _merge_group(o, payload, where, repository)
        if payload:
            if not sha and fields.head_sha:
                sha, sha_src = fields.head_sha, f"{where} (merge_group.head_sha)"
            ref = ref or (fields.head_ref and _full_ref(fields.head_ref))
    else:
        fields = _PullRequestFields(head_repository=repository)
        if event == "push":
            if not sha and payload.get("after") and payload.get("after") != _ZERO_SHA:
                sha, sha_src = payload["after"], f"{where} (after)"
            if payload and payload.get("deleted"):
                raise ContextError(f"{where}: this push deletes {payload.get('ref')}: there is nothing to build")
        if event in ("push", "workflow_dispatch"):
            ref = ref or payload.get("ref")

    ref = _ref(ref or env.get("GITHUB_REF") or None, cwd, notes)
    sha = _sha(sha, sha_src, env, cwd, notes)
    default_branch = o.default_branch or _get(payload, "repository.default_branch")
    if not default_branch and event == "schedule" and ref.startswith("refs/heads/"):
        # GitHub runs scheduled workflows only on the default branch, and sends no repository.
        default_branch = ref[len("refs/heads/"):]
        notes.append("default branch: the scheduled run's ref (schedules run on the default branch)")

    inputs = payload["inputs"] if isinstance(payload.get("inputs"), dict) else {}
    ref_protected = o.ref_protected
    if ref_protected is None and env.get("GITHUB_REF_PROTECTED"):
        ref_protected = env["GITHUB_REF_PROTECTED"].strip().lower() == "true"
    return GitHubContext(
        event=event, repository=repository, ref=ref, sha=sha, default_branch=default_branch,
        **fields._asdict(), ref_protected=ref_protected, run_id=env.get("GITHUB_RUN_ID"),
        run_attempt=env.get("GITHUB_RUN_ATTEMPT"), server_url=env.get("GITHUB_SERVER_URL", "https://github.com"),
        inputs=inputs, notes=tuple(notes))


def _event(env: Mapping[str, str], o: ContextFlags, notes: list[str]) -> str:
    actual_event = env.get("GITHUB_EVENT_NAME")
    if o.event and actual_event and o.event != actual_event and env.get("GITHUB_ACTIONS") == "true":
        # Inside a real run, a flag must not turn (say) a pull_request_target run into a trusted push.
        raise TrustError(f"--event {o.event}: this run is a {actual_event} event; "
                         "the event cannot be overridden inside GitHub Actions")
    if env.get("GITHUB_ACTIONS") == "true":
        _refuse_context_flags(o)
    event = o.event or actual_event or ""
    if not event and env.get("GITHUB_ACTIONS") != "true":
        # Local use: the run at hand is a push of what is checked out, so a plain `ghbuild build`
        # needs no flags; the repository, ref and commit then come from git like any unset value.
        event = "push"
        notes.append(LOCAL_PUSH_NOTE)
    if not event:
        raise ContextError("no event: GITHUB_EVENT_NAME is not set")
    if event not in EVENTS:
        raise ContextError(f"event {event!r} is not supported (supported: {', '.join(EVENTS)})")
    return event


def _repository(env: Mapping[str, str], o: ContextFlags, payload: Mapping[str, Any], where: str, cwd: Path,
                notes: list[str]) -> str:
    repository: Any
    if o.repository:
        repository, repository_src = o.repository, "--repository"
    elif env.get("GITHUB_REPOSITORY"):
        repository, repository_src = env["GITHUB_REPOSITORY"], "GITHUB_REPOSITORY"
    else:
        repository, repository_src = _get(payload, "repository.full_name"), f"{where} (repository.full_name)"
    if not repository:
        origin = git_output(["remote", "get-url", "origin"], cwd)
        try:
            repository = naming.normalize_slug(origin) if origin else None
        except InvalidReferenceError:
            repository = None
        if repository:
            repository_src = "git remote 'origin'"
            notes.append("repository: from the git remote 'origin'")
    if not repository:
        raise ContextError("no repository: GITHUB_REPOSITORY is not set and no git remote 'origin' names a GitHub "
                           "repository (pass --repository OWNER/NAME)")
    try:
        if not isinstance(repository, str):
            raise InvalidReferenceError(f"{repository!r} is not a GitHub repository (expected owner/name)")
        slug = naming.normalize_slug(repository)
    except InvalidReferenceError as exc:
        raise ContextError(f"{repository_src}: {exc}") from None
    if repository.lower() != slug:
        # A URL form (https://github.com/o/r.git, git@github.com:o/r): keep owner/name only, since
        # the owner names registry namespaces and the slug builds the source URL.
        repository = slug
    return repository


def _pull_request(event: str, env: Mapping[str, str], o: ContextFlags, payload: Mapping[str, Any], where: str,
                  repository: str, notes: list[str]) -> _PullRequestFields:
    fields = _pull_request_payload(event, payload, where, notes) if payload else _PullRequestFields()
    pull_request = o.pr if o.pr is not None else fields.pull_request
    base_ref = o.base or fields.base_ref or env.get("GITHUB_BASE_REF") or None
    head_ref = o.head_ref or fields.head_ref or env.get("GITHUB_HEAD_REF") or None
    head_repository, is_fork = fields.head_repository, fields.is_fork
    if o.head_repo:
        try:
            flag_fork = naming.normalize_slug(o.head_repo) != naming.normalize_slug(repository)
        except InvalidReferenceError as exc:
            raise ContextError(f"--head-repo: {exc}") from None
        if is_fork and not flag_fork:
            # Least trust wins: a name cannot overrule the payload's repository ids.
            notes.append("--head-repo names this repository, but the payload's ids say the head is a fork: "
                         "treated as a fork")
        head_repository = o.head_repo
        is_fork = bool(is_fork) or flag_fork
    if pull_request is None:
        raise ContextError(f"{event}: no pull request number (pass --pr N or GITHUB_EVENT_PATH)")
    if not base_ref:
        raise ContextError(f"{event}: no base branch (pass --base BRANCH or GITHUB_BASE_REF)")
    if is_fork is None:
        # Without a payload or --head-repo the source is unknown: assume the least trust.
        is_fork = True
        notes.append("head repository unknown (no payload, no --head-repo): treated as a fork")
    if head_repository:
        try:
            naming.normalize_slug(head_repository)
        except InvalidReferenceError as exc:
            raise ContextError(f"{'--head-repo' if o.head_repo else where}: {exc}") from None
    return _PullRequestFields(pull_request, base_ref, head_ref, head_repository, fields.head_sha, is_fork)


def _pull_request_payload(event: str, payload: Mapping[str, Any], where: str,
                          notes: list[str]) -> _PullRequestFields:
    number = payload.get("number", _get(payload, "pull_request.number"))
    if not isinstance(number, int):
        raise ContextError(f"{where}: {event} payload has no pull_request number")
    base_ref = _require(payload, "pull_request.base.ref", event, where)
    head_ref = _require(payload, "pull_request.head.ref", event, where)
    head_sha = _get(payload, "pull_request.head.sha")
    head_repo = _get(payload, "pull_request.head.repo")
    base_repo = _require(payload, "pull_request.base.repo", event, where)
    for side, repo in (("head", head_repo), ("base", base_repo)):
        if repo is not None and not isinstance(repo, Mapping):
            raise ContextError(f"{where}: {event} payload: pull_request.{side}.repo is not an object")
    if head_repo is None:
        # The fork was deleted: the head repository is unknown, so it is not ours.
        notes.append("head repository deleted: treated as a fork")
        return _PullRequestFields(number, base_ref, head_ref, None, head_sha, True)
    head_repository = head_repo.get("full_name")
    if head_repo.get("id") is not None and base_repo.get("id") is not None:
        is_fork = head_repo["id"] != base_repo["id"]
    else:
        is_fork = (head_repository or "").lower() != (base_repo.get("full_name") or "").lower()
    return _PullRequestFields(number, base_ref, head_ref, head_repository, head_sha, is_fork)


def _merge_group(o: ContextFlags, payload: Mapping[str, Any], where: str, repository: str) -> _PullRequestFields:
    base_ref = head_ref = head_sha = None
    if payload:
        base_ref = _require(payload, "merge_group.base_ref", "merge_group", where)
        head_ref = _get(payload, "merge_group.head_ref")
        head_sha = _get(payload, "merge_group.head_sha")
    base_ref = o.base or base_ref
    if not base_ref:
        raise ContextError("merge_group: no base branch (pass --base BRANCH or GITHUB_EVENT_PATH)")
    return _PullRequestFields(base_ref=base_ref.removeprefix("refs/heads/"), head_ref=head_ref,
                              head_repository=repository, head_sha=head_sha)


def _ref(ref: str | None, cwd: Path, notes: list[str]) -> str:
    if not ref:
        branch = git_output(["symbolic-ref", "--short", "-q", "HEAD"], cwd)
        if branch:
            ref = _full_ref(branch)
            notes.append("ref: the checked-out git branch")
    if not ref:
        raise ContextError("no ref: GITHUB_REF is not set and git HEAD is not on a branch (pass --ref BRANCH)")
    return ref


def _sha(sha: str | None, sha_src: str, env: Mapping[str, str], cwd: Path, notes: list[str]) -> str:
    if not sha:
        sha, sha_src = env.get("GITHUB_SHA") or None, "GITHUB_SHA"
    if not sha:
        sha, sha_src = git_output(["rev-parse", "HEAD"], cwd), "git HEAD"
        if sha:
            notes.append("sha: the checked-out git commit")
    if not sha:
        raise ContextError("no commit: GITHUB_SHA is not set and this is not a git checkout (pass --sha SHA)")
    if not (isinstance(sha, str) and len(sha) == 40 and all(c in "0123456789abcdef" for c in sha.lower())):
        raise ContextError(f"{sha_src}: {sha!r} is not a 40-hex commit id")
    return sha.lower()
