"""Read BuildKit's plain progress output: per-stage step counts, cache hits and seconds."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_STEP_RE = re.compile(r"^#(\d+) \[(?:(?:linux|windows)/[\w/]+ )?([^\]\s]+) (\d+)/(\d+)\] (.*)$")
_DONE_RE = re.compile(r"^#(\d+) DONE (\d+(?:\.\d+)?)s$")
_CACHED_RE = re.compile(r"^#(\d+) CACHED$")


@dataclass
class StageTiming:
    stage: str
    steps: int = 0
    cached: int = 0
    seconds: float = 0.0
    instructions: list[str] = field(default_factory=list)

    @property
    def fully_cached(self) -> bool:
        return self.steps > 0 and self.cached == self.steps


def stage_timings(log_text: str) -> dict[str, StageTiming]:
    """Per Dockerfile stage: steps seen, steps CACHED, and the seconds of the steps that ran."""
    step_stage: dict[str, str] = {}
    seen: set[str] = set()
    stages: dict[str, StageTiming] = {}
    for line in log_text.splitlines():
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
            if stage:
                stages[stage].cached += 1
        elif match := _DONE_RE.match(line):
            stage = step_stage.get(match.group(1))
            if stage:
                stages[stage].seconds += float(match.group(2))
    return stages
