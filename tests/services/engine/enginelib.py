"""Helpers for the engine tests (the fixtures live in conftest.py): runs, registry API, the session."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fakes.oci import RegistryClient

from infra import localenv

REPO = Path(__file__).resolve().parents[3]
LOCAL_ENV = localenv.path()

# The example job of the issue: a trusted push to the default branch of the canonical repository.
CONTEXT_FLAGS = ("--event", "push", "--repository", "ghbuild/ghbuild", "--ref", "main", "--default-branch", "main")

STRIP_PREFIXES = ("GITHUB_", "ACTIONS_", "RUNNER_", "GHBUILD_", "AWS_", "SCCACHE_", "INPUT_")

COLD_BUILD_TIMEOUT = 1200
# Every sccache setting reaches a build in a secret, so nothing about S3 is in a compile step's cache key: a
# build of unchanged sources is served by the layer cache whatever its mode or key prefix. A build that must
# compile (a session's first build, a degraded-mode build) gets its own content in this file, which the
# compile stages bind-mount with their sources and no compiler reads: their layers miss, sccache can still hit.
LAYER_NONCE_DIRS = ("examples/native/cpp", "examples/native/rust", "examples/rocm/hip")
LAYER_NONCE = ".ghbuild-test-layers"
# make's message when a compile "succeeded" but its object file is not in this container.
CACHED_BUILD_TIMEOUT = 600


# --------------------------------------------------------------------------- small helpers

def sha_for(sid: str, name: str) -> str:
    """A 40-hex commit sha unique to this session and build: every build gets its own tag."""
    return hashlib.sha1(f"{sid}/{name}".encode()).hexdigest()


def ghbuild_argv() -> list[str]:
    script = Path(sys.executable).with_name("ghbuild")
    return [str(script)] if script.exists() else [sys.executable, "-m", "ghbuild"]


def kill_group(proc: subprocess.Popen, grace: float = 30.0) -> str:
    """Stop a process we started in its own session: SIGINT (ghbuild cleans up), then SIGKILL."""
    if proc.poll() is not None:
        return "exited"
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=grace)
        return "interrupted"
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        return "killed"


@dataclass
class Run:
    """One finished `ghbuild` invocation."""

    name: str
    argv: list[str]
    env: dict[str, str]
    rc: int
    stdout: str
    stderr: str
    seconds: float
    tmpdir: Path

    @property
    def report(self) -> dict[str, Any]:
        assert self.rc == 0, f"{self.name}: ghbuild exited {self.rc}:\n{self.tail()}"
        try:
            return json.loads(self.stdout)
        except json.JSONDecodeError as exc:
            raise AssertionError(f"{self.name}: stdout is not the JSON report ({exc}):\n{self.stdout[:2000]}") from exc

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.stderr.splitlines()[-lines:])

    def output_lines(self) -> list[str]:
        return self.stdout.splitlines() + self.stderr.splitlines()


# --------------------------------------------------------------------------- the session

@dataclass
class Session:
    sid: str
    base_env: dict[str, str]       # inherited env, stripped, + local.env + this session's isolation
    local: dict[str, str]          # .ghbuild/local.env as written by infra up
    workdir: Path                  # this session's scratch (TMPDIRs, logs, docker save output)
    registry: RegistryClient
    docker: str
    runs: list[Run] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)   # every secret value handed to any run
    created_tags: set[str] = field(default_factory=set)
    # every image ghbuild built here carries one as its revision label
    used_shas: set[str] = field(default_factory=set)
    created_repos: set[str] = field(default_factory=set)
    s3_prefixes: set[str] = field(default_factory=set)
    _counter: int = 0

    # ---- names
    @property
    def staging_repo(self) -> str:      # template, as GHBUILD_REGISTRIES_STAGING wants it
        return f"{self.registry.host}/ghbuild-test-{self.sid}/{{image}}"

    @property
    def cache_repo(self) -> str:
        return f"{self.registry.host}/ghbuild-test-{self.sid}/cache"

    @property
    def key_prefix(self) -> str:
        return self.base_env["GHBUILD_SCCACHE_KEY_PREFIX"]

    def new_key_prefix(self, suffix: str) -> str:
        """Switch the session to a fresh (empty) S3 key prefix."""
        prefix = f"ghbuild-test-{self.sid}{suffix}"
        self.base_env["GHBUILD_SCCACHE_KEY_PREFIX"] = prefix
        self.s3_prefixes.add(prefix + "/")
        return prefix

    @property
    def secret(self) -> str:
        return self.base_env["AWS_SECRET_ACCESS_KEY"]

    def sha(self, name: str) -> str:
        return sha_for(self.sid, name)

    # ---- the compile stages' layer key
    def set_layers(self, generation: str | None) -> None:
        """Write `generation` into the nonce file of every compile stage's sources (None: remove them)."""
        for folder in LAYER_NONCE_DIRS:
            path = REPO / folder / LAYER_NONCE
            if generation is None:
                path.unlink(missing_ok=True)
            else:
                path.write_text(generation + "\n")

    # ---- processes
    def env(self, **overrides: str | None) -> dict[str, str]:
        env = dict(self.base_env)
        for key, value in overrides.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def _new_tmpdir(self, name: str) -> Path:
        self._counter += 1
        path = self.workdir / f"run{self._counter:02d}-{name}"
        path.mkdir(parents=True)
        (path / "tmp").mkdir()
        return path

    def build_argv(self, name: str, *extra: str, arch: str = "amd64", sha: str | None = None) -> list[str]:
        self.used_shas.add(sha or self.sha(name))
        return [*ghbuild_argv(), "build", "--image", "cpu", "--arch", arch, *CONTEXT_FLAGS,
                "--sha", sha or self.sha(name), *extra]

    def ghbuild(self, name: str, *extra: str, arch: str = "amd64", sha: str | None = None,
                env: dict[str, str] | None = None, timeout: float = CACHED_BUILD_TIMEOUT,
                argv: list[str] | None = None) -> Run:
        """Run `ghbuild build ...` to the end; its output is kept for the session-wide secret scan."""
        argv = argv or self.build_argv(name, *extra, arch=arch, sha=sha)
        run_dir = self._new_tmpdir(name)
        env = dict(env if env is not None else self.base_env)
        env["TMPDIR"] = str(run_dir / "tmp")
        for key in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
            if env.get(key):
                self.secrets.add(env[key])
        start = time.monotonic()
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, errors="replace", start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            stdout, stderr = proc.communicate()
            (run_dir / "stderr.txt").write_text(stderr)
            pytest.fail(f"{name}: ghbuild did not finish within {timeout} s; last output:\n"
                        + "\n".join(stderr.splitlines()[-30:]))
        run = Run(name, argv, env, proc.returncode, stdout, stderr, time.monotonic() - start, run_dir / "tmp")
        (run_dir / "stdout.txt").write_text(stdout)
        (run_dir / "stderr.txt").write_text(stderr)
        self.runs.append(run)
        if "--json" in argv and "--dry-run" not in argv:
            with contextlib.suppress(json.JSONDecodeError):
                report = json.loads(stdout)
                self.created_tags.update(report.get("tags") or [])
                for spec in report.get("cache_to") or []:
                    if "type=registry" in spec:
                        self.created_tags.add(spec.split("ref=", 1)[1].split(",", 1)[0])
        return run

    def cold_build(self, name: str, *extra: str, fresh_layers: bool = True, **kwargs) -> Run:
        """A build that compiles (its own commit sha, a long timeout). `fresh_layers`: its compile stages miss
        the layer cache (their own nonce, for this build only); otherwise they have the session's."""
        kwargs.setdefault("sha", self.sha(name))
        kwargs.setdefault("timeout", COLD_BUILD_TIMEOUT)
        if not fresh_layers:
            return self.ghbuild(name, *extra, **kwargs)
        self.set_layers(f"{self.sid}-{name}")
        try:
            return self.ghbuild(name, *extra, **kwargs)
        finally:
            self.set_layers(self.sid)

    def docker_run(self, *args: str, timeout: float = 300, check: bool = False) -> subprocess.CompletedProcess:
        proc = subprocess.run([self.docker, *args], env=self.base_env, capture_output=True, text=True,
                              errors="replace", timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"docker {' '.join(args[:3])}... exited {proc.returncode}:\n"
                                 f"{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}")
        return proc

    def image_inspect(self, ref: str) -> dict[str, Any] | None:
        proc = self.docker_run("image", "inspect", ref)
        if proc.returncode != 0:
            return None
        return json.loads(proc.stdout)[0]

    def docker_build(self, *args: str, tag: str | None = None, timeout: float = 900,
                     ) -> subprocess.CompletedProcess:
        """`docker build` straight at the engine (no ghbuild; the client runs it through buildx on the engine's
        own builder), from the repo root."""
        argv = [self.docker, "build", "--progress", "plain", "--file", str(REPO / "docker" / "Dockerfile.cpu"),
                "--network", "host", "--build-arg", f"BASE_IMAGE={self.local['GHBUILD_BUILD_BASE_IMAGE']}",
                "--build-arg", f"GHBUILD_SCCACHE_IMAGE={self.local['GHBUILD_SCCACHE_HELPER_IMAGE']}"]
        if tag:
            argv += ["--tag", tag]
            self.created_tags.add(tag)
        argv += [*args, str(REPO)]
        return subprocess.run(argv, env={**self.base_env, "DOCKER_BUILDKIT": "1"}, capture_output=True,
                              text=True, errors="replace", timeout=timeout)

    def s3(self, endpoint: str | None = None, access_key: str | None = None, secret: str | None = None):
        import boto3
        from botocore.config import Config

        return boto3.session.Session(
            aws_access_key_id=access_key or self.base_env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=secret or self.base_env["AWS_SECRET_ACCESS_KEY"],
            region_name=self.base_env.get("GHBUILD_SCCACHE_REGION") or "us-east-1",
        ).client("s3", endpoint_url=endpoint or self.base_env["GHBUILD_SCCACHE_ENDPOINT"],
                 config=Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 2}))

    def s3_keys(self, prefix: str) -> list[str]:
        client = self.s3()
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(
                Bucket=self.base_env["GHBUILD_SCCACHE_BUCKET"], Prefix=prefix):
            keys += [obj["Key"] for obj in page.get("Contents", [])]
        return keys

    # ---- teardown
    def cleanup(self) -> None:
        self.set_layers(None)
        for tag in sorted(self.created_tags):
            self.docker_run("rmi", tag, timeout=120)
        # Images of this session's builds that lost their tag (a moved cache tag, the layer audit's
        # stage images): found by the revision label, which only this session's builds carry.
        for sha in sorted(self.used_shas):
            ids = self.docker_run("image", "ls", "-q", "--no-trunc", "--filter",
                                  f"label=org.opencontainers.image.revision={sha}").stdout.split()
            for image_id in sorted(set(ids)):
                self.docker_run("rmi", "-f", image_id, timeout=120)
        for repo in sorted(self.created_repos):
            with contextlib.suppress(Exception):
                self.registry.delete_repository_manifests(repo)
        with contextlib.suppress(Exception):
            client = self.s3()
            for prefix in self.s3_prefixes:
                keys = self.s3_keys(prefix)
                for i in range(0, len(keys), 1000):
                    client.delete_objects(Bucket=self.base_env["GHBUILD_SCCACHE_BUCKET"],
                                          Delete={"Objects": [{"Key": k} for k in keys[i:i + 1000]]})


