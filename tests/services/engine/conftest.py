"""Fixtures for the engine tests: the REAL Docker engine (BuildKit), staging registry and S3.

Nothing here is mocked. Every test talks to the local services of `python -m infra up`
(loopback only) and runs `ghbuild build` as a subprocess, the way a workflow does.

Isolation from other users of the same machine and from earlier sessions:
- a session id `sid` (random hex) names the S3 key prefix (so the first build is really cold),
  the staging and cache repositories, and every commit sha (so every build has its own tag);
- ghbuild runs with its own TMPDIR (its work folder, with the credentials file, lives there);
- the inherited environment is stripped of GITHUB_*, ACTIONS_*, RUNNER_*, GHBUILD_*, AWS_* and
  SCCACHE_* before .ghbuild/local.env is applied, so a run inside GitHub Actions CI behaves the
  same as a run on a laptop.

Expensive results are session fixtures: `first_build` (the cold push build every other test
compares against) is built once. Files run in their number order: everything up to test_45 reuses
the first build's BuildKit cache; test_50 prunes the builder (as the issue asks); test_60 (arm64)
is cold either way; test_99 scans the output of every ghbuild run of the session for secrets.

Builds are never retried: concurrent builds on one machine must not disturb each other (see
test_45_sccache_port_collision.py).

Services: `python -m infra status`, and `up` when .ghbuild/local.env is missing or a service
is down. If they cannot be had, the session fails under CI=true and is skipped (with the reason)
elsewhere.

Teardown removes what this session created, and nothing else: its local tags and the images of its
builds (found by their unique revision label), its manifests in the staging registry, its S3
objects. Its scratch folder (run logs) is kept only when a test failed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from act import harness
from fakes.oci import RegistryClient

from infra import localenv

from .enginelib import (
    LOCAL_ENV,
    REPO,
    STRIP_PREFIXES,
    Run,
    Session,
)

# --------------------------------------------------------------------------- services

def _infra(*args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(STRIP_PREFIXES)}
    return subprocess.run([sys.executable, "-m", "infra", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, errors="replace", timeout=timeout)


def _unavailable(reason: str) -> None:
    """No services: CI must fail loudly (never a silent skip); elsewhere skip with the reason."""
    message = f"engine tests need the local services (python -m infra up): {reason}"
    if os.environ.get("CI") == "true":
        pytest.fail(message, pytrace=False)
    pytest.skip(reason=message)


def _ensure_services() -> dict[str, str]:
    why = None
    if LOCAL_ENV.exists():
        try:
            status = _infra("status", timeout=120)
        except subprocess.TimeoutExpired:
            status = None
        if status is not None and status.returncode == 0:
            return localenv.read()
        why = "status reported a service down" if status is not None else "status timed out"
    else:
        why = f"{LOCAL_ENV} is missing"
    try:
        up = _infra("up", timeout=2400)
    except subprocess.TimeoutExpired:
        _unavailable(f"{why}; `python -m infra up` did not finish within 40 minutes")
    if up.returncode != 0:
        last = (up.stderr.strip().splitlines() or ["(no output)"])[-1]
        _unavailable(f"{why}; `python -m infra up` exited {up.returncode}: {last}")
    if not LOCAL_ENV.exists():
        _unavailable(f"`python -m infra up` succeeded but did not write {LOCAL_ENV}")
    status = _infra("status", timeout=120)
    if status.returncode != 0:
        _unavailable("services still down after `up`:\n" + status.stdout)
    return localenv.read()


@pytest.fixture(scope="session")
def session(request) -> Session:
    local = _ensure_services()
    docker = local.get("GHBUILD_DOCKER_CLI") or "/usr/bin/docker"
    if not os.access(docker, os.X_OK):
        _unavailable(f"docker client {docker} is missing")
    sid = uuid.uuid4().hex[:10]
    base = {k: v for k, v in os.environ.items() if not k.startswith(STRIP_PREFIXES)}
    base.update(local)
    # Our own scratch folder (not pytest's basetemp, which concurrent pytest runs on this machine rotate).
    workdir = Path(tempfile.mkdtemp(prefix=f"ghbuild-engine-{sid}-"))
    registry = RegistryClient(local["GHBUILD_LOCAL_STAGING"])
    sess = Session(sid=sid, base_env=base, local=local, workdir=workdir, registry=registry, docker=docker)
    base.update({
        "GHBUILD_SCCACHE_KEY_PREFIX": f"ghbuild-test-{sid}",
        "GHBUILD_REGISTRIES_STAGING": sess.staging_repo,
        "GHBUILD_REGISTRIES_CACHE": sess.cache_repo,
        # A session token too: it is a secret as much as the key, and sccache passes it on to S3.
        "AWS_SESSION_TOKEN": f"ghbuild-test-session-token-{uuid.uuid4().hex}",
    })
    sess.secrets.update({base["AWS_SECRET_ACCESS_KEY"], base["AWS_SESSION_TOKEN"]})
    sess.created_repos.update({f"ghbuild-test-{sid}/cpu", f"ghbuild-test-{sid}/cache"})
    sess.s3_prefixes.add(sess.key_prefix + "/")
    sess.set_layers(sid)          # this session's compile layers are its own: its first build compiles
    try:
        yield sess
    finally:
        sess.cleanup()
        harness.remove_setup_stages(workdir)     # what the act tests' setup actions left in ~/.cache
        # A credentials file that an interrupted ghbuild could not remove never stays.
        for leftover in workdir.rglob("ghbuild_sccache"):
            leftover.unlink()
        if request.session.testsfailed:
            print(f"\nengine test logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


# --------------------------------------------------------------------------- the shared builds

@pytest.fixture(scope="session")
def first_build(session: Session) -> Run:
    """The issue's example, cold: `ghbuild build --image cpu --arch amd64 --push --json`.

    Cold for real: a fresh S3 key prefix and a fresh layer-cache repository. The BuildKit cache may
    still hold the toolchain stage (it has no sccache inputs); the compile stages bind-mount the
    session's nonce with their sources (enginelib.LAYER_NONCE), so they always run. Later builds with
    the session's nonce find them in the layer cache.
    """
    run = session.cold_build("first", "--push", "--json", fresh_layers=False)
    assert run.rc == 0, f"first build failed (exit {run.rc}):\n{run.tail(60)}"
    return run


@pytest.fixture(scope="session")
def helper_dir(session: Session) -> Path:
    """The amd64 sccache helper image's /bin (sccache + ghbuild-sccache), copied out of the image that infra
    pushed, for mounting at /opt/ghbuild/bin in a container as a Dockerfile's RUN step mounts the image."""
    ref = session.local["GHBUILD_SCCACHE_HELPER_IMAGE"]
    proc = session.docker_run("create", "--platform", "linux/amd64", ref, "/bin/ghbuild-sccache", timeout=300)
    assert proc.returncode == 0, proc.stderr
    cid = proc.stdout.strip()
    target = session.workdir / "helper"
    try:
        session.docker_run("cp", f"{cid}:/bin", str(target), check=True)
    finally:
        session.docker_run("rm", "-f", cid)
    assert (target / "sccache").is_file() and (target / "ghbuild-sccache").is_file(), list(target.iterdir())
    return target
