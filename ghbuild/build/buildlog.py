"""Read BuildKit's plain progress output: per-stage step counts, cache hits and seconds."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from typing import Any

_STEP_RE = re.compile(r"^#(\d+) \[(?:(?:linux|windows)/[\w/]+ )?([^\]\s]+) (\d+)/(\d+)\] (.*)$")
_DONE_RE = re.compile(r"^#(\d+) DONE (\d+(?:\.\d+)?)s$")
_CACHED_RE = re.compile(r"^#(\d+) CACHED$")


class StageTiming(SimpleNamespace):
    """One stage's steps, cache hits and seconds, counted as the log is read."""

    stage: str
    steps: int
    cached: int
    seconds: float
    instructions: list[str]

    def __init__(self, stage: str, steps: int = 0, cached: int = 0, seconds: float = 0.0,
                 instructions: list[str] | None = None) -> None:
        super().__init__(stage=stage, steps=steps, cached=cached, seconds=seconds,
                         instructions=instructions if instructions is not None else [])

    @property
    def fully_cached(self) -> bool:
        return self.steps > 0 and self.cached == self.steps


def stage_timings(log_text: str) -> dict[str, StageTiming]:
    """Per Dockerfile stage: steps seen, steps CACHED, and the seconds of the steps that ran."""
    step_stage: dict[str, str] = {}
    seen: set[str] = set()
    cached: set[str] = set()     # BuildKit may print `#N CACHED` more than once for one step: count it once
    stages: dict[str, StageTiming] = {}
    for line in log_text.split("\n"):
        line = line.rstrip()
        if match := _STEP_RE.match(line):
            step, stage, instruction = match.group(1), match.group(2), match.group(5)
            if stage == "internal":
                continue
            step_stage[step] = stage
            timing = stages.setdefault(stage, StageTiming(stage))
            if step not in seen:
                seen.add(step)
                timing.steps += 1
                timing.instructions.append(instruction[:120])
        elif match := _CACHED_RE.match(line):
            stage = step_stage.get(match.group(1))
            if stage and match.group(1) not in cached:
                cached.add(match.group(1))
                stages[stage].cached += 1
        elif match := _DONE_RE.match(line):
            stage = step_stage.get(match.group(1))
            if stage:
                stages[stage].seconds += float(match.group(2))
    return stages


# The sccache wrapper (docker/sccache-helper/ghbuild-sccache) prints one stats line per wrapped step, and
# its command line names the stage: `ghbuild-sccache run STAGE -- ...`.
_WRAPPER_RUN_RE = re.compile(r"ghbuild-sccache run ([A-Za-z0-9._-]+) --")
_WRAPPER_STATS_RE = re.compile(r"^#(\d+) (?:\d+(?:\.\d+)? )?ghbuild-sccache-stats (\{.*\})$")
# Anything the wrapper says when it runs ("ghbuild-sccache: STAGE: mode ..." first of all). A wrapped step that
# downloaded a layer and ended DONE without a word from the wrapper did not run: its layer came from an imported
# cache, which BuildKit shows as the layer's download and DONE instead of CACHED.
_WRAPPER_SAID_RE = re.compile(r"^#(\d+) (?:\d+(?:\.\d+)? )?ghbuild-sccache[:-]")
_DOWNLOAD_RE = re.compile(r"^#(\d+) (?:extracting )?sha256:[0-9a-f]{64} ")


class SccacheRuns(SimpleNamespace):
    """What the sccache wrapper's steps left in a build log."""

    stats: dict[str, dict[str, Any]]      # stage -> the wrapper's stats (ran in this build)
    cached: set[str]            # stages whose wrapped step came from the layer cache
    unreadable: set[str]        # wrapped steps that ran but left no readable stats

    def __init__(self, stats: dict[str, dict[str, Any]] | None = None, cached: set[str] | None = None,
                 unreadable: set[str] | None = None) -> None:
        super().__init__(stats=stats if stats is not None else {}, cached=cached if cached is not None else set(),
                         unreadable=unreadable if unreadable is not None else set())


_MODES = ("read-write", "read-only", "anonymous", "local", "off")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def _text_problem(value: Any, where: str) -> str | None:
    """Strings anywhere in `value` are one line of at most 512 characters: what ghbuild prints of them later
    (reports, annotations, the summary) can then never start a line of its own, a workflow command's."""
    if isinstance(value, str):
        return f"{where}: a control character or more than 512 characters" if (
            len(value) > 512 or _CONTROL_RE.search(value)) else None
    if isinstance(value, dict):
        return next((p for k, v in value.items() for p in (_text_problem(k, where), _text_problem(v, f"{where}.{k}"))
                     if p), None)
    if isinstance(value, list):
        return next((p for item in value if (p := _text_problem(item, where))), None)
    return None


# The wrapper's stats line nests four levels (sccache.stats.cache_hits.counts); the checks below and the adding
# up of a stage's steps recurse, so a line nested deeper, which any step can print, is refused before them.
_MAX_NESTING = 8


def _nesting(value: Any) -> int:
    """How deep objects and arrays nest in `value`, counted without recursion."""
    deepest, level = 0, [(value, 0)]
    while level:
        item, depth = level.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth + 1)
            if depth < _MAX_NESTING:
                level.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def wrapper_stats_problem(data: Any, stage: str) -> str | None:
    """What the sccache wrapper would never print in its stats line for `stage`, or None: the fields and
    types docker/sccache-helper/ghbuild-sccache writes, modes it knows, counts that are numbers."""
    if not isinstance(data, dict):
        return "not a JSON object"
    if _nesting(data) > _MAX_NESTING:
        return f"nested more than {_MAX_NESTING} levels deep"
    if data.get("stage") != stage:
        return f"stage {data.get('stage')!r}, not the step's {stage!r}"
    for key in ("mode", "requested_mode"):
        if data.get(key) not in _MODES:
            return f"{key} {data.get(key)!r} is not a mode"
    fallbacks = data.get("fallbacks", "")
    if not isinstance(fallbacks, str) or any(f not in _MODES for f in fallbacks.split(",") if f):
        return "fallbacks is not a list of modes"
    for key in ("version", "started", "finished", "exit"):
        if key in data and (not isinstance(data[key], int) or isinstance(data[key], bool)):
            return f"{key} is not a number"
    sccache = data.get("sccache")
    if sccache is not None and not isinstance(sccache, dict):
        return "sccache is not an object"
    stats = (sccache or {}).get("stats") or {}
    if not isinstance(stats, dict):
        return "sccache.stats is not an object"
    for key in ("cache_hits", "cache_misses"):
        if not isinstance(stats.get(key) or {}, dict):
            return f"sccache.stats.{key} is not an object"
        counts = (stats.get(key) or {}).get("counts") or {}
        if not isinstance(counts, dict) or not all(_is_count(n) for n in counts.values()):
            return f"sccache.stats.{key}.counts are not numbers"
    not_cached = stats.get("not_cached") or {}
    if not isinstance(not_cached, dict) or not all(_is_count(n) for n in not_cached.values()):
        return "sccache.stats.not_cached is not counts by reason"
    for key in _STATS_COUNTS:
        if key in stats and not _is_count(stats[key]):
            return f"sccache.stats.{key} is not a number"
    return _text_problem(data, "stats")


# The counts of sccache's stats that ghbuild reports.
_STATS_COUNTS = ("compile_requests", "requests_not_compile", "requests_not_cacheable", "cache_write_errors",
                 "cache_read_errors")


def _is_count(value: Any) -> bool:
    """A count as sccache prints one: a whole number, not negative, below 2**53 (what any JSON reader keeps
    exact; a huge one would not even print)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 53


def _added(earlier: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """Two steps' sccache stats as one: counts added up (nested ones too), anything else the later step's."""
    out = {**earlier, **later}
    for key in earlier.keys() & later.keys():
        a, b = earlier[key], later[key]
        if _is_count(a) and _is_count(b):
            out[key] = a + b
        elif isinstance(a, dict) and isinstance(b, dict):
            out[key] = _added(a, b)
    return out


def _stage_stats(earlier: dict[str, Any], later: dict[str, Any]) -> dict[str, Any]:
    """The stats of a stage with more than one wrapped step (init wraps each compiling RUN with the stage's
    name): counts added up, the lowest mode any step ran in, every fallback, the time of both."""
    modes = [m for m in (earlier.get("mode"), later.get("mode")) if m in _MODES]
    # The time inside wrapped steps only, not the unwrapped steps between them: the stage "finishes" the later
    # step's duration after the earlier one did (the report reads only finished - started).
    spans = [(step["started"], step["finished"]) for step in (earlier, later)
             if _is_count(step.get("started")) and _is_count(step.get("finished"))]
    fallbacks = [f for step in (earlier, later) for f in str(step.get("fallbacks") or "").split(",") if f]
    sccache = {**(earlier.get("sccache") or {}), **(later.get("sccache") or {})}
    sccache["stats"] = _added((earlier.get("sccache") or {}).get("stats") or {},
                              (later.get("sccache") or {}).get("stats") or {})
    return {**later, "mode": max(modes, key=_MODES.index) if modes else later.get("mode"),
            "fallbacks": ",".join(dict.fromkeys(fallbacks)), "sccache": sccache,
            **({"started": spans[0][0], "finished": spans[0][1] + sum(max(0, end - start) for start, end in spans[1:])}
               if spans else {})}


def sccache_runs(log_text: str) -> SccacheRuns:
    """Per-stage sccache stats from the wrapper's lines in BuildKit's plain progress output, and the
    wrapped steps the layer cache served (they ran in an earlier build: no stats, nothing compiled). A stage's
    wrapped steps add up; within a step the last line counts (the wrapper prints its own after the command)."""
    step_wrapped: dict[str, str] = {}
    step_stats: dict[str, dict[str, Any] | None] = {}     # step -> its stats, None: unreadable
    said: set[str] = set()      # wrapped steps the wrapper printed anything in
    downloaded: set[str] = set()
    done: set[str] = set()
    runs = SccacheRuns()
    for line in log_text.split("\n"):
        line = line.rstrip()
        if match := _STEP_RE.match(line):
            if wrapped := _WRAPPER_RUN_RE.search(match.group(5)):
                step_wrapped[match.group(1)] = wrapped.group(1)
        elif match := _CACHED_RE.match(line):
            if match.group(1) in step_wrapped:
                runs.cached.add(step_wrapped[match.group(1)])
        elif (match := _DONE_RE.match(line)) and match.group(1) in step_wrapped:
            done.add(match.group(1))
        elif match := _DOWNLOAD_RE.match(line):
            downloaded.add(match.group(1))
        elif (match := _WRAPPER_SAID_RE.match(line)) and match.group(1) in step_wrapped:
            # Only the wrapper's own lines from the wrapper's own step: any RUN step can print them.
            step = match.group(1)
            said.add(step)
            if stats := _WRAPPER_STATS_RE.match(line):
                try:
                    data = json.loads(stats.group(2))
                except (ValueError, RecursionError):     # the decoder's own limit on nesting
                    data = None
                step_stats[step] = data if wrapper_stats_problem(data, step_wrapped[step]) is None else None
    from_cache = (done & downloaded) - said
    runs.cached.update(step_wrapped[step] for step in from_cache)
    for step in sorted(set(step_stats) | (done - from_cache), key=int):
        stage, data = step_wrapped[step], step_stats.get(step)
        if data is None:
            runs.unreadable.add(stage)
        else:
            runs.stats[stage] = _stage_stats(runs.stats[stage], data) if stage in runs.stats else data
    runs.cached -= set(runs.stats)
    return runs


_ERROR_RE = re.compile(r"^#(\d+) ERROR\b")
_CACHE_MOUNT_RE = re.compile(r"--mount=(\S*)")


def _cache_mount_id(spec: str) -> str | None:
    """The id of a `--mount=` spec when it is a cache mount (BuildKit's default id is its target)."""
    fields = dict(part.partition("=")[::2] for part in spec.split(","))
    if fields.get("type") != "cache":
        return None
    return fields.get("id") or fields.get("target") or fields.get("dst") or fields.get("destination")


def cache_mounts_used(log_text: str) -> set[str]:
    """The ids of the cache mounts that a step which ran in this build mounted (a CACHED step mounted nothing:
    BuildKit took its result from the layer cache). Used to skip saving a mount no step could have changed;
    a step that prints fake progress lines can at most make a save happen or be skipped."""
    mounted: dict[str, set[str]] = {}
    ran: set[str] = set()
    cached: set[str] = set()
    for line in log_text.split("\n"):
        line = line.rstrip()
        if match := _STEP_RE.match(line):
            ids = {i for spec in _CACHE_MOUNT_RE.findall(match.group(5)) if (i := _cache_mount_id(spec))}
            if ids:
                mounted.setdefault(match.group(1), set()).update(ids)
        elif match := _CACHED_RE.match(line):
            cached.add(match.group(1))
        elif match := (_DONE_RE.match(line) or _ERROR_RE.match(line)):
            ran.add(match.group(1))
    return {i for step, ids in mounted.items() if step in ran and step not in cached for i in ids}
