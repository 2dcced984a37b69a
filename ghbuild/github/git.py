"""The git checkout, asked for one value: what the GitHub context, `publish` and `init` read from git when
GitHub did not say it (outside Actions, or a commit time for the tag phase)."""

from __future__ import annotations

from pathlib import Path


def git_output(args: list[str], cwd: Path) -> str | None:
    """`git ARGS` in `cwd`: its stripped stdout, or None when git is missing, fails, hangs or prints nothing."""
    import subprocess  # with threading and selectors, 3 ms: in Actions the context never asks git

    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None
