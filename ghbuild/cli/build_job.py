"""The work of `ghbuild build` once its engine probe runs: plan the job, build it, report and record it."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from ghbuild import render
from ghbuild.build import buildjob, engine
from ghbuild.build.report import BuildReport, check_budgets
from ghbuild.cli import planning
from ghbuild.plan.planner import Plan
from ghbuild.publish import records
from ghbuild.sign import check, policy


def run(args: argparse.Namespace, probe: engine.ClientProbe) -> tuple[Plan, BuildReport]:
    options, plan = planning.load_plan(args, [args.image], [args.arch])
    if args.record:
        records.destination(Path(args.record), os.environ, Path.cwd())   # refused before anything is built
    request = buildjob.BuildRequest(image=args.image, arch=args.arch, push=args.push, dry_run=args.dry_run,
                                    target=args.target, base_image=args.base_image, backend=args.backend,
                                    require_digest_base=args.require_digest_base, echo=not args.quiet)
    return plan, buildjob.run(plan, options, request, os.environ, probe=probe)


def done(args: argparse.Namespace, plan: Plan, report: BuildReport) -> int:
    if args.dry_run:
        print(json.dumps(report.to_dict(), indent=2) if args.json else report.command)
        return 0
    buildjob.outputs(report)
    print(render.build_text(report), file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    check_budgets(report)
    if args.record and report.digest:   # only for a build that passed every check
        job = plan.job(args.image, args.arch)
        signature = _sign(plan, report)
        records.write(Path(args.record), {"id": job.id, "image": job.image, "arch": job.arch,
                                          "platform": job.platform, "digest": report.digest, "ref": report.ref,
                                          "sha": plan.context.sha, "trusted": plan.trust.trusted,
                                          "signature": signature},
                      os.environ, Path.cwd())
    return 0


def _sign(plan: Plan, report: BuildReport) -> str:
    """A trusted build signs the staging digest it records (publish verifies it before copying anything);
    returns how: key, keyless, or none (untrusted, or no way to sign: said on stderr)."""
    if not plan.trust.trusted or not report.ref:
        return "none"
    url = policy.source_url(plan.context.server_url, plan.trust.canonical_repository)
    mode = check.sign_image(report.ref, url, plan.context.sha, os.environ)
    print(f"ghbuild: signed {report.ref} ({mode})" if mode != "none"
          else f"ghbuild: {report.ref}: {policy.signer(os.environ).reason}", file=sys.stderr)
    return mode
