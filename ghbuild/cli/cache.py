"""`ghbuild cache`: the GitHub Actions cache budget; a dry run unless --apply, and --apply only in a trusted run
(as `ghbuild prune`)."""

from __future__ import annotations

import argparse
import json
import os

from ghbuild import actions_cache, naming
from ghbuild.cli import common, planning
from ghbuild.errors import ContextError, InvalidReferenceError
from ghbuild.github import gha


def cmd_cache(args: argparse.Namespace) -> int:
    options = common.load_options(args)
    if args.apply:
        repository = planning.require_trusted_run(args, options, "cache --apply").repository
    else:
        repository = _repository(args)
    with gha.group(f"cache {repository}{'' if args.apply else ' (dry run)'}"):
        result = actions_cache.run(options, repository, os.environ, apply=args.apply, log=common.log)
    common.log(actions_cache.render(result))
    gha.add_summary(actions_cache.markdown(result))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    actions_cache.raise_for_failures(result)
    return 0


def _repository(args: argparse.Namespace) -> str:
    """The repository a dry run reads: --repository outside Actions (no other context needed), else the run's."""
    if args.repository and not gha.in_actions():
        try:
            return naming.normalize_slug(args.repository)
        except InvalidReferenceError as exc:
            raise ContextError(f"--repository: {exc}") from None
    return planning.github_context(args).repository
