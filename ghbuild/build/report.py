"""What one build did (`BuildReport`), filled in as it runs: sccache's stats per stage from the build log,
the budgets, and the metadata output in docker/build-push-action's shape. Pure: `ghbuild build --json`, the
job summary and the tests read it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ghbuild.build import buildlog, sccache
from ghbuild.errors import BudgetError


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
    actions_cache: dict[str, Any] | None   # the repository's GitHub Actions cache against cache.budget
    cache_mounts: list[dict[str, Any]]     # per carried cache mount: restored and saved (bytes, seconds, ref)

    def __init__(self, image: str, arch: str, platform: str, backend: str, target: str | None, command: str,
                 **fields: Any) -> None:
        super().__init__(image=image, arch=arch, platform=platform, backend=backend, target=target, command=command,
                         builder=None, config_digest=None, ref=None, digest=None, image_id=None, tags=[], pushed=False,
                         cache_from=[], cache_to=[], skipped=[], warnings=[], sccache={}, layers=[], stages={},
                         size=None, timings={}, budget_failures=[], actions_cache=None,
                         cache_mounts=[])
        unknown = sorted(set(fields) - set(vars(self)))
        if unknown:
            raise TypeError(f"BuildReport: unknown fields {', '.join(unknown)}")
        self.__dict__.update(fields)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


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
            "not_compile": stats.get("requests_not_compile", 0),
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
                        "not_compile": 0, "seconds": 0, "from_layer_cache": True, "cache_location": None}
    return {"mode": decision.mode, "reason": decision.reason, "hits": hits, "misses": misses,
            "hit_rate": round(hits / (hits + misses), 4) if hits + misses else None, "stages": stages}


def add_sccache_stats(report: BuildReport, decision: sccache.SccacheDecision, log_text: str) -> None:
    """sccache's stats per stage from the build log, and a warning per stage that fell back or printed none."""
    runs = buildlog.sccache_runs(log_text)
    report.sccache = summarize_sccache(decision, runs)
    for name, stage in report.sccache["stages"].items():
        if stage["fallbacks"]:
            report.warnings.append(f"sccache in stage {name}: fell back from {', '.join(stage['fallbacks'])} "
                                   f"to {stage['mode']}")
        unused = _unused(stage)
        if unused:
            report.warnings.append(f"sccache in stage {name}: {unused}")
    for name in sorted(runs.unreadable):
        report.warnings.append(f"sccache in stage {name}: the step ran but left no readable stats line "
                               "in the build log (ghbuild-sccache-stats)")


def _unused(stage: dict[str, Any]) -> str | None:
    """Why a stage that ran with sccache on cached nothing, when that is the wrapped command's doing: the
    wrapper only exports launchers, and sccache caches only compiles of one source file to an object."""
    if stage["from_layer_cache"] or stage["mode"] in (None, "off") or stage["hits"] + stage["misses"]:
        return None
    if not stage["compile_requests"]:
        return ("no compiler call reached sccache. CMake and Cargo use it by themselves; a compiler or a Makefile "
                'called directly needs it in front: "$GHBUILD_SCCACHE_LAUNCHER gcc -c ...", make '
                'CC="$GHBUILD_SCCACHE_LAUNCHER gcc" (docs/building.md: Your Dockerfile)')
    if stage["not_cacheable"]:
        most = sorted(stage["not_cached_reasons"].items(), key=lambda item: -item[1])[:5]
        reasons = ", ".join(f"{why} {count}" for why, count in most)
        return f"{stage['not_cacheable']} compile(s) sccache cannot cache" + (f" ({reasons})" if reasons else "")
    if stage["not_compile"]:
        return (f"{stage['not_compile']} call(s) reached sccache and none was a compile it caches: links, "
                "version probes, or a compile and link in one command (sccache caches `-c` compiles of one "
                "source file)")
    return None


def check_budgets(report: BuildReport) -> None:
    """Fail (exit 11) when the audit found the image or a stage over its budget."""
    if report.budget_failures:
        raise BudgetError("; ".join(report.budget_failures))


def buildx_metadata(digest: str | None, config_digest: str | None, names: list[str]) -> dict[str, str]:
    """The `metadata` output in the shape docker/build-push-action gives (buildx's metadata file), so a
    step written for that action reads it unchanged: pushed manifest digest, image config digest, names."""
    data = {"containerimage.digest": digest, "containerimage.config.digest": config_digest,
            "image.name": ",".join(names)}
    return {key: value for key, value in data.items() if value}
