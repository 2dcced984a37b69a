"""The `ghbuild` command line: one parser, one dispatch table, one handler per command.

A handler reads its flags, makes one call into the module that does the work, and prints or sets
outputs; every error is a GhbuildError, printed as one line with its exit code (ghbuild.errors).
Results go to stdout (`--json`: one JSON document), human lines to stderr; in GitHub Actions the
same values also go to step outputs, the job summary and annotations (ghbuild.github.gha).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from ghbuild import __version__
from ghbuild.errors import GhbuildError, RunnerCheckError, UsageError, help_epilog
from ghbuild.github import gha


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, like every other usage error
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _context_flags(p: argparse.ArgumentParser) -> None:
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


def _names(text: str) -> list[str]:
    """One --image / --platform value: names separated by commas or spaces (a workflow passes one input);
    a value that names nothing is refused, not read as "every image"."""
    names = text.replace(",", " ").split()
    if not names:
        raise argparse.ArgumentTypeError(f"{text!r} names nothing (give one or more names separated by commas "
                                         "or spaces, or leave the flag out)")
    return names


def _selection_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--image", action="append", type=_names, metavar="NAME",
                   help="only this image (repeatable; a comma or space separated list works too)")
    p.add_argument("--arch", action="append", choices=("amd64", "arm64"), help="only this arch (repeatable)")


def _base_flags(p: argparse.ArgumentParser) -> None:
    """identity and ensure-base: one content-addressed image and arch."""
    p.add_argument("--config", metavar="PATH", help="config file")
    p.add_argument("--image", required=True, metavar="NAME", help="content-addressed image (with [identity])")
    p.add_argument("--arch", choices=("amd64", "arm64"), help="architecture (default: the image's first)")
    p.add_argument("--base-image", metavar="REF", help="BASE_IMAGE (overrides images.<name>.base-image)")


def _published_flags(p: argparse.ArgumentParser) -> None:
    """publish and prune: the images published per commit."""
    p.add_argument("--config", metavar="PATH", help="config file")
    p.add_argument("--image", action="append", type=_names, metavar="NAME",
                   help="only this image (repeatable or a comma/space list; default: every image that is not "
                        "content-addressed)")


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: must be a positive number of seconds")
    return value


def _size(text: str) -> int:
    from ghbuild.config.options import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def _tag_phase_flags(p: argparse.ArgumentParser) -> None:
    """publish: the tag phase's ordering between concurrent runs."""
    p.add_argument("--commit-time", type=int, metavar="UNIX_SECONDS",
                   help="commit time of --sha (default: from git in the working directory, when it has the commit); "
                        "a nightly never moves tags that a newer commit's nightly holds")
    p.add_argument("--lease-wait", type=_positive, default=600.0, metavar="SECONDS",
                   help="how long to wait for another publish of the same repository to finish its tag moves "
                        "(default 600)")


RECORDS_HELP = ("the trusted build's records: the build workflow's `digests` output (the JSON itself, or a file "
                "holding it) or a folder of `build --record` files; the digests to publish (required unless "
                "--dry-run)")


# Per command: what it does (the --help description, where none is set with the parser) and examples.
# Every command has an entry; tests/test_cli.py checks that each --help shows both.
COMPLETION_SHELLS = ("bash", "zsh")
_LOCAL = "--event push --repository org/project --ref main --default-branch main"
COMMAND_HELP: dict[str, tuple[str, list[str]]] = {
    "plan": ("Shows what this event builds (image x arch), on which runners, with which caches and tags, and the "
             "trust decision: whether the run may push, write caches or use secrets, and why. Reads the GitHub "
             "context GitHub sets, or the flags below; under Actions also writes the job summary.",
             ["ghbuild plan", f"ghbuild plan {_LOCAL} --image cpu --json"]),
    "matrix": ("Prints the build matrix as JSON for `strategy.matrix: fromJSON(...)`, and sets the step outputs "
               "matrix, bases, trusted, secrets and gha-write; under Actions the job summary shows the trust "
               "decision, its reason and the jobs.",
               ["ghbuild matrix --identities", f"ghbuild matrix {_LOCAL} --arch amd64"]),
    "build": ("Builds one plan job (an image for one arch) with BuildKit, pushes its staging tags when asked and "
              "the plan allows it, and reports digest, caches, sccache hits and sizes (step outputs and job "
              "summary under Actions).",
              ["ghbuild build --image cpu --arch amd64 --dry-run", "ghbuild build --image cpu --arch amd64 --push "
               "--record \"$RUNNER_TEMP/records/cpu-amd64.json\""]),
    "identity": ("Prints the content identity of a content-addressed base image: the hash of its inputs, build "
                 "args and base digests that ensure-base looks it up by.",
                 ["ghbuild identity --image rocm-base --json"]),
    "ensure-base": ("Finds a content-addressed base image by its identity, or builds and pushes it when it is "
                    "missing; prints its name@sha256 reference for the images built on it.",
                    ["ghbuild ensure-base --image rocm-base --dry-run",
                     "ghbuild ensure-base --image rocm-base --lookup-only --quiet"]),
    "publish": ("Copies the images a trusted build staged to the publish registry: nightly tags per commit, or "
                "a release. Writes only in a trusted run; --dry-run prints every copy anywhere.",
                ["ghbuild publish nightly --dry-run", "ghbuild publish release --version 0.7.0 --records-from ci.yml"]),
    "publish nightly": ("Writes nightly-<arch> tags and the nightly / nightly-<sha> multi-arch manifests from the "
                        "staging images of one commit.",
                        ["ghbuild publish nightly --dry-run --sha \"$GITHUB_SHA\"",
                         "ghbuild publish nightly --records \"$DIGESTS\""]),
    "publish release": ("Writes v<version>, per-arch tags and latest from the staging images of one commit, then "
                        "creates the GitHub release.",
                        ["ghbuild publish release --version 0.7.0 --dry-run",
                         "ghbuild publish release --version 0.7.0 --records-from ci.yml"]),
    "prune": ("Deletes old nightly-* tags (Docker Hub, GHCR, plain registries), keeping the newest commits. A dry "
              "run unless --apply: deleting is the one step that cannot be undone, so it needs saying.",
              ["ghbuild prune", "ghbuild prune --dry-run --keep 7 --json", "ghbuild prune --apply"]),
    "digests": ("Collects the record files `build --record` wrote into one JSON by job id (the build workflow's "
                "digests output) and a job summary listing every planned job, pushed or not. A missing folder is "
                "an error; an empty one means nothing was pushed.",
                ["ghbuild digests \"$RUNNER_TEMP/records\" --matrix \"$MATRIX\" --out digests.json"]),
    "schema": ("Prints the JSON schema of ghbuild.toml (also published at its $id, for editors).",
               ["ghbuild schema > ghbuild.schema.json"]),
    "init": ("Run at the root of a repository: writes ghbuild.toml (an image per Dockerfile found, its last stage "
             "as target, the canonical repository from the git remote 'origin') and the caller workflow "
             ".github/workflows/images.yml pinned to the ghbuild commit running this; then prints what each compile "
             "step of each Dockerfile needs for sccache. Edits no Dockerfile; overwrites nothing without --force "
             "(with --diff, files already there are kept and the patch is printed all the same).",
             ["ghbuild init", "ghbuild init --diff | git apply", "ghbuild init --force --platform linux/amd64"]),
    "overrides": ("Checks KEY=VALUE lines (config keys such as sccache.bucket, or their GHBUILD_* variables) against "
                  "the config and, in Actions, sets them as GHBUILD_* variables for the job's later steps: the "
                  "reusable workflows' `overrides` input. An unknown key or a bad value is refused before anything "
                  "is set.",
                  ["ghbuild overrides 'sccache.bucket=my-bucket'",
                   "ghbuild overrides \"$(printf 'sccache.bucket=b\\nregistries.publish=docker.io/me/{image}')\""]),
    "completion": ("Prints the shell completion script of ghbuild (commands, flags, their choices, file names), "
                   "generated from this command line by shtab: a static script, so no Python starts while you "
                   "type. Write it where your shell loads completions from.",
                   ["ghbuild completion bash > ~/.local/share/bash-completion/completions/ghbuild",
                    "ghbuild completion zsh > \"${fpath[1]}/_ghbuild\""]),
    "runner-check": ("", ["ghbuild runner-check --gpus 2 --min-free-disk 100GB",
                          "ghbuild runner-check --gpus 0 --clean-containers --json"]),
    "container-flags": ("", ["docker run $(ghbuild container-flags) rocm/dev-ubuntu-24.04 rocminfo",
                             "ghbuild container-flags --gid 109 --json"]),
    "diagnose": ("", ["ghbuild diagnose --out \"$RUNNER_TEMP/diagnostics\""]),
}


def _describe(parser: argparse.ArgumentParser, name: str) -> None:
    """Give a command its description (unless set) and examples, and keep their line breaks."""
    description, examples = COMMAND_HELP.get(name, ("", []))
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    if description and not parser.description:
        parser.description = description
    if parser.description:
        import textwrap

        parser.description = textwrap.fill(" ".join(parser.description.split()), 100)
    if examples:
        parser.epilog = "examples:\n" + "\n".join(f"  {example}" for example in examples)


def _describe_all(subparsers, prefix: str = "") -> None:
    for name, parser in subparsers.choices.items():
        _describe(parser, prefix + name)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                _describe_all(action, f"{prefix}{name} ")


class _OnlyCommand:
    """The subparsers action as `build_parser` fills it when one command is run: that command's parser is
    built in full, every other command gets an `_Unbuilt` that takes its arguments and keeps nothing
    (building all of them cost every start-up about as much as loading a config)."""

    def __init__(self, action, command: str):
        self._action, self._command = action, command

    def add_parser(self, name: str, **kwargs):
        return self._action.add_parser(name, **kwargs) if name == self._command else _Unbuilt()

    def __getattr__(self, name: str):
        return getattr(self._action, name)


class _Unbuilt:
    """Any parser method: does nothing, returns itself (for a parser, group or subparsers action)."""

    def __getattr__(self, name: str):
        return lambda *args, **kwargs: self


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `command`, only that command's parser is built (enough to run it)."""
    parser = _Parser(prog="ghbuild", description="Container-image CI for large native projects on GitHub Actions.",
                     epilog="examples:\n  ghbuild plan\n  ghbuild build --image cpu --arch amd64 --dry-run\n"
                            "  ghbuild COMMAND --help\n\n" + help_epilog(),
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ghbuild {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    if command:
        sub = _OnlyCommand(sub, command)

    p = sub.add_parser("plan", help="show what this event builds, where, with which caches and tags")
    p.add_argument("--config", metavar="PATH", help="config file (default: ghbuild.toml, or [tool.ghbuild] "
                                                    "in pyproject.toml; env GHBUILD_CONFIG)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    _selection_flags(p)
    _context_flags(p)

    p = sub.add_parser("matrix", help="print the build matrix for strategy.matrix (and set the 'matrix' output)")
    p.add_argument("--config", metavar="PATH", help="config file")
    p.add_argument("--identities", action="store_true",
                   help="compute each content-addressed base's identity for the 'bases' output (reads git's index "
                        "and resolves base image digests in their registries)")
    _selection_flags(p)
    _context_flags(p)

    p = sub.add_parser("build", help="build one plan job (image x arch) with BuildKit, push it, report")
    p.add_argument("--config", metavar="PATH", help="config file")
    p.add_argument("--image", required=True, metavar="NAME", help="image to build")
    p.add_argument("--arch", required=True, choices=("amd64", "arm64"), help="architecture to build")
    p.add_argument("--push", action="store_true", help="push the staging tags (only when the plan allows it)")
    p.add_argument("--json", action="store_true", help="print the build report as JSON on stdout")
    p.add_argument("--dry-run", action="store_true", help="print the exact command and build args; run nothing "
                   "(no engine is asked: the client is chosen by its version and the buildx plugin on disk)")
    p.add_argument("--target", help="build this stage instead of the configured target")
    p.add_argument("--base-image", metavar="REF", help="BASE_IMAGE build arg (overrides images.<name>.base-image)")
    p.add_argument("--require-digest-base", action="store_true",
                   help="fail unless --base-image (or base-image) is name@sha256:<64 hex>")
    p.add_argument("--backend", choices=("buildx",), help="the build backend: docker buildx, the only one (the "
                   "engine backend, for docker clients older than 23 without buildx, was retired)")
    p.add_argument("--record", metavar="FILE", help="after a push, write {id, image, arch, platform, digest, ref} "
                                                   "as JSON to FILE (what `ghbuild digests` collects)")
    p.add_argument("--quiet", action="store_true", help="do not echo the build log")
    _context_flags(p)

    p = sub.add_parser("identity", help="the content identity of a base image: what ensure-base looks up")
    _base_flags(p)
    p.add_argument("--json", action="store_true", help="print identity, inputs and parts as JSON")
    _context_flags(p)

    p = sub.add_parser("ensure-base", help="find a content-addressed base by identity, or build and push it; "
                                           "prints its name@sha256 ref")
    _base_flags(p)
    p.add_argument("--dry-run", action="store_true", help="look up, but build and push nothing")
    p.add_argument("--lookup-only", action="store_true",
                   help="only find it: a base missing everywhere is an error (exit 16), never a build")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--quiet", action="store_true", help="do not echo the build log")
    _context_flags(p)

    p = sub.add_parser("publish", help="publish nightly tags and multi-arch manifests from staging")
    pub = p.add_subparsers(dest="publish_command", metavar="KIND", parser_class=_Parser, required=True)
    n = pub.add_parser("nightly", help="nightly-<arch> tags and the nightly / nightly-<sha> manifests")
    _published_flags(n)
    n.add_argument("--dry-run", action="store_true", help="print every copy and tag; push nothing")
    n.add_argument("--json", action="store_true", help="print the tags written with their digests as JSON")
    n.add_argument("--records", metavar="PATH", help=RECORDS_HELP)
    _tag_phase_flags(n)
    _context_flags(n)

    r = pub.add_parser("release", help="v<version>, per-arch tags and latest, plus the GitHub release")
    r.add_argument("--version", required=True, help="release version (PEP 440), e.g. 0.7.0 or 0.7.0rc1")
    _published_flags(r)
    r.add_argument("--dry-run", action="store_true", help="print every copy and tag; push nothing")
    r.add_argument("--json", action="store_true", help="print the tags written with their digests as JSON")
    r.add_argument("--no-github-release", action="store_true", help="do not create the GitHub release")
    r.add_argument("--records", metavar="PATH", help=RECORDS_HELP)
    _tag_phase_flags(r)
    r.add_argument("--records-from", metavar="WORKFLOW",
                   help="read the records from the build workflow's newest successful push run on the stable "
                        "branch for the commit (its ghbuild-digests artifact; GITHUB_TOKEN with actions: read), "
                        "e.g. ci.yml")
    _context_flags(r)

    p = sub.add_parser("prune", help="retention of nightly-* tags (Docker Hub, GHCR, plain registries); "
                                     "a dry run unless --apply")
    _published_flags(p)
    p.add_argument("--keep", type=int, metavar="N", help="nightly commits to keep (default: publish.retention)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--apply", action="store_true", help="really delete (default: only say what would go)")
    mode.add_argument("--dry-run", action="store_true", help="only say what would go (the default; accepted "
                                                             "like every command that pushes or deletes)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    _context_flags(p)

    p = sub.add_parser("digests", help="collect the records of `build --record` into one JSON (the workflow's "
                                       "'digests' output) and a job summary of every planned job")
    p.add_argument("records", metavar="DIR", help="folder of the record files")
    p.add_argument("--matrix", metavar="JSON", help="the plan's build matrix, to list jobs that pushed nothing")
    p.add_argument("--title", default="Images", help="heading of the job summary section")
    p.add_argument("--out", metavar="FILE", help="also write the JSON to FILE (the artifact release.yml reads)")

    sub.add_parser("schema", help="print the JSON schema of the config file")
    _init_parser(sub)
    p = sub.add_parser("overrides", help="check KEY=VALUE config overrides and set them as GHBUILD_* variables for "
                                         "the job's later steps (the reusable workflows' `overrides` input)")
    p.add_argument("lines", metavar="TEXT", help="KEY=VALUE lines; KEY a config key (sccache.bucket) or its variable")
    p.add_argument("--config", metavar="PATH", help="config file")
    p = sub.add_parser("completion", help="print the shell completion script (bash or zsh)")
    p.add_argument("shell", choices=COMPLETION_SHELLS, help="the shell to complete in")
    _runner_parsers(sub)
    _describe_all(sub)
    return parser


def _init_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "init", help="adopt ghbuild here: write ghbuild.toml and .github/workflows/images.yml, print the "
                     "Dockerfile lines for sccache")
    p.add_argument("--diff", action="store_true", help="print the Dockerfile changes as a patch (for `git apply`)")
    p.add_argument("--force", action="store_true", help="overwrite ghbuild.toml and images.yml if they exist")
    p.add_argument("--platform", action="append", type=_names, metavar="OS/ARCH",
                   help="platforms of every image (repeatable or a comma list; default linux/amd64,linux/arm64)")
    p.add_argument("--pin", metavar="OWNER/NAME@SHA",
                   help="the ghbuild the workflow calls (default: the commit this ghbuild was installed from)")


def _runner_parsers(subparsers) -> None:
    """runner-check, container-flags and diagnose: the self-hosted ROCm runner commands."""
    _add = subparsers.add_parser
    p = _add("runner-check", help="check a self-hosted ROCm runner before a job: GPUs, /dev/kfd, render gid, "
                                  "disk, leftover containers",
             description="Checks a self-hosted ROCm runner. Every failure is one line saying what is wrong "
                         "and how to fix it; exit 15 when a check failed.")
    p.add_argument("--gpus", type=_count, default=1, metavar="N",
                   help="minimum number of GPU agents rocminfo must see (default 1; 0 skips the GPU check)")
    p.add_argument("--min-free-disk", type=_size, default="50GB", metavar="SIZE",
                   help="minimum free disk, e.g. 50GB, 200GiB (default 50GB)")
    p.add_argument("--disk-path", metavar="PATH",
                   help="where to measure free disk (default: the Docker data root, else the current directory)")
    p.add_argument("--rocminfo-timeout", type=_positive, default=30.0, metavar="SECONDS",
                   help="kill rocminfo after this long and report a hung driver (default 30)")
    p.add_argument("--docker-timeout", type=_positive, default=15.0, metavar="SECONDS",
                   help="time limit for each docker command (default 15)")
    p.add_argument("--clean-containers", action="store_true",
                   help="remove leftover containers started by earlier jobs (label org.ghbuild.runner)")
    p.add_argument("--root", default="/", metavar="PATH",
                   help="filesystem root to inspect (/dev, /etc/group; default /): for chroots and tests")
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")

    p = _add("container-flags", help="print the docker run flags a ROCm GPU container needs",
             description="Prints --device /dev/kfd --device /dev/dri --group-add <render gid> --security-opt "
                         "seccomp=unconfined --shm-size 16g --label org.ghbuild.runner=smoke-test.")
    p.add_argument("--gid", type=_count, metavar="N", help="render group id (default: detected from "
                                                           "/dev/dri/renderD*, else /etc/group)")
    p.add_argument("--shm-size", default="16g", metavar="SIZE", help="--shm-size value (default 16g)")
    p.add_argument("--no-label", action="store_true",
                   help="omit --label org.ghbuild.runner=... (then runner-check cannot find leftovers)")
    p.add_argument("--root", default="/", metavar="PATH", help="filesystem root for gid detection (default /)")
    p.add_argument("--json", action="store_true", help="print the flags as a JSON list")

    p = _add("diagnose", help="collect bounded failure diagnostics (rocminfo, amd-smi, dmesg, df, docker, ...) "
                              "into a folder",
             description="Runs each diagnostic command with its own timeout, all within a total budget, and "
                         "writes one file per command plus index.json and summary.md inside --out only "
                         "(no '..', no symlinks, inside the working directory or RUNNER_TEMP).")
    p.add_argument("--out", default="ghbuild-diagnostics", metavar="DIR",
                   help="output folder, inside the working directory or RUNNER_TEMP (default ghbuild-diagnostics)")
    p.add_argument("--total-timeout", type=_positive, default=25.0, metavar="SECONDS",
                   help="budget for all commands (default 25)")
    p.add_argument("--command-timeout", type=_positive, default=5.0, metavar="SECONDS",
                   help="budget for each command (default 5)")
    p.add_argument("--json", action="store_true", help="print the index (what ran, status, files) as JSON")


# --------------------------------------------------------------------------- argument helpers

def _overrides(args: argparse.Namespace):
    from ghbuild.github.context import Overrides

    return Overrides(event=args.event, event_path=args.event_path, repository=args.repository, ref=args.ref,
                     sha=args.sha, pr=args.pr, base=args.base, head_ref=args.head_ref, head_repo=args.head_repo,
                     default_branch=args.default_branch,
                     ref_protected=None if args.ref_protected is None else args.ref_protected == "true")


def _listed(values: list[list[str]] | None) -> list[str] | None:
    """--image a --image b, --image a,b and --image "a b" all mean [a, b] (each value split by _names);
    None when the flag was not given."""
    if not values:
        return None
    return list(dict.fromkeys(name for names in values for name in names))


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def _indented(message: str) -> None:
    print(f"  {message}", file=sys.stderr)


def _options(args: argparse.Namespace):
    from ghbuild.config import configfile

    return configfile.load(args.config, os.environ, Path.cwd())


def _context(args: argparse.Namespace):
    """The GitHub context of this run; outside Actions, what was inferred from git is said on stderr
    (`plan`'s table shows it itself)."""
    from ghbuild.github import context

    ctx = context.from_environment(os.environ, _overrides(args), Path.cwd())
    if not gha.in_actions() and not (args.command == "plan" and not args.json):
        for note in ctx.notes:
            _log(f"ghbuild: note: {note}")
    return ctx


def _known_images(args: argparse.Namespace, options, names: list[str]) -> None:
    """Every --image name is in the config; the error names the file, and GHBUILD_CONFIG when that chose it
    (a variable exported for another checkout is the usual reason an image is missing)."""
    from ghbuild.config import configfile

    for name in names:
        if name not in options.images:
            chosen_by = (f" (from {configfile.CONFIG_ENV})"
                         if not getattr(args, "config", None) and os.environ.get(configfile.CONFIG_ENV) else "")
            raise UsageError(f"--image {name}: no such image in {options.config_path}{chosen_by} "
                             f"(known: {', '.join(options.images)})")


def _load(args: argparse.Namespace, images: list[str] | None, arches: list[str] | None):
    """The one way a command gets its config, GitHub context and plan: (options, plan), warnings annotated."""
    from ghbuild.plan import planner

    options = _options(args)
    _known_images(args, options, images or [])
    plan = planner.plan(_context(args), options, images=images, arches=arches)
    for warning in plan.warnings:
        gha.annotate("warning", warning)
    return options, plan


def _load_base(args: argparse.Namespace):
    """(options, plan, arch) for identity / ensure-base: the image must be content-addressed."""
    options = _options(args)
    _known_images(args, options, [args.image])
    image = options.images[args.image]
    if image.identity is None:
        raise UsageError(f"--image {args.image}: not content-addressed (add [images.{args.image}.identity] "
                         f"to {options.config_path.name})")
    arch = args.arch or image.arches[0]
    _, plan = _load(args, [args.image], [arch])
    return options, plan, arch


def _published_images(args: argparse.Namespace, options, command: str) -> list[str]:
    """The images publish/prune work on: those named, else every image that is built per commit."""
    names = _listed(args.image)
    _known_images(args, options, names or [])
    bases = [name for name in names or [] if options.images[name].identity is not None]
    if bases:   # one images list serves build and publish in a workflow: say so and go on
        gha.annotate("warning", f"{command}: skipping {', '.join(bases)}: a content-addressed base is not "
                                "published per commit")
    chosen = [name for name in names or options.images if options.images[name].identity is None]
    if not chosen:
        raise UsageError(f"--image {' '.join(names or [])}: only content-addressed bases, nothing to {command}")
    return chosen


def _owner(args: argparse.Namespace) -> str:
    return (args.repository or os.environ.get("GITHUB_REPOSITORY") or "").split("/")[0]


def _require_trusted_run(args: argparse.Namespace, options, what: str):
    """The GitHub context of a run that writes published tags or deletes them; refused unless trusted."""
    from ghbuild.errors import TrustError
    from ghbuild.plan import planner

    ctx = _context(args)
    refusal = planner.publishing_refusal(ctx, options)
    if refusal:
        raise TrustError(f"{what}: {refusal}")
    return ctx


def _registries():
    from ghbuild.registry import client as registry

    return registry.client_factory(os.environ, _log)


# --------------------------------------------------------------------------- commands

def cmd_plan(args: argparse.Namespace) -> int:
    from ghbuild import render

    _, plan = _load(args, _listed(args.image), args.arch)
    gha.add_summary(render.plan_summary(plan))
    print(json.dumps(plan.to_dict(), indent=2) if args.json else render.plan_table(plan))
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    from ghbuild import render

    options, plan = _load(args, _listed(args.image), args.arch)
    gha.add_summary(render.plan_summary(plan))   # why a run is (un)trusted shows in CI, not only in the log
    identities = {job.id: "" for job in plan.jobs if job.identity_prefix}
    if args.identities and identities:   # I/O (git, registries), so only on request: the plan job asks for it
        from ghbuild.bases import ensure_base

        identities = ensure_base.base_identities(options, plan, _registries())
    matrix, bases = plan.matrix(), plan.bases_matrix(identities)
    gha.set_output("matrix", matrix)
    gha.set_output("bases", bases)
    gha.set_output("bases-count", str(len(bases["include"])))
    gha.set_output("trusted", "true" if plan.trust.trusted else "false")
    gha.set_output("secrets", "true" if plan.trust.secrets else "false")
    gha.set_output("gha-write", "true" if plan.trust.gha_write else "false")
    gha.set_output("jobs", str(len(matrix["include"])))
    print(json.dumps(matrix, separators=(",", ":")))
    return 0


def cmd_identity(args: argparse.Namespace) -> int:
    from ghbuild.bases import ensure_base
    from ghbuild.registry import lookup

    options, plan, arch = _load_base(args)
    result = ensure_base.compute_identity(options, plan.job(args.image, arch),
                                          lookup.registry_lookup(_registries()), args.base_image)
    gha.set_output("identity", result.identity)
    print(json.dumps(result.to_dict(), indent=2) if args.json else result.identity)
    return 0


def cmd_ensure_base(args: argparse.Namespace) -> int:
    from ghbuild import render
    from ghbuild.bases import ensure_base
    from ghbuild.build import buildjob

    options, plan, arch = _load_base(args)
    result = ensure_base.ensure(plan, options, args.image, arch, os.environ, _registries(),
                                base_image=args.base_image, dry_run=args.dry_run, echo=not args.quiet,
                                lookup_only=args.lookup_only)
    gha.set_output("ref", result.ref or "")
    gha.set_output("digest", result.digest or "")
    gha.set_output("identity", result.identity)
    gha.set_output("built", "true" if result.built else "false")
    gha.set_output("metadata", buildjob.buildx_metadata(result.digest, None, [result.ref] if result.ref else []))
    gha.add_summary(render.ensure_base_summary(result))
    if args.json:
        data = result.to_dict()
        data.pop("identity_detail", None)
        print(json.dumps(data, indent=2))
    else:
        print(result.ref or f"(dry run: would build and push {result.found_at})")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from ghbuild.build import engine

    # The docker clients are asked first: they answer (tens of milliseconds each) while the config is read
    # and the job planned. A dry run asks them only their version: it contacts no engine.
    with engine.ClientProbe(os.environ, engine=not args.dry_run) as probe:
        from ghbuild.build import buildjob
        from ghbuild.publish import records

        options, plan = _load(args, [args.image], [args.arch])
        if args.record:
            records.destination(Path(args.record), os.environ, Path.cwd())   # refused before anything is built
        request = buildjob.BuildRequest(image=args.image, arch=args.arch, push=args.push, dry_run=args.dry_run,
                                     target=args.target, base_image=args.base_image, backend=args.backend,
                                     require_digest_base=args.require_digest_base, echo=not args.quiet)
        report = buildjob.run(plan, options, request, os.environ, probe=probe)
    return _build_done(args, plan, report)


def _build_done(args: argparse.Namespace, plan, report) -> int:
    from ghbuild import render
    from ghbuild.build import buildjob
    from ghbuild.publish import records

    if args.dry_run:
        print(json.dumps(report.to_dict(), indent=2) if args.json else report.command)
        return 0
    buildjob.outputs(report)
    print(render.build_text(report), file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    buildjob.check_budgets(report)
    if args.record and report.digest:   # only for a build that passed every check
        job = plan.job(args.image, args.arch)
        records.write(Path(args.record), {"id": job.id, "image": job.image, "arch": job.arch,
                                          "platform": job.platform, "digest": report.digest, "ref": report.ref,
                                          "sha": plan.context.sha, "trusted": plan.trust.trusted},
                      os.environ, Path.cwd())
    return 0


def cmd_digests(args: argparse.Namespace) -> int:
    from ghbuild import render
    from ghbuild.publish import records

    digests = records.collect(Path(args.records))
    planned = records.planned_jobs(args.matrix)
    gha.set_output("digests", digests)
    gha.add_summary(render.digests_summary(args.title, planned, digests))
    if args.out:
        records.write_all(Path(args.out), digests)
    print(json.dumps(digests, indent=2))
    return 0


def _publish_records(args: argparse.Namespace, options, sha: str):
    """--records (the JSON, a file, a folder) or --records-from WORKFLOW (its trusted push run's artifact of
    commit `sha`)."""
    from ghbuild.publish import records

    records_from = getattr(args, "records_from", None)   # release only
    if args.records and records_from:
        raise UsageError("--records and --records-from: give one")
    if args.records:
        return records.load(args.records)
    if records_from:
        from ghbuild.plan import planner

        trust, _ = planner.decide_trust(_context(args), options)
        return records.fetch(os.environ, trust.canonical_repository, records_from, sha, trust.stable_branch,
                             log=_indented)
    return None


def interrupt_on_sigterm() -> None:
    """SIGTERM (a cancelled GitHub job: SIGINT, then SIGTERM) raises KeyboardInterrupt like SIGINT, so
    a publish interrupted in its tag phase still puts its tags back and gives its lease up."""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


def cmd_publish(args: argparse.Namespace) -> int:
    from ghbuild.publish import promote, report

    interrupt_on_sigterm()
    from ghbuild.github.context import _git

    options = _options(args)
    kind = args.publish_command
    source_url = None
    if args.dry_run:   # writes nothing: any run, or a laptop, may look
        sha = (args.sha or os.environ.get("GITHUB_SHA") or _git(["rev-parse", "HEAD"], Path.cwd()) or "").lower()
        owner = _owner(args)
    else:
        ctx = _require_trusted_run(args, options, f"publish {kind}")
        sha, owner = (args.sha or ctx.sha).lower(), ctx.repository.split("/")[0]
        source_url = f"{ctx.server_url.rstrip('/')}/{options.trust.canonical_repository or ctx.repository}"
    if not sha:
        raise UsageError("publish: no commit (pass --sha, or set GITHUB_SHA)")
    def commit_time() -> int | None:   # asked only when a tag has to move (a republish runs no git)
        if args.commit_time is not None:
            return args.commit_time
        found = _git(["show", "-s", "--format=%ct", f"{sha}^{{commit}}"], Path.cwd())
        return int(found) if found and found.isdigit() else None
    try:
        outcome = promote.run(options, kind, _published_images(args, options, f"publish {kind}"), sha=sha,
                              owner=owner, env=os.environ, version=args.version if kind == "release" else None,
                              dry_run=args.dry_run,
                              github_release=not (kind == "release" and args.no_github_release),
                              records=_publish_records(args, options, sha),
                              source_url=source_url, commit_time=commit_time,
                              lease_options={"wait": args.lease_wait}, log=_indented, say=_log,
                              warn=lambda m: gha.annotate("warning", m), group=gha.group)
    except GhbuildError as exc:
        gha.add_summary(report.failure_summary(kind, exc))
        raise
    gha.add_summary(report.summary(outcome, dry_run=args.dry_run))
    if not args.dry_run:
        for result in outcome.results:
            gha.set_output(f"{result.image}-index-digest", result.index_digest or "")
        for name, value in report.outputs(outcome).items():
            gha.set_output(name, value)
    if args.json:
        print(json.dumps(outcome.to_dict(), indent=2))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    from ghbuild import retention

    if args.keep is not None and args.keep < 1:
        raise UsageError(f"--keep {args.keep}: keep at least 1")
    options = _options(args)
    if args.apply:
        _require_trusted_run(args, options, "prune --apply")
    results = retention.prune_images(options, _published_images(args, options, "prune"), keep=args.keep,
                                     apply=args.apply, owner=_owner(args) or None, say=_log, group=gha.group)
    gha.add_summary(retention.markdown(results))
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2, default=str))
    retention.raise_for_failures(results)
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from ghbuild.config import schema

    print(json.dumps(schema.document(), indent=2))
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    from ghbuild import adopt

    platforms = tuple(_listed(args.platform) or adopt.DEFAULT_PLATFORMS)
    pin = adopt.toolkit_pin(args.pin)
    adoption = adopt.adopt(Path.cwd(), pin, platforms)
    if args.diff and not args.force and (kept := adopt.existing(adoption)):
        # `init` then `init --diff | git apply`: the patch is about the Dockerfiles, so it is printed anyway.
        _log(f"ghbuild init: {adopt.kept_message(kept)} (--force overwrites); the Dockerfile patch follows")
    else:
        for path in adopt.write(adoption, args.force):
            _log(f"ghbuild init: wrote {path.relative_to(adoption.root)}")
    _log(f"ghbuild init: the workflow calls {pin.repository}@{pin.ref} ({pin.source}); images: "
         + ", ".join(f"{f.image} ({f.path})" for f in adoption.dockerfiles))
    for item in adoption.dockerfiles:
        print(adopt.diff(adoption.root, item) if args.diff else adopt.instructions(item), end="")
        for line in item.skipped:
            _log(f"ghbuild init: {line}")
    return 0


def cmd_completion(args: argparse.Namespace) -> int:
    import shtab  # here only: no other command pays for the import

    parser = build_parser()
    _for_completion(parser, {"PATH": shtab.FILE, "FILE": shtab.FILE, "DIR": shtab.DIRECTORY})
    print(shtab.complete(parser, shell=args.shell), end="")
    return 0


def _for_completion(parser: argparse.ArgumentParser, by_metavar: dict[str, dict[str, str]]) -> None:
    """Ready a parser for shtab: arguments whose metavar names a file or a folder complete file or folder
    names (shtab's `complete` attribute), and a command's menu entry is its one-line help (shtab would
    take the first line of its wrapped description, cut mid-sentence)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                sub.description = None
                _for_completion(sub, by_metavar)
        elif action.metavar in by_metavar:
            action.complete = by_metavar[action.metavar]


def cmd_overrides(args: argparse.Namespace) -> int:
    from ghbuild.config import overrides

    variables = overrides.parse(args.lines)
    overrides.validate(variables, args.config, os.environ, Path.cwd())
    for name, value in variables.items():
        gha.export(name, value)
        print(f"{name}={value}")
    return 0


def cmd_runner_check(args: argparse.Namespace) -> int:
    from ghbuild.runner import health

    host = health.Host(root=Path(args.root))
    report = health.check(gpus=args.gpus, min_free_disk=args.min_free_disk, disk_path=args.disk_path,
                          rocminfo_timeout=args.rocminfo_timeout, docker_timeout=args.docker_timeout,
                          clean_containers=args.clean_containers, host=host)
    print(report.text(), file=sys.stderr)
    if gha.in_actions():  # elsewhere the lines above already say it
        for failure in report.failures:
            gha.annotate("error", failure.line(), title="ROCm runner check")
    gha.add_summary(report.markdown())
    gid_check = report.get("render-gid")
    gid = gid_check.details.get("gid") if gid_check and gid_check.ok else None
    gha.set_output("ok", "true" if report.ok else "false")
    gha.set_output("render-gid", "" if gid is None else str(gid))
    gha.set_output("container-flags", shlex.join(health.container_flags(gid)) if gid is not None else "")
    gpus = report.get("gpus")
    gha.set_output("gpus", str(gpus.details.get("count", "")) if gpus else "")
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    if not report.ok:
        raise RunnerCheckError(f"{len(report.failures)} of {len(report.checks)} checks failed: "
                               f"{', '.join(c.name for c in report.failures)} (each FAIL line above says why)")
    return 0


def cmd_container_flags(args: argparse.Namespace) -> int:
    from ghbuild.runner import health

    gid = args.gid if args.gid is not None else health.detect_render_gid(args.root)
    try:
        flags = health.container_flags(gid, shm_size=args.shm_size, label=None if args.no_label else
                                       health.CONTAINER_LABEL_VALUE)
    except ValueError as exc:
        raise UsageError(f"container-flags: {exc}") from None
    gha.set_output("flags", shlex.join(flags))
    gha.set_output("render-gid", str(gid))
    print(json.dumps(flags) if args.json else shlex.join(flags))
    return 0


def cmd_diagnose(args: argparse.Namespace) -> int:
    from ghbuild.runner import diagnose

    result = diagnose.collect(args.out, total_budget=args.total_timeout, per_command=args.command_timeout)
    print(f"ghbuild diagnose: {result.line()}", file=sys.stderr)
    gha.add_summary(result.markdown())
    gha.set_output("dir", str(result.out_dir))
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    return 0


COMMANDS = {"plan": cmd_plan, "matrix": cmd_matrix, "build": cmd_build, "identity": cmd_identity,
            "ensure-base": cmd_ensure_base, "digests": cmd_digests, "publish": cmd_publish, "prune": cmd_prune,
            "schema": cmd_schema, "init": cmd_init, "overrides": cmd_overrides, "completion": cmd_completion,
            "runner-check": cmd_runner_check,
            "container-flags": cmd_container_flags,
            "diagnose": cmd_diagnose}


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    # The command comes first (the top level has only --help and --version); anything else, such as a
    # typo, gets the whole parser, which lists every command.
    parser = build_parser(words[0] if words and words[0] in COMMANDS else None)
    try:
        args = parser.parse_args(argv)
        if not args.command:
            parser.print_help(sys.stderr)
            return 2
        return COMMANDS[args.command](args)
    except GhbuildError as exc:
        if gha.in_actions():
            gha.annotate("error", exc.message, title=f"ghbuild {exc.kind}", **exc.location)
        print(f"ghbuild: {exc.kind}: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("ghbuild: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1


# The collector's first generation runs every 700 net allocations of container objects. A command's start-up
# creates tens of thousands of long-lived ones (modules, classes, functions), so the default threshold scans
# them over and over before the first useful output, and once more at exit: about 20 ms of every short
# command here (bench/startup.py). A higher threshold still collects, just rarely. Freezing at exit spares
# the interpreter's final collection its scan; the objects it would have found are freed with the process
# (ghbuild has no __del__ that must run; files are closed by `with`, temporary folders by their finalizers).
START_UP_GC_THRESHOLD = 50_000


def run() -> None:
    """The `ghbuild` console script (and `python -m ghbuild`): main(), with the collector tuned for a CLI.
    Tests call main() and leave the collector alone."""
    import gc

    gc.set_threshold(START_UP_GC_THRESHOLD, *gc.get_threshold()[1:])
    code = main()
    gc.freeze()
    sys.exit(code)

