"""The GitHub context of a run, its plan, and the trust check of a run that writes published tags: what
the commands that plan or publish get from their flags (ghbuild.cli.common has the config)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ghbuild.cli.common import known_images, load_options, log
from ghbuild.config.options import Options
from ghbuild.errors import TrustError, UsageError
from ghbuild.github import context, gha
from ghbuild.github.event import GitHubContext
from ghbuild.plan import planner
from ghbuild.plan.planner import Plan


def context_flags(args: argparse.Namespace) -> context.ContextFlags:
    return context.ContextFlags(
        event=args.event, event_path=args.event_path, repository=args.repository, ref=args.ref, sha=args.sha,
        pr=args.pr, base=args.base, head_ref=args.head_ref, head_repo=args.head_repo,
        default_branch=args.default_branch,
        ref_protected=None if args.ref_protected is None else args.ref_protected == "true")


def github_context(args: argparse.Namespace) -> GitHubContext:
    """The GitHub context of this run; outside Actions, what was inferred from git is said on stderr
    (`plan`'s table shows it itself)."""
    ctx = context.from_environment(os.environ, context_flags(args), Path.cwd())
    if not gha.in_actions() and not (args.command == "plan" and not args.json):
        for note in ctx.notes:
            log(f"ghbuild: note: {note}")
    return ctx


def load_plan(args: argparse.Namespace, images: list[str] | None,
              arches: list[str] | None) -> tuple[Options, Plan]:
    """The one way a command gets its config, GitHub context and plan: (options, plan), warnings annotated."""
    options = load_options(args)
    known_images(args, options, images or [])
    plan = planner.plan(github_context(args), options, images=images, arches=arches)
    for warning in plan.warnings:
        gha.annotate("warning", warning)
    return options, plan


def load_base(args: argparse.Namespace) -> tuple[Options, Plan, str]:
    """(options, plan, arch) for identity / ensure-base: the image must be content-addressed."""
    options = load_options(args)
    known_images(args, options, [args.image])
    image = options.images[args.image]
    if image.identity is None:
        raise UsageError(f"--image {args.image}: not content-addressed (add [images.{args.image}.identity] "
                         f"to {options.config_path.name})")
    arch = args.arch or image.arches[0]
    _, plan = load_plan(args, [args.image], [arch])
    return options, plan, arch


def require_trusted_run(args: argparse.Namespace, options: Options, what: str) -> GitHubContext:
    """The GitHub context of a run that writes published tags or deletes them; refused unless trusted."""
    ctx = github_context(args)
    refusal = planner.publishing_refusal(ctx, options)
    if refusal:
        raise TrustError(f"{what}: {refusal}")
    return ctx


def trust(args: argparse.Namespace, options: Options) -> planner.Trust:
    """The trust decision of this run (who may write what, the canonical repository and stable branch)."""
    decided, _ = planner.decide_trust(github_context(args), options)
    return decided
