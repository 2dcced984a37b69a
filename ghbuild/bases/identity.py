"""The content identity of a base image.

sha256 over: a version string, the declared input files as git's index has them (path, mode, content
id; a symlink's content is its target), the text of the Dockerfile stages the image builds (and the
global ARGs they may use), the resolved build args, the platform, and the digest of every image the
stages build FROM or copy from. Equal identity means "this image would be built from the same inputs".

Fast on big trees: for a file the worktree has not changed, git's own blob id in the index is the
content id, so only files `git diff-files` reports are read and hashed here (the blob id is a hash of
the same bytes, so both routes give one answer; `reference_inputs` is the slow route, kept for tests
and the benchmark). Permission drift in the worktree (0664 vs 0644 on shared CI workers) and untracked
files never count: the mode is the index's, and only indexed paths are inputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path, PurePosixPath
from types import MappingProxyType
from typing import Any, NamedTuple

from ghbuild.errors import ConfigError, GitError
from ghbuild.plan import dockerfile

SCHEME = "ghbuild-identity/1"
MISSING = "missing"
_ARG_RE = re.compile(r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-+])?(?P<word>[^}]*)\}"
                     r"|(?P<plain>[A-Za-z_][A-Za-z0-9_]*))")
_ARG_LINE_RE = re.compile(r"^\s*ARG\s+(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:=(?P<value>.*))?$", re.I)


class InputEntry(NamedTuple):
    """One input file. A NamedTuple, not a dataclass: a big tree makes tens of thousands of them."""

    path: str     # repository-root relative, '/' separated
    mode: str     # the index's mode: 100644, 100755, 120000 (symlink), 160000 (submodule); or "missing"
    oid: str      # git object id of the content (a symlink: of its target); "" when missing
    source: str   # "index" (clean: git's blob id), "worktree" (changed: hashed here), "missing"

    def key(self) -> list[str]:
        return [self.path, self.mode, self.oid]


class Identity(NamedTuple):
    identity: str
    version: str
    platform: str
    inputs: tuple[InputEntry, ...]
    stages: tuple[str, ...]
    build_args: Mapping[str, str]
    bases: Mapping[str, str]                 # image ref as written (ARGs expanded) -> digest
    parts: Mapping[str, str] = MappingProxyType({})   # part -> sha256, to see what changed

    def to_dict(self) -> dict[str, Any]:
        return {
            "identity": self.identity, "version": self.version, "platform": self.platform,
            "inputs": [e._asdict() for e in self.inputs], "stages": list(self.stages),
            "build_args": dict(self.build_args), "bases": dict(self.bases), "parts": dict(self.parts),
        }


# --------------------------------------------------------------------------- git

def _git(root: Path, *args: str, input_bytes: bytes | None = None) -> bytes:
    # --no-optional-locks: never rewrite the index as a side effect (another job may be using it).
    argv = ["git", "--no-optional-locks", "-C", str(root), *args]
    try:
        proc = subprocess.run(argv, input=input_bytes, capture_output=True, check=False)
    except FileNotFoundError:
        raise GitError("git is not installed; the identity is computed from git's index") from None
    if proc.returncode != 0:
        message = (proc.stderr.decode("utf-8", "replace").strip().splitlines() or ["failed"])[-1]
        raise GitError(f"git {args[0]} in {root}: {message}")
    return proc.stdout


def repository_root(path: Path) -> Path:
    return Path(_git(path, "rev-parse", "--show-toplevel").decode().strip())


def blob_id(data: bytes, algorithm: str = "sha1") -> str:
    """git's object id for a blob with this content (what `git hash-object` prints, without filters)."""
    h = hashlib.new(algorithm)
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def root_patterns(root: Path, project_dir: Path, patterns: Sequence[str]) -> list[str]:
    """Config patterns (relative to the config file's folder) as repository-root relative pathspecs."""
    prefix = PurePosixPath(Path(os.path.relpath(project_dir.resolve(), root.resolve())).as_posix())
    out = []
    for pattern in patterns:
        if pattern.startswith("/") or re.match(r"^[A-Za-z]:", pattern):
            raise ConfigError(f"identity input {pattern!r}: must be relative to the config file's folder")
        joined = os.path.normpath(str(prefix / pattern)).replace(os.sep, "/")
        if joined == ".." or joined.startswith("../"):
            raise ConfigError(f"identity input {pattern!r}: points outside the git repository")
        out.append("" if joined == "." else joined)
    return out


def _pathspec(pattern: str) -> str:
    # glob magic: `*` does not cross `/`, `**` does — the way people read globs in a config file.
    return f":(top,glob){pattern or '**'}"


def _start_git(root: Path, *args: str) -> subprocess.Popen:
    try:
        return subprocess.Popen(["git", "--no-optional-locks", "-C", str(root), *args],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except FileNotFoundError:
        raise GitError("git is not installed; the identity is computed from git's index") from None


def _finish_git(proc: subprocess.Popen, root: Path, what: str) -> str:
    out, err = proc.communicate()
    if proc.returncode != 0:
        message = (err.decode("utf-8", "replace").strip().splitlines() or ["failed"])[-1]
        raise GitError(f"git {what} in {root}: {message}")
    return out.decode("utf-8", "surrogateescape")


def _ls_files(root: Path, patterns: Sequence[str], *, with_changes: bool) -> tuple[list[dict], set[str]]:
    """Per pattern, {path: (mode, object id)} of the index entries it matches (a pattern's own listing
    tells whether it matched anything); and the paths whose worktree file git cannot vouch for
    (content, type, deleted; a stat difference too), from the stat data git keeps for every entry.

    All git processes start at once: the listing is parsed while `diff-files` is still checking stats.
    """
    listings = [_start_git(root, "ls-files", "--stage", "-z", "--", _pathspec(p)) for p in patterns]
    changes = (_start_git(root, "diff-files", "--name-only", "-z", "--", *(_pathspec(p) for p in patterns))
               if with_changes and patterns else None)
    results = []
    for proc in listings:
        # "<6-digit mode> <oid> <stage>\t<path>": fixed offsets once the id length is known (40 hex for
        # sha1, 64 for sha256 repositories); slicing keeps 20,000 entries in a few milliseconds.
        records = _finish_git(proc, root, "ls-files").split("\0")
        if records[0]:
            oid_end = records[0].index(" ", 7)
            path_at = oid_end + 3
            # a conflicted path (stages 1-3) keeps its last stage
            results.append({r[path_at:]: (r[:6], r[7:oid_end]) for r in records if r})
        else:
            results.append({})
    changed = set(filter(None, _finish_git(changes, root, "diff-files").split("\0"))) if changes else set()
    return results, changed


def _worktree_entries(root: Path, paths: Sequence[str], indexed: Mapping[str, tuple[str, str]]) -> list[InputEntry]:
    """Entries for paths read from the worktree: the content id git would give them.

    Regular files go through one `git hash-object --stdin-paths`, which applies the same filters
    (.gitattributes eol, ident, LFS clean) as the blob ids in the index, so a `touch` or a CRLF checkout
    never changes the identity. A symlink's content is its target; a submodule is the commit the index
    records; a path gone from the worktree is "missing".
    """
    out: list[InputEntry] = []
    regular: list[str] = []
    for path in paths:
        mode, oid = indexed[path]
        full = root / path
        if mode == "160000":
            out.append(InputEntry(path, mode, oid, "index"))
        elif full.is_symlink():
            algorithm = "sha1" if len(oid) == 40 else "sha256"
            out.append(InputEntry(path, mode, blob_id(os.fsencode(os.readlink(full)), algorithm), "worktree"))
        elif full.is_file():
            regular.append(path)
        else:
            out.append(InputEntry(path, MISSING, "", MISSING))
    batch = [p for p in regular if "\n" not in p]    # --stdin-paths is one path per line
    if batch:
        names = "".join(p + "\n" for p in batch).encode("utf-8", "surrogateescape")
        text = _git(root, "hash-object", "--stdin-paths", input_bytes=names).decode("ascii")
        for path, oid in zip(batch, text.split(), strict=True):
            out.append(InputEntry(path, indexed[path][0], oid, "worktree"))
    for path in regular:
        if "\n" in path:
            oid = _git(root, "hash-object", "--", path).decode("ascii").strip()
            out.append(InputEntry(path, indexed[path][0], oid, "worktree"))
    return out


def _collect(root: Path, patterns: Sequence[str], with_changes: bool):
    indexed: dict[str, tuple[str, str]] = {}
    missing: list[str] = []
    listings, changed = _ls_files(root, patterns, with_changes=with_changes)
    for pattern, entries in zip(patterns, listings, strict=True):
        if not entries:
            missing.append(pattern)
        indexed.update(entries)
    if missing:
        _refuse_patterns_inside_submodules(root, missing)
    return indexed, changed, [InputEntry(p or ".", MISSING, "", MISSING) for p in missing]


def _refuse_patterns_inside_submodules(root: Path, patterns: Sequence[str]) -> None:
    """git's index holds a submodule as one commit id: a pattern below it matches nothing, and counting it
    as "missing" would let a submodule bump go unnoticed. Name the submodule itself instead."""
    listing = _git(root, "ls-files", "--stage", "-z").decode("utf-8", "surrogateescape")
    gitlinks = [r.split("\t", 1)[1] for r in listing.split("\0") if r.startswith("160000 ")]
    for pattern in patterns:
        for link in gitlinks:
            if pattern.startswith(link + "/"):
                raise ConfigError(f"identity input {pattern!r} is inside the submodule {link}: name {link!r} "
                                  "itself (its commit is the input)")


def git_inputs(root: Path, patterns: Sequence[str]) -> list[InputEntry]:
    """The inputs the patterns name, fast: git's blob ids for clean files, hashing only changed ones.

    A pattern that matches no indexed path is an input too ("missing"), so adding the file later
    changes the identity.
    """
    indexed, changed, missing = _collect(root, patterns, with_changes=True)
    make = InputEntry._make
    entries = [make((path, mode, oid, "index")) for path, (mode, oid) in indexed.items() if path not in changed]
    entries += _worktree_entries(root, [path for path in changed if path in indexed], indexed)
    return sorted(entries + missing)


def reference_inputs(root: Path, patterns: Sequence[str]) -> list[InputEntry]:
    """The slow route to the same answer: read and hash every indexed file (tests and benchmarks)."""
    indexed, _, missing = _collect(root, patterns, with_changes=False)
    return sorted(_worktree_entries(root, list(indexed), indexed) + missing)


# --------------------------------------------------------------------------- Dockerfile

def _arg_defaults(preamble: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in preamble.splitlines():
        m = _ARG_LINE_RE.match(line)
        if m and m.group("value") is not None:
            values[m.group("name")] = m.group("value").strip().strip('"').strip("'")
    return values


def expand_args(text: str, values: Mapping[str, str]) -> str:
    def sub(m: re.Match) -> str:
        value = values.get(m.group("braced") or m.group("plain"), "")
        op = m.group("op") or ""
        if op.endswith("-"):     # ${X:-word} / ${X-word}: the word when X is empty / unset
            return value or m.group("word") if op == ":-" or m.group("braced") not in values else value
        if op.endswith("+"):     # ${X:+word}: the word when X is set
            return m.group("word") if value or (op == "+" and m.group("braced") in values) else ""
        return value

    return _ARG_RE.sub(sub, text)


class StageSource(NamedTuple):
    text: str                       # preamble + the stages built, in file order
    labels: tuple[str, ...]
    external: tuple[str, ...]       # images the stages build FROM or copy from (ARGs expanded)


def stage_source(path: Path, target: str | None, build_args: Mapping[str, str]) -> StageSource:
    """What of the Dockerfile the target builds: its stages' text and the external images they use."""
    preamble, all_stages = dockerfile.parse(path)
    built = dockerfile.dependencies(target, all_stages)
    chosen = [s for s in all_stages if s.label in built]
    names = {s.name for s in all_stages if s.name} | {str(s.number) for s in all_stages}
    values = {**_arg_defaults(preamble), **build_args}
    external: list[str] = []
    for stage in chosen:
        for ref in (stage.base, *stage.uses):
            if ref.lower() in names:
                continue
            expanded = expand_args(ref, values)
            if expanded.lower() != "scratch":
                external.append(expanded)
    return StageSource(preamble + "".join(s.text for s in chosen), tuple(s.label for s in chosen),
                       tuple(dict.fromkeys(external)))


# --------------------------------------------------------------------------- identity

def _sha256(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
                          .encode("utf-8", "surrogateescape")).hexdigest()


def compute(*, version: str, platform: str, inputs: Iterable[InputEntry], stages: StageSource,
            build_args: Mapping[str, str], bases: Mapping[str, str]) -> Identity:
    entries = tuple(sorted(inputs))
    parts = {
        "version": _sha256([SCHEME, version]),
        "platform": _sha256(platform),
        "inputs": _sha256([e.key() for e in entries]),
        "dockerfile": _sha256(stages.text),
        "build_args": _sha256(sorted(build_args.items())),
        "bases": _sha256(sorted(bases.items())),
    }
    identity = _sha256([SCHEME, sorted(parts.items())])
    return Identity(identity=identity, version=version, platform=platform, inputs=entries,
                    stages=stages.labels, build_args=dict(build_args), bases=dict(bases), parts=parts)


Resolver = Callable[[str], str]   # image ref -> digest (sha256:...); raises when it cannot tell


def base_digests(refs: Iterable[str], resolve: Resolver) -> dict[str, str]:
    """Digest of each external image: a digest-pinned ref is taken as written, a tag is resolved."""
    out = {}
    for ref in refs:
        _name, sep, digest = ref.partition("@")
        out[ref] = digest if sep and digest.startswith("sha256:") else resolve(ref)
    return out
