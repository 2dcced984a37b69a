"""The content identity of a base image, on real git repositories in tmp_path.

What must not change it: permission drift in the worktree, untracked files, stages the image does not
build. What must: content, the index's mode, a symlink's target, the text of a built stage, a build
arg, the base image's digest, the version, the platform. And the fast route (git's blob ids for clean
files) must give exactly the answer of the slow route that reads every file.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import read_outputs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ghbuild.bases import identity
from ghbuild.bases.ensure_base import compute_identity
from ghbuild.config import configfile
from ghbuild.github import context
from ghbuild.naming import pinned, split_reference
from ghbuild.plan import planner

BASE = "127.0.0.1:5000/base/debian:bookworm"
DIGEST_A = "sha256:" + "a" * 64
DIGEST_B = "sha256:" + "b" * 64

DOCKERFILE = """\
# syntax=docker/dockerfile:1
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE} AS toolchain
RUN echo toolchain > /toolchain
FROM toolchain AS base
COPY src/ /opt/src/
RUN echo base > /base
FROM base AS consumer
RUN echo "a stage the base does not build"
"""

CONFIG = f"""\
[registries]
staging = "127.0.0.1:5000/test/{{image}}"

[images.tiny]
dockerfile = "Dockerfile"
target = "base"
platforms = ["linux/amd64", "linux/arm64"]
base-image = "{BASE}"
build-args = {{ FLAVOUR = "plain" }}
identity = {{ version = "1", inputs = ["src/**", "tools/run.sh", "tools/link", "later/*.txt"] }}
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def make_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "src" / "deep").mkdir(parents=True)
    (repo / "tools").mkdir()
    (repo / "Dockerfile").write_text(DOCKERFILE)
    (repo / "ghbuild.toml").write_text(CONFIG)
    (repo / "src" / "a.c").write_text("int a;\n")
    (repo / "src" / "deep" / "b.c").write_text("int b;\n")
    (repo / "tools" / "run.sh").write_text("#!/bin/sh\necho run\n")
    os.chmod(repo / "tools" / "run.sh", 0o755)
    os.symlink("run.sh", repo / "tools" / "link")
    (repo / "unrelated.txt").write_text("not an input\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    git(repo, "config", "core.fileMode", "true")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    return repo


class Resolver:
    """Tag -> digest, as a registry would answer; counts lookups."""

    def __init__(self, digest: str = DIGEST_A):
        self.digest = digest
        self.calls: list[str] = []

    def __call__(self, ref: str) -> str:
        self.calls.append(ref)
        return self.digest


def ident(repo: Path, resolver: Resolver | None = None, env: dict | None = None, arch: str = "amd64",
          base_image: str | None = None) -> identity.Identity:
    options = configfile.load(str(repo / "ghbuild.toml"), env or {}, repo)
    ctx = context.from_environment({}, context.ContextFlags(event="push", repository="o/r", ref="main", sha="1" * 40,
                                                         default_branch="main"), repo)
    plan = planner.plan(ctx, options)
    job = plan.job("tiny", arch)
    return compute_identity(options, job, resolver or Resolver(), base_image)


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path)


# --------------------------------------------------------------------------- what never changes it

def test_stable_and_the_inputs_listed(repo):
    first = ident(repo)
    assert first.identity == ident(repo).identity
    assert len(first.identity) == 64
    assert [(e.path, e.mode, e.source) for e in first.inputs] == [
        ("later/*.txt", "missing", "missing"),
        ("src/a.c", "100644", "index"),
        ("src/deep/b.c", "100644", "index"),
        ("tools/link", "120000", "index"),
        ("tools/run.sh", "100755", "index"),
    ]
    assert first.stages == ("toolchain", "base")
    assert first.bases == {BASE: DIGEST_A}


def test_worktree_permission_drift_does_not_change_it(repo):
    before = ident(repo).identity
    os.chmod(repo / "src" / "a.c", 0o664)           # group-writable on a shared worker
    os.chmod(repo / "tools" / "run.sh", 0o644)      # even the executable bit lost in the worktree
    os.chmod(repo / "src" / "deep" / "b.c", 0o755)
    after = ident(repo)
    assert after.identity == before
    # git noticed at least the x-bit flips (a ctime change may flag a.c too); re-hashed, and still matched
    assert {"tools/run.sh", "src/deep/b.c"} <= {e.path for e in after.inputs if e.source == "worktree"}


def test_untracked_files_do_not_change_it(repo):
    before = ident(repo).identity
    (repo / "src" / "junk.o").write_bytes(b"\x7fELF junk")
    (repo / "src" / "deep" / "new.c").write_text("int new;\n")
    (repo / "later").mkdir()
    (repo / "later" / "x.txt").write_text("untracked\n")
    assert ident(repo).identity == before


def test_a_stage_the_image_does_not_build_does_not_change_it(repo):
    before = ident(repo).identity
    text = (repo / "Dockerfile").read_text().replace("a stage the base does not build", "something else")
    (repo / "Dockerfile").write_text(text + "# a trailing comment\n")
    assert ident(repo).identity == before


# --------------------------------------------------------------------------- what always changes it

def test_content_changes_it_and_committing_the_same_content_does_not(repo):
    before = ident(repo).identity
    (repo / "src" / "a.c").write_text("int a = 2;\n")
    dirty = ident(repo)
    assert dirty.identity != before
    assert [e.source for e in dirty.inputs if e.path == "src/a.c"] == ["worktree"]
    git(repo, "commit", "-qam", "change")
    committed = ident(repo)
    assert committed.identity == dirty.identity    # same bytes, same identity, staged or not
    assert [e.source for e in committed.inputs if e.path == "src/a.c"] == ["index"]


def test_the_index_mode_changes_it(repo):
    before = ident(repo).identity
    git(repo, "update-index", "--chmod=+x", "src/a.c")
    assert ident(repo).identity != before


def test_a_symlink_target_changes_it(repo):
    before = ident(repo).identity
    (repo / "tools" / "link").unlink()
    os.symlink("../src/a.c", repo / "tools" / "link")
    relinked = ident(repo)
    assert relinked.identity != before
    git(repo, "add", "tools/link")
    assert ident(repo).identity == relinked.identity


def test_a_deleted_input_and_a_new_matching_file_change_it(repo):
    before = ident(repo).identity
    (repo / "src" / "deep" / "b.c").unlink()
    deleted = ident(repo)
    assert deleted.identity != before
    assert [e.mode for e in deleted.inputs if e.path == "src/deep/b.c"] == ["missing"]
    git(repo, "checkout", "--", "src/deep/b.c")
    (repo / "later").mkdir()
    (repo / "later" / "x.txt").write_text("now an input\n")
    git(repo, "add", "later/x.txt")
    assert ident(repo).identity not in (before, deleted.identity)


def test_the_text_of_a_built_stage_changes_it(repo):
    before = ident(repo).identity
    (repo / "Dockerfile").write_text(DOCKERFILE.replace("echo base", "echo base2"))
    assert ident(repo).identity != before
    (repo / "Dockerfile").write_text(DOCKERFILE.replace("debian:bookworm-slim", "debian:trixie-slim"))
    # the preamble's default is not used (base-image is set) but its text is part of what is built
    assert ident(repo).identity != before


@pytest.mark.parametrize("edit", [("echo one", "echo two"), ("# a comment of the script", "# another"),
                                  ("  indented", "    indented")])
def test_a_heredoc_body_of_a_built_stage_changes_it(repo, edit):
    """A heredoc's body is what its RUN runs: every byte of it counts, comment lines and indentation too (a
    shebang or a Python script's indentation is code)."""
    heredoc = ("RUN <<EOF\n#!/bin/sh\n# a comment of the script\necho one\n  indented\nEOF\n"
               "FROM base AS consumer")
    (repo / "Dockerfile").write_text(DOCKERFILE.replace("FROM base AS consumer", heredoc, 1))
    before = ident(repo).identity
    (repo / "Dockerfile").write_text(DOCKERFILE.replace("FROM base AS consumer", heredoc.replace(*edit), 1))
    assert ident(repo).identity != before


def test_a_build_arg_changes_it(repo):
    before = ident(repo).identity
    assert ident(repo, env={"GHBUILD_IMAGES_TINY_BUILD_ARGS": "FLAVOUR=fancy"}).identity != before


def test_the_base_digest_changes_it_not_the_tag(repo):
    before = ident(repo, Resolver(DIGEST_A)).identity
    assert ident(repo, Resolver(DIGEST_B)).identity != before
    # the same digest behind another tag name: the tag is not part of it
    pinned_a = ident(repo, base_image=f"127.0.0.1:5000/base/debian@{DIGEST_A}")
    assert pinned_a.bases == {f"127.0.0.1:5000/base/debian@{DIGEST_A}": DIGEST_A}
    resolver = Resolver()
    ident(repo, resolver, base_image=f"127.0.0.1:5000/base/debian@{DIGEST_A}")
    assert resolver.calls == []          # a pinned ref is never looked up


def test_version_and_platform_change_it(repo):
    before = ident(repo).identity
    assert ident(repo, env={"GHBUILD_IMAGES_TINY_IDENTITY_VERSION": "2"}).identity != before
    assert ident(repo, arch="arm64").identity != before


def test_inputs_outside_the_repository_are_refused(repo):
    from ghbuild.errors import ConfigError

    with pytest.raises(ConfigError, match=r"outside the git repository"):
        ident(repo, env={"GHBUILD_IMAGES_TINY_IDENTITY_INPUTS": "../etc/passwd"})
    with pytest.raises(ConfigError, match=r"relative"):
        ident(repo, env={"GHBUILD_IMAGES_TINY_IDENTITY_INPUTS": "/etc/passwd"})


def test_a_config_in_a_subfolder_names_inputs_relative_to_itself(repo):
    sub = repo / "ci"
    sub.mkdir()
    (sub / "ghbuild.toml").write_text(CONFIG.replace('dockerfile = "Dockerfile"', 'dockerfile = "../Dockerfile"')
                                      .replace('"src/**"', '"../src/**"'))
    git(repo, "add", "ci")
    options = configfile.load(str(sub / "ghbuild.toml"), {}, sub)
    ctx = context.from_environment({}, context.ContextFlags(event="push", repository="o/r", ref="main", sha="1" * 40,
                                                         default_branch="main"), sub)
    job = planner.plan(ctx, options).job("tiny", "amd64")
    result = compute_identity(options, job, Resolver())
    assert "src/a.c" in [e.path for e in result.inputs]


def test_sha256_repositories_use_sha256_blob_ids(tmp_path):
    repo = tmp_path / "r256"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "--object-format=sha256", str(repo)], check=True)
    (repo / "f").write_text("x\n")
    git(repo, "add", "f")
    (entry,) = identity.git_inputs(repo, ["f"])
    assert len(entry.oid) == 64
    assert entry.oid == git(repo, "hash-object", "f").strip()
    (repo / "f").write_text("y\n")
    (changed,) = identity.git_inputs(repo, ["f"])
    assert changed.source == "worktree" and changed.oid == git(repo, "hash-object", "f").strip()


def test_not_a_git_checkout_is_one_clear_line(tmp_path):
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / "ghbuild.toml").write_text(CONFIG)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GHBUILD_"))}
    env["GIT_CEILING_DIRECTORIES"] = str(tmp_path.parent)
    proc = subprocess.run([sys.executable, "-m", "ghbuild", "identity", "--image", "tiny", "--base-image",
                           f"127.0.0.1:5000/base/debian@{DIGEST_A}", "--event", "push", "--repository", "o/r",
                           "--ref", "main", "--sha", "1" * 40, "--default-branch", "main"],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 4, proc.stderr
    assert proc.stderr.count("\n") == 1 and "not a git repository" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""


def test_cli_json_lists_identity_and_inputs(repo):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GHBUILD_"))}
    proc = subprocess.run([sys.executable, "-m", "ghbuild", "identity", "--image", "tiny", "--json", "--base-image",
                           f"127.0.0.1:5000/base/debian@{DIGEST_A}", "--event", "push", "--repository", "o/r",
                           "--ref", "main", "--sha", "1" * 40, "--default-branch", "main"],
                          cwd=repo, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    import json

    data = json.loads(proc.stdout)
    assert len(data["identity"]) == 64
    assert {e["path"] for e in data["inputs"]} >= {"src/a.c", "tools/run.sh"}
    assert data["identity"] == ident(repo, base_image=f"127.0.0.1:5000/base/debian@{DIGEST_A}").identity


def test_reference_helpers():
    assert split_reference("127.0.0.1:5000/base/debian:bookworm") == ("127.0.0.1:5000", "base/debian", "bookworm")
    assert split_reference("rocm/dev-ubuntu-24.04:6.4") == ("docker.io", "rocm/dev-ubuntu-24.04", "6.4")
    assert split_reference("debian") == ("docker.io", "debian", "latest")
    assert split_reference(f"ghcr.io/o/x@{DIGEST_A}") == ("ghcr.io", "o/x", DIGEST_A)
    assert pinned("127.0.0.1:5000/base/debian:bookworm", DIGEST_A) == f"127.0.0.1:5000/base/debian@{DIGEST_A}"
    assert pinned("localhost:5000/x", DIGEST_A) == f"localhost:5000/x@{DIGEST_A}"


# --------------------------------------------------------------------------- fast route == slow route

_names = st.text(alphabet="abcdefgh_-.", min_size=1, max_size=6).filter(lambda n: n not in (".", ".."))
_tree = st.dictionaries(
    st.lists(_names, min_size=1, max_size=3).map(lambda parts: "/".join(parts)),
    st.tuples(st.sampled_from(["file", "exec", "link"]), st.binary(max_size=64)),
    min_size=1, max_size=12)
_edits = st.lists(st.tuples(st.sampled_from(["write", "chmod", "flipx", "delete", "relink", "untracked"]),
                            st.integers(0, 50), st.binary(max_size=16)), max_size=6)


def _write_tree(root: Path, tree: dict) -> list[str]:
    written = []
    for path, (kind, data) in sorted(tree.items()):
        full = root / path
        if any((root / p).is_symlink() or ((root / p).exists() and not (root / p).is_dir()) for p in _parents(path)):
            continue   # a file where a folder should be
        if full.exists() or full.is_symlink():
            continue
        full.parent.mkdir(parents=True, exist_ok=True)
        if kind == "link":
            os.symlink(data.hex() or "target", full)
        else:
            full.write_bytes(data)
            os.chmod(full, 0o755 if kind == "exec" else 0o644)
        written.append(path)
    return written


def _parents(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=_tree, edits=_edits)
def test_fast_route_equals_reading_every_file(tmp_path_factory, tree, edits):
    root = tmp_path_factory.mktemp("rand")
    git(root, "init", "-q")
    git(root, "config", "core.fileMode", "true")
    paths = _write_tree(root, tree)
    if not paths:
        return
    git(root, "add", "-A")
    for kind, n, data in edits:
        path = root / paths[n % len(paths)]
        if not (path.exists() or path.is_symlink()):
            continue
        if kind == "write" and not path.is_symlink():
            path.write_bytes(data)
        elif kind == "chmod" and not path.is_symlink():
            os.chmod(path, 0o664)
        elif kind == "flipx" and not path.is_symlink():
            os.chmod(path, stat.S_IMODE(path.stat().st_mode) ^ 0o111)
        elif kind == "delete":
            path.unlink()
        elif kind == "relink" and path.is_symlink():
            path.unlink()
            os.symlink(data.hex() or "other", path)
        elif kind == "untracked":
            (root / f"untracked-{n}").write_bytes(data)
    patterns = ["**", "nothing/here/*"]
    fast = identity.git_inputs(root, patterns)
    slow = identity.reference_inputs(root, patterns)
    assert [e.key() for e in fast] == [e.key() for e in slow]


def test_matrix_identities_match_the_identity_command(repo):
    import json

    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GHBUILD_"))}
    env["GHBUILD_IMAGES_TINY_BASE_IMAGE"] = f"127.0.0.1:5000/base/debian@{DIGEST_A}"   # no registry needed
    flags = ["--event", "push", "--repository", "o/r", "--ref", "main", "--sha", "1" * 40, "--default-branch", "main"]
    out = repo / "out.txt"
    env["GITHUB_OUTPUT"] = str(out)
    out.write_text("")
    proc = subprocess.run([sys.executable, "-m", "ghbuild", "matrix", "--identities", *flags], cwd=repo, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"include": []}       # the only image is a base: nothing per commit
    outputs = read_outputs(out.read_text())
    bases = json.loads(outputs["bases"])["include"]
    assert [b["id"] for b in bases] == ["tiny-amd64", "tiny-arm64"] and outputs["bases-count"] == "2"
    for entry in bases:
        one = subprocess.run([sys.executable, "-m", "ghbuild", "identity", "--image", "tiny", "--arch", entry["arch"],
                              *flags], cwd=repo, env=env, capture_output=True, text=True)
        assert one.returncode == 0, one.stderr
        assert entry["identity"] == one.stdout.strip() and len(entry["identity"]) == 64
    # without --identities: no I/O, identities left empty
    proc = subprocess.run([sys.executable, "-m", "ghbuild", "matrix", *flags], cwd=repo, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_git_filters_apply_to_changed_files_too(tmp_path):
    """A CRLF checkout (.gitattributes eol) and a bare `touch` leave the identity alone: changed files are
    hashed the way git hashes them into the index, filters included."""
    repo = tmp_path / "eol"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".gitattributes").write_text("*.txt text eol=crlf\n")
    (repo / "a.txt").write_bytes(b"one\r\ntwo\r\n")
    (repo / "new\nline.txt").write_bytes(b"odd name\r\n")
    git(repo, "add", "-A")
    before = identity.git_inputs(repo, ["*.txt"])
    assert [e.key() for e in before] == [e.key() for e in identity.reference_inputs(repo, ["*.txt"])]
    os.utime(repo / "a.txt", (1, 1))            # stat changed, content not: git reports it, we re-hash
    os.utime(repo / "new\nline.txt", (1, 1))
    after = identity.git_inputs(repo, ["*.txt"])
    assert {e.source for e in after} == {"worktree"}
    assert [e.key() for e in after] == [e.key() for e in before]


def test_the_dockerignore_and_the_context_are_part_of_it(repo):
    before = ident(repo).identity
    (repo / ".dockerignore").write_text("*\n!src/\n")
    git(repo, "add", ".dockerignore")
    with_ignore = ident(repo).identity
    assert with_ignore != before
    (repo / ".dockerignore").write_text("*\n!src/\n!tools/\n")
    assert ident(repo).identity != with_ignore
    (repo / "sub").mkdir()
    assert ident(repo, env={"GHBUILD_IMAGES_TINY_CONTEXT": "sub"}).identity != ident(repo).identity


def test_external_images_keep_their_case_and_defaults(tmp_path):
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.5\nARG TAG\nFROM debian:${TAG:-bookworm} AS base\n"
                          "COPY --from=${UV_IMAGE} /uv /bin/uv\n")
    source = identity.stage_source(dockerfile, "base", {})
    assert source.external == ("debian:bookworm", "ghcr.io/astral-sh/uv:0.5")
    assert identity.stage_source(dockerfile, "base", {"TAG": "trixie"}).external[0] == "debian:trixie"


def test_a_pattern_inside_a_submodule_is_refused_and_the_submodule_itself_counts(tmp_path):
    from ghbuild.errors import ConfigError

    sub = tmp_path / "sub"
    sub.mkdir()
    git(sub, "init", "-q")
    (sub / "x.c").write_text("int x;\n")
    git(sub, "add", "-A")
    git(sub, "-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "s")
    top = tmp_path / "top"
    top.mkdir()
    git(top, "init", "-q")
    commit = git(sub, "rev-parse", "HEAD").strip()
    git(top, "update-index", "--add", "--cacheinfo", f"160000,{commit},third_party/sub")
    with pytest.raises(ConfigError, match=r"inside the submodule third_party/sub"):
        identity.git_inputs(top, ["third_party/sub/**"])
    (entry,) = identity.git_inputs(top, ["third_party/sub"])
    assert (entry.mode, entry.oid) == ("160000", commit)


# --------------------------------------------------------------------------- the sccache helper of a base

HELPER_DEFAULT = "ghcr.io/ghbuild/ghbuild-sccache:1"
HELPER_CONFIGURED = "127.0.0.1:5000/ghbuild/ghbuild-sccache:1"
HELPER_DOCKERFILE = f"""\
ARG GHBUILD_SCCACHE_IMAGE={HELPER_DEFAULT}
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${{GHBUILD_SCCACHE_IMAGE}} AS ghbuild-sccache
FROM ${{BASE_IMAGE}} AS base
COPY src/ /opt/src/
RUN --mount=type=bind,from=ghbuild-sccache,source=/,target=/opt/ghbuild \\
    --mount=type=secret,id=ghbuild_sccache,required=false \\
    /opt/ghbuild/bin/ghbuild-sccache run base -- cc -c /opt/src/a.c -o /a.o
"""


@pytest.fixture
def helper_repo(tmp_path):
    repo = make_repo(tmp_path)
    (repo / "Dockerfile").write_text(HELPER_DOCKERFILE)
    git(repo, "commit", "-qam", "the base compiles through ghbuild's sccache helper")
    return repo


def test_a_base_hashes_the_configured_sccache_helper_not_the_dockerfiles_default(helper_repo):
    """The helper a base compiles with is sccache.helper-image pinned to its digest, as `ghbuild build` passes
    it: never the Dockerfile's ARG default (ghcr.io, unreachable here and not what the build mounts)."""
    env = {"GHBUILD_SCCACHE_HELPER_IMAGE": HELPER_CONFIGURED}
    resolver = Resolver(DIGEST_A)
    result = ident(helper_repo, resolver, env=env)
    assert HELPER_DEFAULT not in resolver.calls, resolver.calls
    assert resolver.calls.count(HELPER_CONFIGURED) == 1, resolver.calls
    helper = f"127.0.0.1:5000/ghbuild/ghbuild-sccache@{DIGEST_A}"
    assert result.bases[helper] == DIGEST_A, result.bases
    # Another helper digest behind the same tag is another identity; a pinned helper is taken as written.
    assert ident(helper_repo, Resolver(DIGEST_B), env=env).identity != result.identity
    pinned_resolver = Resolver(DIGEST_A)
    assert ident(helper_repo, pinned_resolver, env={"GHBUILD_SCCACHE_HELPER_IMAGE": helper}).identity \
        == result.identity
    assert helper not in pinned_resolver.calls


def test_a_base_whose_configured_helper_is_missing_says_what_to_set(helper_repo):
    from ghbuild.errors import ConfigError

    def lookup(ref: str):
        return None if "sccache" in ref else DIGEST_A

    with pytest.raises(ConfigError) as exc:
        options = configfile.load(str(helper_repo / "ghbuild.toml"), {}, helper_repo)
        ctx = context.from_environment({}, context.ContextFlags(event="push", repository="o/r", ref="main",
                                                             sha="1" * 40, default_branch="main"), helper_repo)
        compute_identity(options, planner.plan(ctx, options).job("tiny", "amd64"), lookup)
    message = str(exc.value)
    assert f"{HELPER_DEFAULT} does not exist in its registry" in message
    assert "GHBUILD_SCCACHE_HELPER_IMAGE" in message and "[sccache] helper-image" in message
    assert "sccache.helper-image=" in message and "\n" not in message
