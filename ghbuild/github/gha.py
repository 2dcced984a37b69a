"""The one place that speaks the GitHub Actions runner protocol.

Inputs, outputs, step summary, groups, masks and annotations all go through here, on top of
actions-toolkit; nothing else in ghbuild writes `::` commands or the `GITHUB_*` files.
Workflow commands go to stderr (the runner reads both streams), so that stdout stays clean
for `--json` output. Outside Actions the same calls degrade to plain stderr lines.

actions-toolkit pulls in `requests` when imported, so it is imported lazily: the planner's
cold start must not pay for it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator, Mapping
from types import SimpleNamespace
from typing import Any

from ghbuild.errors import ContextError

_ANNOTATION_KEYS = ("title", "file", "line", "endLine", "col", "endColumn")


def in_actions(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get("GITHUB_ACTIONS") == "true"


def runner_kind(env: Mapping[str, str] | None = None) -> str:
    """"github-hosted", "self-hosted" or "local". GitHub sets RUNNER_ENVIRONMENT on every runner it runs a job
    on; a job inside Actions without it (an older GitHub Enterprise Server runner) counts as self-hosted, a
    persistent machine: fail closed. act (ACT=true) and runs outside Actions are "local"."""
    env = os.environ if env is None else env
    runner = env.get("RUNNER_ENVIRONMENT", "")
    if runner == "github-hosted":
        return "github-hosted"
    if runner == "self-hosted" or (in_actions(env) and env.get("ACT") != "true"):
        return "self-hosted"
    return "local"


def _toolkit() -> Any:
    """actions_toolkit, imported on first use: ~90 ms that a command run outside Actions never pays."""
    from actions_toolkit import command, core, file_command

    return SimpleNamespace(command=command, core=core, file_command=file_command)


def _command(name: str, properties: Mapping[str, Any], message: str) -> None:
    props = {k: v for k, v in properties.items() if v not in (None, "")}
    with contextlib.redirect_stdout(sys.stderr):
        _toolkit().command.issue_command(name, props, message)
    sys.stderr.flush()


def get_input(name: str, default: str = "") -> str:
    """An action input as the runner passes it (INPUT_<NAME>), trimmed."""
    value = os.environ.get("INPUT_" + name.replace(" ", "_").upper(), "")
    return value.strip() or default


def _runner_file(var: str) -> str | None:
    path = os.environ.get(var)
    if path and not os.path.isfile(path):
        raise ContextError(f"{var}: {path} does not exist (the runner creates it for each step)")
    return path or None


def set_output(name: str, value: Any) -> bool:
    """Write a step output. Returns False outside Actions (nothing to write to)."""
    if not _runner_file("GITHUB_OUTPUT"):
        return False
    _toolkit().core.set_output(name, value if isinstance(value, str) else json.dumps(value, separators=(",", ":")))
    return True


def export(name: str, value: str) -> bool:
    """Set an environment variable for the job's later steps. Returns False outside Actions."""
    if not _runner_file("GITHUB_ENV"):
        return False
    _toolkit().core.export_variable(name, value)
    return True


def add_summary(markdown: str) -> bool:
    """Append Markdown to the job summary. Returns False outside Actions."""
    if not _runner_file("GITHUB_STEP_SUMMARY"):
        return False
    _toolkit().file_command.issue_file_command("STEP_SUMMARY", markdown.rstrip("\n") + "\n")
    return True


def mask(secret: str) -> None:
    """Ask the runner to mask a value in all later log lines."""
    if secret and in_actions():
        for line in secret.splitlines():
            if line.strip():
                _command("add-mask", {}, line)


def annotate(level: str, message: str, **properties: Any) -> None:
    """An error/warning/notice annotation in Actions; `level: message` on stderr elsewhere."""
    if level not in ("error", "warning", "notice"):
        raise ValueError(level)
    if in_actions():
        props = {k: properties.get(k) for k in _ANNOTATION_KEYS}
        if props["file"]:
            props["file"] = workspace_path(str(props["file"]))
        _command(level, props, message)
    else:
        where = properties.get("file")
        prefix = f"{where}: " if where else ""
        print(f"ghbuild {level}: {prefix}{message}", file=sys.stderr, flush=True)


def workspace_path(path: str, env: Mapping[str, str] | None = None) -> str:
    """An annotation's `file`: relative to GITHUB_WORKSPACE (what GitHub links to the diff), when inside it."""
    env = os.environ if env is None else env
    workspace = env.get("GITHUB_WORKSPACE") or os.getcwd()
    absolute = os.path.abspath(path)
    try:
        relative = os.path.relpath(absolute, os.path.abspath(workspace))
    except ValueError:   # another drive (Windows)
        return path
    return path if relative.startswith("..") else relative


@contextlib.contextmanager
def commands_off() -> Iterator[None]:
    """Lines printed inside are never taken for workflow commands: a build's RUN steps print what they
    like (`::error::`, `::add-mask::`...), and the code being built may be a fork's."""
    if not in_actions():
        yield
        return
    token = os.urandom(16).hex()   # unguessable: the output inside cannot print it to resume commands
    _command("stop-commands", {}, token)
    try:
        yield
    finally:
        print(f"::{token}::", file=sys.stderr, flush=True)


@contextlib.contextmanager
def group(title: str) -> Iterator[None]:
    """A foldable log group in Actions; a header line elsewhere."""
    if in_actions():
        _command("group", {}, title)
        try:
            yield
        finally:
            _command("endgroup", {}, "")
    else:
        print(f"--- {title}", file=sys.stderr, flush=True)
        yield
