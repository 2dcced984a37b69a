"""The `ghbuild` entry point: parse, dispatch to the command's handler, turn errors into exit codes.

Handlers live in one module per pipeline stage (ghbuild.cli.plan, .build, .bases, .publish, ...) and
are imported only when their command runs, as pip loads its commands: `ghbuild plan` never loads the
registry client or the Docker SDK. Every error is a GhbuildError, printed as one line with its exit
code (ghbuild.errors); results go to stdout (`--json`: one JSON document), human lines to stderr, and
in GitHub Actions also to step outputs, the job summary and annotations (ghbuild.github.gha).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
from collections.abc import Callable, Sequence

from ghbuild import __version__
from ghbuild.cli.parser import build_parser
from ghbuild.errors import GhbuildError
from ghbuild.github import gha

# command -> "module:handler" (the module is imported when the command runs).
COMMANDS = {
    "plan": "plan:cmd_plan", "matrix": "plan:cmd_matrix", "build": "build:cmd_build",
    "identity": "bases:cmd_identity", "ensure-base": "bases:cmd_ensure_base", "digests": "records:cmd_digests",
    "publish": "publish:cmd_publish", "verify": "verify:cmd_verify", "prune": "prune:cmd_prune",
    "cache": "cache:cmd_cache",
    "schema": "schema:cmd_schema", "init": "adopt:cmd_init", "overrides": "setup:cmd_overrides",
    "completion": "setup:cmd_completion",
    "runner-check": "runner:cmd_runner_check", "container-flags": "runner:cmd_container_flags",
    "diagnose": "runner:cmd_diagnose",
}


def handler(command: str) -> Callable[[argparse.Namespace], int]:
    module, _, function = COMMANDS[command].partition(":")
    found: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(f"ghbuild.cli.{module}"),
                                                         function)
    return found


def interrupt_on_sigterm() -> None:
    """SIGTERM (a cancelled GitHub job: SIGINT, then SIGTERM) raises KeyboardInterrupt like SIGINT, so
    a publish interrupted in its tag phase still puts its tags back and gives its lease up."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    import signal  # only the commands that write (publish) need it

    signal.signal(signal.SIGTERM, interrupt)


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words == ["--version"]:   # what argparse's version action prints, without building every command's parser
        print(f"ghbuild {__version__}")
        return 0
    # The command comes first (the top level has only --help and --version); anything else, such as a
    # typo, gets the whole parser, which lists every command.
    parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
    try:
        args = parser.parse_args(argv)
        if not args.command:
            parser.print_help(sys.stderr)
            return 2
        return handler(args.command)(args)
    except GhbuildError as exc:
        if gha.in_actions():
            gha.annotate("error", exc.message, title=f"ghbuild {exc.kind}", **exc.location)
        print(f"ghbuild: {exc.kind}: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("ghbuild: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1


# The collector's first generation runs every 700 net allocations of container objects. A command's start-up
# creates tens of thousands of long-lived ones (modules, classes, functions), so the default threshold scans
# them over and over before the first useful output, and once more at exit: about 20 ms of every short
# command here (bench/startup.py). A higher threshold still collects, just rarely. Freezing at exit spares
# the interpreter's final collection its scan; the objects it would have found are freed with the process
# (ghbuild has no __del__ that must run; files are closed by `with`, temporary folders by their finalizers).
START_UP_GC_THRESHOLD = 50_000


def run() -> None:
    """The `ghbuild` console script (and `python -m ghbuild`): main(), with the collector tuned for a CLI.
    Tests call main() and leave the collector alone."""
    gc.set_threshold(START_UP_GC_THRESHOLD, *gc.get_threshold()[1:])
    code = main()
    gc.freeze()
    sys.exit(code)
