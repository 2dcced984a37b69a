"""Human-readable renderings (terminal tables, Markdown for the job summary).

Everything interpolated into Markdown goes through ghbuild.markdown (`md`, `code`).
"""

from __future__ import annotations

import re

from ghbuild.markdown import code, md
from ghbuild.plan import planner
from ghbuild.plan.planner import Plan
from ghbuild.sizes import format_size


def _pie_label(value: object) -> str:
    """A mermaid string has no escapes: keep what cannot end it or the diagram."""
    return re.sub(r"[^A-Za-z0-9 ._/:-]", "_", str(value))[:64]


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _job_rows(plan: Plan):
    """(id, platform, runs-on labels, push yes/no, tags) per planned job: what the terminal table and the job
    summary list."""
    for job in plan.jobs:
        if job.identity_prefix:   # found or built by ensure-base under its content identity, not per commit
            refs = planner.base_refs(plan, job, "IDENTITY") if job.staging_repository else None
            tags = [f"{refs.write or refs.read[0]} (ensure-base)"] if refs else []
            push = _yes(bool(refs and refs.write))
        else:
            tags, push = list(job.tags), _yes(job.push)
        yield job.id, job.platform, list(job.runs_on), push, tags


def plan_summary(plan: Plan) -> str:
    """Markdown for the plan job's summary: the trust decision and why, what the run may write, the jobs."""
    ctx, t = plan.context, plan.trust
    lines = [f"### ghbuild plan: {md(ctx.event)} on {code(ctx.ref)} @ {code(ctx.sha[:12])}", ""]
    if ctx.pull_request is not None:
        fork = "a fork" if ctx.is_fork else "the same repository"
        lines += [f"Pull request #{ctx.pull_request} from {code(ctx.head_repository or '(deleted)')} "
                  f"({fork}) into {code(ctx.base_ref)}.", ""]
    lines += ["| | |", "|---|---|",
              f"| trusted | **{_yes(t.trusted)}**: {md(t.reason)} |",
              f"| canonical | {code(t.canonical_repository)}, stable branch {code(t.stable_branch)} |",
              f"| cache scope | {code(t.scope)}; writes {code(t.write_scope) if t.write_scope else 'nothing'}, "
              f"reads {', '.join(code(s) for s in t.read_scopes) or '-'} |",
              f"| may push to registries | {_yes(t.registry_write)} |",
              f"| may write the GitHub Actions cache | {_yes(t.gha_write)} |",
              f"| gets secrets | {_yes(t.secrets)} |", ""]
    notes = [*ctx.notes, *plan.warnings]
    if notes:
        lines += [f"- {md(note)}" for note in notes] + [""]
    if not plan.jobs:
        return "\n".join([*lines, "No jobs: nothing selected.", ""])
    lines += ["| job | platform | runs on | push | tags |", "|---|---|---|---|---|"]
    for job_id, platform, runs_on, push, tags in _job_rows(plan):
        lines.append(f"| {md(job_id)} | {md(platform)} | {', '.join(code(r) for r in runs_on)} | {push} "
                     f"| {'<br>'.join(code(tag) for tag in tags) or '-'} |")
    return "\n".join(lines) + "\n"


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
    rows += [(job_id, platform, ",".join(runs_on), push, " ".join(tags) or "-")
             for job_id, platform, runs_on, push, tags in _job_rows(plan)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:   # every cell padded to its column but the last
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)) + "  " + row[-1])
    for job in plan.jobs:
        lines.append("")
        lines.append(f"{job.id}: {job.dockerfile}" + (f" (target {job.target})" if job.target else "")
                     + (f", FROM {job.base} by digest" if job.base else "")
                     + (", content-addressed" if job.identity_prefix else ""))
        for ref in job.cache_from:
            lines.append(f"  cache from  {ref}")
        for ref in job.cache_to or ("(none)",):
            lines.append(f"  cache to    {ref}")
        for mount in job.cache_mounts:
            lines.append(f"  mount       {mount.id}: from {', '.join(mount.read) or '-'}; to {mount.write or '(none)'}")
    if not plan.jobs:
        lines.append("(no jobs: nothing selected)")
    return "\n".join(lines)


def _rate(rate) -> str:
    return f"{rate * 100:.1f} %" if isinstance(rate, (int, float)) else "-"


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def digests_summary(title: str, planned: list[dict], digests: dict[str, dict]) -> str:
    """The summary job's table: every planned job, with the ref it pushed or "not pushed"."""
    lines = [f"### {md(title)}", "", "| job | platform | pushed |", "|---|---|---|"]
    ids = [job["id"] for job in planned] + [i for i in digests if i not in {job["id"] for job in planned}]
    platforms = {job["id"]: job.get("platform", "") for job in planned}
    for job_id in ids:
        record = digests.get(job_id)
        pushed = code(record["ref"]) if record and record.get("ref") else "not pushed"
        lines.append(f"| {md(job_id)} | {md(platforms.get(job_id) or (record or {}).get('platform', ''))} | {pushed} |")
    return "\n".join(lines) + "\n"


def ensure_base_summary(result) -> str:
    """Markdown for the job summary of `ensure-base`: found or built, where, and what the identity hashed."""
    lines = [f"### ghbuild: base {md(result.image)} ({md(result.arch)})", "", "| | |", "|---|---|",
             f"| identity | {code(result.identity)} |"]
    if result.dry_run:
        outcome = "would build and push " + md(result.found_at) if result.built else "present"
        lines.append(f"| outcome | dry run: {outcome} |")
    else:
        lines.append(f"| outcome | {'built and pushed' if result.built else 'present: build skipped'} |")
    lines.append(f"| ref | {code(result.ref or '-')} |")
    lines.append(f"| looked up | {', '.join(code(r) for r in result.looked_up)} |")
    detail = result.identity_detail or {}
    if detail:
        lines += ["", "<details><summary>What the identity hashes</summary>", "",
                  f"- version {code(detail.get('version'))}, platform {code(detail.get('platform'))}",
                  f"- stages: {', '.join(md(stage) for stage in detail.get('stages', []))}",
                  f"- {len(detail.get('inputs', []))} input files"]
        lines += [f"- FROM {code(ref)} = {code(digest)}" for ref, digest in detail.get("bases", {}).items()]
        lines += [f"- build arg {code(k)}" for k in detail.get("build_args", {})]
        lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def _actions_cache(cache: dict) -> str:
    """The repository's GitHub Actions cache against its budget (ghbuild.actions_cache.budget's to_dict)."""
    if cache.get("size") is None:
        return f"not read: {cache.get('note')}"
    count = cache.get("entries")
    return (f"{format_size(cache['size'])} of {format_size(cache['budget'])} ({_rate(cache.get('share'))}), "
            f"{count} {'entry' if count == 1 else 'entries'}")


def _mount_step(step: dict | None) -> str:
    """`restored 12.3 MB (4.1 MB compressed) in 0.8 s`, or the step's status."""
    step = step or {}
    status = str(step.get("status") or "-")
    if status not in ("restored", "saved", "unchanged"):
        return status
    dropped = (f", {_count(step.get('dropped_files'))} oldest files left out "
               f"({format_size(_count(step.get('dropped_bytes')))})" if step.get("dropped_files") else "")
    return (f"{status} {format_size(_count(step.get('bytes')))} ({format_size(_count(step.get('blob_bytes')))} "
            f"compressed) in {step.get('seconds', 0)} s{dropped}")


def _mounts_summary(mounts: list[dict]) -> list[str]:
    """The job summary's table of carried cache mounts (ghbuild.build.cachemounts' results)."""
    if not mounts:
        return []
    lines = ["#### Cache mounts", "", "| mount | restored | saved |", "|---|---|---|"]
    for mount in mounts:
        lines.append(f"| {code(mount.get('id'))} | {md(_mount_step(mount.get('restored')))} "
                     f"| {md(_mount_step(mount.get('saved')))} |")
    return [*lines, ""]


def build_summary(report) -> str:
    """Markdown for the job summary: digest, caches, sccache per stage and language, layers, timings."""
    lines = [f"### ghbuild: {md(report.image)} ({md(report.arch)})", ""]
    lines.append("| | |")
    lines.append("|---|---|")
    lines.append(f"| image | {code(report.ref or report.image_id or '-')} |")
    lines.append(f"| pushed | {'yes' if report.pushed else 'no'} |")
    lines.append(f"| backend | {md(report.backend)} |")
    if getattr(report, "builder", None):
        lines.append(f"| builder | {md(report.builder)} |")
    if report.size is not None:
        lines.append(f"| size | {format_size(report.size)} |")
    for key, value in report.timings.items():
        lines.append(f"| {key.replace('_', ' ')} | {value:.1f} s |")
    sc = report.sccache or {}
    lines.append(f"| sccache | {md(sc.get('mode', '-'))}: {md(sc.get('hits', 0))} hits, "
                 f"{md(sc.get('misses', 0))} misses ({_rate(sc.get('hit_rate'))}) |")
    cache = getattr(report, "actions_cache", None)
    if cache:
        over = " **over cache.warn-share**" if cache.get("over") else ""
        lines.append(f"| GitHub Actions cache | {md(_actions_cache(cache))}{over} |")
    lines.append("")
    if report.cache_from or report.cache_to:
        lines += ["<details><summary>Layer caches</summary>", ""]
        lines += [f"- from {code(ref)}" for ref in report.cache_from]
        lines += [f"- to {code(ref)}" for ref in report.cache_to]
        lines += ["", "</details>", ""]
    lines += _mounts_summary(getattr(report, "cache_mounts", None) or [])
    if report.skipped or report.warnings:
        lines += ["**Not applied / warnings**", ""]
        lines += [f"- {md(line)}" for line in [*report.skipped, *report.warnings]]
        lines.append("")
    if sc.get("stages"):
        lines += ["#### sccache per stage", "",
                  "| stage | mode | hits | misses | rate | by language | not cacheable | write errors |",
                  "|---|---|---|---|---|---|---|---|"]
        for name, st in sc["stages"].items():
            langs = ", ".join(f"{md(lang)} {md(n)}/{md(_count(n) + _count(st['misses_by_language'].get(lang, 0)))}"
                              for lang, n in st["hits_by_language"].items()) or "-"
            note = " (layer cache: not rebuilt)" if st.get("from_layer_cache") else ""
            lines.append(f"| {md(name)}{note} | {md(st['mode'] or '-')} | {md(st['hits'])} | {md(st['misses'])} "
                         f"| {_rate(st['hit_rate'])} | {langs} | {md(st['not_cacheable'])} "
                         f"| {md(st['write_errors'])} |")
        lines.append("")
    if report.stages:
        lines += ["#### Stages", "", "| stage | steps | cached | seconds | own layers |", "|---|---|---|---|---|"]
        for name, st in report.stages.items():
            size = format_size(st["size"]) if "size" in st else "-"
            lines.append(f"| {md(name)} | {md(st.get('steps', '-'))} | {md(st.get('cached', '-'))} "
                         f"| {md(st.get('seconds', '-'))} | {size} |")
        lines.append("")
        sized = {name: st["size"] for name, st in report.stages.items() if st.get("size")}
        if sized:
            title = f"Image size by stage ({_pie_label(report.image)}, {_pie_label(report.arch)})"
            lines += ["```mermaid", f"pie title {title}"]
            lines += [f'    "{_pie_label(name)}" : {round(size / 1e6, 2)}' for name, size in sized.items()
                      if isinstance(size, (int, float))]
            lines += ["```", ""]
    if report.budget_failures:
        lines += ["**Over budget**", ""] + [f"- {md(f)}" for f in report.budget_failures] + [""]
    return "\n".join(lines)


def build_text(report) -> str:
    """A few lines for the terminal after a build."""
    sc = report.sccache or {}
    lines = [f"ghbuild: built {report.image}/{report.arch} ({report.backend})",
             f"  image    {report.ref or report.image_id}",
             *([f"  builder  {report.builder}"] if getattr(report, "builder", None) else []),
             f"  sccache  {sc.get('mode')}: {sc.get('hits', 0)} hits, {sc.get('misses', 0)} misses "
             f"({_rate(sc.get('hit_rate'))})"]
    for name, st in (sc.get("stages") or {}).items():
        lines.append(f"    {name:<10} {st['mode'] or '-':<10} hits {st['hits']:>4}  misses {st['misses']:>4}  "
                     f"{st['seconds']:>5}s" + ("  (layer cache)" if st.get("from_layer_cache") else ""))
    if report.size is not None:
        lines.append(f"  size     {format_size(report.size)}")
    timings = getattr(report, "timings", None) or {}
    if timings:     # the engine's own time (the build subprocess), for the log
        lines.append("  engine   " + ", ".join(f"{key.removesuffix('_seconds')} {value:.2f} s"
                                               for key, value in timings.items()))
    steps = {name: st for name, st in report.stages.items() if st.get("steps")}
    if steps:       # what the layer cache served, stage by stage (BuildKit's CACHED steps)
        lines.append("  layers   " + ", ".join(f"{name} {st.get('cached', 0)}/{st['steps']} cached"
                                               for name, st in steps.items()))
    for name, st in report.stages.items():
        if "size" in st:
            lines.append(f"    {name:<12} {format_size(st['size'])}")
    for mount in getattr(report, "cache_mounts", None) or []:
        lines.append(f"  mount    {mount.get('id')}: {_mount_step(mount.get('restored'))}; "
                     f"{_mount_step(mount.get('saved'))}")
    for line in [*report.skipped, *report.warnings, *report.budget_failures]:
        lines.append(f"  note     {line}")
    return "\n".join(lines)
