"""`ghbuild runner-check`, `container-flags` and `diagnose`: the self-hosted ROCm runner commands."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from ghbuild.errors import RunnerCheckError, UsageError
from ghbuild.github import gha
from ghbuild.runner import diagnose, health


def cmd_runner_check(args: argparse.Namespace) -> int:
    host = health.Host(root=Path(args.root))
    report = health.check(gpus=args.gpus, min_free_disk=args.min_free_disk, disk_path=args.disk_path,
                          rocminfo_timeout=args.rocminfo_timeout, docker_timeout=args.docker_timeout,
                          clean_containers=args.clean_containers, host=host)
    print(report.text(), file=sys.stderr)
    if gha.in_actions():  # elsewhere the lines above already say it
        for failure in report.failures:
            gha.annotate("error", failure.line(), title="ROCm runner check")
    gha.add_summary(report.markdown())
    _runner_outputs(report)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    if not report.ok:
        raise RunnerCheckError(f"{len(report.failures)} of {len(report.checks)} checks failed: "
                               f"{', '.join(c.name for c in report.failures)} (each FAIL line above says why)")
    return 0


def _runner_outputs(report: health.Report) -> None:
    gid_check = report.get("render-gid")
    gid = gid_check.details.get("gid") if gid_check and gid_check.ok else None
    gha.set_output("ok", "true" if report.ok else "false")
    gha.set_output("render-gid", "" if gid is None else str(gid))
    gha.set_output("container-flags", shlex.join(health.container_flags(gid)) if gid is not None else "")
    gpus = report.get("gpus")
    gha.set_output("gpus", str(gpus.details.get("count", "")) if gpus else "")


def cmd_container_flags(args: argparse.Namespace) -> int:
    gid = args.gid if args.gid is not None else health.detect_render_gid(args.root)
    try:
        flags = health.container_flags(gid, shm_size=args.shm_size, label=None if args.no_label else
                                       health.CONTAINER_LABEL_VALUE)
    except ValueError as exc:
        raise UsageError(f"container-flags: {exc}") from None
    gha.set_output("flags", shlex.join(flags))
    gha.set_output("render-gid", str(gid))
    print(json.dumps(flags) if args.json else shlex.join(flags))
    return 0


def cmd_diagnose(args: argparse.Namespace) -> int:
    result = diagnose.collect(args.out, total_budget=args.total_timeout, per_command=args.command_timeout)
    print(f"ghbuild diagnose: {result.line()}", file=sys.stderr)
    gha.add_summary(result.markdown())
    gha.set_output("dir", str(result.out_dir))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    return 0
