"""What the commands share between their arguments and their work: the config and the images named
(ghbuild.cli.planning adds the GitHub context, the plan and the trust check)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ghbuild.config import configfile
from ghbuild.config.options import Options
from ghbuild.errors import UsageError
from ghbuild.github import gha


def log(message: str) -> None:
    print(message, file=sys.stderr)


def indented(message: str) -> None:
    print(f"  {message}", file=sys.stderr)


def listed(values: list[list[str]] | None) -> list[str] | None:
    """--image a --image b, --image a,b and --image "a b" all mean [a, b] (each value split by flags.names);
    None when the flag was not given."""
    if not values:
        return None
    return list(dict.fromkeys(name for names in values for name in names))


def load_options(args: argparse.Namespace) -> Options:
    return configfile.load(args.config, os.environ, Path.cwd())


def known_images(args: argparse.Namespace, options: Options, names: list[str]) -> None:
    """Every --image name is in the config; the error names the file, and GHBUILD_CONFIG when that chose it
    (a variable exported for another checkout is the usual reason an image is missing)."""
    for name in names:
        if name not in options.images:
            chosen_by = (f" (from {configfile.CONFIG_ENV})"
                         if not getattr(args, "config", None) and os.environ.get(configfile.CONFIG_ENV) else "")
            raise UsageError(f"--image {name}: no such image in {options.config_path}{chosen_by} "
                             f"(known: {', '.join(options.images)})")


def published_images(args: argparse.Namespace, options: Options, command: str) -> list[str]:
    """The images publish/prune work on: those named, else every image that is built per commit."""
    names = listed(args.image)
    known_images(args, options, names or [])
    bases = [name for name in names or [] if options.images[name].identity is not None]
    if bases:   # one images list serves build and publish in a workflow: say so and go on
        gha.annotate("warning", f"{command}: skipping {', '.join(bases)}: a content-addressed base is not "
                                "published per commit")
    chosen = [name for name in names or options.images if options.images[name].identity is None]
    if not chosen:
        raise UsageError(f"--image {' '.join(names or [])}: only content-addressed bases, nothing to {command}")
    return chosen


def owner(args: argparse.Namespace) -> str:
    return (args.repository or os.environ.get("GITHUB_REPOSITORY") or "").split("/")[0]
