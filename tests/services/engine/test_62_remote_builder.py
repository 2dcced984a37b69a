"""`build.builder` pointing at another engine: a second dockerd of its own (data root, exec root, sockets, no
iptables rules), reached over a unix socket and over tcp://127.0.0.1:PORT, builds a small image with buildx's docker
driver through the docker context ghbuild creates for it; the image lands in the registry and in that engine,
never in the machine's own. This is the scale-out path (a build machine elsewhere) as far as one machine can
show it: a real second BuildKit, reached only through its address.

Not exercised here: the `remote` driver (a bare buildkitd: no such binary here), docker-container builders
(the moby/buildkit image is on Docker Hub), kubernetes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from .enginelib import ghbuild_argv, kill_group

DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE} AS base
RUN echo "built on $(uname -m) by the second engine" > /built-by
FROM base AS final
RUN cat /built-by
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def second_engine(session):
    """dockerd #2: its own roots and sockets, the containerd image store, no iptables rules (builds use the host
    network). It shares the machine's docker0 instead of `--bridge=none`: with none, dockerd deletes the default
    bridge interface, which is the machine engine's. Stopped, and its folders removed, at the end of the module;
    the last test checks that the machine's engine still runs containers."""
    root = Path(tempfile.mkdtemp(prefix="ghbuild-dockerd2-", dir="/var/tmp"))
    sock, port = root / "docker.sock", _free_port()
    (root / "daemon.json").write_text(json.dumps({"features": {"containerd-snapshotter": True}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
    with open(root / "dockerd.log", "wb") as log:   # dockerd writes through its own descriptor
        proc = subprocess.Popen(
            ["dockerd", f"--config-file={root / 'daemon.json'}", f"--data-root={root / 'data'}",
             f"--exec-root={root / 'exec'}", f"--pidfile={root / 'docker.pid'}", f"-H=unix://{sock}",
             f"-H=tcp://127.0.0.1:{port}", "--tls=false", "--iptables=false", "--ip6tables=false"],
            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    client = [session.docker, "-H", f"unix://{sock}"]
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"second dockerd exited {proc.returncode}: {(root / 'dockerd.log').read_text()[-2000:]}")
            if subprocess.run([*client, "info"], capture_output=True, env=env).returncode == 0:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"second dockerd did not answer within 90 s: {(root / 'dockerd.log').read_text()[-2000:]}")
        yield {"unix": f"unix://{sock}", "tcp": f"tcp://127.0.0.1:{port}", "client": client, "env": env}
    finally:
        for address in (f"unix://{sock}", f"tcp://127.0.0.1:{port}"):      # the contexts ghbuild made for them
            name = "ghbuild-engine-" + hashlib.sha256(address.encode()).hexdigest()[:12]
            session.docker_run("context", "rm", "--force", name)
        kill_group(proc, grace=40)      # dockerd shuts down on SIGINT as on SIGTERM
        subprocess.run(["umount", "-R", str(root / "exec")], capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def project(session):
    root = session.workdir / "remote-builder-project"
    root.mkdir()
    (root / "Dockerfile").write_text(DOCKERFILE)
    (root / "ghbuild.toml").write_text(f"""\
[trust]
canonical-repository = "acme/remote"
[registries]
staging = "{session.registry.host}/ghbuild-test-{session.sid}-remote/{{image}}"
cache = "{session.registry.host}/ghbuild-test-{session.sid}-remote/cache"
gha-cache = false
[sccache]
enabled = false
[images.small]
dockerfile = "Dockerfile"
target = "final"
platforms = ["linux/amd64"]
""")
    session.created_repos.update({f"ghbuild-test-{session.sid}-remote/small",
                                  f"ghbuild-test-{session.sid}-remote/cache"})
    return root


def _build(session, project: Path, builder: str, name: str):
    env = session.env(GHBUILD_CONFIG=None, GHBUILD_REGISTRIES_STAGING=None, GHBUILD_REGISTRIES_CACHE=None,
                      GHBUILD_BUILD_BUILDER=builder)
    for key in [k for k in env if k.startswith("GHBUILD_IMAGES_")]:      # ghbuild's own images' settings
        del env[key]
    argv = [*ghbuild_argv(), "build", "--config", str(project / "ghbuild.toml"), "--image", "small",
            "--arch", "amd64", "--push", "--json", "--event", "push", "--repository", "acme/remote", "--ref", "main",
            "--default-branch", "main", "--sha", session.sha(name)]
    session.used_shas.add(session.sha(name))
    return session.ghbuild(name, argv=argv, env=env)


@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_a_second_engine_builds_through_its_address(session, second_engine, project, kind):
    address = second_engine[kind]
    run = _build(session, project, address, f"remote-{kind}")
    assert run.rc == 0, run.tail()
    report = run.report
    assert report["backend"] == "buildx"
    assert report["builder"].startswith("ghbuild-engine-") and "(docker driver" in report["builder"], report["builder"]
    assert report["pushed"] and report["digest"].startswith("sha256:")
    # In the registry, built by the second engine: that engine has the image, the machine's own does not.
    status, headers, _ = session.registry.manifest(report["ref"].split("/", 1)[1].split("@")[0], report["digest"],
                                                   method="HEAD")
    assert status == 200 and headers["docker-content-digest"] == report["digest"]
    there = subprocess.run([*second_engine["client"], "image", "inspect", report["tags"][0]], capture_output=True,
                           env=second_engine["env"])
    assert there.returncode == 0, there.stderr
    assert session.docker_run("image", "inspect", report["tags"][0]).returncode != 0
    # The context ghbuild made names that address, and is the builder the command used.
    context = report["builder"].split()[0]
    assert report["command"].startswith(f"{session.docker} --context {context} buildx build ")
    shown = session.docker_run("context", "inspect", context, "--format", "{{.Endpoints.docker.Host}}")
    assert shown.stdout.strip() == address


def test_nothing_answering_at_the_address_is_one_line(session, project):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run = _build(session, project, f"tcp://127.0.0.1:{port}", "remote-nothing")
    assert run.rc == 10, run.tail()
    lines = [line for line in run.stderr.splitlines() if line.startswith("ghbuild:")]
    assert lines[-1].startswith(f"ghbuild: engine error: build.builder: nothing answers at tcp://127.0.0.1:{port} ")
    assert "Traceback" not in run.stderr


def test_the_machines_engine_still_runs_containers(session, second_engine):
    """The second engine leaves the machine's network alone (its docker0 bridge above all)."""
    proc = session.docker_run("run", "--rm", session.local["GHBUILD_LOCAL_BASE_IMAGE"], "true", timeout=120)
    assert proc.returncode == 0, proc.stderr
