"""Another repository adopts ghbuild's sccache with the documented lines only, and a fresh runner rebuilds
it from S3: every compile a hit, with per-stage stats in the report and the job summary.

The repository is not ghbuild: a new git repository in the session's folder with two CMake libraries (C++
and C) and a Rust library crate, sources it generates here, a Dockerfile that follows the contract of the
section "Your Dockerfile: three lines for sccache" of docs/building.md (the ARG, the FROM, and in each compile stage the
two mounts and `ghbuild-sccache run STAGE -- ...`; nothing copied from ghbuild), and a hand-written
ghbuild.toml. Its builds use the local services: the helper image infra pushed, S3, the staging registry.

1. `ghbuild build --push`: cold (a fresh key prefix), every compile a miss, stored in S3.
2. `docker builder prune -af`, then `ghbuild build --push` of the same sources with no layer cache at all
   (the repository configures none): the compile stages run again and every compile is a hit.
"""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest

from .enginelib import COLD_BUILD_TIMEOUT, ghbuild_argv

REPOSITORY = "acme/native-libs"
STAGES = {"geometry": "C/C++", "codec": "C/C++", "checksum": "Rust"}

DOCKERFILE = r"""
ARG GHBUILD_SCCACHE_IMAGE=ghcr.io/ghbuild/ghbuild-sccache:1
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${GHBUILD_SCCACHE_IMAGE} AS ghbuild-sccache

FROM ${BASE_IMAGE} AS toolchain
RUN --mount=type=cache,target=/var/cache/apt,sharing=locked \
    --mount=type=cache,target=/var/lib/apt/lists,sharing=locked \
    set -eu; \
    rm -f /etc/apt/apt.conf.d/docker-clean; \
    apt-get update -q; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends g++ gcc make cmake rustc cargo

{cmake_stages}FROM toolchain AS checksum
WORKDIR /src/checksum
ENV CARGO_HOME=/root/.cargo
RUN --mount=type=bind,source=crates/checksum,target=/src/checksum \
    --mount=type=bind,from=ghbuild-sccache,source=/,target=/opt/ghbuild \
    --mount=type=secret,id=ghbuild_sccache,required=false \
    /opt/ghbuild/bin/ghbuild-sccache run checksum -- sh -euc ' \
        cargo build --release --offline --locked --target-dir /tmp/target; \
        mkdir -p /out/lib; \
        cp /tmp/target/release/libchecksum.rlib /out/lib/; \
        rm -rf /tmp/target'

FROM ${BASE_IMAGE} AS runtime
COPY --from=geometry /out/ /usr/local/
COPY --from=codec /out/ /usr/local/
COPY --from=checksum /out/ /usr/local/
"""


# One compile stage per CMake library, each with the contract's lines around its build command.
CMAKE_STAGE = r"""FROM toolchain AS {name}
WORKDIR /src/{name}
RUN --mount=type=bind,source=libs/{name},target=/src/{name} \
    --mount=type=bind,from=ghbuild-sccache,source=/,target=/opt/ghbuild \
    --mount=type=secret,id=ghbuild_sccache,required=false \
    /opt/ghbuild/bin/ghbuild-sccache run {name} -- sh -euc ' \
        cmake -S /src/{name} -B /tmp/build -DCMAKE_INSTALL_PREFIX=/out; \
        cmake --build /tmp/build --parallel 2; \
        cmake --install /tmp/build; \
        rm -rf /tmp/build'

"""


def _dockerfile() -> str:
    stages = "".join(CMAKE_STAGE.format(name=name) for name in ("geometry", "codec"))
    return DOCKERFILE.replace("{cmake_stages}", stages).lstrip()


def _cmake_library(root: Path, name: str, language: str, files: int, build_id: str) -> None:
    ext, lang = (".cpp", "CXX") if language == "C++" else (".c", "C")
    src = root / "libs" / name
    (src / "src").mkdir(parents=True)
    for i in range(files):
        body = (f"int {name}_f{i}(int x) {{ int s = 0; for (int k = 0; k < x; ++k) s += k * {i + 1}; return s; }}\n"
                + (f"namespace {name} {{ double scale{i}(double v) {{ return v * {i + 2}.5; }} }}\n"
                   if lang == "CXX" else ""))
        (src / "src" / f"part{i}{ext}").write_text(body)
    sources = " ".join(f"src/part{i}{ext}" for i in range(files))
    (src / "CMakeLists.txt").write_text(textwrap.dedent(f"""\
        cmake_minimum_required(VERSION 3.16)
        project({name} LANGUAGES {lang})
        add_library({name} STATIC {sources})
        install(TARGETS {name} ARCHIVE DESTINATION lib)
        """))
    # Not read by any compiler: makes this session's compile steps miss the layer cache of earlier sessions.
    (src / ".build-id").write_text(build_id + "\n")


def _rust_crate(root: Path, build_id: str) -> None:
    crate = root / "crates" / "checksum"
    (crate / "src").mkdir(parents=True)
    (crate / "Cargo.toml").write_text('[package]\nname = "checksum"\nversion = "0.1.0"\nedition = "2021"\n\n'
                                      '[lib]\ncrate-type = ["rlib"]\n')
    (crate / "src" / "lib.rs").write_text(
        "pub fn adler32(data: &[u8]) -> u32 {\n    let (mut a, mut b) = (1u32, 0u32);\n"
        "    for &x in data { a = (a + x as u32) % 65521; b = (b + a) % 65521; }\n    (b << 16) | a\n}\n")
    # The sources are mounted read-only: the lock file is part of them (cargo --locked).
    (crate / "Cargo.lock").write_text('version = 3\n\n[[package]]\nname = "checksum"\nversion = "0.1.0"\n')
    (crate / ".build-id").write_text(build_id + "\n")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin",
                               "HOME": str(root)}).stdout.strip()


@pytest.fixture(scope="module")
def adopter(session):
    root = session.workdir / "native-libs"
    root.mkdir()
    _cmake_library(root, "geometry", "C++", 4, session.sid)
    _cmake_library(root, "codec", "C", 3, session.sid)
    _rust_crate(root, session.sid)
    (root / "Dockerfile").write_text(_dockerfile())
    (root / ".dockerignore").write_text("**/target/\n**/build/\n")
    (root / "ghbuild.toml").write_text(textwrap.dedent(f"""\
        [trust]
        canonical-repository = "{REPOSITORY}"

        [sccache]
        enabled = true

        [images.libs]
        dockerfile = "Dockerfile"
        context = "."
        target = "runtime"
        platforms = ["linux/amd64"]
        """))
    _git(root, "init", "-q", "-b", "main")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "native libraries")
    prefix = session.new_key_prefix("-adopter")
    namespace = f"ghbuild-test-{session.sid}-adopter"
    session.created_repos.add(f"{namespace}/libs")
    # The adopter's own config, plus the local services; none of ghbuild's own image settings.
    env = {k: v for k, v in session.base_env.items() if not k.startswith(("GHBUILD_IMAGES_", "GHBUILD_REGISTRIES_"))}
    env.update(GHBUILD_CONFIG=str(root / "ghbuild.toml"), GHBUILD_SCCACHE_KEY_PREFIX=prefix,
               GHBUILD_REGISTRIES_STAGING=f"{session.registry.host}/{namespace}/{{image}}")
    return root, env, _git(root, "rev-parse", "HEAD")


def _build(session, adopter, name: str, **extra_env: str):
    _root, env, _sha = adopter
    summary = session.workdir / f"{name}-summary.md"
    summary.write_text("")
    argv = [*ghbuild_argv(), "build", "--image", "libs", "--arch", "amd64", "--push", "--json",
            "--event", "push", "--repository", REPOSITORY, "--ref", "refs/heads/main",
            "--default-branch", "main", "--sha", session.sha(name)]
    session.used_shas.add(session.sha(name))
    run = session.ghbuild(name, argv=argv, timeout=COLD_BUILD_TIMEOUT,
                          env={**env, "GITHUB_STEP_SUMMARY": str(summary), **extra_env})
    assert run.rc == 0, run.tail(60)
    return run, summary.read_text()


@pytest.fixture(scope="module")
def cold(session, adopter):
    return _build(session, adopter, "adopter-cold")


@pytest.fixture(scope="module")
def rebuilt(session, adopter, cold):
    proc = session.docker_run("builder", "prune", "-af", timeout=900)
    assert proc.returncode == 0, proc.stderr
    return _build(session, adopter, "adopter-rebuilt")


def test_the_dockerfile_has_only_the_documented_lines(adopter):
    """Nothing of ghbuild's is copied: no ARG for sccache settings, no stats stage, no script."""
    root, _, _ = adopter
    text = (root / "Dockerfile").read_text()
    mentions = [line for line in text.splitlines() if "ghbuild" in line.lower()]
    assert len(mentions) == 2 + 3 * len(STAGES), mentions     # ARG, FROM; per compile stage 2 mounts + the run line
    for absent in ("SCCACHE_BUCKET", "GHBUILD_SCCACHE_MODE", "ghbuild-stats", "COPY --from=ghbuild"):
        assert absent not in text


def test_cold_build_pins_the_helper_and_misses_everything(session, cold):
    run, _ = cold
    report = run.report
    helper = session.local["GHBUILD_SCCACHE_HELPER_IMAGE"].rsplit(":", 1)[0]
    assert f"--build-arg 'GHBUILD_SCCACHE_IMAGE={helper}@sha256:" in report["command"] \
        or f"--build-arg GHBUILD_SCCACHE_IMAGE={helper}@sha256:" in report["command"], report["command"]
    assert "--secret id=ghbuild_sccache," in report["command"] and "SCCACHE_BUCKET" not in report["command"]
    sc = report["sccache"]
    assert sc["mode"] == "read-write", sc["reason"]
    assert set(sc["stages"]) == set(STAGES), sc["stages"].keys()
    for name, language in STAGES.items():
        stage = sc["stages"][name]
        assert stage["from_layer_cache"] is False and stage["mode"] == "read-write", (name, stage)
        assert stage["hits"] == 0 and stage["misses"] > 0, (name, stage)
        assert set(stage["misses_by_language"]) == {language}, (name, stage)
    # Every source file, plus CMake's own compiler checks (they go through the launcher too).
    assert sc["stages"]["geometry"]["misses"] >= 4 and sc["stages"]["codec"]["misses"] >= 3
    assert report["pushed"] is True


def test_pruned_builder_without_layer_cache_hits_every_compile(cold, rebuilt):
    first, second = cold[0].report["sccache"], rebuilt[0].report["sccache"]
    # The adopter configures no registry layer cache (and the gha one needs buildx): nothing to restore from.
    cache_from = rebuilt[0].report["cache_from"]
    assert not any("type=registry" in ref for ref in cache_from), cache_from
    assert all(any(ref in line and "skipped" in line for line in rebuilt[0].report["skipped"])
               for ref in cache_from), rebuilt[0].report["skipped"]
    assert second["mode"] == "read-write" and second["misses"] == 0, second
    assert second["hits"] == first["misses"] > 0 and second["hit_rate"] == 1.0
    for name in STAGES:
        before, after = first["stages"][name], second["stages"][name]
        assert after["from_layer_cache"] is False, f"stage {name} came from the layer cache after the prune"
        assert after["misses"] == 0 and after["hits"] == before["misses"], (name, before, after)
        assert after["hits_by_language"] == before["misses_by_language"], (name, before, after)
        assert after["read_errors"] == 0 and after["write_errors"] == 0, (name, after)


def test_per_stage_stats_reach_the_terminal_and_the_job_summary(rebuilt):
    run, summary = rebuilt
    sc = run.report["sccache"]
    assert "#### sccache per stage" in summary
    for name in STAGES:
        stage = sc["stages"][name]
        assert f"    {name:<10} read-write hits {stage['hits']:>4}  misses    0" in run.stderr, run.stderr[-2000:]
        row = next(line for line in summary.splitlines() if line.startswith(f"| {name} |"))
        assert f"| read-write | {stage['hits']} | 0 | 100.0 % |" in row, row


def test_a_second_build_of_the_same_commit_is_served_by_the_layer_cache(session, adopter, rebuilt):
    """No compile runs twice on one builder: the steps are reported as layer-cached, nothing counted."""
    run, _ = _build(session, adopter, "adopter-again")
    sc = run.report["sccache"]
    assert all(stage["from_layer_cache"] for stage in sc["stages"].values()) and set(sc["stages"]) == set(STAGES)
    assert (sc["hits"], sc["misses"]) == (0, 0)
    assert "(layer cache)" in run.stderr
