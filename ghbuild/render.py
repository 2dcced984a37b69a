"""Human-readable renderings (terminal tables, Markdown for the job summary)."""

from __future__ import annotations

from ghbuild.planner import Plan


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def plan_table(plan: Plan) -> str:
    ctx, t = plan.context, plan.trust
    lines = [
        f"event       {ctx.event} on {ctx.ref} @ {ctx.sha[:12]} in {ctx.repository}",
    ]
    if ctx.pull_request is not None:
        fork = "fork" if ctx.is_fork else "same repository"
        lines.append(f"pull request #{ctx.pull_request} from {ctx.head_repository or '(deleted)'}:"
                     f"{ctx.head_ref or '?'} ({fork}) into {ctx.base_ref}")
    lines += [
        f"canonical   {t.canonical_repository}, stable branch {t.stable_branch}",
        f"trusted     {_yes(t.trusted)}: {t.reason}",
        f"scope       {t.scope}  (writes: {t.write_scope or 'nothing'}; reads: {', '.join(t.read_scopes)})",
        f"may write   registry {_yes(t.registry_write)}, GitHub Actions cache {_yes(t.gha_write)}, "
        f"secrets {_yes(t.secrets)}",
    ]
    for note in ctx.notes:
        lines.append(f"note        {note}")
    for warning in plan.warnings:
        lines.append(f"warning     {warning}")
    lines.append("")
    rows = [("JOB", "PLATFORM", "RUNS ON", "PUSH", "TAGS")]
    for job in plan.jobs:
        rows.append((job.id, job.platform, ",".join(job.runs_on), _yes(job.push), " ".join(job.tags) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths)) + "  " + row[-1])
    for job in plan.jobs:
        lines.append("")
        lines.append(f"{job.id}: {job.dockerfile}" + (f" (target {job.target})" if job.target else ""))
        for ref in job.cache_from:
            lines.append(f"  cache from  {ref}")
        for ref in job.cache_to or ("(none)",):
            lines.append(f"  cache to    {ref}")
    if not plan.jobs:
        lines.append("(no jobs: nothing selected)")
    return "\n".join(lines)
