"""`ghbuild prune`: retention of nightly tags; a dry run unless --apply, and --apply only in a trusted run."""

from __future__ import annotations

import argparse
import json

from ghbuild import retention
from ghbuild.cli import common
from ghbuild.errors import UsageError
from ghbuild.github import gha


def cmd_prune(args: argparse.Namespace) -> int:
    if args.keep is not None and args.keep < 1:
        raise UsageError(f"--keep {args.keep}: keep at least 1")
    options = common.load_options(args)
    if args.apply:
        from ghbuild.cli import planning  # the GitHub context and the planner: only a prune that deletes

        planning.require_trusted_run(args, options, "prune --apply")
    results = retention.prune_images(options, common.published_images(args, options, "prune"), keep=args.keep,
                                     apply=args.apply, owner=common.owner(args) or None, say=common.log,
                                     group=gha.group)
    gha.add_summary(retention.markdown(results))
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2, default=str))
    retention.raise_for_failures(results)
    return 0
