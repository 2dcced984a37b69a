#!/usr/bin/env python3
"""The sccache wrapper's cost: a pruned-builder rebuild through `ghbuild-sccache run` against the same
Dockerfile wired to sccache by hand, warm S3 cache, in one run.

The hand-wired Dockerfile is docker/Dockerfile.cpu with each wrapped command rewritten the way a Dockerfile
did it before the helper: the same helper mount (for the same sccache binary), the same secret, but in the
step itself `set -a; . /run/secrets/ghbuild_sccache`, a server on a fixed port, the launcher variables
exported by hand, `--show-stats`, `--stop-server`. Everything else, sources and compiler flags included, is
identical, so both variants hit the same S3 objects.

Steps, against the local engine, registry and S3 from `make infra-up`, the registry layer cache off:
(1) warm-up: one wrapper build into a fresh S3 key prefix (every compile a miss, stored); then `--rounds`
rounds of (2) and (3) in alternating order, each after `docker builder prune -af` (layers and cache mounts
gone, as on a fresh runner): (2) through the wrapper, (3) wired by hand. Prints the compile stages' seconds
(cpp + rust RUN steps, BuildKit's own step timings) of each, and the ratio of the medians.
Goal: wrapper <= 1.05x the hand-wired build, every compile of both a hit.

Usage: make infra-up && .venv/bin/python bench/sccache_wrapper.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sccache_rebuild import COMPILE_STAGES, ROOT, build, compile_seconds, local_env

_WRAPPED = re.compile(r"/opt/ghbuild/bin/ghbuild-sccache run (\S+) -- sh -euc ' \\\n(.*?)'\n", re.S)
_PORTS = {"cpp": 4226, "rust": 4227}
SCCACHE = "/opt/ghbuild/bin/sccache"


def by_hand(dockerfile: str) -> str:
    """The Dockerfile with each wrapped step wired to sccache by hand instead."""
    def wire(match: re.Match) -> str:
        stage, body = match.group(1), match.group(2)
        launchers = " ".join(f"CMAKE_{lang}_COMPILER_LAUNCHER={SCCACHE}" for lang in ("C", "CXX", "CUDA", "HIP"))
        return (f"sh -euc 'set -a; . /run/secrets/ghbuild_sccache; set +a; \\\n"
                f"        export SCCACHE_SERVER_PORT={_PORTS[stage]} SCCACHE_IDLE_TIMEOUT=0 {launchers} "
                f"RUSTC_WRAPPER={SCCACHE} CARGO_INCREMENTAL=0; \\\n"
                f"        {SCCACHE} --start-server; \\\n{body}; \\\n"
                f"        printf \"ghbuild-sccache-stats {{\\\"stage\\\":\\\"{stage}\\\","
                "\\\"mode\\\":\\\"$GHBUILD_SCCACHE_MODE\\\","
                f"\\\"sccache\\\":%s}}\\n\" \"$({SCCACHE} --show-stats --stats-format=json)\" >&2; \\\n"
                f"        {SCCACHE} --stop-server'\n")

    wired, count = _WRAPPED.subn(wire, dockerfile)
    if count != len(COMPILE_STAGES):
        sys.exit(f"bench: expected {len(COMPILE_STAGES)} wrapped steps in the Dockerfile, found {count}")
    return wired


def check_hits(name: str, report: dict) -> None:
    sc = report["sccache"]
    stages = sc["stages"]
    if set(stages) != set(COMPILE_STAGES) or any(s["from_layer_cache"] for s in stages.values()):
        sys.exit(f"bench: {name}: compile stages did not all run ({stages.keys()}); the comparison would be void")
    if sc["misses"] or not sc["hits"]:
        sys.exit(f"bench: {name}: {sc['hits']} hits / {sc['misses']} misses; both variants must be all hits")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    env = local_env()
    env["GHBUILD_SCCACHE_KEY_PREFIX"] = f"bench-wrapper-{uuid.uuid4().hex[:12]}"
    env["GHBUILD_REGISTRIES_CACHE"] = ""
    hand = ROOT / ".ghbuild" / "bench" / "Dockerfile.cpu-by-hand"
    hand.parent.mkdir(parents=True, exist_ok=True)
    hand.write_text(by_hand((ROOT / "docker" / "Dockerfile.cpu").read_text()))
    variants = {"wrapper": env, "by hand": {**env, "GHBUILD_IMAGES_CPU_DOCKERFILE": str(hand.relative_to(ROOT))}}

    warm_up, _ = build(env, "cpu", "amd64")
    print(f"cpu/amd64, S3 prefix {env['GHBUILD_SCCACHE_KEY_PREFIX']}, warm-up (cold S3): "
          f"{warm_up['sccache']['misses']} misses, compile stages {compile_seconds(warm_up):.1f} s")
    times: dict[str, list[float]] = {name: [] for name in variants}
    for round_no in range(args.rounds):
        order = list(variants) if round_no % 2 == 0 else list(reversed(variants))
        for name in order:
            report, wall = build(variants[name], "cpu", "amd64")
            check_hits(name, report)
            seconds = compile_seconds(report)
            times[name].append(seconds)
            per = ", ".join(f"{k} {report['stages'][k]['seconds']:.1f}s" for k in COMPILE_STAGES)
            print(f"round {round_no + 1} {name:<8} wall {wall:6.1f} s   compile stages {seconds:5.1f} s ({per})   "
                  f"sccache {report['sccache']['hits']} hits / {report['sccache']['misses']} misses")
    wrapper, manual = statistics.median(times["wrapper"]), statistics.median(times["by hand"])
    ratio = wrapper / manual if manual else float("inf")
    print(f"median compile stages: wrapper {wrapper:.1f} s, by hand {manual:.1f} s: ratio {ratio:.3f}")
    ok = ratio <= 1.05
    print(f"goal (wrapper <= 1.05x by hand, all hits): {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
