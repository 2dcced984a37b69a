"""Retention planning at thousands of tags: a dry-run prune of a repository with N nightly tags on the local
staging registry (127.0.0.1:5000, from `make infra-up`), read one request at a time and side by side, in one run.

The repository holds `--commits` nightly commits as the publish job leaves them: an index tagged
`nightly-<sha>` and its two per-arch images tagged `nightly-<sha>-x86_64` / `-arm64`, each image with a config
whose `created` is the commit's time (what a plain registry ranks commits by) and a small layer. It is pushed
once (untimed, a fresh repository per run). Each timed run is the delete loop of `ghbuild prune`
(`ghbuild.retention.prune`, apply=False) on a fresh OciBackend, so nothing is cached between runs: list the
tags, read every manifest, the children of the indexes and the configs, then plan. Printed: the median of
`--runs` per reader count, ms per tag, and the ratio to one reader.

Goal (issue 25): planning 2,000 nightly tags <= 2 ms per tag.

Usage: make infra-up && .venv/bin/python bench/retention_scale.py [--commits 667] [--runs 3] [--readers 1,8]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]   # tests/fakes: the test-side registry client

from fakes.oci import RegistryClient, push_dated  # noqa: E402

from ghbuild.registry.client import Registry  # noqa: E402
from ghbuild.retention import PruneResult, prune  # noqa: E402
from ghbuild.retention.oci import OciBackend  # noqa: E402
from ghbuild.retention.plan import nightly_pattern  # noqa: E402

HOST = "127.0.0.1:5000"
BASE = datetime(2024, 1, 1, tzinfo=UTC)


def push_commit(reg: RegistryClient, repo: str, n: int) -> None:
    sha = f"{n:040x}"
    when = BASE + timedelta(hours=n)
    children = []
    for arch, suffix in (("amd64", "x86_64"), ("arm64", "arm64")):
        image = push_dated(reg, repo, arch, when, f"{repo} {n} {arch}".encode())
        reg.tag(repo, image["digest"], f"nightly-{sha}-{suffix}")
        children.append(image)
    reg.push_index(repo, children, f"nightly-{sha}")


def fill(repo: str, commits: int) -> None:
    """Push the commits side by side (8 clients), untimed."""
    clients = [RegistryClient(HOST, timeout=60) for _ in range(8)]
    with ThreadPoolExecutor(max_workers=len(clients)) as pool:
        list(pool.map(lambda n: push_commit(clients[n % len(clients)], repo, n), range(commits)))


def plan_once(repo: str, readers: int) -> tuple[float, str]:
    """One dry-run prune on a fresh backend (nothing cached): seconds, and what the listing saw."""
    start = time.perf_counter()
    backend = OciBackend(Registry(HOST, log=lambda message: None), f"{HOST}/{repo}", repo,
                         nightly_pattern("nightly", ("x86_64", "arm64")), readers=readers)
    result = prune(backend, PruneResult("app", f"{HOST}/{repo}", backend.name, None, True, 14), apply=False,
                   log=lambda message: None)
    elapsed = time.perf_counter() - start
    if not result.ok or len(result.would_delete) == 0:
        raise SystemExit(f"the dry run did not plan deletions: {result.errors}")
    return elapsed, backend.summary()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=667, help="nightly commits (3 tags each; 667: 2,001 tags)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--readers", default="1,8", help="reader counts to compare, comma-separated")
    args = parser.parse_args()
    readers = [int(r) for r in args.readers.split(",")]
    repo = f"bench/retention-{secrets.token_hex(4)}"
    try:
        RegistryClient(HOST, timeout=5).tags("none/none")
    except OSError as exc:
        print(f"the staging registry {HOST} is not answering ({exc}): run `make infra-up`", file=sys.stderr)
        return 1
    start = time.perf_counter()
    fill(repo, args.commits)
    tags = args.commits * 3
    print(f"pushed {args.commits} commits ({tags} tags) to {HOST}/{repo} in {time.perf_counter() - start:.1f} s",
          file=sys.stderr)
    times: dict[int, list[float]] = {r: [] for r in readers}
    for _ in range(args.runs):
        for r in readers:            # interleaved: the machine's load is shared alike
            elapsed, seen = plan_once(repo, r)
            times[r].append(elapsed)
    first = statistics.median(times[readers[0]])
    print(f"the listing saw {seen}", file=sys.stderr)
    print(f"dry-run prune of {tags} nightly tags, median of {args.runs} ({HOST}, fresh backend each run)")
    print(f"{'readers':>8} {'seconds':>9} {'ms/tag':>8} {'vs ' + str(readers[0]):>8}")
    for r in readers:
        median = statistics.median(times[r])
        print(f"{r:>8} {median:>9.2f} {median / tags * 1000:>8.2f} {first / median:>7.2f}x")
    best = min(statistics.median(t) for t in times.values()) / tags * 1000
    print(f"goal (<= 2 ms per tag): {'met' if best <= 2 else 'not met'} ({best:.2f} ms per tag)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
