"""`ghbuild init` in a repository that is not ghbuild: what it writes, what it prints, what it refuses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ghbuild import adopt
from ghbuild.config import configfile
from ghbuild.errors import UsageError
from ghbuild.plan import dockerfile

SHA = "0123456789abcdef0123456789abcdef01234567"
PIN = f"ghbuild/ghbuild@{SHA}"
GIT_IDENT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
             "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid"}
LIBS_DOCKERFILE = """\
# syntax=docker/dockerfile:1
FROM debian:bookworm AS toolchain
RUN apt-get update && apt-get install -y g++ cmake cargo

FROM toolchain AS libs
COPY . /src
RUN --mount=type=cache,target=/root/.cache \\
    cmake -S /src/libs -B /b && \\
    # the build itself
    cmake --build /b
RUN ["cargo", "build", "--release", "--manifest-path", "/src/crate/Cargo.toml"]

FROM debian:bookworm-slim AS runtime
COPY --from=libs /b/lib /usr/lib
"""


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_IDENT}).stdout


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "widgets"
    (root / "docker").mkdir(parents=True)
    (root / "docker" / "Dockerfile.libs").write_text(LIBS_DOCKERFILE)
    (root / "tools.Dockerfile").write_text("FROM debian:bookworm-slim\nRUN echo no compiler here\n")
    _git(root.parent, "init", "-q", "-b", "main", str(root))
    _git(root, "remote", "add", "origin", "https://github.com/Acme/Widgets.git")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "--no-gpg-sign", "-m", "widgets")
    return root


def ghbuild(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GHBUILD_"))}
    env["GIT_CEILING_DIRECTORIES"] = str(cwd.parent)
    return subprocess.run([sys.executable, "-m", "ghbuild", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=60)


def test_writes_a_config_that_loads_and_names_every_dockerfile(repo):
    result = ghbuild(["init", "--pin", PIN], repo)
    assert result.returncode == 0, result.stderr
    text = (repo / "ghbuild.toml").read_text()
    assert text.splitlines()[0] == (f"#:schema https://raw.githubusercontent.com/ghbuild/ghbuild/{SHA}"
                                    "/ghbuild/resources/ghbuild.schema.json")
    data = tomllib.loads(text)
    assert data["trust"]["canonical-repository"] == "acme/widgets"
    assert data["images"] == {
        "libs": {"dockerfile": "docker/Dockerfile.libs", "context": ".", "target": "runtime",
                 "platforms": ["linux/amd64", "linux/arm64"]},
        "tools": {"dockerfile": "tools.Dockerfile", "context": ".", "platforms": ["linux/amd64", "linux/arm64"]}}
    options = configfile.load(None, {}, repo)
    assert set(options.images) == {"libs", "tools"}
    # The schema the comment points at is the one this ghbuild ships (same $id).
    assert json.loads((Path(adopt.__file__).parent / "resources" / "ghbuild.schema.json").read_text())["$id"]


def test_the_caller_workflow_is_pinned_and_lint_clean(repo):
    assert ghbuild(["init", "--pin", PIN, "--platform", "linux/amd64"], repo).returncode == 0
    workflow = repo / ".github" / "workflows" / "images.yml"
    assert f"uses: ghbuild/ghbuild/.github/workflows/build-images.yml@{SHA} # ghbuild " in workflow.read_text()
    assert tomllib.loads((repo / "ghbuild.toml").read_text())["images"]["libs"]["platforms"] == ["linux/amd64"]
    zizmor = shutil.which("zizmor", path=str(Path(sys.executable).parent))
    proc = subprocess.run([zizmor, "--offline", "--no-progress", str(workflow)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_prints_the_lines_for_each_compile_step_and_nothing_for_others(repo):
    out = ghbuild(["init", "--pin", PIN], repo).stdout
    assert "docker/Dockerfile.libs: add above line 2 (the first FROM):" in out
    assert "    ARG GHBUILD_SCCACHE_IMAGE=" in out and "    FROM ${GHBUILD_SCCACHE_IMAGE} AS ghbuild-sccache" in out
    assert "stage libs, line 7" in out and "stage libs, line 11" in out
    assert "stage toolchain" not in out          # apt-get install g++ names a package, it compiles nothing
    assert "tools.Dockerfile: no compile step found" in out


def test_diff_is_a_patch_that_applies_and_follows_the_contract(repo):
    result = ghbuild(["init", "--pin", PIN, "--diff"], repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("--- a/docker/Dockerfile.libs\n+++ b/docker/Dockerfile.libs\n")
    subprocess.run(["git", "apply"], input=result.stdout, cwd=repo, check=True, text=True)
    patched = (repo / "docker" / "Dockerfile.libs").read_text()
    _, stages = dockerfile.parse(repo / "docker" / "Dockerfile.libs")
    assert [s.name for s in stages] == ["ghbuild-sccache", "toolchain", "libs", "runtime"]
    libs = stages[2].text
    assert libs.count("--mount=type=bind,from=ghbuild-sccache,source=/,target=/opt/ghbuild") == 2
    assert libs.count("--mount=type=secret,id=ghbuild_sccache,required=false") == 2
    assert "--mount=type=cache,target=/root/.cache" in libs            # the RUN's own flags are kept
    assert ("/opt/ghbuild/bin/ghbuild-sccache run libs -- cargo build --release --manifest-path "
            "/src/crate/Cargo.toml") in libs
    # The continued shell command keeps its lines inside sh -c '...'; Docker joins them.
    assert "ghbuild-sccache run libs -- sh -c ' \\\n        cmake -S /src/libs -B /b && \\\n" in patched
    assert "# the build itself" not in patched
    # A second init on the patched file finds nothing left to wrap.
    again = ghbuild(["init", "--pin", PIN, "--diff", "--force"], repo)
    assert again.returncode == 0 and again.stdout == "", again.stdout


def test_never_overwrites_without_force(repo):
    (repo / "ghbuild.toml").write_text("# mine\n")
    result = ghbuild(["init", "--pin", PIN], repo)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == ("ghbuild: usage error: ghbuild.toml already exists: nothing written "
                                     "(pass --force to overwrite)")
    assert (repo / "ghbuild.toml").read_text() == "# mine\n"
    assert not (repo / ".github").exists()
    assert ghbuild(["init", "--pin", PIN, "--force"], repo).returncode == 0
    assert (repo / "ghbuild.toml").read_text().startswith("#:schema ")


def test_diff_after_init_keeps_the_files_and_prints_the_patch(repo):
    """README order: `ghbuild init`, then `ghbuild init --diff | git apply`."""
    assert ghbuild(["init", "--pin", PIN], repo).returncode == 0
    (repo / "ghbuild.toml").write_text("# mine\n")
    result = ghbuild(["init", "--pin", PIN, "--diff"], repo)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("--- a/docker/Dockerfile.libs\n")
    assert ("ghbuild init: ghbuild.toml and .github/workflows/images.yml already exist: nothing written "
            "(--force overwrites); the Dockerfile patch follows") in result.stderr
    assert (repo / "ghbuild.toml").read_text() == "# mine\n"
    subprocess.run(["git", "apply"], input=result.stdout, cwd=repo, check=True, text=True)
    # Without --diff an existing file is still refused: the instructions alone are not worth a silent no-op.
    assert ghbuild(["init", "--pin", PIN], repo).returncode == 2


@pytest.mark.parametrize(("args", "message"), [
    (["--pin", "not a repo@x"], "--pin not a repo@x:"),
    (["--pin", "ghbuild/ghbuild@main"], "give OWNER/NAME@<40-hex commit>"),
    (["--pin", PIN, "--platform", "linux/s390x"], "--platform linux/s390x: not one of linux/amd64, linux/arm64"),
])
def test_bad_flags_are_one_line(repo, args, message):
    result = ghbuild(["init", *args], repo)
    assert result.returncode == 2 and message in result.stderr and len(result.stderr.splitlines()) == 1
    assert not (repo / "ghbuild.toml").exists()


def test_a_repository_without_dockerfiles_is_refused(tmp_path):
    result = ghbuild(["init", "--pin", PIN], tmp_path)
    assert result.returncode == 2 and "no Dockerfile in" in result.stderr
    assert list(tmp_path.iterdir()) == []


class _Distribution:
    """What importlib.metadata gives for an install, as pip records it."""

    def __init__(self, direct_url: dict | None, source: str = "https://github.com/ghbuild/ghbuild"):
        self.direct_url = direct_url
        self.metadata = type("Metadata", (), {"get_all": lambda _, key: [f"Source, {source}"]})()

    def read_text(self, name: str):
        return json.dumps(self.direct_url) if name == "direct_url.json" and self.direct_url else None


def test_pin_is_the_commit_pip_installed_from():
    dist = _Distribution({"url": "https://github.com/someone/ghbuild-fork.git",
                          "vcs_info": {"vcs": "git", "commit_id": SHA, "requested_revision": "main"}})
    pin = adopt.toolkit_pin(None, dist)
    assert (pin.repository, pin.ref) == ("someone/ghbuild-fork", SHA)


def test_explicit_pin_beats_the_installation():
    pin = adopt.toolkit_pin("Other/GHBuild@" + "f" * 40, _Distribution(None))
    assert (pin.repository, pin.ref, pin.source) == ("other/ghbuild", "f" * 40, "--pin")
    with pytest.raises(UsageError):
        adopt.toolkit_pin("other/ghbuild", _Distribution(None))


DIRECT_DOCKERFILE = """\
FROM debian:bookworm AS build
COPY . /src
RUN gcc -O2 -c -o /tmp/main.o /src/main.c && gcc -o /app /tmp/main.o
RUN ["g++", "-c", "/src/a b.cc"]
RUN CC=clang make -C /src && make install
"""


@pytest.mark.parametrize("launcher", ["/opt/ghbuild/bin/sccache", ""])
def test_a_compiler_called_by_name_goes_behind_the_launcher(tmp_path, launcher):
    """The wrapper exports launchers for CMake and Cargo; gcc called by name would never reach sccache (a build
    that cached nothing, silently). init puts $GHBUILD_SCCACHE_LAUNCHER in front of it; unset (mode off), the
    compiler runs alone. Each wrapped command is run here through sh, as the wrapper runs it."""
    root = tmp_path / "direct"
    root.mkdir()
    (root / "Dockerfile").write_text(DIRECT_DOCKERFILE)
    found = adopt.read_dockerfile(root, "Dockerfile", "direct", adopt.DEFAULT_PLATFORMS)
    commands = [step.replacement.split(f"{adopt.WRAPPER} run build -- ", 1)[1] for step in found.steps]
    assert commands == [
        "sh -c '$GHBUILD_SCCACHE_LAUNCHER gcc -O2 -c -o /tmp/main.o /src/main.c && "
        "$GHBUILD_SCCACHE_LAUNCHER gcc -o /app /tmp/main.o'",
        "sh -c '$GHBUILD_SCCACHE_LAUNCHER g++ -c '\"'\"'/src/a b.cc'\"'\"''",
        "sh -c 'CC=clang make -C /src && make install'",   # a build system: left to its launcher variables
    ]
    tools = tmp_path / "bin"
    tools.mkdir()
    calls = tmp_path / "calls"
    for tool in ("gcc", "g++", "sccache"):
        (tools / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> {calls}\n')
        (tools / tool).chmod(0o755)
    env = {"PATH": f"{tools}:/usr/bin:/bin", "GHBUILD_SCCACHE_LAUNCHER": launcher and str(tools / "sccache")}
    for command in commands[:2]:
        subprocess.run(["/bin/sh", "-c", command], env=env, check=True)
    through = "sccache " if launcher else ""
    assert calls.read_text().splitlines() == [f"{through}gcc -O2 -c -o /tmp/main.o /src/main.c",
                                              f"{through}gcc -o /app /tmp/main.o", f"{through}g++ -c /src/a b.cc"]


@pytest.mark.parametrize("run, wrapped", [
    # a package list continued over lines: no line's start is a command of its own, and nothing compiles here
    ("RUN apt-get update && apt-get install -y \\\n    gcc \\\n    cmake", None),
    # a word in a quoted string is text, separators in it too
    ("RUN cmake -B b && grep -q 'clang' f", "sh -c 'cmake -B b && grep -q '\"'\"'clang'\"'\"' f'"),
    ("RUN export CC=\"gcc\" && make", "sh -c 'export CC=\"gcc\" && make'"),
    ("RUN make && grep -Eq 'gcc|clang' f", "sh -c 'make && grep -Eq '\"'\"'gcc|clang'\"'\"' f'"),
    ("RUN make && echo \"x;gcc\"", "sh -c 'make && echo \"x;gcc\"'"),
    # a nested shell's command is left alone (its quoting is its own)
    ("RUN sh -c 'gcc -c x.c'", "sh -c 'sh -c '\"'\"'gcc -c x.c'\"'\"''"),
    # a continued line after && is a command, so is one after `then`
    ("RUN make && \\\n    gcc -c x.c", "sh -c ' \\\n        make && \\\n        $GHBUILD_SCCACHE_LAUNCHER gcc -c x.c'"),
    ("RUN if true; then cc -c a.c; fi", "sh -c 'if true; then $GHBUILD_SCCACHE_LAUNCHER cc -c a.c; fi'"),
    # shell form that starts with the test command, not an exec form: BuildKit runs it through sh
    ("RUN [ -d / ] && cmake -B b", "sh -c '[ -d / ] && cmake -B b'"),
    ("RUN [\"make\", 4] || gcc -c a.c", "sh -c '[\"make\", 4] || $GHBUILD_SCCACHE_LAUNCHER gcc -c a.c'"),
    # a compiler by path or by another name is left alone (it may be one sccache does not know)
    ("RUN /usr/bin/gcc -c a.c && gcc-12 -c b.c && make", "sh -c '/usr/bin/gcc -c a.c && gcc-12 -c b.c && make'"),
])
def test_only_a_compiler_in_command_position_gets_the_launcher(tmp_path, run, wrapped):
    """What init writes, and that it does what the RUN did: both run through sh (as BuildKit runs them, the
    continued lines joined) with the launcher empty (mode off) and every tool a fake that logs its arguments."""
    (tmp_path / "Dockerfile").write_text(f"FROM debian:bookworm AS build\n{run}\n")
    found = adopt.read_dockerfile(tmp_path, "Dockerfile", "x", adopt.DEFAULT_PLATFORMS)
    commands = [step.replacement.split(f"{adopt.WRAPPER} run build -- ", 1)[1] for step in found.steps]
    assert commands == ([wrapped] if wrapped else [])
    if not wrapped:
        return
    tools, log = tmp_path / "bin", tmp_path / "log"
    tools.mkdir()
    for tool in ("gcc", "cc", "cmake", "make", "grep", "gcc-12"):
        (tools / tool).write_text(f'#!/bin/sh\nprintf "%s|" {tool} "$@" >> {log}; echo >> {log}\n')
        (tools / tool).chmod(0o755)
    env = {"PATH": f"{tools}:/usr/bin:/bin", "GHBUILD_SCCACHE_LAUNCHER": ""}

    def ran(shell_command: str) -> str:
        log.write_text("")
        subprocess.run(["/bin/sh", "-c", shell_command], env=env, cwd=tmp_path, capture_output=True, timeout=30)
        return log.read_text()

    original = run.removeprefix("RUN ").replace("\\\n", "")
    if "/usr/bin/gcc" not in original:          # that one is the machine's compiler, if any: not run here
        assert ran(commands[0]) == ran(original) != ""


def test_a_heredoc_run_that_compiles_is_named_for_wrapping_by_hand(tmp_path):
    """A heredoc's body is a script of the RUN, not instructions of its own: init finds the compile in it and
    says to wrap it by hand (it rewrites no heredoc), and the rest of the file is read as before."""
    (tmp_path / "Dockerfile").write_text("FROM debian:bookworm AS build\nRUN <<EOF\nset -e\ncmake -B b\n"
                                         "cmake --build b\nEOF\nRUN cargo build\n")
    found = adopt.read_dockerfile(tmp_path, "Dockerfile", "x", adopt.DEFAULT_PLATFORMS)
    assert found.skipped == ("Dockerfile:2 (stage build): a heredoc RUN; wrap its build command by hand",)
    assert [(step.first_line, step.last_line) for step in found.steps] == [(6, 6)]
    assert [line for line in dockerfile.instructions((tmp_path / "Dockerfile").read_text())] == [
        (0, 0, "FROM debian:bookworm AS build"), (1, 5, "RUN <<EOF\nset -e\ncmake -B b\ncmake --build b\nEOF"),
        (6, 6, "RUN cargo build")]


def test_under_a_backtick_escape_directive_compile_steps_are_named_not_rewritten(tmp_path):
    """init writes backslash continuations; under `# escape=`` ` BuildKit would read them as new instructions."""
    (tmp_path / "Dockerfile").write_text("# escape=`\nFROM debian:bookworm AS build\nRUN make -C /src && `\n"
                                         "    make install\n")
    found = adopt.read_dockerfile(tmp_path, "Dockerfile", "x", adopt.DEFAULT_PLATFORMS)
    assert found.steps == ()
    assert found.skipped == ("Dockerfile:3 (stage build): the escape directive is a backtick; wrap its build "
                             "command by hand",)
