"""The command line's parsers: one function per command, and the help every command shows.

`build_parser(command)` builds only the parser of the command being run (building all of them cost every
start-up about as much as loading a config); with no command it builds them all (for help and completion).
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable

import ghbuild.cli.flags as flags
from ghbuild import __version__
from ghbuild.cli.flags import Parser
from ghbuild.errors import help_epilog

COMPLETION_SHELLS = ("bash", "zsh")
_LOCAL = "--event push --repository org/project --ref main --default-branch main"

# Per command: what it does (the --help description, where none is set with the parser) and examples.
# Every command has an entry; tests/test_cli.py checks that each --help shows both.
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
    "cache": ("Shows the repository's GitHub Actions caches by the ref GitHub stores them under and the ghbuild "
              "scope their BuildKit keys name (trusted, branch, pull request, merge queue), each against the cache "
              "budget (cache.budget, GitHub's 10 GB). A dry run unless --apply, which deletes the entries of closed "
              "pull requests and deleted branches, never the trusted or default branch's (a trusted run only). "
              "Needs GITHUB_TOKEN: actions: read to list, actions: write to delete.",
              ["ghbuild cache", "ghbuild cache --json", "ghbuild cache --apply"]),
    "digests": ("Collects the record files `build --record` wrote into one JSON by job id (the build workflow's "
                "digests output) and a job summary listing every planned job, pushed or not. A missing folder is "
                "an error; an empty one means nothing was pushed.",
                ["ghbuild digests \"$RUNNER_TEMP/records\" --matrix \"$MATRIX\" --out digests.json"]),
    "verify": ("Checks a published image: its cosign signature (by --key; else GHBUILD_VERIFY_KEY or keyless: a "
               "push, schedule or dispatch run of the canonical repository's stable branch, --branch), the "
               "repository and commit it was signed for, and that BuildKit's provenance of every platform names "
               "that commit. One line naming the signer; exit 0, or 13 saying why not; a malformed reference: 2.",
               ["ghbuild verify docker.io/org/project:nightly --repository org/project",
                "ghbuild verify ghcr.io/org/project:v0.7.0 --key cosign.pub --sha \"$SHA\""]),
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


def _plan(sub) -> None:
    p = sub.add_parser("plan", help="show what this event builds, where, with which caches and tags")
    p.add_argument("--config", metavar="PATH", help="config file (default: ghbuild.toml, or [tool.ghbuild] "
                                                    "in pyproject.toml; env GHBUILD_CONFIG)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    flags.selection_flags(p)
    flags.context_flags(p)


def _matrix(sub) -> None:
    p = sub.add_parser("matrix", help="print the build matrix for strategy.matrix (and set the 'matrix' output)")
    p.add_argument("--config", metavar="PATH", help="config file")
    p.add_argument("--identities", action="store_true",
                   help="compute each content-addressed base's identity for the 'bases' output (reads git's index "
                        "and resolves base image digests in their registries)")
    flags.selection_flags(p)
    flags.context_flags(p)


def _build(sub) -> None:
    p = sub.add_parser("build", help="build one plan job (image x arch) with BuildKit, push it, report")
    p.add_argument("--config", metavar="PATH", help="config file")
    p.add_argument("--image", required=True, metavar="NAME", help="image to build")
    p.add_argument("--arch", required=True, choices=flags.ARCHES, help="architecture to build")
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
    flags.context_flags(p)


def _identity(sub) -> None:
    p = sub.add_parser("identity", help="the content identity of a base image: what ensure-base looks up")
    flags.base_flags(p)
    p.add_argument("--json", action="store_true", help="print identity, inputs and parts as JSON")
    flags.context_flags(p)


def _ensure_base(sub) -> None:
    p = sub.add_parser("ensure-base", help="find a content-addressed base by identity, or build and push it; "
                                           "prints its name@sha256 ref")
    flags.base_flags(p)
    p.add_argument("--dry-run", action="store_true", help="look up, but build and push nothing")
    p.add_argument("--lookup-only", action="store_true",
                   help="only find it: a base missing everywhere is an error (exit 16), never a build")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--quiet", action="store_true", help="do not echo the build log")
    flags.context_flags(p)


def _publish_kind(pub, kind: str, help_text: str) -> argparse.ArgumentParser:
    """The flags `publish nightly` and `publish release` share, around the kind's own."""
    p = pub.add_parser(kind, help=help_text)
    if kind == "release":
        p.add_argument("--version", required=True, help="release version (PEP 440), e.g. 0.7.0 or 0.7.0rc1")
    flags.published_flags(p)
    p.add_argument("--dry-run", action="store_true", help="print every copy and tag; push nothing")
    p.add_argument("--json", action="store_true", help="print the tags written with their digests as JSON")
    if kind == "release":
        p.add_argument("--no-github-release", action="store_true", help="do not create the GitHub release")
    p.add_argument("--records", metavar="PATH", help=flags.RECORDS_HELP)
    flags.tag_phase_flags(p)
    return p


def _publish(sub) -> None:
    p = sub.add_parser("publish", help="publish nightly tags and multi-arch manifests from staging")
    pub = p.add_subparsers(dest="publish_command", metavar="KIND", parser_class=Parser, required=True)
    nightly = _publish_kind(pub, "nightly", "nightly-<arch> tags and the nightly / nightly-<sha> manifests")
    flags.context_flags(nightly)
    release = _publish_kind(pub, "release", "v<version>, per-arch tags and latest, plus the GitHub release")
    release.add_argument("--records-from", metavar="WORKFLOW",
                         help="read the records from the build workflow's newest successful push run on the stable "
                              "branch for the commit (its ghbuild-digests artifact; GITHUB_TOKEN with actions: "
                              "read), e.g. ci.yml")
    flags.context_flags(release)


def _prune(sub) -> None:
    p = sub.add_parser("prune", help="retention of nightly-* tags (Docker Hub, GHCR, plain registries); "
                                     "a dry run unless --apply")
    flags.published_flags(p)
    p.add_argument("--keep", type=int, metavar="N", help="nightly commits to keep (default: publish.retention)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--apply", action="store_true", help="really delete (default: only say what would go)")
    mode.add_argument("--dry-run", action="store_true", help="only say what would go (the default; accepted "
                                                             "like every command that pushes or deletes)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    flags.context_flags(p)


def _cache(sub) -> None:
    p = sub.add_parser("cache", help="the GitHub Actions cache budget: size per scope; --apply deletes closed pull "
                                     "requests' and deleted branches' caches")
    p.add_argument("--config", metavar="PATH", help="config file")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--apply", action="store_true", help="really delete (default: only say what would go)")
    mode.add_argument("--dry-run", action="store_true", help="only say what would go (the default)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    flags.context_flags(p)


def _digests(sub) -> None:
    p = sub.add_parser("digests", help="collect the records of `build --record` into one JSON (the workflow's "
                                       "'digests' output) and a job summary of every planned job")
    p.add_argument("records", metavar="DIR", help="folder of the record files")
    p.add_argument("--matrix", metavar="JSON", help="the plan's build matrix, to list jobs that pushed nothing")
    p.add_argument("--title", default="Images", help="heading of the job summary section")
    p.add_argument("--out", metavar="FILE", help="also write the JSON to FILE (the artifact release.yml reads)")


def _verify(sub) -> None:
    p = sub.add_parser("verify", help="check a published image's signature and provenance")
    p.add_argument("reference", metavar="REF", help="the image: host/repository:tag or host/repository@sha256:...")
    p.add_argument("--key", metavar="FILE", help="cosign public key (default: GHBUILD_VERIFY_KEY; none: keyless)")
    p.add_argument("--repository", metavar="OWNER/NAME",
                   help="the canonical repository (default: trust.canonical-repository, else GITHUB_REPOSITORY)")
    p.add_argument("--sha", metavar="COMMIT", help="the commit the image must have been built from")
    p.add_argument("--branch", metavar="BRANCH",
                   help="keyless: the stable branch whose push/schedule/dispatch runs sign (default: "
                        "trust.stable-branch, else main)")
    p.add_argument("--config", metavar="PATH", help="config file (for trust.canonical-repository, "
                                                     "trust.stable-branch)")


def _schema(sub) -> None:
    sub.add_parser("schema", help="print the JSON schema of the config file")


def _init(sub) -> None:
    p = sub.add_parser(
        "init", help="adopt ghbuild here: write ghbuild.toml and .github/workflows/images.yml, print the "
                     "Dockerfile lines for sccache")
    p.add_argument("--diff", action="store_true", help="print the Dockerfile changes as a patch (for `git apply`)")
    p.add_argument("--force", action="store_true", help="overwrite ghbuild.toml and images.yml if they exist")
    p.add_argument("--platform", action="append", type=flags.names, metavar="OS/ARCH",
                   help="platforms of every image (repeatable or a comma list; default linux/amd64,linux/arm64)")
    p.add_argument("--pin", metavar="OWNER/NAME@SHA",
                   help="the ghbuild the workflow calls (default: the commit this ghbuild was installed from)")


def _overrides(sub) -> None:
    p = sub.add_parser("overrides", help="check KEY=VALUE config overrides and set them as GHBUILD_* variables for "
                                         "the job's later steps (the reusable workflows' `overrides` input)")
    p.add_argument("lines", metavar="TEXT", help="KEY=VALUE lines; KEY a config key (sccache.bucket) or its variable")
    p.add_argument("--config", metavar="PATH", help="config file")


def _completion(sub) -> None:
    p = sub.add_parser("completion", help="print the shell completion script (bash or zsh)")
    p.add_argument("shell", choices=COMPLETION_SHELLS, help="the shell to complete in")


def _runner_check(sub) -> None:
    p = sub.add_parser("runner-check", help="check a self-hosted ROCm runner before a job: GPUs, /dev/kfd, render "
                                            "gid, disk, leftover containers",
                       description="Checks a self-hosted ROCm runner. Every failure is one line saying what is "
                                   "wrong and how to fix it; exit 15 when a check failed.")
    p.add_argument("--gpus", type=flags.count, default=1, metavar="N",
                   help="minimum number of GPU agents rocminfo must see (default 1; 0 skips the GPU check)")
    p.add_argument("--min-free-disk", type=flags.size, default="50GB", metavar="SIZE",
                   help="minimum free disk, e.g. 50GB, 200GiB (default 50GB)")
    p.add_argument("--disk-path", metavar="PATH",
                   help="where to measure free disk (default: the Docker data root, else the current directory)")
    p.add_argument("--rocminfo-timeout", type=flags.seconds, default=30.0, metavar="SECONDS",
                   help="kill rocminfo after this long and report a hung driver (default 30)")
    p.add_argument("--docker-timeout", type=flags.seconds, default=15.0, metavar="SECONDS",
                   help="time limit for each docker command (default 15)")
    p.add_argument("--clean-containers", action="store_true",
                   help="remove leftover containers started by earlier jobs (label org.ghbuild.runner)")
    p.add_argument("--root", default="/", metavar="PATH",
                   help="filesystem root to inspect (/dev, /etc/group; default /): for chroots and tests")
    p.add_argument("--json", action="store_true", help="print the report as JSON on stdout")


def _container_flags(sub) -> None:
    p = sub.add_parser("container-flags", help="print the docker run flags a ROCm GPU container needs",
                       description="Prints --device /dev/kfd --device /dev/dri --group-add <render gid> "
                                   "--security-opt seccomp=unconfined --shm-size 16g --label "
                                   "org.ghbuild.runner=smoke-test.")
    p.add_argument("--gid", type=flags.count, metavar="N", help="render group id (default: detected from "
                                                                "/dev/dri/renderD*, else /etc/group)")
    p.add_argument("--shm-size", default="16g", metavar="SIZE", help="--shm-size value (default 16g)")
    p.add_argument("--no-label", action="store_true",
                   help="omit --label org.ghbuild.runner=... (then runner-check cannot find leftovers)")
    p.add_argument("--root", default="/", metavar="PATH", help="filesystem root for gid detection (default /)")
    p.add_argument("--json", action="store_true", help="print the flags as a JSON list")


def _diagnose(sub) -> None:
    p = sub.add_parser("diagnose", help="collect bounded failure diagnostics (rocminfo, amd-smi, dmesg, df, "
                                        "docker, ...) into a folder",
                       description="Runs each diagnostic command with its own timeout, all within a total budget, "
                                   "and writes one file per command plus index.json and summary.md inside --out "
                                   "only (no '..', no symlinks, inside the working directory or RUNNER_TEMP).")
    p.add_argument("--out", default="ghbuild-diagnostics", metavar="DIR",
                   help="output folder, inside the working directory or RUNNER_TEMP (default ghbuild-diagnostics)")
    p.add_argument("--total-timeout", type=flags.seconds, default=25.0, metavar="SECONDS",
                   help="budget for all commands (default 25)")
    p.add_argument("--command-timeout", type=flags.seconds, default=5.0, metavar="SECONDS",
                   help="budget for each command (default 5)")
    p.add_argument("--json", action="store_true", help="print the index (what ran, status, files) as JSON")


# Every command's parser, in the order `ghbuild --help` lists them.
PARSERS: dict[str, Callable[[argparse._SubParsersAction], None]] = {
    "plan": _plan, "matrix": _matrix, "build": _build, "identity": _identity, "ensure-base": _ensure_base,
    "publish": _publish, "prune": _prune, "cache": _cache, "digests": _digests, "verify": _verify, "schema": _schema,
    "init": _init, "overrides": _overrides, "completion": _completion, "runner-check": _runner_check,
    "container-flags": _container_flags, "diagnose": _diagnose,
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with `command`, only that command's parser is built (enough to run it)."""
    parser = Parser(prog="ghbuild", description="Container-image CI for large native projects on GitHub Actions.",
                    epilog="examples:\n  ghbuild plan\n  ghbuild build --image cpu --arch amd64 --dry-run\n"
                           "  ghbuild COMMAND --help\n\n" + help_epilog(),
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ghbuild {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for name, add in PARSERS.items():
        if command in (None, name):
            add(sub)
    _describe_all(sub)
    return parser


def _describe(parser: argparse.ArgumentParser, name: str) -> None:
    """Give a command its description (unless set) and examples, and keep their line breaks."""
    description, examples = COMMAND_HELP.get(name, ("", []))
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    if description and not parser.description:
        parser.description = description
    if parser.description:
        parser.description = textwrap.fill(" ".join(parser.description.split()), 100)
    if examples:
        parser.epilog = "examples:\n" + "\n".join(f"  {example}" for example in examples)


def _describe_all(subparsers: argparse._SubParsersAction, prefix: str = "") -> None:
    for name, parser in subparsers.choices.items():
        _describe(parser, prefix + name)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                _describe_all(action, f"{prefix}{name} ")
