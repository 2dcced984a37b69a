"""Command-line glue for the self-hosted ROCm runner commands: runner-check, container-flags, diagnose.

Wiring into `ghbuild` (ghbuild/cli.py), two lines:

    runner_cli.register(sub, _Parser)                                  # in build_parser()
    if args.command in runner_cli.COMMANDS: return runner_cli.dispatch(args)   # in main()

Until then (and for tests) `python -m ghbuild.runner_cli COMMAND ...` runs the same commands with
the same one-line errors and exit codes.

Output: results on stdout (`--json`: one JSON document), human lines on stderr. In GitHub Actions
the results also go to the job summary and step outputs through ghbuild.gha.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from ghbuild import gha
from ghbuild.errors import RunnerCheckError, UsageError

COMMANDS = ("runner-check", "container-flags", "diagnose")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a positive number of seconds")
    return value


def _size(text: str) -> int:
    from ghbuild.options import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def register(subparsers, parser_class: type[argparse.ArgumentParser] | None = None) -> None:
    """Add runner-check, container-flags and diagnose to `subparsers` (from add_subparsers).

    parser_class: the CLI's parser class (cli._Parser, whose error() raises UsageError). The
    sub-parsers are made by subparsers.add_parser, which uses the class given to
    add_subparsers(parser_class=...): pass that same class there. Accepted here to make the
    contract explicit; a mismatch is refused.
    """
    expected = getattr(subparsers, "_parser_class", None)
    if parser_class is not None and expected is not None and expected is not parser_class:
        raise TypeError(f"register: subparsers make {expected.__name__} parsers, not {parser_class.__name__}")
    _add = subparsers.add_parser
    p = _add("runner-check", help="check a self-hosted ROCm runner before a job: GPUs, /dev/kfd, render gid, "
                                  "disk, leftover containers",
             description="Checks a self-hosted ROCm runner. Every failure is one line saying what is wrong "
                         "and how to fix it; exit 15 when a check failed.")
    p.add_argument("--gpus", type=_count, default=1, metavar="N",
                   help="minimum number of GPU agents rocminfo must see (default 1; 0 skips the GPU check)")
    p.add_argument("--min-free-disk", type=_size, default="50GB", metavar="SIZE",
                   help="minimum free disk, e.g. 50GB, 200GiB (default 50GB)")
    p.add_argument("--disk-path", metavar="PATH",
                   help="where to measure free disk (default: the Docker data root, else the current directory)")
    p.add_argument("--rocminfo-timeout", type=_positive, default=30.0, metavar="SECONDS",
                   help="kill rocminfo after this long and report a hung driver (default 30)")
    p.add_argument("--docker-timeout", type=_positive, default=15.0, metavar="SECONDS",
                   help="time limit for each docker command (default 15)")
    p.add_argument("--clean-containers", action="store_true",
                   help="remove leftover containers started by earlier jobs (label org.ghbuild.runner)")
    p.add_argument("--root", default="/", metavar="PATH",
                   help="filesystem root to inspect (/dev, /etc/group; default /): for chroots and tests")
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")

    p = _add("container-flags", help="print the docker run flags a ROCm GPU container needs",
             description="Prints --device /dev/kfd --device /dev/dri --group-add <render gid> --security-opt "
                         "seccomp=unconfined --shm-size 16g --label org.ghbuild.runner=smoke-test.")
    p.add_argument("--gid", type=_count, metavar="N", help="render group id (default: detected from "
                                                           "/dev/dri/renderD*, else /etc/group)")
    p.add_argument("--shm-size", default="16g", metavar="SIZE", help="--shm-size value (default 16g)")
    p.add_argument("--no-label", action="store_true",
                   help="omit --label org.ghbuild.runner=... (then runner-check cannot find leftovers)")
    p.add_argument("--root", default="/", metavar="PATH", help="filesystem root for gid detection (default /)")
    p.add_argument("--json", action="store_true", help="print the flags as a JSON list")

    p = _add("diagnose", help="collect bounded failure diagnostics (rocminfo, amd-smi, dmesg, df, docker, ...) "
                              "into a folder",
             description="Runs each diagnostic command with its own timeout, all within a total budget, and "
                         "writes one file per command plus index.json and summary.md inside --out only "
                         "(no '..', no symlinks, inside the working directory or RUNNER_TEMP).")
    p.add_argument("--out", default="ghbuild-diagnostics", metavar="DIR",
                   help="output folder, inside the working directory or RUNNER_TEMP (default ghbuild-diagnostics)")
    p.add_argument("--total-timeout", type=_positive, default=25.0, metavar="SECONDS",
                   help="budget for all commands (default 25)")
    p.add_argument("--command-timeout", type=_positive, default=5.0, metavar="SECONDS",
                   help="budget for each command (default 5)")
    p.add_argument("--json", action="store_true", help="print the index (what ran, status, files) as JSON")


# --------------------------------------------------------------------------- commands

def cmd_runner_check(args: argparse.Namespace) -> int:
    from ghbuild import runner

    host = runner.Host(root=Path(args.root))
    report = runner.check(gpus=args.gpus, min_free_disk=args.min_free_disk, disk_path=args.disk_path,
                          rocminfo_timeout=args.rocminfo_timeout, docker_timeout=args.docker_timeout,
                          clean_containers=args.clean_containers, host=host)
    print(report.text(), file=sys.stderr)
    if gha.in_actions():  # elsewhere the lines above already say it
        for failure in report.failures:
            gha.annotate("error", failure.line(), title="ROCm runner check")
    gha.add_summary(report.markdown())
    gid_check = report.get("render-gid")
    gid = gid_check.details.get("gid") if gid_check and gid_check.ok else None
    gha.set_output("ok", "true" if report.ok else "false")
    gha.set_output("render-gid", "" if gid is None else str(gid))
    gha.set_output("container-flags", shlex.join(runner.container_flags(gid)) if gid is not None else "")
    gpus = report.get("gpus")
    gha.set_output("gpus", str(gpus.details.get("count", "")) if gpus else "")
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    if not report.ok:
        raise RunnerCheckError(f"{len(report.failures)} of {len(report.checks)} checks failed: "
                               f"{', '.join(c.name for c in report.failures)} (each FAIL line above says why)")
    return 0


def cmd_container_flags(args: argparse.Namespace) -> int:
    from ghbuild import runner

    gid = args.gid if args.gid is not None else runner.detect_render_gid(args.root)
    try:
        flags = runner.container_flags(gid, shm_size=args.shm_size, label=None if args.no_label else
                                       runner.CONTAINER_LABEL_VALUE)
    except ValueError as exc:
        raise UsageError(f"container-flags: {exc}") from None
    gha.set_output("flags", shlex.join(flags))
    gha.set_output("render-gid", str(gid))
    print(json.dumps(flags) if args.json else shlex.join(flags))
    return 0


def cmd_diagnose(args: argparse.Namespace) -> int:
    from ghbuild import diagnose

    result = diagnose.collect(args.out, total_budget=args.total_timeout, per_command=args.command_timeout)
    print(f"ghbuild diagnose: {result.line()}", file=sys.stderr)
    gha.add_summary(result.markdown())
    gha.set_output("dir", str(result.out_dir))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    return 0


_HANDLERS = {"runner-check": cmd_runner_check, "container-flags": cmd_container_flags, "diagnose": cmd_diagnose}


def dispatch(args: argparse.Namespace) -> int:
    """Run the command named by args.command (one of COMMANDS). Errors are GhbuildError subclasses."""
    handler = _HANDLERS.get(getattr(args, "command", None))
    if handler is None:
        raise UsageError(f"not a runner command: {getattr(args, 'command', None)!r}")
    return handler(args)


__all__ = ["COMMANDS", "dispatch", "register"]
