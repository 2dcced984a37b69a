"""Identity of a 20,000-file git tree: ghbuild's fast route vs hashing every file.

    .venv/bin/python bench/identity_tree.py [--files 20000] [--runs 5] [--dirty 50]

Builds a throwaway git repository (sizes like a source tree: 200 B .. 32 kB, median ~4 kB), commits
it, changes `--dirty` files in the worktree (and drifts permissions on others, which must not count),
then times side by side, alternating, in one run:

- ghbuild: `identity.git_inputs` (git's index blob ids for clean files, hashing only what
  `git diff-files` reports) + the identity hash;
- sha256-every-file: the usual script: read every indexed file and sha256 it (a different hash,
  so it cannot give the same number; it shows the cost of reading everything);
- reference: read every indexed file and compute its git blob id (the slow route to ghbuild's
  answer, `identity.reference_inputs`), which must give exactly the same identity.

Prints medians and ratios. Page cache is warm for every route (the files were just written).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from ghbuild.bases import identity


def make_tree(root: Path, files: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    paths = []
    for i in range(files):
        folder = f"src/mod{i % 97:02d}/sub{i % 13}"
        path = f"{folder}/file{i:05d}.{rng.choice(['c', 'h', 'cpp', 'py', 'rs', 'txt'])}"
        size = min(32768, max(200, int(rng.lognormvariate(8.3, 0.9))))
        full = root / path
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(rng.randbytes(size))
        paths.append(path)
    return paths


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def sha256_every_file(root: Path) -> str:
    listing = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], check=True, capture_output=True).stdout
    total = hashlib.sha256()
    for raw in sorted(p for p in listing.split(b"\0") if p):
        path = root / os.fsdecode(raw)
        total.update(raw + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return total.hexdigest()


def identity_of(entries) -> str:
    return hashlib.sha256(repr([e.key() for e in entries]).encode()).hexdigest()


def timed(fn) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def drop_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def compare(root: Path, runs: int, cold: bool) -> bool:
    routes = {
        "ghbuild": lambda: identity_of(identity.git_inputs(root, ["**"])),
        "sha256-every-file": lambda: sha256_every_file(root),
        "reference": lambda: identity_of(identity.reference_inputs(root, ["**"])),
    }
    results: dict[str, list[float]] = {name: [] for name in routes}
    answers: dict[str, set[str]] = {name: set() for name in routes}
    for _ in range(runs):
        for name, route in routes.items():
            if cold:
                drop_caches()
            t, answer = timed(route)
            results[name].append(t)
            answers[name].add(answer)
    print(f"-- page cache {'cold (dropped before each call)' if cold else 'warm'}")
    fast = statistics.median(results["ghbuild"])
    for name, times in results.items():
        med = statistics.median(times)
        ratio = "" if name == "ghbuild" else f"   ghbuild is {med / fast:.1f}x faster"
        print(f"{name:20s} median {med * 1000:8.1f} ms  (runs: {', '.join(f'{t * 1000:.0f}' for t in times)}){ratio}")
    same = answers["ghbuild"] == answers["reference"] and len(answers["ghbuild"]) == 1
    print(f"same answer as reading every file: {'yes' if same else 'NO'} ({next(iter(answers['ghbuild']))[:16]})")
    return same


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dirty", type=int, default=50, help="files changed in the worktree after the commit")
    ap.add_argument("--cold", action="store_true",
                    help="also time with a cold page cache (drops the machine's caches before each call; root)")
    args = ap.parse_args()

    root = Path(tempfile.mkdtemp(prefix="ghbuild-bench-identity-"))
    try:
        paths = make_tree(root, args.files)
        size = sum((root / p).stat().st_size for p in paths)
        git(root, "init", "-q")
        git(root, "add", "-A")
        git(root, "-c", "user.name=b", "-c", "user.email=b@example.com", "commit", "-qm", "tree")
        rng = random.Random(11)
        for path in rng.sample(paths, args.dirty):
            (root / path).write_bytes(rng.randbytes(1000))
        for path in rng.sample(paths, args.dirty):
            os.chmod(root / path, 0o664)   # permission drift: must not count
        print(f"tree: {len(paths)} files, {size / 1e6:.1f} MB, {args.dirty} changed in the worktree, "
              f"{args.dirty} with permission drift")

        same = True
        for cold in ([False, True] if args.cold else [False]):
            same &= compare(root, args.runs, cold)
        return 0 if same else 1
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
