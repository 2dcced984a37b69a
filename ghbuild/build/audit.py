"""Layer audit: which stage each layer of an image comes from, its size, and the budgets."""

from __future__ import annotations

from typing import Any, NamedTuple

from ghbuild.plan.dockerfile import Stage
from ghbuild.sizes import format_size


class Layer(NamedTuple):
    stage: str
    created_by: str
    size: int


def attribute(history_oldest_first: list[dict[str, Any]], chain: list[Stage]) -> tuple[list[Layer], bool]:
    """Split an image's history among the stages of its FROM chain (oldest stage first).

    Each stage adds one history entry per instruction (see dockerfile.stages); what is left at the
    bottom came with the external base image. Returns (layers, exact); `exact` is False when the
    counts do not fit, in which case everything above the base is given to the last stage.
    """
    own = sum(stage.history_entries for stage in chain)
    total = len(history_oldest_first)
    exact = bool(chain) and own <= total
    owners: list[str] = []
    if exact:
        owners = ["base image"] * (total - own)
        for stage in chain:
            owners += [stage.label] * stage.history_entries
    else:
        owners = [chain[-1].label if chain else "image"] * total
    layers = []
    for owner, entry in zip(owners, history_oldest_first, strict=True):
        created_by = " ".join(str(entry.get("CreatedBy") or "").split())
        layers.append(Layer(stage=owner, created_by=created_by.removeprefix("/bin/sh -c ")[:160],
                            size=int(entry.get("Size") or 0)))
    return layers, exact


def stage_sizes(layers: list[Layer]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for layer in layers:
        sizes[layer.stage] = sizes.get(layer.stage, 0) + layer.size
    return sizes


def check_budgets(image: str, total: int, sizes: dict[str, int], size_budget: int | None,
                  stage_budgets: dict[str, int]) -> list[str]:
    """One message per exceeded budget."""
    failures = []
    if size_budget is not None and total > size_budget:
        failures.append(f"image {image} is {format_size(total)}, over its size-budget of {format_size(size_budget)}")
    for stage, budget in sorted(stage_budgets.items()):
        size = sizes.get(stage)
        if size is not None and size > budget:
            failures.append(f"stage {stage} of image {image} adds {format_size(size)}, over its budget of "
                            f"{format_size(budget)}")
    return failures
