"""`ghbuild verify REF`: is this published image signed by the canonical repository's build, with provenance
naming its repository and commit? One line either way; exit 0, or 13 (ghbuild.errors.VerificationError)."""

from __future__ import annotations

import argparse
import os

from ghbuild.cli import common
from ghbuild.errors import UsageError
from ghbuild.sign import check


def canonical_repository(args: argparse.Namespace) -> str:
    """--repository, else the config's trust.canonical-repository, else GITHUB_REPOSITORY."""
    if args.repository:
        return str(args.repository)
    if args.config or os.environ.get("GHBUILD_CONFIG") or os.path.exists("ghbuild.toml"):
        canonical = common.load_options(args).trust.canonical_repository
        if canonical:
            return canonical
    if os.environ.get("GITHUB_REPOSITORY"):
        return os.environ["GITHUB_REPOSITORY"]
    raise UsageError("verify: whose image? pass --repository OWNER/NAME (the canonical repository that builds it)")


def cmd_verify(args: argparse.Namespace) -> int:
    done = check.verify_reference(args.reference, canonical_repository(args), os.environ, args.key, args.sha,
                                  os.environ.get("GITHUB_SERVER_URL") or "https://github.com")
    print(f"verified {done.ref}: signed for {done.revision} of {done.source}; provenance of "
          f"{', '.join(done.platforms)} names that commit")
    return 0
