"""`ghbuild overrides` and `ghbuild completion`: config overrides checked and exported, and the shell
completion script."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from pathlib import Path

from ghbuild.cli.parser import build_parser
from ghbuild.config import overrides
from ghbuild.github import gha


def cmd_overrides(args: argparse.Namespace) -> int:
    variables = overrides.parse(args.lines)
    overrides.validate(variables, args.config, os.environ, Path.cwd())
    for name, value in variables.items():
        gha.export(name, value)
        print(f"{name}={value}")
    return 0


def cmd_completion(args: argparse.Namespace) -> int:
    import shtab  # an optional extra, and only this command pays for its import

    parser = build_parser()
    _for_completion(parser, {"PATH": shtab.FILE, "FILE": shtab.FILE, "DIR": shtab.DIRECTORY})
    print(shtab.complete(parser, shell=args.shell), end="")
    return 0


def _for_completion(parser: argparse.ArgumentParser, by_metavar: Mapping[str, object]) -> None:
    """Ready a parser for shtab: arguments whose metavar names a file or a folder complete file or folder
    names (shtab's `complete` attribute), and a command's menu entry is its one-line help (shtab would
    take the first line of its wrapped description, cut mid-sentence)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.description = None
                _for_completion(sub, by_metavar)
        elif isinstance(action.metavar, str) and action.metavar in by_metavar:
            action.complete = by_metavar[action.metavar]  # type: ignore[attr-defined]  # shtab reads it
