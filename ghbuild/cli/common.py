"""What the commands share between their arguments and their work: the config, the GitHub context, the
plan, the images named, and the trust check of a run that writes published tags."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ghbuild.config import configfile
from ghbuild.config.options import Options
from ghbuild.errors import TrustError, UsageError
from ghbuild.github import context, gha
from ghbuild.github.event import GitHubContext
from ghbuild.plan import planner
from ghbuild.plan.planner import Plan


def log(message: str) -> None:
    print(message, file=sys.stderr)


def indented(message: str) -> None:
    print(f"  {message}", file=sys.stderr)


def context_flags(args: argparse.Namespace) -> context.ContextFlags:
    return context.ContextFlags(
        event=args.event, event_path=args.event_path, repository=args.repository, ref=args.ref, sha=args.sha,
        pr=args.pr, base=args.base, head_ref=args.head_ref, head_repo=args.head_repo,
        default_branch=args.default_branch,
        ref_protected=None if args.ref_protected is None else args.ref_protected == "true")


def listed(values: list[list[str]] | None) -> list[str] | None:
    """--image a --image b, --image a,b and --image "a b" all mean [a, b] (each value split by flags.names);
    None when the flag was not given."""
    if not values:
        return None
    return list(dict.fromkeys(name for names in values for name in names))


def load_options(args: argparse.Namespace) -> Options:
    return configfile.load(args.config, os.environ, Path.cwd())


def github_context(args: argparse.Namespace) -> GitHubContext:
    """The GitHub context of this run; outside Actions, what was inferred from git is said on stderr
    (`plan`'s table shows it itself)."""
    ctx = context.from_environment(os.environ, context_flags(args), Path.cwd())
    if not gha.in_actions() and not (args.command == "plan" and not args.json):
        for note in ctx.notes:
            log(f"ghbuild: note: {note}")
    return ctx


def known_images(args: argparse.Namespace, options: Options, names: list[str]) -> None:
    """Every --image name is in the config; the error names the file, and GHBUILD_CONFIG when that chose it
    (a variable exported for another checkout is the usual reason an image is missing)."""
    for name in names:
        if name not in options.images:
            chosen_by = (f" (from {configfile.CONFIG_ENV})"
                         if not getattr(args, "config", None) and os.environ.get(configfile.CONFIG_ENV) else "")
            raise UsageError(f"--image {name}: no such image in {options.config_path}{chosen_by} "
                             f"(known: {', '.join(options.images)})")


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


def published_images(args: argparse.Namespace, options: Options, command: str) -> list[str]:
    """The images publish/prune work on: those named, else every image that is built per commit."""
    names = listed(args.image)
    known_images(args, options, names or [])
    bases = [name for name in names or [] if options.images[name].identity is not None]
    if bases:   # one images list serves build and publish in a workflow: say so and go on
        gha.annotate("warning", f"{command}: skipping {', '.join(bases)}: a content-addressed base is not "
                                "published per commit")
    chosen = [name for name in names or options.images if options.images[name].identity is None]
    if not chosen:
        raise UsageError(f"--image {' '.join(names or [])}: only content-addressed bases, nothing to {command}")
    return chosen


def owner(args: argparse.Namespace) -> str:
    return (args.repository or os.environ.get("GITHUB_REPOSITORY") or "").split("/")[0]


def require_trusted_run(args: argparse.Namespace, options: Options, what: str) -> GitHubContext:
    """The GitHub context of a run that writes published tags or deletes them; refused unless trusted."""
    ctx = github_context(args)
    refusal = planner.publishing_refusal(ctx, options)
    if refusal:
        raise TrustError(f"{what}: {refusal}")
    return ctx
