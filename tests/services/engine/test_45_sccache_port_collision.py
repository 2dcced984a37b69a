"""Two builds on one host must not share an sccache server.

ghbuild builds with `--network host` (build.network defaults to "host", so the build reaches S3 on
the runner) and the Dockerfile starts each stage's sccache server on a FIXED port
(`ghbuild_sccache_start cpp 4226`, rust 4227). Every RUN step of every build on the machine shares
the host's loopback: a second build's `ghbuild_sccache_start` stops the first build's server and
starts its own on the same port, and from then on the first build's compiler calls are executed
by the second build's server, in the second build's container. The compile "succeeds", the object
file is written into the other container, and make fails with
"No rule to make target 'CMakeFiles/nativecore_obj.dir/src/....cpp.o'" (seen here whenever another
build ran at the same time); a build that does not fail reports the other build's sccache stats.

The reproduction below runs the Dockerfile's own start line in two containers of the toolchain
stage that share one network namespace, which is what two `--network host` builds share. It uses a
private namespace (not the host's) so that it cannot disturb a real build running on this machine.
"""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from .enginelib import REPO

HELPER = "/usr/local/lib/ghbuild/sccache.sh"
UNIT = "printf 'int twice(int x) { return 2 * x; }\\n' > /src/unit.cpp"


def cpp_start_line() -> str:
    text = (REPO / "docker" / "Dockerfile.cpu").read_text()
    match = re.search(r"ghbuild_sccache_start cpp [^;\\\n]+", text)
    assert match, "the cpp stage no longer calls ghbuild_sccache_start"
    return match.group(0).strip()


@pytest.fixture(scope="module")
def toolchain_image(session, first_build):
    tag = f"ghbuild-test-{session.sid}/toolchain-stage:amd64"
    proc = session.docker_build("--platform", "linux/amd64", "--target", "toolchain", tag=tag)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return tag


def test_builds_share_the_host_network_and_fixed_ports(first_build):
    """The two ingredients: ghbuild's build command uses the host network, the ports are constants."""
    assert "--network host" in first_build.report["command"]
    text = (REPO / "docker" / "Dockerfile.cpu").read_text()
    starts = re.findall(r"ghbuild_sccache_start (\w+) (\S+?);", text)
    assert dict(starts) == {"cpp": "4226", "rust": "4227"}, starts


def test_concurrent_builds_keep_their_own_object_files(session, toolchain_image):
    start = cpp_start_line()
    a, b = f"ghbuild-test-{session.sid}-build-a", f"ghbuild-test-{session.sid}-build-b"
    try:
        session.docker_run("run", "-d", "--name", a, "--network", "none", "--entrypoint", "sleep",
                           toolchain_image, "300", check=True)
        session.docker_run("run", "-d", "--name", b, "--network", f"container:{a}", "--entrypoint", "sleep",
                           toolchain_image, "300", check=True)
        for name in (a, b):   # the same project at the same path in both builds
            session.docker_run("exec", name, "sh", "-c", f"mkdir -p /src /tmp/build && {UNIT}", check=True)
        script_a = (
            f"set -u; . {HELPER}; GHBUILD_SCCACHE_MODE=local; {start}; touch /tmp/a-ready; "
            "i=0; while [ ! -e /tmp/go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
            "$GHBUILD_LAUNCHER c++ -O2 -c /src/unit.cpp -o /tmp/build/unit.o; "
            "echo compile-rc=$?; if [ -f /tmp/build/unit.o ]; then echo object-present; else echo object-missing; fi")
        build_a = subprocess.Popen([session.docker, "exec", a, "sh", "-c", script_a], env=session.base_env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        while session.docker_run("exec", a, "test", "-e", "/tmp/a-ready").returncode != 0:
            assert build_a.poll() is None, build_a.communicate()[0]
            assert time.monotonic() < deadline, "build A did not start its sccache server"
            time.sleep(0.2)
        # Build B's compile stage starts while A is compiling.
        started_b = session.docker_run("exec", b, "sh", "-c", f". {HELPER}; GHBUILD_SCCACHE_MODE=local; {start}")
        assert started_b.returncode == 0, started_b.stdout + started_b.stderr
        session.docker_run("exec", a, "touch", "/tmp/go", check=True)
        out_a, _ = build_a.communicate(timeout=120)
        in_b = session.docker_run("exec", b, "test", "-f", "/tmp/build/unit.o").returncode == 0
        assert "compile-rc=0" in out_a, out_a
        assert "object-present" in out_a, (
            f"build A's compile exited 0 but its object file is missing"
            f"{' (it was written into build B' + chr(39) + 's container)' if in_b else ''}:\n{out_a}")
    finally:
        session.docker_run("rm", "-f", a, b)
