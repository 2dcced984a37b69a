"""`ghbuild plan` and `ghbuild matrix`: what this event builds, as a table, JSON or the build matrix."""

from __future__ import annotations

import argparse
import json

from ghbuild import render
from ghbuild.cli import common, planning
from ghbuild.github import gha


def cmd_plan(args: argparse.Namespace) -> int:
    _, plan = planning.load_plan(args, common.listed(args.image), args.arch)
    gha.add_summary(render.plan_summary(plan))
    print(json.dumps(plan.to_dict(), indent=2) if args.json else render.plan_table(plan))
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    options, plan = planning.load_plan(args, common.listed(args.image), args.arch)
    gha.add_summary(render.plan_summary(plan))   # why a run is (un)trusted shows in CI, not only in the log
    identities = {job.id: "" for job in plan.jobs if job.identity_prefix}
    if args.identities and identities:   # I/O (git, registries), so only on request: the plan job asks for it
        from ghbuild.cli import bases  # the registry client: only for this flag (start-up of `matrix`)

        identities = bases.identities(options, plan)
    matrix, bases_matrix = plan.matrix(), plan.bases_matrix(identities)
    gha.set_output("matrix", matrix)
    gha.set_output("bases", bases_matrix)
    gha.set_output("bases-count", str(len(bases_matrix["include"])))
    gha.set_output("trusted", "true" if plan.trust.trusted else "false")
    gha.set_output("secrets", "true" if plan.trust.secrets else "false")
    gha.set_output("gha-write", "true" if plan.trust.gha_write else "false")
    gha.set_output("jobs", str(len(matrix["include"])))
    print(json.dumps(matrix, separators=(",", ":")))
    return 0
