"""`ghbuild build`: run one plan job as a real BuildKit build and report what happened.

Order: plan the job, pick the sccache mode (S3 preflight), pin the sccache helper image to its digest,
assemble the command, build, push, read the per-stage sccache stats the wrapper printed into the build
log (steps served by the layer cache reported as such), audit the layers, check budgets, report (stdout
JSON, GITHUB_OUTPUT, job summary).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType, SimpleNamespace
from typing import Any, NamedTuple

from ghbuild import naming
from ghbuild.build import buildcmd, builders, buildlog, engine, images, sccache
from ghbuild.config.options import ImageOptions, Options
from ghbuild.errors import BudgetError, ConfigError, EngineError, InvalidReferenceError
from ghbuild.github import gha
from ghbuild.plan import dockerfile
from ghbuild.plan.planner import Job, Plan


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


class BuildReport(SimpleNamespace):
    """What one build did, filled in as it runs (a namespace: mutable, compared and printed by its fields)."""

    image: str
    arch: str
    platform: str
    backend: str
    target: str | None
    command: str
    builder: str | None
    config_digest: str | None
    ref: str | None
    digest: str | None
    image_id: str | None
    tags: list[str]
    pushed: bool
    cache_from: list[str]
    cache_to: list[str]
    skipped: list[str]
    warnings: list[str]
    sccache: dict[str, Any]
    layers: list[dict[str, Any]]
    stages: dict[str, Any]
    size: int | None
    timings: dict[str, float]
    budget_failures: list[str]

    def __init__(self, image: str, arch: str, platform: str, backend: str, target: str | None, command: str,
                 **fields: Any) -> None:
        super().__init__(image=image, arch=arch, platform=platform, backend=backend, target=target, command=command,
                         builder=None, config_digest=None, ref=None, digest=None, image_id=None, tags=[], pushed=False, cache_from=[], cache_to=[],
                         skipped=[], warnings=[], sccache={}, layers=[], stages={}, size=None, timings={},
                         budget_failures=[])
        unknown = sorted(set(fields) - set(vars(self)))
        if unknown:
            raise TypeError(f"BuildReport: unknown fields {', '.join(unknown)}")
        self.__dict__.update(fields)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# --------------------------------------------------------------------------- sccache stats

def summarize_sccache(decision: sccache.SccacheDecision, runs: buildlog.SccacheRuns) -> dict[str, Any]:
    """Hits, misses and rate over the compile steps this build ran, plus each stage by language and why;
    stages whose wrapped step the layer cache served are listed as such (they compiled nothing now)."""
    stages: dict[str, Any] = {}
    hits = misses = 0
    for name, data in sorted(runs.stats.items()):
        stats = (data.get("sccache") or {}).get("stats") or {}
        stage_hits = dict((stats.get("cache_hits") or {}).get("counts") or {})
        stage_misses = dict((stats.get("cache_misses") or {}).get("counts") or {})
        h, m = sum(stage_hits.values()), sum(stage_misses.values())
        stages[name] = {
            "mode": data.get("mode"), "requested_mode": data.get("requested_mode"),
            "fallbacks": [f for f in str(data.get("fallbacks") or "").split(",") if f],
            "hits": h, "misses": m, "hit_rate": round(h / (h + m), 4) if h + m else None,
            "hits_by_language": stage_hits, "misses_by_language": stage_misses,
            "not_cacheable": stats.get("requests_not_cacheable", 0),
            "not_cached_reasons": dict(stats.get("not_cached") or {}),
            "write_errors": stats.get("cache_write_errors", 0),
            "read_errors": stats.get("cache_read_errors", 0),
            "compile_requests": stats.get("compile_requests", 0),
            "seconds": max(0, int(data.get("finished") or 0) - int(data.get("started") or 0)),
            "from_layer_cache": False,
            "cache_location": (data.get("sccache") or {}).get("cache_location"),
        }
        hits += h
        misses += m
    for name in sorted(runs.cached):
        stages[name] = {"mode": None, "requested_mode": None, "fallbacks": [], "hits": 0, "misses": 0,
                        "hit_rate": None, "hits_by_language": {}, "misses_by_language": {}, "not_cacheable": 0,
                        "not_cached_reasons": {}, "write_errors": 0, "read_errors": 0, "compile_requests": 0,
                        "seconds": 0, "from_layer_cache": True, "cache_location": None}
    return {"mode": decision.mode, "reason": decision.reason, "hits": hits, "misses": misses,
            "hit_rate": round(hits / (hits + misses), 4) if hits + misses else None, "stages": stages}


# --------------------------------------------------------------------------- helpers

def _now_iso() -> str:
    return _dt.datetime.now(_dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _version_label(plan: Plan) -> str:
    ctx = plan.context
    if ctx.ref.startswith("refs/tags/"):
        return ctx.ref[len("refs/tags/"):]
    return ctx.sha[:12]


class BuildContext(NamedTuple):
    """What every step of one build shares: the job as built, its options and Dockerfile, the command's
    settings, the scratch folder, the environment the docker client runs in and the values to redact."""

    job: Job
    image: ImageOptions
    stages: list[dockerfile.Stage]
    settings: buildcmd.BuildSettings
    workdir: Path
    env: Mapping[str, str]          # the caller's environment
    run_env: Mapping[str, str]      # with the command's own variables
    redact: tuple[str, ...]
    trusted: bool


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
                        "the trusted environment (README: Who can write what)")
    warnings += [helper_note] if helper_note else []
    client = _client(env, request, probe)
    # The builder's questions (docker CLI runs, tens of milliseconds each) go on while S3 is probed.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        finding = pool.submit(_builder, client, options, plan.trust.trusted, env, request.dry_run)
        decision = (sccache.planned if request.dry_run else sccache.preflight)(options.sccache,
                                                                               _credentials_refusal(plan), env)
        builder, builder_note = finding.result()
    warnings += [builder_note] if builder_note else []
    if decision.degraded:
        warnings.append(f"sccache {decision.mode}: {decision.reason}")
    redact = tuple(v for k, v in env.items() if k in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN") and v)
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
        ctx = BuildContext(job, image, stages, settings, workdir, engine_env, {**env, **command.env}, redact,
                           plan.trust.trusted)
        # Stage budgets outside the final image's chain are measured by building those stages as targets, beside
        # the build: BuildKit shares their steps. Stored gzip when a mode=max cache export makes every stage's gzip
        # blobs anyway (the two exports share that work), else uncompressed: a second compression would be new work.
        stage_audits = _start_stage_audits(ctx, uncompressed=not command.exports_every_stage())
        try:
            log_text = _build(report, ctx, command, echo=request.echo)
            _push_image(report, ctx, push)
            _sccache_report(report, decision, log_text)
            if report.image_id:
                start = time.monotonic()
                _audit(report, ctx, stage_audits)
                report.timings["audit_seconds"] = round(time.monotonic() - start, 2)
        finally:
            for audit_build in stage_audits.values():
                audit_build.stop()
            _clean_up_untrusted_builder(report, plan, client, builder, env)
        for warning in report.warnings:
            gha.annotate("warning", warning)
        return report
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _sccache_report(report: BuildReport, decision: sccache.SccacheDecision, log_text: str) -> None:
    """sccache's stats per stage from the build log, and a warning per stage that fell back or printed none."""
    runs = buildlog.sccache_runs(log_text)
    report.sccache = summarize_sccache(decision, runs)
    for name, stage in report.sccache["stages"].items():
        if stage["fallbacks"]:
            report.warnings.append(f"sccache in stage {name}: fell back from {', '.join(stage['fallbacks'])} "
                                   f"to {stage['mode']}")
    for name in sorted(runs.unreadable):
        report.warnings.append(f"sccache in stage {name}: the step ran but its stats line is not in the "
                               "build log (ghbuild-sccache-stats)")


def check_budgets(report: BuildReport) -> None:
    """Fail (exit 11) when the audit found the image or a stage over its budget."""
    if report.budget_failures:
        raise BudgetError("; ".join(report.budget_failures))


# --------------------------------------------------------------------------- the steps

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
             dry_run: bool) -> tuple[builders.Builder, str | None]:
    """The builder (docker_client.resolve_builder) and a warning when build.builder was left out. A dry run asks
    nothing: the builder it would pick, its driver as that choice implies and its BuildKit version unknown."""
    choice = builders.choose_builder(options.build.builder, trusted, env)
    note = (f"build.builder = {choice.ignored!r} ignored: an untrusted build inside GitHub Actions gets a builder "
            "of its own, never a named or remote one" if choice.ignored else None)
    if not dry_run:
        return builders.resolve_builder(client, options.build.builder, options.build.builder_network,
                                             trusted, env), note
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
        # The registry layer only for a Dockerfile that declares the helper: start-up of the others.
        from ghbuild.registry.lookup import registry_lookup

        nonlocal registries
        if registries is None:
            from ghbuild.registry import client as registry

            registries = registry.client_factory(env, lambda message: print(message, file=sys.stderr))
        return registry_lookup(registries)(ref)

    return sccache.helper_image(options, options.project_dir / job.dockerfile, lookup, dry_run=request.dry_run)


def _settings(plan: Plan, options: Options, job: Job, client: engine.DockerClient,
              builder: builders.Builder, push: bool, helper: str | None, base_image: str | None,
              secrets: list[buildcmd.Secret], workdir: Path, env: Mapping[str, str]) -> buildcmd.BuildSettings:
    from ghbuild.build import ghacache

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
        provenance=options.build.provenance)


def _build(report: BuildReport, ctx: BuildContext, command: buildcmd.BuildCommand, echo: bool) -> str:
    """Run the build; record its time, the per-stage timings from its log and the image id. Returns the log."""
    log_path = ctx.workdir / "build.log"
    with gha.group(f"build {ctx.job.id} ({ctx.settings.builder})"), gha.commands_off():
        rc, seconds = engine.run_streaming(command.argv, ctx.run_env, log_path, echo=echo, redact=ctx.redact)
    log_text = log_path.read_text("utf-8", errors="replace")
    if rc != 0:
        tail = [line for line in log_text.splitlines() if line.strip()][-1:] or ["(no output)"]
        raise EngineError(f"build of {ctx.job.id} failed (exit {rc}): {tail[0][:300]}")
    report.timings["build_seconds"] = round(seconds, 2)
    report.stages = {name: {"steps": t.steps, "cached": t.cached, "seconds": round(t.seconds, 2)}
                     for name, t in buildlog.stage_timings(log_text).items()}
    iid, metadata = ctx.workdir / "iid", ctx.workdir / "metadata.json"
    report.config_digest = (_metadata(metadata).get("containerimage.config.digest")
                            or (iid.read_text().strip() if iid.exists() else None))
    report.image_id = _local_image(ctx, iid, metadata, ctx.job.tags)
    return log_text


def _metadata(path: Path) -> dict[str, Any]:
    """buildx's --metadata-file (empty when it wrote none)."""
    try:
        data = json.loads(path.read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _local_image(ctx: BuildContext, iid: Path, metadata: Path, tags: tuple[str, ...] = ()) -> str | None:
    """The id the local engine knows the built image by (docker_client.local_image_id): the iidfile's config
    digest on the classic image store, the manifest digest on the containerd store."""
    written = iid.read_text().strip() if iid.exists() else None
    if not written:
        return None
    return images.local_image_id(ctx.env, [written, str(_metadata(metadata).get("containerimage.digest") or ""),
                                                  *tags]) or written


def _push_image(report: BuildReport, ctx: BuildContext, push: bool) -> None:
    """buildx pushed during the build; the digest and ref of the push from its metadata file."""
    if push:
        report.digest = _metadata(ctx.workdir / "metadata.json").get("containerimage.digest")
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


def _audit(report: BuildReport, ctx: BuildContext, stage_audits: Mapping[str, StageAudit]) -> None:
    """Layer sizes per stage from the image history, and the budgets. Stages with a budget outside the
    final image's chain (compile stages) are audited from their own image (`stage_audits`)."""
    from ghbuild.build import audit  # after a build only: a dry run's start-up does without it

    chain = dockerfile.chain(ctx.job.target, ctx.stages)
    layers, exact = audit.attribute(images.image_history(ctx.env, report.image_id), chain)
    if not exact:
        report.warnings.append("layer audit: history does not match the Dockerfile's stages; "
                               "layers are attributed to the target stage")
    sizes = audit.stage_sizes(layers)
    for stage_name, stage_audit in stage_audits.items():
        size = stage_audit.size(ctx)
        if size is not None:
            sizes[stage_name] = size
    report.size = sum(layer.size for layer in layers)
    report.layers = [{"stage": layer.stage, "size": layer.size, "created_by": layer.created_by} for layer in layers]
    for name, size in sizes.items():
        report.stages.setdefault(name, {})["size"] = size
    # The size budget is the shipped image's: it applies to the configured target, not to a --target stage.
    shipped = (ctx.job.target or None) == (ctx.image.target or None)
    report.budget_failures = audit.check_budgets(ctx.job.image, report.size, sizes,
                                                 ctx.image.size_budget if shipped else None,
                                                 dict(ctx.image.stage_budgets))


class StageAudit:
    """One stage built as the target, for the own layers of that stage. Only stages the main build builds
    (outside the final image's chain): their steps are shared with it or cache hits, the stage costs its export."""

    def __init__(self, ctx: BuildContext, stage_name: str, uncompressed: bool) -> None:
        self.stage_name = stage_name
        sub_job = ctx.job._replace(target=stage_name, tags=(), cache_to=(), push=False)
        self.iid_file = ctx.workdir / f"iid-{stage_name}"
        self.metadata = ctx.workdir / f"metadata-{stage_name}.json"
        sub = buildcmd.build_command(sub_job, ctx.settings._replace(push=False, metadata_file=self.metadata,
                                                                    iidfile=self.iid_file, uncompressed=uncompressed))
        self.process = engine.StreamingProcess(sub.argv, {**ctx.run_env, **sub.env},
                                                      ctx.workdir / f"audit-{stage_name}.log", redact=ctx.redact)

    def stop(self) -> None:
        self.process.stop()

    def size(self, ctx: BuildContext) -> int | None:
        """The stage's own layers' bytes, once its build ended; None when that build failed."""
        from ghbuild.build import audit

        rc, _ = self.process.wait()
        image_id = _local_image(ctx, self.iid_file, self.metadata) if rc == 0 else None
        if image_id is None:
            return None
        history = images.image_history(ctx.env, image_id)
        layers, _ = audit.attribute(history, dockerfile.chain(self.stage_name, ctx.stages))
        return audit.stage_sizes(layers).get(self.stage_name, 0)


def _start_stage_audits(ctx: BuildContext, uncompressed: bool) -> dict[str, StageAudit]:
    """The stage builds the audit needs, started side by side: stages with a budget that the main build builds
    but the final image's chain does not contain. `uncompressed`: their layers are only read back for their
    sizes, and gzip of a toolchain layer that no export compressed takes tens of seconds."""
    chain = {stage.label for stage in dockerfile.chain(ctx.job.target, ctx.stages)}
    built = dockerfile.dependencies(ctx.job.target, ctx.stages)
    return {name: StageAudit(ctx, name, uncompressed)
            for name in ctx.image.stage_budgets if name in built and name not in chain}


def buildx_metadata(digest: str | None, config_digest: str | None, names: list[str]) -> dict[str, str]:
    """The `metadata` output in the shape docker/build-push-action gives (buildx's metadata file), so a
    step written for that action reads it unchanged: pushed manifest digest, image config digest, names."""
    data = {"containerimage.digest": digest, "containerimage.config.digest": config_digest,
            "image.name": ",".join(names)}
    return {key: value for key, value in data.items() if value}


def outputs(report: BuildReport) -> None:
    """Step outputs and the job summary (no-ops outside Actions)."""
    from ghbuild import render

    gha.set_output("digest", report.digest or "")
    gha.set_output("ref", report.ref or "")
    gha.set_output("image-id", report.image_id or "")
    gha.set_output("report", report.to_dict())
    gha.set_output("metadata", buildx_metadata(report.digest, report.config_digest,
                                               report.tags if report.pushed else []))
    gha.add_summary(render.build_summary(report))
