"""Turn a plan job into the exact build command. Pure: no I/O, no clock.

Two backends:
- `buildx`: `docker buildx build` on GitHub runners (docker-container builder): every plan feature.
- `engine`: the Docker engine's built-in BuildKit (`DOCKER_BUILDKIT=1 docker build`), for machines
  without the buildx plugin. It keeps platform, target, build args, labels, secrets, cache mounts,
  network and registry `--cache-from`; what it cannot do is listed in `skipped`, one line each,
  so a difference from the plan is never silent.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from ghbuild.planner import Job

BACKENDS = ("buildx", "engine")
# Variables buildx needs in its own environment to use type=gha caches.
GHA_CACHE_ENV = ("ACTIONS_RUNTIME_TOKEN", "ACTIONS_RESULTS_URL")


class Secret(NamedTuple):
    """A BuildKit secret, mounted with `RUN --mount=type=secret,id=...`; only its file path is in argv."""

    id: str
    src: Path


class BuildSettings(NamedTuple):
    backend: str
    docker: str = "docker"
    project_dir: Path = Path(".")
    builder: str | None = None          # buildx builder name
    network: str | None = None          # e.g. "host", so the build reaches services on the runner
    push: bool = False
    extra_build_args: Mapping[str, str] = MappingProxyType({})   # BASE_IMAGE, SCCACHE_* (never secrets)
    extra_labels: Mapping[str, str] = MappingProxyType({})       # created, version
    secrets: tuple[Secret, ...] = ()
    metadata_file: Path | None = None
    iidfile: Path | None = None
    provenance: bool = False            # attestations turn per-arch images into indexes; off by default
    env: Mapping[str, str] = MappingProxyType({})                # the caller's environment (read only)


class BuildCommand(NamedTuple):
    argv: tuple[str, ...]
    env: dict[str, str]                 # variables to add to the caller's environment
    skipped: tuple[str, ...]            # one line per plan feature not applied, with the reason
    push_tags: tuple[str, ...]          # tags to `docker push` after the build (engine backend)
    cache_push_refs: tuple[str, ...]    # inline-cache images to push (engine stand-in for cache-to registry)

    def display(self) -> str:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        return (env + " " if env else "") + " ".join(shlex.quote(a) for a in self.argv)


def _kv(spec: str) -> dict[str, str]:
    out = {}
    for item in spec.split(","):
        key, _, value = item.partition("=")
        out[key] = value
    return out


def build_command(job: Job, settings: BuildSettings) -> BuildCommand:
    if settings.backend not in BACKENDS:
        raise ValueError(settings.backend)
    project = settings.project_dir
    dockerfile = str(project / job.dockerfile)
    context = str(project / job.context)
    buildx = settings.backend == "buildx"
    skipped: list[str] = []
    env: dict[str, str] = {}

    argv: list[str] = [settings.docker]
    argv += ["buildx", "build"] if buildx else ["build"]
    if buildx and settings.builder:
        argv += ["--builder", settings.builder]
    if not buildx:
        env["DOCKER_BUILDKIT"] = "1"
    argv += ["--progress", "plain", "--platform", job.platform, "--file", dockerfile]
    if job.target:
        argv += ["--target", job.target]
    if settings.network:
        argv += ["--network", settings.network]
        if buildx and settings.network == "host":
            argv += ["--allow", "network.host"]  # an entitlement in buildx; the engine allows it as is

    build_args = {**job.build_args, **settings.extra_build_args}
    for key in sorted(build_args):
        argv += ["--build-arg", f"{key}={build_args[key]}"]
    labels = {**job.labels, **settings.extra_labels}
    for key in sorted(labels):
        argv += ["--label", f"{key}={labels[key]}"]
    for secret in settings.secrets:
        argv += ["--secret", f"id={secret.id},src={secret.src}"]

    gha_ready = all(settings.env.get(v) for v in GHA_CACHE_ENV)
    push_tags: list[str] = []
    cache_push: list[str] = []

    def gha_unusable(kind: str | None) -> str | None:
        if kind != "gha":
            return None
        if not buildx:
            return "needs buildx"
        if not gha_ready:
            return (f"{' and '.join(GHA_CACHE_ENV)} are not in the environment (buildx would drop it silently; "
                    "run the build through the ghbuild action)")
        return None

    for spec in job.cache_from:
        if reason := gha_unusable(_kv(spec).get("type")):
            skipped.append(f"cache-from {spec}: skipped: {reason}")
        elif buildx:
            argv += ["--cache-from", spec]
        else:
            # The engine reads a registry cache only when it was written inline into an image.
            argv += ["--cache-from", _kv(spec)["ref"]]
    for spec in job.cache_to:
        fields = _kv(spec)
        kind = fields.get("type")
        if reason := gha_unusable(kind):
            skipped.append(f"cache-to {spec}: skipped: {reason}")
        elif buildx:
            argv += ["--cache-to", spec]
        elif kind == "registry" and settings.push:
            cache_push.append(fields["ref"])
            skipped.append(f"cache-to {spec}: degraded: written as inline cache (final stage only, mode=min) "
                           f"by also pushing the image to {fields['ref']}; mode=max needs buildx")
        else:
            skipped.append(f"cache-to {spec}: skipped: needs buildx" if kind != "registry"
                           else f"cache-to {spec}: skipped: nothing is pushed in this run")
    if not buildx and (cache_push or job.cache_from):
        argv += ["--build-arg", "BUILDKIT_INLINE_CACHE=1"]

    if buildx:
        argv += [f"--provenance={'true' if settings.provenance else 'false'}"]
        if settings.metadata_file:
            argv += ["--metadata-file", str(settings.metadata_file)]
        for tag in job.tags:
            argv += ["--tag", tag]
        if settings.push and job.tags:
            argv += ["--output", "type=image,push=true"]
        # Also into the local image store, for the layer audit and smoke tests (two exporters: buildx >= 0.13).
        argv += ["--load"]
    else:
        for tag in job.tags:
            argv += ["--tag", tag]
        for ref in cache_push:
            argv += ["--tag", ref]
        if settings.push:
            push_tags = list(job.tags)
    if settings.iidfile:
        argv += ["--iidfile", str(settings.iidfile)]
    argv.append(context)
    return BuildCommand(argv=tuple(argv), env=env, skipped=tuple(skipped), push_tags=tuple(push_tags),
                        cache_push_refs=tuple(cache_push))
