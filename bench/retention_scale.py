"""Retention planning at thousands of tags: a dry-run prune of a repository with N nightly tags on the local
staging registry (127.0.0.1:5000, from `make infra-up`), read one request at a time and side by side, in one run.

Two repositories hold `--commits` nightly commits each as a publish job leaves them: an index tagged
`nightly-<sha>` and its two per-arch images tagged `nightly-<sha>-x86_64` / `-arm64`, each image with a config
whose `created` is the commit's time (what a plain registry ranks commits by) and a small layer. In the first
the index is the one ghbuild publish writes (ghbuild.registry.manifest.make_index, each entry annotated with
its image's `created`); in the second an index without those annotations (another tool's, or ghbuild's before
it wrote them), where every image's config must be read. They are pushed once (untimed, fresh repositories per
run). Each timed run is the delete loop of `ghbuild prune` (`ghbuild.retention.prune`, apply=False) on a fresh
OciBackend, so nothing is cached between runs: list the tags, read every manifest, the children of the
indexes and the configs the indexes did not time, then plan. Printed: the median of `--runs` per index kind
and reader count, ms per tag, requests, and the ratio to the first row.

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
from ghbuild.registry.manifest import Descriptor, make_index  # noqa: E402
from ghbuild.registry.mediatypes import ANNOTATION_CREATED  # noqa: E402
from ghbuild.registry.readers import Readers  # noqa: E402
from ghbuild.retention import PruneResult, prune  # noqa: E402
from ghbuild.retention.oci import OciBackend  # noqa: E402
from ghbuild.retention.plan import nightly_pattern  # noqa: E402

HOST = "127.0.0.1:5000"


class CountingReaders(Readers):
    """Readers that count the reads they make (every registry read of the listing goes through them)."""

    reads = 0

    def map(self, read, keys):                      # type: ignore[no-untyped-def]
        self.reads += len(keys)
        return super().map(read, keys)
BASE = datetime(2024, 1, 1, tzinfo=UTC)


def push_commit(reg: RegistryClient, repo: str, n: int, annotated: bool) -> None:
    sha = f"{n:040x}"
    when = BASE + timedelta(hours=n)
    children = []
    for arch, suffix in (("amd64", "x86_64"), ("arm64", "arm64")):
        image = push_dated(reg, repo, arch, when, f"{repo} {n} {arch}".encode())
        reg.tag(repo, image["digest"], f"nightly-{sha}-{suffix}")
        annotations = {ANNOTATION_CREATED: when.strftime("%Y-%m-%dT%H:%M:%SZ")} if annotated else None
        children.append(Descriptor(image["mediaType"], image["digest"], image["size"], image["platform"],
                                   annotations))
    raw, media_type = make_index(children)
    reg.put_manifest(repo, f"nightly-{sha}", raw, media_type)


def fill(repo: str, commits: int, annotated: bool) -> None:
    """Push the commits side by side (8 clients), untimed."""
    clients = [RegistryClient(HOST, timeout=60) for _ in range(8)]
    with ThreadPoolExecutor(max_workers=len(clients)) as pool:
        list(pool.map(lambda n: push_commit(clients[n % len(clients)], repo, n, annotated), range(commits)))


def plan_once(repo: str, readers: int) -> tuple[float, int]:
    """One dry-run prune on a fresh backend (nothing cached): seconds, and the registry reads it made."""
    start = time.perf_counter()
    backend = OciBackend(Registry(HOST, log=lambda message: None), f"{HOST}/{repo}", repo,
                         nightly_pattern("nightly", ("x86_64", "arm64")), readers=readers)
    backend.readers = CountingReaders(backend.readers.client, readers)
    result = prune(backend, PruneResult("app", f"{HOST}/{repo}", backend.name, None, True, 14), apply=False,
                   log=lambda message: None)
    elapsed = time.perf_counter() - start
    if not result.ok or len(result.would_delete) == 0:
        raise SystemExit(f"the dry run did not plan deletions: {result.errors}")
    return elapsed, backend.readers.reads + 1       # and the tag list


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=667, help="nightly commits (3 tags each; 667: 2,001 tags)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--readers", default="1,8", help="reader counts to compare, comma-separated")
    args = parser.parse_args()
    readers = [int(r) for r in args.readers.split(",")]
    kinds = {"annotated": f"bench/retention-{secrets.token_hex(4)}", "plain": f"bench/retention-{secrets.token_hex(4)}"}
    try:
        RegistryClient(HOST, timeout=5).tags("none/none")
    except OSError as exc:
        print(f"the staging registry {HOST} is not answering ({exc}): run `make infra-up`", file=sys.stderr)
        return 1
    tags = args.commits * 3
    for kind, repo in kinds.items():
        start = time.perf_counter()
        fill(repo, args.commits, annotated=kind == "annotated")
        print(f"pushed {args.commits} commits ({tags} tags, {kind} indexes) to {HOST}/{repo} in "
              f"{time.perf_counter() - start:.1f} s", file=sys.stderr)
    rows = [(kind, r) for kind in kinds for r in readers]
    times: dict[tuple[str, int], list[float]] = {row: [] for row in rows}
    reads: dict[tuple[str, int], int] = {}
    for _ in range(args.runs):
        for kind, r in rows:            # interleaved: the machine's load is shared alike
            elapsed, reads[kind, r] = plan_once(kinds[kind], r)
            times[kind, r].append(elapsed)
    first = statistics.median(times[rows[0]])
    print(f"dry-run prune of {tags} nightly tags, median of {args.runs} ({HOST}, fresh backend each run)")
    print(f"{'indexes':>10} {'readers':>8} {'requests':>9} {'seconds':>9} {'ms/tag':>8} {'vs first':>9}")
    for kind, r in rows:
        median = statistics.median(times[kind, r])
        print(f"{kind:>10} {r:>8} {reads[kind, r]:>9} {median:>9.2f} {median / tags * 1000:>8.2f} "
              f"{first / median:>8.2f}x")
    best = min(statistics.median(times["annotated", r]) for r in readers) / tags * 1000
    print(f"goal (<= 2 ms per tag, the indexes ghbuild publishes): {'met' if best <= 2 else 'not met'} "
          f"({best:.2f} ms per tag)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
