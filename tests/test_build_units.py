"""The pure parts of the build path: command assembly, log reading, stage reading, layer attribution,
budgets and the sccache summary. The engine-backed behaviour is in tests/services/engine/."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from ghbuild import render
from ghbuild.build import audit, buildcmd, buildlog
from ghbuild.build.report import summarize_sccache
from ghbuild.build.sccache import SccacheDecision
from ghbuild.github.context import ContextFlags, from_environment
from ghbuild.plan import dockerfile
from ghbuild.plan.planner import plan

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).parent / "fixtures"
SHA = "a" * 40


def _options(tmp_path, extra=""):
    from ghbuild.config import configfile

    (tmp_path / "ghbuild.toml").write_text(f"""
[trust]
canonical-repository = "org/proj"
[registries]
cache = "ghcr.io/org/cache"
staging = "ghcr.io/org/ci-{{image}}"
[images.cpu]
dockerfile = "docker/Dockerfile.cpu"
target = "runtime"
build-args = {{ PYTHON_VERSION = "3.12" }}
platforms = ["linux/amd64", "linux/arm64"]
{extra}""")
    return configfile.load(str(tmp_path / "ghbuild.toml"), env={}, cwd=tmp_path)


def _job(tmp_path, **ctx):
    overrides = ContextFlags(**{"event": "push", "repository": "org/proj", "ref": "main", "sha": SHA,
                             "default_branch": "main", **ctx})
    context = from_environment({}, overrides, tmp_path)
    return plan(context, _options(tmp_path)).job("cpu", "amd64")


def _settings(**kw):
    return buildcmd.BuildSettings(docker="/usr/bin/docker", project_dir=Path("/p"), network="host", **kw)


# --------------------------------------------------------------------------- command assembly

def test_buildx_command_applies_every_cache_and_pushes(tmp_path):
    secret = buildcmd.Secret("ghbuild_sccache", Path("/tmp/x/ghbuild_sccache"))
    cmd = buildcmd.build_command(_job(tmp_path), _settings(push=True, builder="ghbuild", secrets=(secret,),
                                                           extra_build_args={"GHBUILD_SCCACHE_MODE": "read-write"},
                                                           metadata_file=Path("/tmp/m.json")))
    argv = list(cmd.argv)
    assert argv[:5] == ["/usr/bin/docker", "buildx", "build", "--builder", "ghbuild"] and cmd.env == {}
    assert argv[argv.index("--platform") + 1] == "linux/amd64"
    assert argv[argv.index("--target") + 1] == "runtime"
    assert argv[argv.index("--file") + 1] == "/p/docker/Dockerfile.cpu" and argv[-1] == "/p"
    assert argv[argv.index("--network") + 1] == "host" and argv[argv.index("--allow") + 1] == "network.host"
    assert argv[argv.index("--secret") + 1] == "id=ghbuild_sccache,src=/tmp/x/ghbuild_sccache"
    assert "PYTHON_VERSION=3.12" in argv and "GHBUILD_SCCACHE_MODE=read-write" in argv
    froms = [argv[i + 1] for i, a in enumerate(argv) if a == "--cache-from"]
    tos = [argv[i + 1] for i, a in enumerate(argv) if a == "--cache-to"]
    assert froms == ["type=gha,scope=main-cpu-x86_64", "type=registry,ref=ghcr.io/org/cache:main-cpu-x86_64"]
    # Every exported blob gzip, forced: the audit's uncompressed stage blobs on this builder stay local.
    assert tos[0] == "type=gha,scope=main-cpu-x86_64,mode=max,ignore-error=true,compression=gzip,force-compression=true"
    assert tos[1] == ("type=registry,ref=ghcr.io/org/cache:main-cpu-x86_64,mode=max,ignore-error=true,"
                      "image-manifest=true,oci-mediatypes=true,compression=gzip,force-compression=true")
    assert "--provenance=false" in argv and argv[argv.index("--metadata-file") + 1] == "/tmp/m.json"
    # docker-container (the default driver here) pushes and loads: two exporters.
    assert argv[argv.index("--output") + 1] == "type=image,push=true,compression=gzip,force-compression=true"
    assert "--load" in argv
    assert cmd.skipped == ()


def test_the_docker_driver_pushes_from_the_engine_with_one_exporter(tmp_path):
    """The docker driver's image exporter stores the image in the engine and pushes it; a second exporter
    (--load) would collide with it on the tag ('image ... already exists')."""
    pushed = list(buildcmd.build_command(_job(tmp_path), _settings(push=True, driver="docker")).argv)
    assert pushed[pushed.index("--output") + 1] == "type=image,push=true,compression=gzip,force-compression=true"
    assert "--load" not in pushed
    local = list(buildcmd.build_command(_job(tmp_path), _settings(push=False, driver="docker")).argv)
    assert "--output" not in local and "--load" in local


def test_a_compression_the_cache_spec_names_is_kept(tmp_path):
    job = _job(tmp_path)._replace(cache_to=("type=registry,ref=r/c:x,mode=max,compression=zstd",))
    argv = list(buildcmd.build_command(job, _settings(push=True)).argv)
    assert argv[argv.index("--cache-to") + 1] == "type=registry,ref=r/c:x,mode=max,compression=zstd"


def test_an_image_only_read_locally_is_stored_uncompressed(tmp_path):
    """The layer audit's stage builds: gzip of a toolchain layer would cost more than the build."""
    for driver, exporter in (("docker", "image"), ("docker-container", "docker")):
        settings = _settings(push=False, driver=driver, uncompressed=True)
        argv = list(buildcmd.build_command(_job(tmp_path), settings).argv)
        assert argv[argv.index("--output") + 1] == f"type={exporter},compression=uncompressed" and "--load" not in argv


def test_a_builder_that_cannot_export_caches_still_reads_them_and_says_so(tmp_path):
    why = "builder 'default' (docker driver) exports no cache without the containerd image store"
    cmd = buildcmd.build_command(_job(tmp_path), _settings(push=True, driver="docker", cache_export_problem=why))
    argv = list(cmd.argv)
    assert "--cache-to" not in argv and argv.count("--cache-from") == 2
    assert [line.split(":")[0] for line in cmd.skipped] == [
        "cache-to type=gha,scope=main-cpu-x86_64,mode=max,ignore-error=true",
        "cache-to type=registry,ref=ghcr.io/org/cache"]
    assert all(line.endswith(f"skipped: {why}") for line in cmd.skipped)


def test_a_gha_cache_the_builder_cannot_use_is_named_not_dropped(tmp_path):
    """buildx drops type=gha silently without the runtime variables; ghbuild leaves it out and says why."""
    cmd = buildcmd.build_command(_job(tmp_path), _settings(push=True, gha_problem="no token"))
    argv = list(cmd.argv)
    assert not any(a.startswith("type=gha") for a in argv)
    assert [line for line in cmd.skipped] == ["cache-from type=gha,scope=main-cpu-x86_64: skipped: no token",
                                              "cache-to type=gha,scope=main-cpu-x86_64,mode=max,ignore-error=true: "
                                              "skipped: no token"]
    assert argv.count("--cache-from") == 1 and argv.count("--cache-to") == 1     # the registry cache stays


def test_fork_pull_request_command_writes_no_cache_and_pushes_nothing(tmp_path):
    job = _job(tmp_path, event="pull_request", pr=7, base="main", head_repo="someone/proj", head_ref="x", ref=None)
    cmd = buildcmd.build_command(job, _settings(push=job.push))
    argv = list(cmd.argv)
    tos = [argv[i + 1] for i, a in enumerate(argv) if a == "--cache-to"]
    assert job.push is False and "--output" not in argv and "--load" in argv
    scope = job.cache_to[0].split("scope=")[1]
    assert tos == [f"type=gha,scope={scope},compression=gzip,force-compression=true"] and "main-cpu" not in tos[0]


def test_another_contexts_builder_is_reached_through_the_context(tmp_path):
    argv = buildcmd.build_command(_job(tmp_path), _settings(builder="ci", context="ci", driver="docker")).argv
    assert list(argv[:5]) == ["/usr/bin/docker", "--context", "ci", "buildx", "build"] and "--builder" not in argv


def test_display_quotes_arguments(tmp_path):
    cmd = buildcmd.build_command(_job(tmp_path), _settings(extra_build_args={"X": "a b"}))
    assert "'X=a b'" in cmd.display() and cmd.display().startswith("/usr/bin/docker buildx build")


# --------------------------------------------------------------------------- reading Dockerfiles and logs

def test_dockerfile_stages_of_the_example():
    stages = dockerfile.stages(ROOT / "docker" / "Dockerfile.cpu")
    names = [s.name for s in stages]
    assert names == ["ghbuild-sccache", "os-base", "toolchain", "cpp", "rust", "wheel", "runtime"]
    assert [s.label for s in dockerfile.chain("runtime", stages)] == ["os-base", "runtime"]
    assert [s.label for s in dockerfile.chain("cpp", stages)] == ["os-base", "toolchain", "cpp"]
    assert dockerfile.chain("nope", stages) == []
    by_name = {s.name: s for s in stages}
    assert by_name["os-base"].history_entries == 2      # RUN, RUN (ARG and FROM add no history)
    assert by_name["runtime"].history_entries == 5      # COPY, COPY, RUN, ENV, CMD (no stats stage copied in)


def test_dockerfile_continuations_and_comments(tmp_path):
    path = tmp_path / "Dockerfile"
    path.write_text("ARG B=x\nFROM --platform=$BUILDPLATFORM ${B} AS One\n# c\nRUN a \\\n  b\nENV X=1\n"
                    "FROM one\nCOPY . /\n")
    stages = dockerfile.stages(path)
    assert [(s.label, s.base, s.history_entries) for s in stages] == [("one", "${B}", 2), ("stage-1", "one", 1)]
    assert [s.label for s in dockerfile.chain(None, stages)] == ["one", "stage-1"]


def test_stage_args_count_as_history_and_dependencies_follow_from_uses(tmp_path):
    path = tmp_path / "Dockerfile"
    path.write_text("FROM x AS a\nARG ONE\nARG TWO=2\nRUN true\nCOPY f /f\n")
    # BuildKit records a stage's ARG as an (empty) history entry: 2 ARGs, a RUN and a COPY.
    assert dockerfile.stages(path)[0].history_entries == 4
    stages = dockerfile.stages(ROOT / "docker" / "Dockerfile.cpu")
    # The sccache helper is a dependency of each compile stage through its bind mount, never copied.
    assert dockerfile.dependencies("runtime", stages) == {"ghbuild-sccache", "os-base", "toolchain", "cpp", "rust",
                                                          "wheel", "runtime"}
    assert dockerfile.dependencies("cpp", stages) == {"ghbuild-sccache", "os-base", "toolchain", "cpp"}
    assert dockerfile.dependencies("os-base", stages) == {"os-base"}


def test_build_log_stage_timings_from_a_real_buildkit_log():
    timings = buildlog.stage_timings((FIXTURES / "buildkit" / "cold-build.log").read_text())
    assert {"os-base", "sccache", "toolchain", "cpp", "rust", "wheel", "runtime"} <= set(timings)
    assert "internal" not in timings
    assert timings["cpp"].steps == 2 and timings["cpp"].cached == 1 and timings["cpp"].seconds > 10
    assert timings["toolchain"].fully_cached and timings["toolchain"].seconds == 0
    assert not timings["wheel"].fully_cached and timings["wheel"].seconds > 0


def test_build_log_counts_cached_steps():
    log = "#5 [cpp 1/2] WORKDIR /src\n#5 CACHED\n#6 [linux/arm64 cpp 2/2] RUN make\n#6 DONE 12.5s\n"
    timing = buildlog.stage_timings(log)["cpp"]
    assert (timing.steps, timing.cached, timing.seconds) == (2, 1, 12.5) and not timing.fully_cached


def test_a_step_buildkit_reports_cached_twice_counts_once():
    # Seen in a registry-cache rebuild: `#N CACHED` printed again for the same vertex (steps 2, cached 3).
    log = ("#7 [cpp 1/2] WORKDIR /src\n#7 CACHED\n#8 [cpp 2/2] RUN --mount=type=cache make\n#8 CACHED\n"
           "#7 [cpp 1/2] WORKDIR /src\n#7 CACHED\n")
    timing = buildlog.stage_timings(log)["cpp"]
    assert (timing.steps, timing.cached) == (2, 2) and timing.fully_cached


def test_a_run_step_printing_cached_lines_counts_no_cache_hit():
    # A branch's RUN step prints what looks like BuildKit's lines: in the plain log they carry the step's own
    # prefix and a timestamp, so no stage reads as cached (which would hide its compile from the audit).
    log = ("#7 [cpp 1/2] WORKDIR /src\n#7 DONE 0.1s\n#8 [cpp 2/2] RUN make\n#8 0.512 #7 CACHED\n"
           "#8 0.513 #8 CACHED\n#8 DONE 3.0s\n")
    timing = buildlog.stage_timings(log)["cpp"]
    assert (timing.steps, timing.cached) == (2, 0) and not timing.fully_cached


# --------------------------------------------------------------------------- layers and budgets

def test_layers_are_attributed_to_the_stages_of_the_chain():
    stages = dockerfile.stages(ROOT / "docker" / "Dockerfile.cpu")
    chain = dockerfile.chain("runtime", stages)
    history = ([{"CreatedBy": "ADD rootfs.tar /", "Size": 100}]
               + [{"CreatedBy": f"os {i}", "Size": 10} for i in range(2)]
               + [{"CreatedBy": f"rt {i}", "Size": 1} for i in range(5)])
    layers, exact = audit.attribute(history, chain)
    assert exact
    assert audit.stage_sizes(layers) == {"base image": 100, "os-base": 20, "runtime": 5}


def test_attribution_that_does_not_fit_says_so():
    stages = dockerfile.stages(ROOT / "docker" / "Dockerfile.cpu")
    layers, exact = audit.attribute([{"CreatedBy": "x", "Size": 3}], dockerfile.chain("runtime", stages))
    assert not exact and audit.stage_sizes(layers) == {"runtime": 3}


def test_budgets_name_what_is_over():
    failures = audit.check_budgets("cpu", 2_000_000_000, {"runtime": 300_000_000, "cpp": 1}, 1_500_000_000,
                                   {"runtime": 200_000_000, "cpp": 10, "absent": 1})
    assert failures == ["image cpu is 2.00 GB, over its size-budget of 1.50 GB",
                        "stage runtime of image cpu adds 300.00 MB, over its budget of 200.00 MB"]
    assert audit.check_budgets("cpu", 1, {}, None, {}) == []


# --------------------------------------------------------------------------- sccache summary

def _stats(hits: dict, misses: dict, **extra):
    return {"stats": {"cache_hits": {"counts": hits}, "cache_misses": {"counts": misses},
                      "compile_requests": sum(hits.values()) + sum(misses.values()), **extra},
            "cache_location": "s3"}


def test_sccache_summary_counts_rebuilt_stages_and_flags_layer_cached_ones():
    decision = SccacheDecision("read-write", "ok", {})
    runs = buildlog.SccacheRuns(stats={
        "cpp": {"stage": "cpp", "mode": "read-write", "requested_mode": "read-write", "fallbacks": "",
                "started": 1000, "finished": 1010, "sccache": _stats({"C/C++": 40}, {})},
        "wasm": {"stage": "wasm", "mode": "local", "requested_mode": "read-write", "fallbacks": "read-write,anonymous",
                 "started": 900, "finished": 910, "sccache": _stats({}, {"Rust": 1}, cache_write_errors=0,
                                                                      not_cached={"crate-type": 1})},
    }, cached={"rust"})
    summary = summarize_sccache(decision, runs)
    assert (summary["hits"], summary["misses"], summary["hit_rate"]) == (40, 1, 0.9756)
    assert summary["stages"]["rust"]["from_layer_cache"] is True and summary["stages"]["rust"]["hits"] == 0
    assert summary["stages"]["cpp"]["from_layer_cache"] is False and summary["stages"]["cpp"]["seconds"] == 10
    assert summary["stages"]["wasm"]["fallbacks"] == ["read-write", "anonymous"]
    assert summary["stages"]["wasm"]["not_cached_reasons"] == {"crate-type": 1}
    assert summary["stages"]["cpp"]["hits_by_language"] == {"C/C++": 40}
    json.dumps(summary)  # the report is JSON
    text = render.build_text(SimpleNamespace(image="cpu", arch="amd64", backend="buildx", ref="r", image_id=None,
                                             sccache=summary, size=None, stages={}, skipped=[], warnings=[],
                                             budget_failures=[]))
    assert "rust       -          hits    0" in text and "(layer cache)" in text
    assert "  engine   " not in text
    timed = render.build_text(SimpleNamespace(image="cpu", arch="amd64", backend="buildx", ref="r", image_id=None,
                                              sccache=summary, size=None, stages={}, skipped=[], warnings=[],
                                              budget_failures=[], timings={"build_seconds": 1.5, "push_seconds": 0.25}))
    assert "  engine   build 1.50 s, push 0.25 s" in timed.splitlines()
    staged = render.build_text(SimpleNamespace(image="cpu", arch="amd64", backend="buildx", ref="r", image_id=None,
                                               sccache=summary, size=None, skipped=[], warnings=[], budget_failures=[],
                                               stages={"os-base": {"steps": 3, "cached": 3, "size": 5},
                                                       "cpp": {"steps": 2, "cached": 0}, "base image": {"size": 9}}))
    assert "  layers   os-base 3/3 cached, cpp 0/2 cached" in staged.splitlines()


def test_sccache_summary_without_stats_is_empty_not_an_error():
    summary = summarize_sccache(SccacheDecision("off", "disabled", {}), buildlog.SccacheRuns())
    assert summary == {"mode": "off", "reason": "disabled", "hits": 0, "misses": 0, "hit_rate": None, "stages": {}}


@pytest.mark.parametrize("value", ["https://u:p@host", "http://h/?x", "http://h/#f", "ftp://h", "http://h\n"])
def test_bad_endpoints_are_refused_without_the_value(value):
    from ghbuild.config.options import check_endpoint

    with pytest.raises(ValueError) as info:
        check_endpoint(value)
    assert value.strip() not in str(info.value) and "p@" not in str(info.value)


def test_a_mode_max_cache_export_is_what_lets_the_audit_reuse_gzip_blobs(tmp_path):
    """The layer audit stores its stage images gzip (reusing blobs) only after a mode=max export made them."""
    job = _job(tmp_path)
    assert buildcmd.build_command(job, _settings(push=True)).exports_every_stage()
    assert not buildcmd.build_command(job._replace(cache_to=()), _settings(push=True)).exports_every_stage()
    min_only = job._replace(cache_to=("type=registry,ref=r/c:x,mode=min",))
    assert not buildcmd.build_command(min_only, _settings(push=True)).exports_every_stage()
    skipped = buildcmd.build_command(job, _settings(push=True, cache_export_problem="no export"))
    assert not skipped.exports_every_stage()


def _stats_line(step: int, stage: str, mode: str, **stats) -> str:
    data = {"version": 1, "stage": stage, "requested_mode": mode, "mode": mode, "fallbacks": "", "started": 1,
            "finished": 2, "exit": 0, "sccache": {"stats": {"compile_requests": 0, "requests_not_compile": 0,
                                                            "requests_not_cacheable": 0, "cache_hits": {"counts": {}},
                                                            "cache_misses": {"counts": {}}, "not_cached": {},
                                                            **stats}}}
    return (f"#{step} [{stage} 4/4] RUN --mount=type=bind,from=ghbuild-sccache,source=/,target=/opt/ghbuild     "
            f"--mount=type=secret,id=ghbuild_sccache,required=false     /opt/ghbuild/bin/ghbuild-sccache run {stage} "
            f"-- gcc -O2 -o /widget /src/main.c\n#{step} 1.5 ghbuild-sccache-stats {json.dumps(data)}")


@pytest.mark.parametrize("mode, stats, said", [
    # `ghbuild-sccache run build -- gcc -o app main.c`: the wrapper exports launchers; gcc called directly uses none
    ("read-write", {}, 'no compiler call reached sccache. CMake and Cargo use it by themselves; a compiler or a '
                       'Makefile called directly needs it in front: "$GHBUILD_SCCACHE_LAUNCHER gcc -c ...", make '
                       'CC="$GHBUILD_SCCACHE_LAUNCHER gcc" (docs/building.md: Your Dockerfile)'),
    # `"$GHBUILD_SCCACHE_LAUNCHER" gcc -o app main.c`: reached it, but a compile and link in one is not cached
    ("local", {"compile_requests": 1, "requests_not_compile": 1},
     "1 call(s) reached sccache and none was a compile it caches: links, version probes, or a compile and link in "
     "one command (sccache caches `-c` compiles of one source file)"),
    # cargo's rustc probes are not compiles; a binary crate is not cacheable: the reason is what matters
    ("read-write", {"compile_requests": 3, "requests_not_compile": 2, "requests_not_cacheable": 1,
                    "not_cached": {"crate-type": 1}}, "1 compile(s) sccache cannot cache (crate-type 1)"),
    ("anonymous", {"compile_requests": 2, "requests_not_cacheable": 2, "not_cached": {"multiple input files": 2}},
     "2 compile(s) sccache cannot cache (multiple input files 2)"),
    ("off", {}, None),                                            # off: nothing was meant to reach it
    ("read-write", {"compile_requests": 3, "requests_not_compile": 1, "cache_misses": {"counts": {"C/C++": 2}}},
     None),                                                       # it cached something: links beside are normal
])
def test_a_stage_that_cached_nothing_says_why(mode, stats, said):
    from ghbuild.build.report import add_sccache_stats

    report = SimpleNamespace(warnings=[])
    add_sccache_stats(report, SccacheDecision(mode, "ok", {}), _stats_line(7, "build", mode, **stats) + "\n")
    assert report.warnings == ([f"sccache in stage build: {said}"] if said else [])


def test_the_reasons_named_are_the_five_most_frequent():
    from ghbuild.build.report import add_sccache_stats

    report = SimpleNamespace(warnings=[])
    reasons = {f"reason {n}": n for n in range(1, 9)}
    add_sccache_stats(report, SccacheDecision("read-write", "ok", {}),
                      _stats_line(3, "build", "read-write", compile_requests=36, requests_not_cacheable=36,
                                  not_cached=reasons) + "\n")
    assert report.warnings == ["sccache in stage build: 36 compile(s) sccache cannot cache (reason 8 8, reason 7 7, "
                               "reason 6 6, reason 5 5, reason 4 4)"]


@pytest.mark.parametrize("stats", [{"requests_not_compile": "9 links"}, {"not_cached": 5},
                                   {"not_cached": {"x": "many"}}, {"compile_requests": True},
                                   {"cache_hits": 5}, {"cache_misses": [1]}, {"requests_not_cacheable": -3},
                                   {"cache_hits": {"counts": {"C": 9 * 10 ** 4299}}}])
def test_a_stats_line_with_counts_that_are_not_numbers_is_unreadable(stats):
    """The step's own command can print a stats line for its stage: one that is not what the wrapper writes is
    not read (before, `"not_cached": 5` raised a TypeError in the summary)."""
    from ghbuild.build.report import add_sccache_stats

    report = SimpleNamespace(warnings=[])
    add_sccache_stats(report, SccacheDecision("read-write", "ok", {}),
                      _stats_line(3, "build", "read-write", **stats) + "\n#3 DONE 1.0s\n")
    assert report.warnings == ["sccache in stage build: the step ran but left no readable stats line in the build "
                               "log (ghbuild-sccache-stats)"]
    assert report.sccache["stages"] == {}


@pytest.mark.parametrize("nested", ['{"a": ' * 900 + "1" + "}" * 900, "[" * 200_000 + "]" * 200_000])
def test_a_stats_line_nested_deeper_than_the_wrappers_is_unreadable_not_a_traceback(nested):
    """Any wrapped step's command can print a stats line for its stage: one nested 900 levels deep (within the
    JSON decoder's limit) once raised a RecursionError in ghbuild's checks, one deeper in the decoder."""
    from ghbuild.build.report import add_sccache_stats

    log = "\n".join(_stats_line(step, "build", "read-write").replace('"not_cached": {}', f'"not_cached": {{}}, '
                                                                     f'"extra": {nested}') + f"\n#{step} DONE 1.0s"
                    for step in (3, 4)) + "\n"
    report = SimpleNamespace(warnings=[])
    add_sccache_stats(report, SccacheDecision("read-write", "ok", {}), log)
    assert report.warnings == ["sccache in stage build: the step ran but left no readable stats line in the build "
                               "log (ghbuild-sccache-stats)"]
    assert report.sccache["stages"] == {}


def test_the_wrapped_steps_of_one_stage_add_up():
    """init wraps every compiling RUN of a stage with the stage's name (cmake -S, cmake --build, cmake --install):
    the stage's figures are all its steps', not the last one's (before: 0 misses and "no compiler call reached
    sccache" after 40 misses)."""
    from ghbuild.build.report import add_sccache_stats

    log = "\n".join([
        _stats_line(5, "native", "read-write", compile_requests=40, cache_misses={"counts": {"C/C++": 40}},
                    not_cached={"-E": 1}),
        _stats_line(6, "native", "local", compile_requests=3, cache_hits={"counts": {"C/C++": 2}},
                    not_cached={"-E": 2}).replace('"fallbacks": ""', '"fallbacks": "read-write,anonymous"')
        .replace('"started": 1, "finished": 2', '"started": 5, "finished": 9'),
        _stats_line(7, "native", "read-write"),
    ]) + "\n"
    report = SimpleNamespace(warnings=[])
    add_sccache_stats(report, SccacheDecision("read-write", "ok", {}), log)
    stage = report.sccache["stages"]["native"]
    assert (stage["hits"], stage["misses"], stage["compile_requests"]) == (2, 40, 43)
    assert stage["hits_by_language"] == {"C/C++": 2} and stage["misses_by_language"] == {"C/C++": 40}
    assert stage["not_cached_reasons"] == {"-E": 3}
    assert stage["seconds"] == 1 + 4 + 1       # inside the wrapped steps, not the 8 s from the first to the last
    assert (stage["mode"], stage["fallbacks"]) == ("local", ["read-write", "anonymous"])
    assert report.warnings == ["sccache in stage native: fell back from read-write, anonymous to local"]


def test_a_wrapped_step_without_stats_is_named_beside_one_with_them():
    """Two wrapped steps of one stage: one printed its stats, the other ran and printed none. Before, the stage
    counted as read; a line the step's own command printed before the wrapper's is replaced by the wrapper's."""
    from ghbuild.build.report import add_sccache_stats

    forged = _stats_line(5, "native", "read-write", compile_requests=9, cache_hits={"counts": {"C/C++": 9}})
    real = _stats_line(5, "native", "read-write", compile_requests=4, cache_misses={"counts": {"C/C++": 4}})
    log = "\n".join([forged, real.split("\n")[1], _stats_line(6, "native", "read-write").split("\n")[0],
                     "#6 DONE 2.0s"]) + "\n"
    report = SimpleNamespace(warnings=[])
    add_sccache_stats(report, SccacheDecision("read-write", "ok", {}), log)
    stage = report.sccache["stages"]["native"]
    assert (stage["hits"], stage["misses"]) == (0, 4)
    assert report.warnings == ["sccache in stage native: the step ran but left no readable stats line in the build "
                               "log (ghbuild-sccache-stats)"]


def test_a_wrapped_step_whose_layer_was_downloaded_from_the_cache_did_not_run():
    """BuildKit shows a step it took from an imported registry cache as the layer's download and DONE, not
    CACHED (seen in `make demo`). The wrapper said nothing there: the stage is served by the layer cache, not
    "ran but left no readable stats line"."""
    from ghbuild.build.report import add_sccache_stats

    header = _stats_line(18, "cpp", "read-write").split("\n")[0]
    layer = "sha256:811c7779999a2e1b5ea7aa4eafae52258ccd902c07f9294a4ab7071763f3b3c9"
    log = "\n".join([header, "#18 ...", header, f"#18 {layer} 27.26MB / 273.12MB 0.2s",
                     f"#18 {layer} 273.12MB / 273.12MB 1.4s done", f"#18 extracting {layer} 0.9s done",
                     "#18 DONE 1.5s"]) + "\n"
    report = SimpleNamespace(warnings=[])
    add_sccache_stats(report, SccacheDecision("read-write", "ok", {}), log)
    assert report.warnings == [] and report.sccache["stages"]["cpp"]["from_layer_cache"] is True
    # The same step with the wrapper's first line (it ran) and no stats line is named.
    ran = log.replace("#18 DONE 1.5s", "#18 0.2 ghbuild-sccache: cpp: mode read-write (requested read-write)\n"
                                       "#18 DONE 1.5s")
    report = SimpleNamespace(warnings=[])
    add_sccache_stats(report, SccacheDecision("read-write", "ok", {}), ran)
    assert report.warnings == ["sccache in stage cpp: the step ran but left no readable stats line in the build "
                               "log (ghbuild-sccache-stats)"]
