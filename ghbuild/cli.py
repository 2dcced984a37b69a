"""The `ghbuild` command line. Parses flags, calls the modules, turns errors into exit codes."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from ghbuild import __version__, gha
from ghbuild.errors import GhbuildError, UsageError, help_epilog


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


def _selection_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--image", action="append", metavar="NAME",
                   help="only this image (repeatable; a comma or space separated list works too)")
    p.add_argument("--arch", action="append", choices=("amd64", "arm64"), help="only this arch (repeatable)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ghbuild", description="Container-image CI for large native projects on GitHub Actions.",
                     epilog=help_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"ghbuild {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

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
    p.add_argument("--dry-run", action="store_true", help="print the exact command and build args; run nothing")
    p.add_argument("--target", help="build this stage instead of the configured target")
    p.add_argument("--base-image", metavar="REF", help="BASE_IMAGE build arg (overrides images.<name>.base-image)")
    p.add_argument("--require-digest-base", action="store_true",
                   help="fail unless --base-image (or base-image) is name@sha256:<64 hex>")
    p.add_argument("--backend", choices=("buildx", "engine"), help="force a backend (default: detect)")
    p.add_argument("--record", metavar="FILE", help="after a push, write {id, image, arch, platform, digest, ref} "
                                                   "as JSON to FILE (what `ghbuild digests` collects)")
    p.add_argument("--quiet", action="store_true", help="do not echo the build log")
    _context_flags(p)

    p = sub.add_parser("identity", help="the content identity of a base image (SPEC 3): what ensure-base looks up")
    p.add_argument("--config", metavar="PATH", help="config file")
    p.add_argument("--image", required=True, metavar="NAME", help="content-addressed image (with [identity])")
    p.add_argument("--arch", choices=("amd64", "arm64"), help="architecture (default: the image's first)")
    p.add_argument("--base-image", metavar="REF", help="BASE_IMAGE (overrides images.<name>.base-image)")
    p.add_argument("--json", action="store_true", help="print identity, inputs and parts as JSON")
    _context_flags(p)

    p = sub.add_parser("ensure-base", help="find a content-addressed base by identity, or build and push it; "
                                           "prints its name@sha256 ref")
    p.add_argument("--config", metavar="PATH", help="config file")
    p.add_argument("--image", required=True, metavar="NAME", help="content-addressed image (with [identity])")
    p.add_argument("--arch", choices=("amd64", "arm64"), help="architecture (default: the image's first)")
    p.add_argument("--base-image", metavar="REF", help="BASE_IMAGE (overrides images.<name>.base-image)")
    p.add_argument("--dry-run", action="store_true", help="look up, but build and push nothing")
    p.add_argument("--lookup-only", action="store_true",
                   help="only find it: a base missing everywhere is an error (exit 12), never a build")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--quiet", action="store_true", help="do not echo the build log")
    _context_flags(p)

    p = sub.add_parser("publish", help="publish nightly tags and multi-arch manifests from staging")
    pub = p.add_subparsers(dest="publish_command", metavar="KIND", parser_class=_Parser, required=True)
    n = pub.add_parser("nightly", help="nightly-<arch> tags and the nightly / nightly-<sha> manifests")
    n.add_argument("--config", metavar="PATH", help="config file")
    n.add_argument("--image", action="append", metavar="NAME", help="only this image (repeatable or a comma/space list; default: every image that is "
                                                          "not content-addressed)")
    n.add_argument("--sha", help="commit whose staging images to publish (default: GITHUB_SHA, else git HEAD)")
    n.add_argument("--repository", metavar="OWNER/NAME", help="for {owner} in repository names "
                                                              "(default: GITHUB_REPOSITORY)")
    n.add_argument("--dry-run", action="store_true", help="print every copy and tag; push nothing")
    n.add_argument("--json", action="store_true", help="print the tags written with their digests as JSON")

    r = pub.add_parser("release", help="v<version>, per-arch tags and latest, plus the GitHub release")
    r.add_argument("--version", required=True, help="release version (PEP 440), e.g. 0.7.0 or 0.7.0rc1")
    r.add_argument("--config", metavar="PATH", help="config file")
    r.add_argument("--image", action="append", metavar="NAME", help="only this image (repeatable or a comma/space list; default: every image that is "
                                                          "not content-addressed)")
    r.add_argument("--sha", help="commit whose staging images to promote (default: GITHUB_SHA, else git HEAD)")
    r.add_argument("--repository", metavar="OWNER/NAME", help="for {owner} in repository names")
    r.add_argument("--dry-run", action="store_true", help="print every copy and tag; push nothing")
    r.add_argument("--json", action="store_true", help="print the tags written with their digests as JSON")
    r.add_argument("--no-github-release", action="store_true", help="do not create the GitHub release")

    p = sub.add_parser("prune", help="retention of nightly-* tags (Docker Hub, GHCR, plain registries); "
                                     "a dry run unless --apply")
    p.add_argument("--config", metavar="PATH", help="config file")
    p.add_argument("--image", action="append", metavar="NAME", help="only this image (repeatable or a comma/space list; default: every image that is "
                                                          "not content-addressed)")
    p.add_argument("--keep", type=int, metavar="N", help="nightly commits to keep (default: publish.retention)")
    p.add_argument("--apply", action="store_true", help="really delete (default: only say what would go)")
    p.add_argument("--repository", metavar="OWNER/NAME", help="for {owner} in repository names")
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    p = sub.add_parser("digests", help="collect the records of `build --record` into one JSON (the workflow's "
                                       "'digests' output) and a job summary of every planned job")
    p.add_argument("records", metavar="DIR", help="folder of the record files")
    p.add_argument("--matrix", metavar="JSON", help="the plan's build matrix, to list jobs that pushed nothing")
    p.add_argument("--title", default="Images", help="heading of the job summary section")

    sub.add_parser("schema", help="print the JSON schema of the config file")
    from ghbuild import runner_cli   # self-hosted runner commands: runner-check, container-flags, diagnose

    runner_cli.register(sub, _Parser)
    return parser


def _overrides(args: argparse.Namespace):
    from ghbuild.context import Overrides

    return Overrides(event=args.event, event_path=args.event_path, repository=args.repository, ref=args.ref,
                     sha=args.sha, pr=args.pr, base=args.base, head_ref=args.head_ref, head_repo=args.head_repo,
                     default_branch=args.default_branch)


def _image_names(values: list[str] | None) -> list[str] | None:
    """--image a --image b, --image a,b and --image "a b" (a workflow passes one input) all mean [a, b]."""
    if not values:
        return None
    names = [name for value in values for name in value.replace(",", " ").split()]
    return list(dict.fromkeys(names)) or None


def _published_images(args: argparse.Namespace, options, command: str) -> list[str]:
    """The images publish/prune work on: those named, else every image that is built per commit."""
    names = _image_names(args.image)
    for name in names or []:
        if name not in options.images:
            raise UsageError(f"--image {name}: no such image (known: {', '.join(options.images)})")
    bases = [name for name in names or [] if options.images[name].identity is not None]
    if bases:   # one images list serves build and publish in a workflow: say so and go on
        gha.annotate("warning", f"{command}: skipping {', '.join(bases)}: a content-addressed base is not "
                                "published per commit")
    chosen = [name for name in names or options.images if options.images[name].identity is None]
    if not chosen:
        raise UsageError(f"--image {' '.join(names or [])}: only content-addressed bases, nothing to {command}")
    return chosen


def _make_plan(args: argparse.Namespace):
    from ghbuild import config, context, planner

    options = config.load(args.config, os.environ, Path.cwd())
    ctx = context.from_environment(os.environ, _overrides(args), Path.cwd())
    return planner.plan(ctx, options, images=_image_names(args.image), arches=args.arch)


def cmd_plan(args: argparse.Namespace) -> int:
    from ghbuild import render

    plan = _make_plan(args)
    for warning in plan.warnings:
        gha.annotate("warning", warning)
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2))
    else:
        print(render.plan_table(plan))
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    plan = _make_plan(args)
    for warning in plan.warnings:
        gha.annotate("warning", warning)
    matrix = plan.matrix()
    identities = {job.id: "" for job in plan.jobs if job.identity_prefix}
    base_jobs = [job for job in plan.jobs if job.identity_prefix] if args.identities else []
    if base_jobs:  # I/O (git, registries), so only on request: the workflow's plan job asks for it
        from ghbuild import config, ensure_base, registry

        options = config.load(args.config, os.environ, Path.cwd())
        resolve = ensure_base.registry_resolver(registry.client_factory(os.environ, _log))
        identities = {job.id: ensure_base.compute_identity(options, job, resolve).identity for job in base_jobs}
    bases = plan.bases_matrix(identities)
    gha.set_output("matrix", matrix)
    gha.set_output("bases", bases)
    gha.set_output("bases-count", str(len(bases["include"])))
    gha.set_output("trusted", "true" if plan.trust.trusted else "false")
    gha.set_output("secrets", "true" if plan.trust.secrets else "false")
    gha.set_output("jobs", str(len(matrix["include"])))
    print(json.dumps(matrix, separators=(",", ":")))
    return 0


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def _base_job_args(args: argparse.Namespace):
    from ghbuild import config, context, planner

    options = config.load(args.config, os.environ, Path.cwd())
    if args.image not in options.images:
        raise UsageError(f"--image {args.image}: no such image (known: {', '.join(options.images)})")
    image = options.images[args.image]
    if image.identity is None:
        raise UsageError(f"--image {args.image}: not content-addressed (add [images.{args.image}.identity] "
                         f"to {options.config_path.name})")
    arch = args.arch or image.arches[0]
    ctx = context.from_environment(os.environ, _overrides(args), Path.cwd())
    plan = planner.plan(ctx, options, images=[args.image], arches=[arch])
    for warning in plan.warnings:
        gha.annotate("warning", warning)
    return options, plan, arch


def cmd_identity(args: argparse.Namespace) -> int:
    from ghbuild import ensure_base, registry

    options, plan, arch = _base_job_args(args)
    job = plan.job(args.image, arch)
    resolve = ensure_base.registry_resolver(registry.client_factory(os.environ, _log))
    result = ensure_base.compute_identity(options, job, resolve, args.base_image)
    gha.set_output("identity", result.identity)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print(result.identity)
    return 0


def cmd_ensure_base(args: argparse.Namespace) -> int:
    from ghbuild import ensure_base, registry, render

    options, plan, arch = _base_job_args(args)
    result = ensure_base.ensure(plan, options, args.image, arch, os.environ,
                                registry.client_factory(os.environ, _log), base_image=args.base_image,
                                dry_run=args.dry_run, echo=not args.quiet, lookup_only=args.lookup_only)
    gha.set_output("ref", result.ref or "")
    gha.set_output("digest", result.digest or "")
    gha.set_output("identity", result.identity)
    gha.set_output("built", "true" if result.built else "false")
    gha.add_summary(render.ensure_base_summary(result))
    if args.json:
        data = result.to_dict()
        data.pop("identity_detail", None)
        print(json.dumps(data, indent=2))
    else:
        print(result.ref or f"(dry run: would build and push {result.found_at})")
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    from ghbuild import build, config, context, planner, render

    options = config.load(args.config, os.environ, Path.cwd())
    ctx = context.from_environment(os.environ, _overrides(args), Path.cwd())
    plan = planner.plan(ctx, options, images=[args.image], arches=[args.arch])
    for warning in plan.warnings:
        gha.annotate("warning", warning)
    request = build.BuildRequest(image=args.image, arch=args.arch, push=args.push, dry_run=args.dry_run,
                                 target=args.target, base_image=args.base_image, backend=args.backend,
                                 require_digest_base=args.require_digest_base, echo=not args.quiet)
    report = build.run(plan, options, request, os.environ)
    if args.dry_run:
        print(json.dumps(report.to_dict(), indent=2) if args.json else report.command)
        return 0
    build.outputs(report)
    print(render.build_text(report), file=sys.stderr)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    if report.budget_failures:
        raise build.BudgetError("; ".join(report.budget_failures))
    if args.record and report.digest:   # only for a build that passed every check
        job = plan.job(args.image, args.arch)
        _write_record(Path(args.record), {"id": job.id, "image": job.image, "arch": job.arch, "platform": job.platform,
                                          "digest": report.digest, "ref": report.ref})
    return 0


def _write_record(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record) + "\n", encoding="utf-8")
    tmp.replace(path)   # never a half-written record for the summary job


def cmd_digests(args: argparse.Namespace) -> int:
    from ghbuild import render

    folder = Path(args.records)
    digests: dict[str, dict] = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            record = json.loads(path.read_text("utf-8"))
            if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in ("id", "digest", "ref")):
                raise ValueError
            digests[record.pop("id")] = record
        except ValueError:
            raise UsageError(f"{path}: not a record written by `ghbuild build --record`") from None
    try:
        planned = json.loads(args.matrix)["include"] if args.matrix else []
        if not all(isinstance(job, dict) and isinstance(job.get("id"), str) for job in planned):
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise UsageError("--matrix: not the JSON matrix of `ghbuild matrix` ({\"include\": [...]})") from None
    gha.set_output("digests", digests)
    gha.add_summary(render.digests_summary(args.title, planned, digests))
    print(json.dumps(digests, indent=2))
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from ghbuild import config, naming, publish, registry
    from ghbuild.context import PR_EVENTS, _git
    from ghbuild.errors import TrustError

    if os.environ.get("GITHUB_EVENT_NAME") in PR_EVENTS:
        raise TrustError(f"publish: refused in a {os.environ['GITHUB_EVENT_NAME']} run (publishing is for "
                         "trusted schedule, push and workflow_dispatch runs)")
    release = args.publish_command == "release"
    version = publish.parse_version(args.version) if release else None   # before anything else
    options = config.load(args.config, os.environ, Path.cwd())
    sha = (args.sha or os.environ.get("GITHUB_SHA") or _git(["rev-parse", "HEAD"], Path.cwd()) or "").lower()
    if not sha:
        raise UsageError("publish: no commit (pass --sha, or set GITHUB_SHA)")
    owner = (args.repository or os.environ.get("GITHUB_REPOSITORY") or "").split("/")[0]
    images = _published_images(args, options, f"publish {args.publish_command}")
    if release and not args.dry_run and not args.no_github_release and not (
            os.environ.get("GITHUB_TOKEN") and os.environ.get("GITHUB_REPOSITORY")):
        raise UsageError("publish release: GITHUB_TOKEN and GITHUB_REPOSITORY are needed for the GitHub release "
                         "(or pass --no-github-release)")

    def log(message: str) -> None:
        print(f"  {message}", file=sys.stderr)

    factory = registry.client_factory(os.environ, log)
    plans = []
    for image in images:
        if release:
            host, repo = naming.split_repository(publish.nightly_plan(options, image, sha, owner).publish)
            plan = publish.release_plan(options, image, sha, owner, version, factory(host).list_tags(repo))
            present = publish.present_arches(plan, factory)
            if not present:
                gha.annotate("warning", f"release {version}: no staging image of {image} for {sha}: skipped")
                continue
            if len(present) != len(plan.sources):
                missing = [s.arch for s in plan.sources if s.arch not in present]
                raise publish.PublishError(f"release {version}: {image} has {', '.join(present)} but not "
                                           f"{', '.join(missing)} for {sha}: refusing a partial release")
        else:
            plan = publish.nightly_plan(options, image, sha, owner)
        plans.append(plan)

    results = []
    for plan in plans:
        with gha.group(f"publish {plan.kind} {plan.image}{' (dry run)' if args.dry_run else ''}"):
            result = publish.execute(plan, factory, dry_run=args.dry_run, log=log)
        results.append(result)
        print(publish.render(result, plan.kind), file=sys.stderr)
        if not args.dry_run:
            gha.set_output(f"{plan.image}-index-digest", result.index_digest or "")
    output: dict = {"kind": args.publish_command, "sha": sha, "images": [r.to_dict() for r in results]}
    if release and results:
        output["version"] = str(version)
        output["latest"] = any("latest" in p.index_tags for p in plans)
        if args.no_github_release or args.dry_run:
            output["github_release"] = None
            print(f"  GitHub release v{version}: " + ("skipped (--no-github-release)" if args.no_github_release
                                                      else "would be created"), file=sys.stderr)
        else:
            notes = publish.release_notes(version, sha, results)
            url = publish.create_github_release(os.environ, version, sha, notes, version.is_prerelease,
                                                output["latest"])
            output["github_release"] = url
            print(f"  GitHub release: {url}", file=sys.stderr)
    if args.json:
        print(json.dumps(output, indent=2))
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    from ghbuild import config, prune

    if args.keep is not None and args.keep < 1:
        raise UsageError(f"--keep {args.keep}: keep at least 1")
    options = config.load(args.config, os.environ, Path.cwd())
    owner = (args.repository or os.environ.get("GITHUB_REPOSITORY") or "").split("/")[0] or None
    results = []
    for image in _published_images(args, options, "prune"):
        with gha.group(f"prune {image}{'' if args.apply else ' (dry run)'}"):
            result = prune.run_prune(options, image, keep=args.keep, apply=args.apply, owner=owner)
        results.append(result)
        print(prune.render(result), file=sys.stderr)
    if args.json:
        print(json.dumps(results, indent=2, default=str))
    failed = [r for r in results if not r.get("ok")]
    if failed:
        # Delete failures are collected, not raised, so the run can report all of them: fail here.
        raise prune.PruneError(f"prune: {len(failed)} image(s) had errors: "
                               + "; ".join(str(e.get("error")) for r in failed for e in r.get("errors", [])[:3]))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from ghbuild import config

    print(json.dumps(config.schema(), indent=2))
    return 0


COMMANDS = {"plan": cmd_plan, "matrix": cmd_matrix, "build": cmd_build, "identity": cmd_identity,
            "ensure-base": cmd_ensure_base, "digests": cmd_digests, "publish": cmd_publish, "prune": cmd_prune,
            "schema": cmd_schema}


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not args.command:
            parser.print_help(sys.stderr)
            return 2
        if args.command in COMMANDS:
            return COMMANDS[args.command](args)
        from ghbuild import runner_cli

        return runner_cli.dispatch(args)
    except GhbuildError as exc:
        if gha.in_actions():
            gha.annotate("error", exc.message, title=f"ghbuild {exc.kind}")
        print(f"ghbuild: {exc.kind}: {exc.message}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("ghbuild: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
