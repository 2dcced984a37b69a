"""The flags several commands share and the argument types that check them: one parse error is one line."""

from __future__ import annotations

import argparse

from ghbuild.errors import UsageError
from ghbuild.sizes import parse_size

ARCHES = ("amd64", "arm64")
RECORDS_HELP = ("the trusted build's records: the build workflow's `digests` output (the JSON itself, or a file "
                "holding it) or a folder of `build --record` files; the digests to publish (required unless "
                "--dry-run)")


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, like every other usage error
        raise UsageError(f"{message} (see '{self.prog} --help')")


def context_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("GitHub context (overrides what GitHub set; for local use)")
    g.add_argument("--event", help="event name: push, pull_request, pull_request_target, schedule, "
                                   "workflow_dispatch, merge_group")
    g.add_argument("--event-path", metavar="PATH", help="event payload JSON (default: GITHUB_EVENT_PATH)")
    g.add_argument("--repository", metavar="OWNER/NAME", help="repository the workflow runs in")
    g.add_argument("--ref", help="branch name or full ref (refs/heads/x)")
    g.add_argument("--sha", help="commit being built (default: GITHUB_SHA, else git HEAD)")
    g.add_argument("--pr", type=int, metavar="N", help="pull request number")
    g.add_argument("--base", metavar="BRANCH", help="pull request / merge queue base branch")
    g.add_argument("--head-ref", metavar="BRANCH", help="pull request source branch")
    g.add_argument("--head-repo", metavar="OWNER/NAME", help="pull request source repository (a fork if it "
                                                             "differs from --repository)")
    g.add_argument("--default-branch", metavar="BRANCH", help="the repository's default branch")
    g.add_argument("--ref-protected", choices=("true", "false"),
                   help="whether GitHub protects the ref (default: GITHUB_REF_PROTECTED)")


def names(text: str) -> list[str]:
    """One --image / --platform value: names separated by commas or spaces (a workflow passes one input);
    a value that names nothing is refused, not read as "every image"."""
    found = text.replace(",", " ").split()
    if not found:
        raise argparse.ArgumentTypeError(f"{text!r} names nothing (give one or more names separated by commas "
                                         "or spaces, or leave the flag out)")
    return found


def selection_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--image", action="append", type=names, metavar="NAME",
                   help="only this image (repeatable; a comma or space separated list works too)")
    p.add_argument("--arch", action="append", choices=ARCHES, help="only this arch (repeatable)")


def base_flags(p: argparse.ArgumentParser) -> None:
    """identity and ensure-base: one content-addressed image and arch."""
    p.add_argument("--config", metavar="PATH", help="config file")
    p.add_argument("--image", required=True, metavar="NAME", help="content-addressed image (with [identity])")
    p.add_argument("--arch", choices=ARCHES, help="architecture (default: the image's first)")
    p.add_argument("--base-image", metavar="REF", help="BASE_IMAGE (overrides images.<name>.base-image)")


def published_flags(p: argparse.ArgumentParser) -> None:
    """publish and prune: the images published per commit."""
    p.add_argument("--config", metavar="PATH", help="config file")
    p.add_argument("--image", action="append", type=names, metavar="NAME",
                   help="only this image (repeatable or a comma/space list; default: every image that is not "
                        "content-addressed)")


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a positive number of seconds")
    return value


def size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def tag_phase_flags(p: argparse.ArgumentParser) -> None:
    """publish: the tag phase's ordering between concurrent runs."""
    p.add_argument("--commit-time", type=int, metavar="UNIX_SECONDS",
                   help="commit time of --sha (default: from git in the working directory, when it has the commit); "
                        "a nightly never moves tags that a newer commit's nightly holds")
    p.add_argument("--lease-wait", type=seconds, default=600.0, metavar="SECONDS",
                   help="how long to wait for another publish of the same repository to finish its tag moves "
                        "(default 600)")
