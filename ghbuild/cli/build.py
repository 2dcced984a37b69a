"""`ghbuild build` (one plan job) and `ghbuild digests` (the records of every job, collected)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ghbuild import render
from ghbuild.build import engine
from ghbuild.build.report import BuildReport, check_budgets
from ghbuild.cli import common
from ghbuild.github import gha
from ghbuild.plan.planner import Plan
from ghbuild.publish import records


def cmd_build(args: argparse.Namespace) -> int:
    # The docker clients are asked first: they answer (tens of milliseconds each) while the build job's
    # modules load, the config is read and the job planned. A dry run asks them only their version.
    with engine.ClientProbe(os.environ, engine=not args.dry_run) as probe:
        from ghbuild.build import buildjob  # loads while the probe runs

        options, plan = common.load_plan(args, [args.image], [args.arch])
        if args.record:
            records.destination(Path(args.record), os.environ, Path.cwd())   # refused before anything is built
        request = buildjob.BuildRequest(image=args.image, arch=args.arch, push=args.push, dry_run=args.dry_run,
                                        target=args.target, base_image=args.base_image, backend=args.backend,
                                        require_digest_base=args.require_digest_base, echo=not args.quiet)
        report = buildjob.run(plan, options, request, os.environ, probe=probe)
        if not args.dry_run:
            buildjob.outputs(report)
    return _build_done(args, plan, report)


def _build_done(args: argparse.Namespace, plan: Plan, report: BuildReport) -> int:
    if args.dry_run:
        print(json.dumps(report.to_dict(), indent=2) if args.json else report.command)
        return 0
    print(render.build_text(report), file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    check_budgets(report)
    if args.record and report.digest:   # only for a build that passed every check
        job = plan.job(args.image, args.arch)
        records.write(Path(args.record), {"id": job.id, "image": job.image, "arch": job.arch,
                                          "platform": job.platform, "digest": report.digest, "ref": report.ref,
                                          "sha": plan.context.sha, "trusted": plan.trust.trusted},
                      os.environ, Path.cwd())
    return 0


def cmd_digests(args: argparse.Namespace) -> int:
    digests = records.collect(Path(args.records))
    planned = records.planned_jobs(args.matrix)
    gha.set_output("digests", digests)
    gha.add_summary(render.digests_summary(args.title, planned, digests))
    if args.out:
        records.write_all(Path(args.out), digests)
    print(json.dumps(digests, indent=2))
    return 0
