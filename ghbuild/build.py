"""`ghbuild build`: run one plan job as a real BuildKit build and report what happened.

Order: plan the job, pick the sccache mode (S3 preflight), assemble the command, build, push,
collect per-stage sccache stats (the Dockerfile's `ghbuild-stats` stage, exported with a cached
second build), audit the layers, check budgets, report (stdout JSON, GITHUB_OUTPUT, job summary).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ghbuild import audit, buildcmd, buildlog, dockerfile, engine, gha, naming, sccache
from ghbuild.errors import ConfigError, InvalidReferenceError
from ghbuild.options import Options, format_size
from ghbuild.planner import Job, Plan


@dataclass
class BuildRequest:
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
    labels: Mapping[str, str] = field(default_factory=dict)   # added to the plan's labels


@dataclass
class BuildReport:
    image: str
    arch: str
    platform: str
    backend: str
    target: str | None
    command: str
    ref: str | None = None
    digest: str | None = None
    image_id: str | None = None
    tags: list[str] = field(default_factory=list)
    pushed: bool = False
    cache_from: list[str] = field(default_factory=list)
    cache_to: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    sccache: dict[str, Any] = field(default_factory=dict)
    layers: list[dict[str, Any]] = field(default_factory=list)
    stages: dict[str, Any] = field(default_factory=dict)
    size: int | None = None
    timings: dict[str, float] = field(default_factory=dict)
    budget_failures: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# --------------------------------------------------------------------------- sccache stats

def summarize_sccache(decision: sccache.SccacheDecision, stage_files: dict[str, dict], build_started: float,
                      ) -> dict[str, Any]:
    """Hits, misses and rate over all compile stages, plus each stage by language and why."""
    stages: dict[str, Any] = {}
    hits = misses = 0
    for name, data in sorted(stage_files.items()):
        stats = (data.get("sccache") or {}).get("stats") or {}
        stage_hits = dict((stats.get("cache_hits") or {}).get("counts") or {})
        stage_misses = dict((stats.get("cache_misses") or {}).get("counts") or {})
        h, m = sum(stage_hits.values()), sum(stage_misses.values())
        # A stage whose layer came from the layer cache did not run in this build: its numbers are old.
        from_layer_cache = float(data.get("finished") or 0) < build_started - 1
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
            "from_layer_cache": from_layer_cache,
            "cache_location": (data.get("sccache") or {}).get("cache_location"),
        }
        if not from_layer_cache:
            hits += h
            misses += m
    return {"mode": decision.mode, "reason": decision.reason, "hits": hits, "misses": misses,
            "hit_rate": round(hits / (hits + misses), 4) if hits + misses else None, "stages": stages}


# --------------------------------------------------------------------------- helpers

def _now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _version_label(plan: Plan) -> str:
    ctx = plan.context
    if ctx.ref.startswith("refs/tags/"):
        return ctx.ref[len("refs/tags/"):]
    return ctx.sha[:12]


def _history(client_sdk, image_id: str) -> list[dict]:
    return list(reversed(client_sdk.api.history(image_id)))


def _stage_audit(client_sdk, image_id: str, chain: list[dockerfile.Stage]) -> tuple[list[audit.Layer], bool]:
    return audit.attribute(_history(client_sdk, image_id), chain)


def run(plan: Plan, options: Options, request: BuildRequest, env: Mapping[str, str]) -> BuildReport:
    job = plan.job(request.image, request.arch)
    image_opts = options.images[job.image]
    if request.target:
        job = replace(job, target=request.target)
    if request.tags is not None:
        job = replace(job, tags=tuple(request.tags), push=bool(request.tags) and plan.trust.registry_write)
    if request.labels:
        job = replace(job, labels={**job.labels, **request.labels})
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

    # An image with a content-addressed `base` takes BASE_IMAGE only from --base-image (ensure-base's ref).
    base_image = request.base_image or (None if image_opts.base else image_opts.base_image or options.build.base_image)
    # An image built on a content-addressed base takes it only by digest (SPEC 3: fail closed).
    require_digest = request.require_digest_base or bool(image_opts.base)
    if require_digest and not (base_image and naming.is_digest_ref(base_image)):
        why = (f"images.{job.image}.base is {image_opts.base!r}: pass the ref `ghbuild ensure-base --image "
               f"{image_opts.base}` printed" if image_opts.base else "--require-digest-base")
        raise InvalidReferenceError(f"--base-image: {base_image or '(none)'} is not digest-pinned "
                                    f"(name@sha256:<64 hex>); refusing a mutable base ({why})")

    push = request.push and job.push
    warnings: list[str] = []
    if request.push and not job.push:
        warnings.append("--push ignored: " + (plan.trust.reason if job.tags else "no staging repository configured"))

    # ---- backend
    if request.dry_run:
        try:
            client = engine.find_client(env, request.backend)
        except engine.EngineError:
            client = engine.DockerClient(env.get("GHBUILD_DOCKER_CLI") or "docker", "unknown",
                                         buildx=request.backend == "buildx")
    else:
        client = engine.find_client(env, request.backend)
    backend = client.backend

    # ---- sccache
    if request.dry_run:
        creds = bool(env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY")) and plan.trust.secrets
        mode = "off" if not options.sccache.enabled else (
            "local" if not options.sccache.bucket else ("read-write" if creds else "anonymous"))
        decision = sccache.SccacheDecision(mode, "dry run: S3 not probed", sccache._build_args(options.sccache, mode),
                                           "(masked)" if creds and mode == "read-write" else None)
    else:
        decision = sccache.preflight(options.sccache, plan.trust.secrets, env)
    if decision.degraded:
        warnings.append(f"sccache {decision.mode}: {decision.reason}")
    redact = [v for k, v in env.items() if k in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN") and v]
    for value in redact:
        gha.mask(value)

    workdir = Path(tempfile.mkdtemp(prefix="ghbuild-build-"))
    os.chmod(workdir, 0o700)
    try:
        secrets: list[buildcmd.Secret] = []
        if decision.secret and plan.trust.secrets:
            secret_file = workdir / "sccache_aws"
            if not request.dry_run:
                fd = os.open(secret_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w") as fh:
                    fh.write(decision.secret)
            secrets.append(buildcmd.Secret(sccache.SECRET_ID, secret_file))

        extra_args = dict(decision.build_args)
        if base_image:
            extra_args["BASE_IMAGE"] = base_image
        settings = buildcmd.BuildSettings(
            backend=backend, docker=client.path, project_dir=project,
            builder=_builder_name(options) if backend == "buildx" else None,
            network=None if options.build.network == "default" else options.build.network,
            push=push, extra_build_args=extra_args,
            extra_labels={"org.opencontainers.image.created": _now_iso(),
                          "org.opencontainers.image.version": _version_label(plan)},
            secrets=tuple(secrets), metadata_file=workdir / "metadata.json", iidfile=workdir / "iid",
            provenance=options.build.provenance, env=env)
        command = buildcmd.build_command(job, settings)
        report = BuildReport(image=job.image, arch=job.arch, platform=job.platform, backend=backend,
                             target=job.target, command=command.display(), tags=list(job.tags),
                             cache_from=list(job.cache_from), cache_to=list(job.cache_to),
                             skipped=list(command.skipped), warnings=warnings)
        for line in command.skipped:
            gha.annotate("notice" if "degraded" in line else "warning", line)
        if request.dry_run:
            report.sccache = {"mode": decision.mode, "reason": decision.reason, "hits": 0, "misses": 0,
                              "hit_rate": None, "stages": {}}
            return report

        if backend == "buildx":
            _ensure_builder(client, options, env)
        run_env = {**env, **command.env}
        build_started = time.time()
        with gha.group(f"build {job.id} ({backend})"):
            rc, seconds = engine.run_streaming(command.argv, run_env, workdir / "build.log", echo=request.echo,
                                               redact=redact)
        log_text = (workdir / "build.log").read_text("utf-8", errors="replace")
        if rc != 0:
            tail = [line for line in log_text.splitlines() if line.strip()][-1:] or ["(no output)"]
            raise engine.EngineError(f"build of {job.id} failed (exit {rc}): {tail[0][:300]}")
        report.timings["build_seconds"] = round(seconds, 2)
        timings = buildlog.stage_timings(log_text)
        report.stages = {name: {"steps": t.steps, "cached": t.cached, "seconds": round(t.seconds, 2)}
                         for name, t in timings.items()}
        iid = (workdir / "iid").read_text().strip() if (workdir / "iid").exists() else None
        report.image_id = iid

        # ---- push
        if backend == "engine" and push:
            start = time.monotonic()
            digests = {tag: engine.push(client, tag, run_env) for tag in command.push_tags}
            report.timings["push_seconds"] = round(time.monotonic() - start, 2)
            report.digest = next(iter(digests.values()), None)
            for ref in command.cache_push_refs:
                try:
                    engine.push(client, ref, run_env)
                except engine.EngineError as exc:  # cache writes are best effort (SPEC 1)
                    report.warnings.append(f"cache push failed, build kept: {exc}")
        elif backend == "buildx":
            meta = json.loads((workdir / "metadata.json").read_text() or "{}") if (workdir / "metadata.json").exists() else {}
            report.digest = meta.get("containerimage.digest") if push else None
        if report.digest:
            report.pushed = True
            report.ref = f"{job.staging_repository}@{report.digest}"

        # ---- sccache stats, read from the built image
        stage_files = _read_stats(env, iid) if iid else {}
        report.sccache = summarize_sccache(decision, stage_files, build_started)
        for name, stage in report.sccache["stages"].items():
            if stage["fallbacks"]:
                report.warnings.append(f"sccache in stage {name}: fell back from {', '.join(stage['fallbacks'])} "
                                       f"to {stage['mode']}")

        # ---- layers
        if iid:
            _audit(report, client, job, settings, stages, image_opts, workdir, run_env, redact, env)
        for warning in report.warnings:
            gha.annotate("warning", warning)
        return report
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _builder_name(options: Options) -> str:
    builder = options.build.builder
    if builder and "://" not in builder:
        return builder
    return "ghbuild-remote" if builder else "ghbuild"


def _ensure_builder(client: engine.DockerClient, options: Options, env: Mapping[str, str]) -> None:
    """Create (once) the docker-container builder, or register the remote one from config."""
    import subprocess

    name = _builder_name(options)
    if subprocess.run([client.path, "buildx", "inspect", name], capture_output=True, env=dict(env)).returncode == 0:
        return
    builder = options.build.builder
    if builder and "://" not in builder:
        raise engine.EngineError(f"build.builder: buildx builder {builder!r} does not exist")
    if builder:
        argv = [client.path, "buildx", "create", "--name", name, "--driver", "remote", builder]
    else:
        argv = [client.path, "buildx", "create", "--name", name, "--driver", "docker-container",
                "--driver-opt", f"network={options.build.builder_network}",
                "--buildkitd-flags", "--allow-insecure-entitlement network.host", "--bootstrap"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=dict(env))
    if proc.returncode != 0:
        raise engine.EngineError(f"docker buildx create: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")


# Where an image built by ghbuild's Dockerfile contract keeps its per-stage stats: the final image
# copies them to STATS_DIR; a compile stage built as the target has them in STAGE_STATS_DIR.
STATS_DIR = "/usr/share/ghbuild/build-stats"
STAGE_STATS_DIR = "/ghbuild/stats"


def _read_stats(env: Mapping[str, str], image_id: str) -> dict[str, dict]:
    """The per-stage stats JSON files inside the built image (no container is started)."""
    import io
    import tarfile

    import docker

    sdk = engine.docker_sdk(env)
    container = sdk.containers.create(image_id, command=["/nonexistent"], entrypoint=[])
    files: dict[str, dict] = {}
    try:
        for folder in (STATS_DIR, STAGE_STATS_DIR):
            try:
                stream, _ = container.get_archive(folder)
            except docker.errors.NotFound:
                continue
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                for member in tar.getmembers():
                    if not (member.isfile() and member.name.endswith(".json")):
                        continue
                    try:
                        data = json.loads(tar.extractfile(member).read().decode("utf-8"))
                    except (ValueError, UnicodeDecodeError, AttributeError):
                        continue
                    files[str(data.get("stage") or Path(member.name).stem)] = data
            if files:
                break
    finally:
        container.remove(force=True)
    return files


def _audit(report: BuildReport, client, job: Job, settings, stages, image_opts, workdir, run_env, redact, env) -> None:
    sdk = engine.docker_sdk(env)
    chain = dockerfile.chain(job.target, stages)
    layers, exact = _stage_audit(sdk, report.image_id, chain)
    if not exact:
        report.warnings.append("layer audit: history does not match the Dockerfile's stages; "
                               "layers are attributed to the target stage")
    sizes = audit.stage_sizes(layers)
    # Stages with a budget that are not in the final image's chain (compile stages): audit their own image,
    # but only those this build built anyway (their image is then a cache hit, never new work).
    built = dockerfile.dependencies(job.target, stages)
    for stage_name in image_opts.stage_budgets:
        if stage_name in sizes or stage_name not in built:
            continue
        sub_job = replace(job, target=stage_name, tags=(), cache_to=(), push=False)
        iid_file = workdir / f"iid-{stage_name}"
        sub_settings = replace(settings, push=False, metadata_file=None, iidfile=iid_file)
        sub = buildcmd.build_command(sub_job, sub_settings)
        rc, _ = engine.run_streaming(sub.argv, {**run_env, **sub.env}, workdir / f"audit-{stage_name}.log",
                                     echo=False, redact=redact)
        if rc == 0 and iid_file.exists():
            sub_layers, _ = _stage_audit(sdk, iid_file.read_text().strip(), dockerfile.chain(stage_name, stages))
            sizes[stage_name] = audit.stage_sizes(sub_layers).get(stage_name, 0)
    report.size = sum(layer.size for layer in layers)
    report.layers = [{"stage": layer.stage, "size": layer.size, "created_by": layer.created_by} for layer in layers]
    for name, size in sizes.items():
        report.stages.setdefault(name, {})["size"] = size
    # The size budget is the shipped image's: it applies to the configured target, not to a --target stage.
    shipped = (job.target or None) == (image_opts.target or None)
    report.budget_failures = audit.check_budgets(job.image, report.size, sizes,
                                                 image_opts.size_budget if shipped else None,
                                                 dict(image_opts.stage_budgets))


def outputs(report: BuildReport) -> None:
    """Step outputs and the job summary (no-ops outside Actions)."""
    gha.set_output("digest", report.digest or "")
    gha.set_output("ref", report.ref or "")
    gha.set_output("image-id", report.image_id or "")
    gha.set_output("report", report.to_dict())
    from ghbuild import render

    gha.add_summary(render.build_summary(report))


def size_text(size: int | None) -> str:
    return format_size(size) if size is not None else "-"
