"""`ghbuild build`: run one plan job as a real BuildKit build and report what happened.

Order: plan the job, pick the sccache mode (S3 preflight), pin the sccache helper image to its digest,
assemble the command, build, push, read the per-stage sccache stats the wrapper printed into the build
log (steps served by the layer cache reported as such), audit the layers, check budgets, report (stdout
JSON, GITHUB_OUTPUT, job summary).
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from ghbuild import naming, render
from ghbuild.build import buildcmd, builders, buildlog, cachemounts, engine, ghacache, images, layer_audit, sccache
from ghbuild.build.buildrun import BuildRun, local_image, read_metadata
from ghbuild.build.report import BuildReport, add_sccache_stats, buildx_metadata
from ghbuild.config.options import DEFAULT_CACHE_MOUNT_IMAGE, ImageOptions, Options
from ghbuild.errors import ConfigError, EngineError, InvalidReferenceError
from ghbuild.github import gha
from ghbuild.plan import dockerfile
from ghbuild.plan.planner import Job, Plan
from ghbuild.registry.lookup import registry_lookup
from ghbuild.sign import policy


class BuildRequest(NamedTuple):
    image: str
    arch: str
    push: bool = False
    dry_run: bool = False
    target: str | None = None
    base_image: str | None = None
    backend: str | None = None
    require_digest_base: bool = False
    echo: bool = True
    tags: tuple[str, ...] | None = None            # instead of the plan's staging tags (ensure-base)
    labels: Mapping[str, str] = MappingProxyType({})   # added to the plan's labels
    helper_image: str | None = None                # GHBUILD_SCCACHE_IMAGE as given (ensure-base: pinned already)


# --------------------------------------------------------------------------- helpers

def _now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _version_label(plan: Plan) -> str:
    ctx = plan.context
    if ctx.ref.startswith("refs/tags/"):
        return ctx.ref[len("refs/tags/"):]
    return ctx.sha[:12]


def run(plan: Plan, options: Options, request: BuildRequest, env: Mapping[str, str],
        registries: Callable[[str], Any] | None = None,
        probe: engine.ClientProbe | None = None) -> BuildReport:
    """Build one plan job: checks first, then the command, the build, the push, the stats and the audit.
    `registries`: host -> ghbuild.registry.client.Registry, for pinning the sccache helper (default: a client per
    host with the credentials in `env`); `probe`: the docker clients' answers, if the caller asked early."""
    job = _job(plan, request)
    image = options.images[job.image]
    stages = _dockerfile_stages(options, job)
    helper, helper_note = _helper_image(options, job, request, env, registries)
    base_image = _base_image(options, image, job, request)
    push, warnings = _push(plan, job, request)
    if push and plan.trust.trusted and env.get("GHBUILD_TRUSTED_LOGIN") == "job":
        warnings.append("trusted writes (the canonical cache, per-commit and base tags) use this job's own registry "
                        "login: every job that holds it can write them too; put GHBUILD_TRUSTED_REGISTRY_PASSWORD in "
                        "the trusted environment (docs/trust.md: Who can write what)")
    warnings += [helper_note] if helper_note else []
    client, decision, builder, builder_note = _start(plan, options, request, env, probe)
    warnings += [builder_note] if builder_note else []
    if decision.degraded:
        warnings.append(f"sccache {decision.mode}: {decision.reason}")
    static = [v for k, v in env.items() if k in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN") and v]
    redact = tuple(dict.fromkeys([*static, *decision.secret_values]))      # a role's credentials too
    for value in redact:
        gha.mask(value)

    workdir = Path(tempfile.mkdtemp(prefix="ghbuild-build-"))
    os.chmod(workdir, 0o700)
    try:
        secrets = _secret_files(decision, plan, workdir, write=not request.dry_run)
        settings = _settings(plan, options, job, client, builder, push, helper, base_image, secrets, workdir, env)
        command = buildcmd.build_command(job, settings)
        report = BuildReport(image=job.image, arch=job.arch, platform=job.platform, backend=client.backend,
                             target=job.target, command=command.display(), builder=builder.describe(),
                             tags=list(job.tags),
                             cache_from=list(job.cache_from), cache_to=list(job.cache_to),
                             skipped=list(command.skipped), warnings=warnings)
        for line in command.skipped:
            gha.annotate("notice" if "degraded" in line else "warning", line)
        if request.dry_run:
            report.sccache = {"mode": decision.mode, "reason": decision.reason, "hits": 0, "misses": 0,
                              "hit_rate": None, "stages": {}}
            return report
        # The built image is read (layer audit) on the engine that holds it: another context's, if so.
        engine_env = {**env, "DOCKER_HOST": builder.docker_host} if builder.docker_host else env
        ctx = BuildRun(job, image, stages, settings, workdir, engine_env, {**env, **command.env}, redact,
                           plan.trust.trusted)
        # Stage budgets outside the final image's chain are measured by building those stages as targets, beside
        # the build: BuildKit shares their steps. Stored gzip when a mode=max cache export makes every stage's gzip
        # blobs anyway (the two exports share that work), else uncompressed: a second compression would be new work.
        stage_audits: dict[str, Any] = {}
        try:
            mounts = _mount_run(ctx, options, base_image, registries)    # restored before any step of the build runs
            report.cache_mounts = cachemounts.restore(mounts, job.cache_mounts, report.warnings)
            stage_audits = layer_audit.start_stage_audits(ctx, uncompressed=not command.exports_every_stage())
            log_text = _build(report, ctx, command, echo=request.echo)
            _push_image(report, ctx, push)
            _save_cache_mounts(report, mounts, job, log_text)
            add_sccache_stats(report, decision, log_text)
            if report.image_id:
                start = time.monotonic()
                layer_audit.audit_layers(report, ctx, stage_audits)
                report.timings["audit_seconds"] = round(time.monotonic() - start, 2)
        finally:
            for audit_build in stage_audits.values():
                audit_build.stop()
            _clean_up_untrusted_builder(report, plan, client, builder, env)
        _cache_budget(report, options, plan, env)
        for warning in report.warnings:
            gha.annotate("warning", warning)
        return report
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------- the steps

def _save_cache_mounts(report: BuildReport, mounts: cachemounts.MountRun | None, job: Job, log_text: str) -> None:
    """Save the cache mounts a step of this build used; one that no step which ran mounted is as restored (or as
    the builder had it): saving it would only read it out and find the same bytes."""
    if mounts is None or len(report.cache_mounts) != len(job.cache_mounts):
        return
    used = buildlog.cache_mounts_used(log_text)
    for mount, result in zip(job.cache_mounts, report.cache_mounts, strict=True):
        if mount.id not in used and mount.write:
            result["saved"] = {"status": "unchanged (no step that mounts it ran)", "to": mount.write, "seconds": 0}
    busy = [(m, r) for m, r in zip(job.cache_mounts, report.cache_mounts, strict=True) if "saved" not in r]
    cachemounts.save(mounts, tuple(m for m, _ in busy), [r for _, r in busy], report.warnings)


def _job(plan: Plan, request: BuildRequest) -> Job:
    """The plan's job with the request's target, tags (ensure-base) and extra labels."""
    job = plan.job(request.image, request.arch)
    if request.target:
        job = job._replace(target=request.target)
    if request.tags is not None:
        job = job._replace(tags=tuple(request.tags), push=bool(request.tags) and plan.trust.registry_write)
    if request.labels:
        job = job._replace(labels={**job.labels, **request.labels})
    return job


def _dockerfile_stages(options: Options, job: Job) -> list[dockerfile.Stage]:
    project = options.project_dir
    dockerfile_path = project / job.dockerfile
    if not dockerfile_path.is_file():
        raise ConfigError(f"{options.config_path}: images.{job.image}.dockerfile: {dockerfile_path} does not exist")
    if not (project / job.context).is_dir():
        raise ConfigError(f"{options.config_path}: images.{job.image}.context: {project / job.context} is not a folder")
    undeclared = dockerfile.undeclared_from_args(dockerfile_path.read_text("utf-8"))
    if undeclared:
        line, instruction, name = undeclared[0]
        raise ConfigError(f"{job.dockerfile}:{line}: `{instruction}` uses {name}, which no ARG before the first FROM "
                          f"declares, so FROM sees it empty (an ARG inside a stage is that stage's alone): move "
                          f"`ARG {name}=<default>` above the first FROM", file=str(dockerfile_path), line=line)
    stages = dockerfile.stages(dockerfile_path)
    if job.target and not any(s.name == job.target.lower() for s in stages):
        raise ConfigError(f"images.{job.image}.target: stage {job.target!r} is not in {job.dockerfile} "
                          f"(stages: {', '.join(s.label for s in stages)})")
    return stages


def _base_image(options: Options, image: ImageOptions, job: Job, request: BuildRequest) -> str | None:
    """BASE_IMAGE: an image with a content-addressed `base` takes it only from --base-image (ensure-base's
    ref), and only by digest (fail closed)."""
    base_image = request.base_image or (None if image.base else image.base_image or options.build.base_image)
    if (request.require_digest_base or image.base) and not (base_image and naming.is_digest_ref(base_image)):
        why = (f"images.{job.image}.base is {image.base!r}: pass the ref `ghbuild ensure-base --image "
               f"{image.base}` printed" if image.base else "--require-digest-base")
        raise InvalidReferenceError(f"--base-image: {base_image or '(none)'} is not digest-pinned "
                                    f"(name@sha256:<64 hex>); refusing a mutable base ({why})")
    return base_image


def _push(plan: Plan, job: Job, request: BuildRequest) -> tuple[bool, list[str]]:
    """Push only when asked and the plan allows it; say why an asked-for push is dropped."""
    if request.push and not job.push:
        return False, ["--push ignored: " + (plan.trust.reason if job.tags else "no staging repository configured")]
    return request.push and job.push, []


def _credentials_refusal(plan: Plan) -> str | None:
    """Why the AWS credentials in the environment may not reach this build (None: they may). The sccache
    bucket is one shared scope: anything with its write key can plant objects the trusted build fetches."""
    if not plan.trust.secrets:
        return "this run may not be handed secrets"
    if not plan.trust.trusted:
        return "not a trusted run: S3 write credentials are kept for the trusted build"
    return None


def _start(plan: Plan, options: Options, request: BuildRequest, env: Mapping[str, str],
           probe: engine.ClientProbe | None) -> tuple[engine.DockerClient, sccache.SccacheDecision, builders.Builder,
                                                        str | None]:
    """The client, the sccache decision and the builder, found side by side: the builder's questions (docker CLI
    runs, tens of milliseconds each) and the S3 preflight go on while the client's own answers come in, asked
    of the preferred client at once and of another only if that one is passed over."""
    trusted = plan.trust.trusted
    # The engine's own builder (the current context's) is described by the probe's own answers.
    answering = probe is not None and probe.context is not None and \
        builders.choose_builder(options.build.builder, trusted, env).kind == "context"
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="ghbuild-start") as pool:
        early = probe.preferred if probe is not None and not request.dry_run and not answering else None
        finding = pool.submit(_builder, engine.DockerClient(early, "", True), options, trusted, env,
                              request.dry_run) if early else None
        deciding = pool.submit(sccache.planned if request.dry_run else sccache.preflight, options.sccache,
                               _credentials_refusal(plan), env)
        client = _client(env, request, probe)
        if finding is None or client.path != early:
            answered = probe.answers.get(client.path) if probe is not None else None
            finding = pool.submit(_builder, client, options, trusted, env, request.dry_run, answered)
        builder, builder_note = finding.result()
        return client, deciding.result(), builder, builder_note


def _client(env: Mapping[str, str], request: BuildRequest,
            probe: engine.ClientProbe | None = None) -> engine.DockerClient:
    """The docker client; a dry run prints the command even where no engine answers."""
    try:
        return (probe or engine.ClientProbe(env, engine=not request.dry_run)).client(request.backend)
    except EngineError:
        if not request.dry_run:
            raise
        return engine.DockerClient(env.get("GHBUILD_DOCKER_CLI") or "docker", "unknown", buildx=True)


def _builder(client: engine.DockerClient, options: Options, trusted: bool, env: Mapping[str, str],
             dry_run: bool, answered: engine.EngineBuilderAnswer | None = None) -> tuple[builders.Builder, str | None]:
    """The builder (docker_client.resolve_builder) and a warning when build.builder was left out. A dry run asks
    nothing: the builder it would pick, its driver as that choice implies and its BuildKit version unknown."""
    choice = builders.choose_builder(options.build.builder, trusted, env)
    note = (f"build.builder = {choice.ignored!r} ignored: an untrusted build inside GitHub Actions gets a builder "
            "of its own, never a named or remote one" if choice.ignored else None)
    if not dry_run:
        builder = builders.resolve_builder(client, options.build.builder, options.build.builder_network,
                                           trusted, env, answered)
        if builder.buildkit is None and ghacache.needs_buildkit_version(env):
            builder = builders.with_buildkit(client, builder, env)
        return builder, note
    suffix = "" if trusted else "-untrusted"
    if choice.kind == "named":
        return builders.Builder(choice.name or "", "unknown", ""), note
    if choice.kind == "address":
        return builders.Builder(builders.REMOTE_BUILDER + suffix, "remote", ""), note
    if choice.kind == "container":
        return builders.Builder(choice.name or "", "docker-container", "", ephemeral=choice.ephemeral), note
    return builders.Builder(env.get("DOCKER_CONTEXT") or "default", "docker", "", "containerd"), note


def _secret_files(decision: sccache.SccacheDecision, plan: Plan, workdir: Path, write: bool) -> list[buildcmd.Secret]:
    """The sccache settings as the BuildKit secret `ghbuild_sccache` (0600, never a build arg): every build
    gets the mode and bucket; the credentials only a trusted run that may be handed secrets. A dry run
    names the file without writing it."""
    secret_file = workdir / sccache.SECRET_ID
    if write:
        fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(decision.secret_text(with_credentials=plan.trust.secrets and plan.trust.trusted))
    return [buildcmd.Secret(sccache.SECRET_ID, secret_file)]


def _helper_image(options: Options, job: Job, request: BuildRequest, env: Mapping[str, str],
                  registries: Callable[[str], Any] | None) -> tuple[str | None, str | None]:
    """GHBUILD_SCCACHE_IMAGE and a note (sccache.helper_image): the one the request names (ensure-base: the
    digest its identity hashed), else the configured helper pinned to its digest now."""
    if request.helper_image:
        return request.helper_image, None
    def lookup(ref: str) -> str | None:
        nonlocal registries
        if registries is None:
            # The registry client (and the HTTP stack under it) only for a Dockerfile that declares the
            # helper: every other build starts without it (bench/startup.py).
            registries = _registries(env, None)
        return registry_lookup(registries)(ref)

    return sccache.helper_image(options, options.project_dir / job.dockerfile, lookup, dry_run=request.dry_run)


def _settings(plan: Plan, options: Options, job: Job, client: engine.DockerClient,
              builder: builders.Builder, push: bool, helper: str | None, base_image: str | None,
              secrets: list[buildcmd.Secret], workdir: Path, env: Mapping[str, str]) -> buildcmd.BuildSettings:
    extra_args = {sccache.HELPER_BUILD_ARG: helper} if helper else {}
    if base_image:
        extra_args["BASE_IMAGE"] = base_image
    return buildcmd.BuildSettings(
        docker=client.path, project_dir=options.project_dir, builder=builder.name, driver=builder.driver,
        context=builder.context,
        gha_problem=ghacache.problem(env, builder), cache_export_problem=builder.cache_export_problem,
        # An untrusted job's own builder on a persistent runner never gets the host's network (see choose_builder).
        network=None if options.build.network == "default" or builder.ephemeral else options.build.network,
        push=push, extra_build_args=extra_args,
        extra_labels={"org.opencontainers.image.created": _now_iso(),
                      "org.opencontainers.image.version": _version_label(plan)},
        secrets=tuple(secrets), metadata_file=workdir / "metadata.json", iidfile=workdir / "iid",
        **_attestations(plan, options, job, push, env))


def _attestations(plan: Plan, options: Options, job: Job, push: bool, env: Mapping[str, str]) -> dict[str, Any]:
    """buildx's --provenance and --sbom for this job (ghbuild.sign.policy.attest_modes)."""
    attest = options.images[job.image].attest
    generator = attest.sbom_generator or options.build.sbom_generator
    provenance, sbom = policy.attest_modes(attest.provenance, attest.sbom, generator,
                                           trusted=plan.trust.trusted, push=push,
                                           signs=policy.signer(env).signs,
                                           legacy_provenance=options.build.provenance)
    return {"provenance": provenance, "sbom": sbom}


def _registries(env: Mapping[str, str], registries: Callable[[str], Any] | None) -> Callable[[str], Any]:
    if registries is not None:
        return registries
    from ghbuild.registry import client as registry  # the HTTP stack: only for a build that talks to a registry

    return registry.client_factory(env, lambda message: print(message, file=sys.stderr))


def _mount_run(ctx: BuildRun, options: Options, base_image: str | None,
               registries: Callable[[str], Any] | None) -> cachemounts.MountRun | None:
    """What the cache-mount steps need (None: the job carries no cache mount). They run in build.cache-mount-image,
    else the build's BASE_IMAGE (already on the builder), else busybox."""
    if not ctx.job.cache_mounts:
        return None
    image = options.build.cache_mount_image or base_image or DEFAULT_CACHE_MOUNT_IMAGE
    namespace = {**ctx.job.build_args, **ctx.settings.extra_build_args}.get("BUILDKIT_CACHE_MOUNT_NS")
    return cachemounts.MountRun(ctx.settings, ctx.job.platform, image, ctx.workdir, ctx.run_env, ctx.redact,
                                _registries(ctx.env, registries), namespace)


SDK_WARM_AFTER = 0.5     # seconds into the build: its docker client and BuildKit's solve have their CPU first


def _build(report: BuildReport, ctx: BuildRun, command: buildcmd.BuildCommand, echo: bool) -> str:
    """Run the build; record its time, the per-stage timings from its log and the image id. Returns the log."""
    log_path = ctx.workdir / "build.log"
    # An engine not on a local socket is read through the Docker SDK afterwards: it loads and asks the engine its
    # API version while the build runs, once its client started, tens of milliseconds off the build's end.
    warm = threading.Timer(SDK_WARM_AFTER, images.warm, args=(ctx.env,))
    warm.daemon = True
    warm.start()
    with gha.group(f"build {ctx.job.id} ({ctx.settings.builder})"), gha.commands_off():
        rc, seconds = engine.run_streaming(command.argv, ctx.run_env, log_path, echo=echo, redact=ctx.redact)
    warm.cancel()
    log_text = log_path.read_text("utf-8", errors="replace")
    if rc != 0:
        tail = [line for line in log_text.splitlines() if line.strip()][-1:] or ["(no output)"]
        raise EngineError(f"build of {ctx.job.id} failed (exit {rc}): {tail[0][:300]}")
    report.timings["build_seconds"] = round(seconds, 2)
    report.stages = {name: {"steps": t.steps, "cached": t.cached, "seconds": round(t.seconds, 2)}
                     for name, t in buildlog.stage_timings(log_text).items()}
    iid, metadata = ctx.workdir / "iid", ctx.workdir / "metadata.json"
    report.config_digest = (read_metadata(metadata).get("containerimage.config.digest")
                            or (iid.read_text().strip() if iid.exists() else None))
    report.image_id = local_image(ctx, iid, metadata, ctx.job.tags)
    return log_text


def _push_image(report: BuildReport, ctx: BuildRun, push: bool) -> None:
    """buildx pushed during the build; the digest and ref of the push from its metadata file."""
    if push:
        report.digest = read_metadata(ctx.workdir / "metadata.json").get("containerimage.digest")
    if report.digest:
        report.pushed = True
        report.ref = f"{ctx.job.staging_repository}@{report.digest}"


def _clean_up_untrusted_builder(report: BuildReport, plan: Plan, client: engine.DockerClient,
                                   builder: builders.Builder, env: Mapping[str, str]) -> None:
    """An untrusted job's own builder (self-hosted runners) is removed after the build, with its cache and its
    `RUN --mount=type=cache` contents, which no cache key covers. Elsewhere, on a persistent (self-hosted)
    runner an untrusted build's cache mounts are pruned: the next build on that builder could be a trusted one.
    Hosted runners are thrown away after the job."""
    if builder.ephemeral:
        failure = builders.remove_builder(client, builder, env)
        report.warnings.append(f"untrusted build: its own builder {builder.name} was removed" if failure is None
                               else f"untrusted build: removing its builder {builder.name} failed: {failure}")
        return
    if plan.trust.trusted or gha.runner_kind(env) != "self-hosted":
        return
    failure = builders.prune_cache_mounts(client, builder, env)
    report.warnings.append("untrusted build on a self-hosted runner: its cache mounts were pruned"
                           if failure is None else f"untrusted build: pruning its cache mounts failed: {failure}")


def _cache_budget(report: BuildReport, options: Options, plan: Plan, env: Mapping[str, str]) -> None:
    """The repository's GitHub Actions cache against cache.budget, in GitHub Actions with the job's token: over
    cache.warn-share a warning, unreadable a note (ghbuild.actions_cache.budget). Never fails the build. Not
    under act (ACT=true): it serves no Actions cache REST API, and its GITHUB_API_URL is github.com's."""
    if (options.cache.warn_share <= 0 or env.get("GITHUB_ACTIONS") != "true" or not env.get("GITHUB_TOKEN")
            or env.get("ACT") == "true"):
        return
    from ghbuild.actions_cache import budget  # the HTTP stack: only for a build that checks

    found = budget.check(options, plan.context.repository, env)
    report.actions_cache = found.to_dict()
    if found.warning:
        report.warnings.append(found.warning)
    elif found.note:
        print(f"ghbuild: note: GitHub Actions cache usage not read: {found.note}", file=sys.stderr)


def outputs(report: BuildReport) -> None:
    """Step outputs and the job summary (no-ops outside Actions)."""
    gha.set_output("digest", report.digest or "")
    gha.set_output("ref", report.ref or "")
    gha.set_output("image-id", report.image_id or "")
    gha.set_output("report", report.to_dict())
    gha.set_output("metadata", buildx_metadata(report.digest, report.config_digest,
                                               report.tags if report.pushed else []))
    gha.add_summary(render.build_summary(report))
