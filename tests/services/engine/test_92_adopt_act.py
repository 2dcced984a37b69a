"""Another repository adopts ghbuild with `ghbuild init`, and the caller workflow init wrote runs under act.

The repository is not ghbuild: `acme/geometry-libs`, a new git repository generated here with two tiny CMake
libraries (one C, one C++), a program that links both, and its own multi-stage Dockerfile (toolchain, a CMake
build, a runtime stage). It is committed first as it was before adopting ghbuild; then, in it:

1. `ghbuild init --diff --platform linux/amd64 --pin ghbuild/ghbuild@<sha>` (the ghbuild of this venv, as an
   adopter's `pip install`; the pin names the ghbuild commit act will use) writes ghbuild.toml and
   .github/workflows/images.yml, and prints the Dockerfile lines for sccache as a patch. Both files are
   committed exactly as init wrote them; the patch is applied with `git apply` as printed and committed: the
   Dockerfile gets nothing written by hand. Its helper image is the one `make infra-up` pushed (the runner's
   GHBUILD_SCCACHE_HELPER_IMAGE, as a repository that sets sccache.helper-image), pinned by digest.
2. act runs images.yml for a push to the repository's default branch, with the secrets the workflow names.
   ghbuild's reusable workflow and its `$/` actions come from a separate checkout of ghbuild (the harness's
   throwaway tree, its own commit), mapped with --local-repository the way GitHub fetches
   `ghbuild/ghbuild/.github/workflows/build-images.yml@<sha>`; only the adopter's repository is checked out.
3. A second push changes a file the compile stage copies but compiles nothing from: the stage runs again
   (its layer cache no longer matches) and every compile is a sccache hit on S3 (a fresh key prefix for this
   module, so the first build missed every compile).

Checked in the registry and the engine, not only by act's exit code: the plan, build and summary jobs are green;
the staging repository holds exactly `<sha>-x86_64` (a linux/amd64 image, a trusted push of the canonical
repository), the digest the workflow's `digests` output names; that image runs the adopter's program, built
from both libraries; the build job's `report` output and its log give the `build` stage's sccache stats
(read-write, misses first, hits on the second push); nothing of ghbuild landed in the adopter's workspace.

The machine's settings reach act's steps as a runner image would have them (the engine, the local base image,
the local registries, the local helper image and S3 in place of ghcr.io and AWS), as in
test_90_workflows_act.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
import uuid

import pytest
from act import harness

from .enginelib import ghbuild_argv

REPOSITORY = "acme/geometry-libs"
IMAGE = "geometry-libs"          # init names the image of a root Dockerfile after the repository
ACT_TIMEOUT = 1500

DOCKERFILE = """\
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE} AS toolchain
RUN apt-get update -q \\
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends cmake make gcc g++ \\
    && rm -rf /var/lib/apt/lists/*

FROM toolchain AS build
COPY CMakeLists.txt /src/CMakeLists.txt
COPY libs /src/libs
COPY app /src/app
RUN cmake -S /src -B /build -DCMAKE_BUILD_TYPE=Release \\
    && cmake --build /build --parallel 2 \\
    && cmake --install /build --prefix /out

FROM ${BASE_IMAGE} AS runtime
COPY --from=build /out/ /usr/local/
CMD ["/usr/local/bin/shapes"]
"""

SOURCES = {
    "CMakeLists.txt": """\
        cmake_minimum_required(VERSION 3.16)
        project(geometry_libs LANGUAGES C CXX)
        add_subdirectory(libs/checksum)
        add_subdirectory(libs/shapes)
        add_subdirectory(app)
        """,
    "libs/checksum/CMakeLists.txt": """\
        add_library(checksum STATIC checksum.c)
        target_include_directories(checksum PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
        """,
    "libs/checksum/checksum.h": """\
        #ifdef __cplusplus
        extern "C" {
        #endif
        unsigned adler32(const unsigned char *data, unsigned long size);
        #ifdef __cplusplus
        }
        #endif
        """,
    "libs/checksum/checksum.c": """\
        #include "checksum.h"
        unsigned adler32(const unsigned char *data, unsigned long size) {
            unsigned a = 1, b = 0;
            for (unsigned long i = 0; i < size; ++i) { a = (a + data[i]) % 65521; b = (b + a) % 65521; }
            return (b << 16) | a;
        }
        """,
    "libs/shapes/CMakeLists.txt": """\
        add_library(shapes STATIC shapes.cpp)
        target_include_directories(shapes PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
        target_compile_features(shapes PUBLIC cxx_std_17)
        """,
    "libs/shapes/shapes.h": """\
        #pragma once
        namespace shapes { struct Rect { int w, h; int area() const; }; }
        """,
    "libs/shapes/shapes.cpp": """\
        #include "shapes.h"
        int shapes::Rect::area() const { return w * h; }
        """,
    "app/CMakeLists.txt": """\
        add_executable(shapes_app main.cpp)
        set_target_properties(shapes_app PROPERTIES OUTPUT_NAME shapes)
        target_link_libraries(shapes_app PRIVATE shapes checksum)
        install(TARGETS shapes_app RUNTIME DESTINATION bin)
        """,
    "app/main.cpp": """\
        #include <cstdio>
        #include "checksum.h"
        #include "shapes.h"
        int main() {
            shapes::Rect r{3, 4};
            const unsigned char text[] = "Wikipedia";
            std::printf("area %d adler32 %08x\\n", r.area(), adler32(text, sizeof text - 1));
            return 0;
        }
        """,
}
# What the program prints: 3 x 4, and Adler-32 of "Wikipedia" (the checksum's well-known example).
EXPECTED_OUTPUT = "area 12 adler32 11e60398"
# Copied into the compile stage with the libraries (`COPY libs`), compiled by nothing: this session's compile
# step misses the engine's layer cache of earlier sessions, and the second push changes only it.
BUILD_ID = "libs/BUILD-ID"


def _run(argv: list[str], cwd, env: dict[str, str], timeout: float = 120, stdin: str | None = None):
    return subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def adoption(session):
    """ghbuild's separate checkout, and the adopter's repository before and after `ghbuild init`."""
    scratch = session.workdir / "adopt-act"
    ghbuild_tree, ghbuild_sha, _, wheelhouse = harness.ghbuild_checkout(
        scratch, f"ghbuild for the adopter's act run, session {session.sid}")
    repo = scratch / "geometry-libs"
    files = {name: textwrap.dedent(text) for name, text in SOURCES.items()}
    files["Dockerfile"] = DOCKERFILE
    files[BUILD_ID] = f"{session.sid}\n"
    harness.make_repository(repo, files, REPOSITORY, f"geometry-libs, session {session.sid}")
    # As an adopter runs it: at the repository's root, the environment of a developer's shell.
    init = _run([*ghbuild_argv(), "init", "--diff", "--platform", "linux/amd64",
                 "--pin", f"{harness.SELF_REPOSITORY}@{ghbuild_sha}"],
                repo, harness._base_env())
    assert init.returncode == 0, f"ghbuild init exited {init.returncode}:\n{init.stderr}"
    config = (repo / "ghbuild.toml").read_text("utf-8")
    workflow = (repo / ".github/workflows/images.yml").read_text("utf-8")
    harness.commit_all(repo, "adopt ghbuild: ghbuild.toml and images.yml from ghbuild init")
    # The Dockerfile's sccache lines: init's patch as printed, nothing by hand.
    applied = _run(["git", "apply", "-"], repo, harness._base_env(), stdin=init.stdout)
    assert applied.returncode == 0, f"git apply of `ghbuild init --diff`:\n{applied.stderr}\n{init.stdout}"
    sha = harness.commit_all(repo, "Dockerfile: the sccache lines of `ghbuild init --diff`")
    return {"scratch": scratch, "wheelhouse": wheelhouse, "ghbuild_tree": ghbuild_tree, "ghbuild_sha": ghbuild_sha,
            "repo": repo, "sha": sha, "init": init, "config": config, "workflow": workflow}


@pytest.fixture(scope="module")
def adopter_act(session, adoption):
    """The act setup of the adopter's runs: the runner's environment and the secrets of a trusted push."""
    scratch, wheelhouse = adoption["scratch"], adoption["wheelhouse"]
    local = session.local
    namespace = f"ghbuild-test-{session.sid}-adopt"
    staging = f"{local['GHBUILD_LOCAL_STAGING']}/{namespace}"
    session.new_key_prefix("-adopt-act")        # empty: the first build misses every compile
    env = {
        **harness.runner_env(local, session.base_env, wheelhouse),
        # The registries of the config init wrote (ghcr.io), pointed at the local staging registry.
        "GHBUILD_REGISTRIES_STAGING": f"{staging}/{{image}}",
        "GHBUILD_REGISTRIES_CACHE": f"{staging}/cache",
    }
    assert env.get("GHBUILD_SCCACHE_HELPER_IMAGE"), "infra's local.env names no helper image"
    session.created_repos.update({f"{namespace}/{IMAGE}", f"{namespace}/cache"})
    session.used_shas.update({adoption["sha"], adoption["ghbuild_sha"]})
    aws_secret = session.base_env["AWS_SECRET_ACCESS_KEY"]
    session.secrets.add(aws_secret)
    # What GitHub gives a push to the canonical repository: the job token and the repository's secrets.
    secrets = {"GITHUB_TOKEN": f"ghs_adopt{uuid.uuid4().hex}",
               "AWS_ACCESS_KEY_ID": local["AWS_ACCESS_KEY_ID"], "AWS_SECRET_ACCESS_KEY": aws_secret}
    act = harness.Act(tree=adoption["ghbuild_tree"], sha=adoption["ghbuild_sha"], scratch=scratch, env=env)
    act.namespace, act.secrets = namespace, secrets
    return act


def _push(session, adoption, act, name: str, sha: str):
    run = act.run(name, "push", ".github/workflows/images.yml",
                  harness.event_payload("push", sha, repository=REPOSITORY),
                  secrets=act.secrets, tree=adoption["repo"], timeout=ACT_TIMEOUT)
    run.namespace, run.secrets, run.sha = act.namespace, set(act.secrets.values()), sha
    run.tags = session.registry.tags(f"{act.namespace}/{IMAGE}") or []
    outputs = run.outputs(f"/{IMAGE}-amd64")
    run.report = json.loads(outputs["report"]) if outputs.get("report") else None
    return run


@pytest.fixture(scope="module")
def caller_run(session, adoption, adopter_act):
    return _push(session, adoption, adopter_act, "adopter-push", adoption["sha"])


@pytest.fixture(scope="module")
def second_run(session, adoption, adopter_act, caller_run):
    """The next push: only the file the compile stage copies and never compiles changed."""
    (adoption["repo"] / BUILD_ID).write_text(f"{session.sid} second push\n", "utf-8")
    sha = harness.commit_all(adoption["repo"], "libs: the build id of the second push")
    session.used_shas.add(sha)
    return _push(session, adoption, adopter_act, "adopter-second-push", sha)


# --------------------------------------------------------------------------- what init wrote


def test_init_wrote_the_config_and_a_workflow_pinned_to_the_ghbuild_commit(adoption):
    config, workflow = adoption["config"], adoption["workflow"]
    assert 'canonical-repository = "acme/geometry-libs"' in config
    assert f"[images.{IMAGE}]" in config and 'target = "runtime"' in config
    assert 'platforms = ["linux/amd64"]' in config
    assert f"uses: ghbuild/ghbuild/.github/workflows/build-images.yml@{adoption['ghbuild_sha']}" in workflow
    assert "permissions: {}" in workflow and "packages: write" in workflow


def test_the_dockerfile_got_inits_patch_and_nothing_else(adoption, tmp_path):
    """init's --diff is a patch of the adopter's Dockerfile alone; `git apply` took it as printed, and the
    commit that adopts it changes the Dockerfile by exactly that patch (undone, the original comes back)."""
    patch = adoption["init"].stdout
    assert patch.startswith("--- a/Dockerfile\n+++ b/Dockerfile\n"), patch[:300]
    assert "+FROM ${GHBUILD_SCCACHE_IMAGE} AS ghbuild-sccache" in patch
    assert "/opt/ghbuild/bin/ghbuild-sccache run build -- " in patch
    repo = adoption["repo"]
    changed = _run(["git", "show", "--name-only", "--format=", adoption["sha"]], repo, harness._base_env()).stdout
    assert changed.split() == ["Dockerfile"]
    committed = _run(["git", "show", f"{adoption['sha']}:Dockerfile"], repo, harness._base_env()).stdout
    (tmp_path / "Dockerfile").write_text(committed, "utf-8")
    undone = _run(["git", "apply", "-R", "-"], tmp_path, harness._base_env(), stdin=patch)
    assert undone.returncode == 0, undone.stderr
    assert (tmp_path / "Dockerfile").read_text("utf-8") == DOCKERFILE


# --------------------------------------------------------------------------- the caller workflow under act


def test_the_workflow_init_wrote_builds_and_stages_the_adopters_image(session, adoption, caller_run):
    run = caller_run
    harness.assert_green(run, ("/plan", f"/{IMAGE}-amd64", "/summary"))
    name = f"{run.namespace}/{IMAGE}"
    registry = session.registry
    assert run.tags == [f"{adoption['sha']}-x86_64"], "a trusted push stages exactly <sha>-<arch>"
    status, headers, body = registry.manifest(name, f"{adoption['sha']}-x86_64")
    assert status == 200, status
    digest = headers["docker-content-digest"]
    config = registry.blob_json(name, json.loads(body)["config"]["digest"])
    assert (config["os"], config["architecture"]) == ("linux", "amd64")
    digests = json.loads(run.outputs("/summary")["digests"])
    assert digests == {f"{IMAGE}-amd64": {"image": IMAGE, "arch": "amd64", "platform": "linux/amd64",
                                          "digest": digest, "ref": f"{registry.host}/{name}@{digest}",
                                          "sha": adoption["sha"], "trusted": True,
                                          # act gives no OIDC token and the adopter set no cosign key: unsigned
                                          "signature": "none"}}


def test_the_staged_image_runs_the_adopters_program(session, caller_run):
    ref = json.loads(caller_run.outputs("/summary")["digests"])[f"{IMAGE}-amd64"]["ref"]
    try:
        proc = session.docker_run("run", "--rm", ref, timeout=300)
    finally:
        session.docker_run("rmi", ref, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == EXPECTED_OUTPUT


def test_ghbuild_came_from_its_own_checkout_not_the_adopters_workspace(adoption, caller_run):
    assert f"ghbuild-ghbuild-.github-actions-setup@{adoption['ghbuild_sha']}" in caller_run.log
    tracked = _run(["git", "ls-files"], adoption["repo"], harness._base_env()).stdout.split()
    assert sorted(n for n in tracked if n.startswith(".github/")) == [".github/workflows/images.yml"]
    assert not (adoption["repo"] / ".github" / "actions").exists()
    assert not (adoption["repo"] / "ghbuild").exists()


def _stage(run) -> dict:
    assert run.report is not None, f"{run.name}: the build job set no report output:\n{run.failure_context()}"
    sc = run.report["sccache"]
    assert set(sc["stages"]) == {"build"}, sc["stages"]
    return sc["stages"]["build"]


def test_the_build_mounts_the_configured_helper_and_reports_the_stages_sccache_stats(session, caller_run):
    """Cold (an empty key prefix): read-write on S3, every compile of the `build` stage a miss, stored."""
    run = caller_run
    helper = session.local["GHBUILD_SCCACHE_HELPER_IMAGE"].rsplit(":", 1)[0]
    assert re.search(rf"GHBUILD_SCCACHE_IMAGE={re.escape(helper)}@sha256:[0-9a-f]{{64}}", run.report["command"]), \
        run.report["command"]
    assert run.report["sccache"]["mode"] == "read-write", run.report["sccache"]["reason"]
    stage = _stage(run)
    assert stage["from_layer_cache"] is False and stage["mode"] == "read-write", stage
    # Three sources (C, C++, C++), plus CMake's own compiler checks: they go through the launcher too.
    assert stage["hits"] == 0 and stage["misses"] >= 3, stage
    assert set(stage["misses_by_language"]) == {"C/C++"}, stage
    assert f"    build      read-write hits    0  misses {stage['misses']:>4}" in run.log, \
        "the per-stage stats must be in the build job's log"


def test_the_second_push_hits_every_compile_on_s3(session, adoption, caller_run, second_run):
    run = second_run
    harness.assert_green(run)
    assert f"{run.sha}-x86_64" in run.tags
    first, second = _stage(caller_run), _stage(run)
    assert second["from_layer_cache"] is False, "the compile stage must have run again"
    assert second["misses"] == 0 and second["hits"] == first["misses"] > 0, (first, second)
    assert second["hits_by_language"] == first["misses_by_language"], (first, second)
    assert second["read_errors"] == 0 and second["write_errors"] == 0, second
    assert run.report["sccache"]["hit_rate"] == 1.0, run.report["sccache"]
    assert f"    build      read-write hits {second['hits']:>4}  misses    0" in run.log


def test_no_secret_in_the_act_log(caller_run, second_run):
    """act masks the secrets it was given, ghbuild the AWS key: neither may appear in the logs."""
    leaks = [(run.name, n) for run in (caller_run, second_run) for n, line in enumerate(run.log.splitlines(), 1)
             if any(secret in line for secret in run.secrets) and not line.lstrip().startswith("::add-mask::")]
    assert leaks == []
