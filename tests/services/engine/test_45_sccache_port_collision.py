"""Two builds on one host must not share an sccache server.

ghbuild builds with `--network host` (build.network defaults to "host", so the build reaches S3 on
the runner): every RUN step of every build on the machine shares the host's loopback. A server on a
fixed TCP port was shared: a second build's start took over the first build's port, and from then on the
first build's compiler calls ran in the second build's container (its object files missing, make failing
with "No rule to make target ...o", or the other build's stats reported). The helper's wrapper gives each
step a server on a unix socket in the step's own /tmp instead, which no other container can reach.

The reproduction below runs the wrapper from the helper image in two containers of the toolchain stage
that share one network namespace, which is what two `--network host` builds share. It uses a private
namespace (not the host's) so that it cannot disturb a real build running on this machine.
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

UNIT = "printf 'int twice(int x) { return 2 * x; }\\n' > /src/unit.cpp"


@pytest.fixture(scope="module")
def toolchain_image(session, first_build):
    tag = f"ghbuild-test-{session.sid}/toolchain-stage:amd64"
    proc = session.docker_build("--platform", "linux/amd64", "--target", "toolchain", tag=tag)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return tag


def test_builds_share_the_host_network(first_build):
    """The ingredient that made ports collide: ghbuild's build command uses the host network."""
    assert "--network host" in first_build.report["command"]


def _stats(output: str) -> dict:
    line = next(x for x in output.splitlines() if x.startswith("ghbuild-sccache-stats "))
    return json.loads(line.split(" ", 1)[1])


def test_concurrent_builds_keep_their_own_servers_and_object_files(session, toolchain_image, helper_dir):
    a, b = f"ghbuild-test-{session.sid}-build-a", f"ghbuild-test-{session.sid}-build-b"
    mount = ("-v", f"{helper_dir}:/opt/ghbuild/bin:ro")
    try:
        session.docker_run("run", "-d", "--name", a, "--network", "none", *mount, "--entrypoint", "sleep",
                           toolchain_image, "300", check=True)
        session.docker_run("run", "-d", "--name", b, "--network", f"container:{a}", *mount, "--entrypoint", "sleep",
                           toolchain_image, "300", check=True)
        for name in (a, b):   # the same project at the same path in both builds
            session.docker_run("exec", name, "sh", "-c", f"mkdir -p /src /tmp/build && {UNIT}", check=True)
        compile_a = (
            "touch /tmp/a-ready; i=0; while [ ! -e /tmp/go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
            "$CMAKE_CXX_COMPILER_LAUNCHER c++ -O2 -c /src/unit.cpp -o /tmp/build/unit.o; "
            "echo compile-rc=$?; if [ -f /tmp/build/unit.o ]; then echo object-present; else echo object-missing; fi")
        build_a = subprocess.Popen([session.docker, "exec", a, "/opt/ghbuild/bin/ghbuild-sccache", "run", "cpp", "--",
                                    "sh", "-c", compile_a], env=session.base_env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 60
        while session.docker_run("exec", a, "test", "-e", "/tmp/a-ready").returncode != 0:
            assert build_a.poll() is None, build_a.communicate()[0]
            assert time.monotonic() < deadline, "build A did not start its sccache server"
            time.sleep(0.2)
        # Build B's compile stage starts, compiles the same file and stops its server while A is waiting.
        built_b = session.docker_run("exec", b, "/opt/ghbuild/bin/ghbuild-sccache", "run", "cpp", "--", "sh", "-c",
                                     "$CMAKE_CXX_COMPILER_LAUNCHER c++ -O2 -c /src/unit.cpp -o /tmp/build/b.o")
        assert built_b.returncode == 0, built_b.stdout + built_b.stderr
        session.docker_run("exec", a, "touch", "/tmp/go", check=True)
        out_a, _ = build_a.communicate(timeout=120)
        in_b = session.docker_run("exec", b, "test", "-f", "/tmp/build/unit.o").returncode == 0
        assert "compile-rc=0" in out_a, out_a
        assert "object-present" in out_a, (
            f"build A's compile exited 0 but its object file is missing"
            f"{' (it was written into build B' + chr(39) + 's container)' if in_b else ''}:\n{out_a}")
        # Each build's stats count its own compile only: B stopped its own server, not A's.
        for output in (out_a, built_b.stderr):
            stats = _stats(output)
            assert stats["mode"] == "local" and stats["exit"] == 0, stats
            assert stats["sccache"]["stats"]["compile_requests"] == 1, stats
    finally:
        session.docker_run("rm", "-f", a, b)
