"""`ghbuild identity` and `ghbuild ensure-base`: content-addressed base images, found or built."""

from __future__ import annotations

import argparse
import json
import os

from ghbuild import render
from ghbuild.bases import ensure_base
from ghbuild.build.report import buildx_metadata
from ghbuild.cli import common, planning
from ghbuild.config.options import Options
from ghbuild.github import gha
from ghbuild.plan.planner import Plan
from ghbuild.registry import client as registry
from ghbuild.registry import lookup


def registries() -> lookup.RegistryFactory:
    return registry.client_factory(os.environ, common.log)


def identities(options: Options, plan: Plan) -> dict[str, str]:
    """Each content-addressed base job's identity (matrix --identities)."""
    return ensure_base.base_identities(options, plan, registries())


def cmd_identity(args: argparse.Namespace) -> int:
    options, plan, arch = planning.load_base(args)
    result = ensure_base.compute_identity(options, plan.job(args.image, arch),
                                          lookup.registry_lookup(registries()), args.base_image)
    gha.set_output("identity", result.identity)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.identity)
    return 0


def cmd_ensure_base(args: argparse.Namespace) -> int:
    options, plan, arch = planning.load_base(args)
    result = ensure_base.ensure(plan, options, args.image, arch, os.environ, registries(),
                                base_image=args.base_image, dry_run=args.dry_run, echo=not args.quiet,
                                lookup_only=args.lookup_only)
    gha.set_output("ref", result.ref or "")
    gha.set_output("digest", result.digest or "")
    gha.set_output("identity", result.identity)
    gha.set_output("built", "true" if result.built else "false")
    gha.set_output("metadata", buildx_metadata(result.digest, None, [result.ref] if result.ref else []))
    gha.add_summary(render.ensure_base_summary(result))
    if args.json:
        data = result.to_dict()
        data.pop("identity_detail", None)
        print(json.dumps(data, indent=2))
    else:
        print(result.ref or f"(dry run: would build and push {result.found_at})")
    return 0
