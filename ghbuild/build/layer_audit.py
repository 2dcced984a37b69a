"""The layer audit of a build: layer sizes per stage from the built image's history, and the budgets.
Stages with a budget outside the final image's chain (compile stages) are built as targets beside the main
build (`StageAudit`) and audited from their own image."""

from __future__ import annotations

from collections.abc import Mapping

from ghbuild.build import audit, buildcmd, engine, images
from ghbuild.build.buildrun import BuildRun, local_image
from ghbuild.build.report import BuildReport
from ghbuild.plan import dockerfile


def audit_layers(report: BuildReport, ctx: BuildRun, stage_audits: Mapping[str, StageAudit]) -> None:
    """Layer sizes per stage from the image history, and the budgets. Stages with a budget outside the
    final image's chain (compile stages) are audited from their own image (`stage_audits`)."""
    if not report.image_id:
        return
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
        if stage_audit.leftover:
            report.warnings.append(f"layer audit: stage {stage_name}'s image, built only to be measured, could "
                                   f"not be kept as {stage_audit.local_tag(ctx)} (the previous one removed): "
                                   f"{stage_audit.leftover}")
    report.size = sum(layer.size for layer in layers)
    report.layers = [{"stage": layer.stage, "size": layer.size, "created_by": layer.created_by} for layer in layers]
    for name, size in sizes.items():
        report.stages.setdefault(name, {})["size"] = size
    # The size budget is the shipped image's: it applies to the configured target, not to a --target stage.
    shipped = (ctx.job.target or None) == (ctx.image.target or None)
    report.budget_failures = audit.check_budgets(ctx.job.image, report.size, sizes,
                                                 ctx.image.size_budget if shipped else None,
                                                 dict(ctx.image.stage_budgets))


AUDIT_REPOSITORY = "ghbuild.local/audit"


class StageAudit:
    """One stage built as the target, for the own layers of that stage. Only stages the main build builds
    (outside the final image's chain): their steps are shared with it or cache hits, the stage costs its export."""

    def __init__(self, ctx: BuildRun, stage_name: str, uncompressed: bool) -> None:
        self.stage_name = stage_name
        self.leftover: str | None = None    # why the stage's previous image could not be tagged over or removed
        sub_job = ctx.job._replace(target=stage_name, tags=(), cache_to=(), push=False)
        self.iid_file = ctx.workdir / f"iid-{stage_name}"
        self.metadata = ctx.workdir / f"metadata-{stage_name}.json"
        sub = buildcmd.build_command(sub_job, ctx.settings._replace(push=False, metadata_file=self.metadata,
                                                                    iidfile=self.iid_file, uncompressed=uncompressed))
        self.process = engine.StreamingProcess(sub.argv, {**ctx.run_env, **sub.env},
                                                      ctx.workdir / f"audit-{stage_name}.log", redact=ctx.redact)

    def stop(self) -> None:
        self.process.stop()

    def local_tag(self, ctx: BuildRun) -> str:
        """The engine-local tag that keeps the latest image of this stage (never pushed: no registry has
        that name), so the next build finds its unchanged layers (images.keep_latest)."""
        return f"{AUDIT_REPOSITORY}/{ctx.job.image}:{self.stage_name}-{ctx.job.arch}"

    def size(self, ctx: BuildRun) -> int | None:
        """The stage's own layers' bytes, once its build ended; None when that build failed."""
        rc, _ = self.process.wait()
        image_id = local_image(ctx, self.iid_file, self.metadata) if rc == 0 else None
        if image_id is None:
            return None
        try:
            history = images.image_history(ctx.env, image_id)
        finally:
            self.leftover = images.keep_latest(ctx.env, image_id, self.local_tag(ctx), ctx.settings.docker)
        layers, _ = audit.attribute(history, dockerfile.chain(self.stage_name, ctx.stages))
        return audit.stage_sizes(layers).get(self.stage_name, 0)


def start_stage_audits(ctx: BuildRun, uncompressed: bool) -> dict[str, StageAudit]:
    """The stage builds the audit needs, started side by side: stages with a budget that the main build builds
    but the final image's chain does not contain. `uncompressed`: their layers are only read back for their
    sizes, and gzip of a toolchain layer that no export compressed takes tens of seconds."""
    chain = {stage.label for stage in dockerfile.chain(ctx.job.target, ctx.stages)}
    built = dockerfile.dependencies(ctx.job.target, ctx.stages)
    return {name: StageAudit(ctx, name, uncompressed)
            for name in ctx.image.stage_budgets if name in built and name not in chain}
