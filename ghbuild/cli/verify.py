"""`ghbuild verify REF`: is this published image signed by the canonical repository's build, with provenance
naming its repository and commit? One line either way; exit 0, or 13 (ghbuild.errors.VerificationError); a
malformed reference is a usage error (exit 2) before any network.

Keyless, a signature counts only from a push, schedule or dispatch run of the stable branch: `--branch`, else the
config's trust.stable-branch (GHBUILD_TRUST_STABLE_BRANCH), else `main`."""

from __future__ import annotations

import argparse
import os

from ghbuild.cli import common
from ghbuild.errors import UsageError
from ghbuild.sign import check, policy


def _trust_setting(args: argparse.Namespace, name: str) -> str | None:
    """A trust setting of the config (`canonical_repository`, `stable_branch`), when there is a config."""
    if args.config or os.environ.get("GHBUILD_CONFIG") or os.path.exists("ghbuild.toml"):
        return getattr(common.load_options(args).trust, name) or None
    return None


def canonical_repository(args: argparse.Namespace) -> str:
    """--repository, else the config's trust.canonical-repository, else GITHUB_REPOSITORY."""
    canonical = args.repository or _trust_setting(args, "canonical_repository")
    if canonical:
        return str(canonical)
    if os.environ.get("GITHUB_REPOSITORY"):
        return os.environ["GITHUB_REPOSITORY"]
    raise UsageError("verify: whose image? pass --repository OWNER/NAME (the canonical repository that builds it)")


def stable_branch(args: argparse.Namespace) -> str:
    """--branch, else the config's trust.stable-branch, else `main` (policy.DEFAULT_STABLE_BRANCH)."""
    return str(args.branch or _trust_setting(args, "stable_branch") or os.environ.get("GHBUILD_TRUST_STABLE_BRANCH")
               or policy.DEFAULT_STABLE_BRANCH)


def cmd_verify(args: argparse.Namespace) -> int:
    check.checked_reference(args.reference)    # a usage error before anything else is read
    done = check.verify_reference(args.reference, canonical_repository(args), os.environ, args.key, args.sha,
                                  os.environ.get("GITHUB_SERVER_URL") or "https://github.com", stable_branch(args))
    print(f"verified {done.ref}: signed by {done.signer} for {done.revision} of {done.source}; provenance of "
          f"{', '.join(done.platforms)} names that commit")
    return 0
