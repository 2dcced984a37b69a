"""``python -m infra up|down|status``: local Docker engine, registries, S3 and base images."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

from . import baseimage, engine, localenv, packages, procs, registry, rocm_standin, s3, sbom_scanner, sccache_helper
from .common import (
    BASE_INDEX_REPO,
    BASE_INDEX_TAG,
    DOCKER_CLI,
    DOCKER_HOST,
    FAKE_AWS_ACCESS_KEY_ID,
    FAKE_AWS_SECRET_ACCESS_KEY,
    LOOPBACK,
    S3_REGION,
    SCCACHE_BUCKET,
    InfraError,
    info,
    ports,
    repo_root,
    state_dir,
    step,
)

# Stop order for `down`: clients of the engine/registries first, dockerd last.
STOP_ORDER = ("s3", "registry-hub", "registry-staging", "dockerd")
STOP_TIMEOUT = {"dockerd": 40.0}


def local_env(p: dict[str, int], sccache: Path, rocm_standin: str, helper: str, sbom_generator: str) -> dict[str, str]:
    root = repo_root()
    staging, hub, s3_url = f"{LOOPBACK}:{p['staging']}", f"{LOOPBACK}:{p['hub']}", f"http://{LOOPBACK}:{p['s3']}"
    return {
        "GHBUILD_CONFIG": str(root / "ghbuild.toml"),
        "GHBUILD_REGISTRIES_CACHE": f"{staging}/ghbuild/cache",
        "GHBUILD_REGISTRIES_STAGING": f"{staging}/ghbuild/{{image}}",
        "GHBUILD_REGISTRIES_PUBLISH": f"{hub}/ghbuild/{{image}}",
        "GHBUILD_SCCACHE_BUCKET": SCCACHE_BUCKET,
        "GHBUILD_SCCACHE_ENDPOINT": s3_url,
        "GHBUILD_SCCACHE_REGION": S3_REGION,
        # The helper image every Dockerfile mounts for sccache; ghbuild's nightly publishes it elsewhere.
        "GHBUILD_SCCACHE_HELPER_IMAGE": helper,
        # Every image's default SBOM generator (attest.sbom): BuildKit's own is on Docker Hub, out of reach here.
        "GHBUILD_BUILD_SBOM_GENERATOR": sbom_generator,
        "AWS_ACCESS_KEY_ID": FAKE_AWS_ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": FAKE_AWS_SECRET_ACCESS_KEY,
        "AWS_DEFAULT_REGION": S3_REGION,
        "GHBUILD_LOCAL_BASE_IMAGE": f"{staging}/{BASE_INDEX_REPO}:{BASE_INDEX_TAG}",
        # The default BASE_IMAGE of every image without its own base-image: the local Debian index.
        "GHBUILD_BUILD_BASE_IMAGE": f"{staging}/{BASE_INDEX_REPO}:{BASE_INDEX_TAG}",
        # rocm-base builds FROM the CPU stand-in, with a small framework instead of PyTorch for ROCm
        # (the PyTorch wheel index is not reachable here).
        "GHBUILD_IMAGES_ROCM_BASE_BASE_IMAGE": rocm_standin,
        "GHBUILD_IMAGES_ROCM_BASE_BUILD_ARGS": ("FRAMEWORK_SPEC=numpy==1.26.4,FRAMEWORK_INDEX_URL=,"
                                                "FRAMEWORK_IMPORT=numpy"),
        "GHBUILD_LOCAL_BASE_IMAGE_AMD64": baseimage.local_tag("amd64"),
        "GHBUILD_LOCAL_BASE_IMAGE_ARM64": baseimage.local_tag("arm64"),
        "GHBUILD_LOCAL_STAGING": staging,
        "GHBUILD_LOCAL_HUB": hub,
        "GHBUILD_LOCAL_S3": s3_url,
        "GHBUILD_DOCKER_CLI": DOCKER_CLI,
        "DOCKER_HOST": DOCKER_HOST,
        "SCCACHE_PATH": str(sccache),
    }


# --------------------------------------------------------------------------- commands


def cmd_up(_args: argparse.Namespace) -> int:
    started = time.monotonic()
    timings: list[tuple[str, float]] = []

    def timed(name: str, fn, *a):
        t0 = time.monotonic()
        with step(name):
            result = fn(*a)
        timings.append((name, time.monotonic() - t0))
        return result

    with step("config"):
        p = ports()
        if os.geteuid() != 0:
            raise InfraError("config", "`up` must run as root (apt, dockerd, binfmt_misc, debootstrap)")
    state_dir().mkdir(parents=True, exist_ok=True)
    with procs.locked():
        state = procs.load_state()
        timed("apt", packages.ensure_apt_packages)
        tools = timed("pip", packages.ensure_python_tools)
        timed("dockerd", engine.ensure_dockerd, state)
        procs.save_state(state)
        timed("binfmt", engine.ensure_binfmt)
        timed("base-images", baseimage.ensure_base_images)
        timed("registry-staging", registry.ensure_registry, state, "staging", p["staging"])
        timed("registry-hub", registry.ensure_registry, state, "hub", p["hub"])
        timed("base-index", registry.ensure_base_index, p["staging"])
        timed("s3", s3.ensure_s3, state, p["s3"], tools["moto_server"])
        # The CPU stand-in for a ROCm dev image (no ROCm images or GPUs here): base of images.rocm-base.
        standin = timed("rocm-standin", rocm_standin.ensure, DOCKER_CLI, f"{LOOPBACK}:{p['staging']}")
        # ghbuild's sccache helper (sccache + the wrapper), the image Dockerfiles mount to compile.
        helper = timed("sccache-helper", sccache_helper.ensure, DOCKER_CLI, p["staging"])
        # The local SBOM generator (BuildKit's scanner protocol), by digest: images with attest.sbom use it.
        sbom_generator = timed("sbom-scanner", sbom_scanner.ensure, DOCKER_CLI, p["staging"])
        state["ports"] = p
        procs.save_state(state)
        with step("local-env"):
            path = localenv.write(local_env(p, tools["sccache"], standin, helper, sbom_generator))
    slow = ", ".join(f"{n} {t:.1f}s" for n, t in timings if t >= 1.0)
    info(f"wrote {path}")
    info(f"up: done in {time.monotonic() - started:.1f} s" + (f" ({slow})" if slow else ""))
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    with procs.locked():
        state = procs.load_state()
        records = state.get("processes", [])
        order = {role: i for i, role in enumerate(STOP_ORDER)}
        for rec in sorted(records, key=lambda r: order.get(r.get("role"), -1)):
            role = rec.get("role")
            with step(f"down/{role}"):
                outcome = procs.stop(rec, timeout=STOP_TIMEOUT.get(role, 15.0))
            info(f"{role}: {outcome} (pid {rec.get('pid')})")
            procs.drop_record(state, role)
            procs.save_state(state)
        if state.get("dockerd_external"):
            info("dockerd: was not started by us; leaving it running")
        if not records:
            info("nothing recorded as started by us; nothing to stop")
        state.pop("dockerd_external", None)
        procs.save_state(state)
        for env_file in (localenv.path(), localenv.path(localenv.SERVICES)):
            if env_file.exists():
                env_file.unlink()
                info(f"removed {env_file}")
        if args.purge:
            for role in ("staging", "hub"):
                data = registry.registry_dir(role) / "data"
                if data.exists():
                    shutil.rmtree(data)
                    info(f"purged {data}")
    return 0


def cmd_status(_args: argparse.Namespace) -> int:
    state = procs.load_state()
    try:
        p = state.get("ports") or ports()
    except InfraError:
        p = state.get("ports") or {}
    ok = True
    rows: list[tuple[str, str, str]] = []

    def owner(role: str, answering: bool) -> str:
        rec = procs.find_record(state, role)
        if rec and procs.is_ours_alive(rec):
            return f"started by us, pid {rec['pid']}"
        if rec:
            return f"recorded pid {rec.get('pid')} is gone"
        return "not started by us" if answering else "not running"

    missing_pkgs = packages.missing_apt_packages()
    rows.append(("apt", "ok" if not missing_pkgs else "MISSING", ", ".join(missing_pkgs) or "all packages installed"))
    ok &= not missing_pkgs

    answers = os.path.exists(DOCKER_CLI) and engine.docker_answers(timeout=5)
    problem = engine.engine_problem(engine.docker_info()) if answers else None
    rows.append(("dockerd", "answering" if answers and not problem else "WRONG" if answers else "DOWN",
                 owner("dockerd", bool(answers)) + (f"; {problem}" if problem else "")))
    ok &= bool(answers) and not problem
    buildx = engine.buildx_version() if answers else None
    rows.append(("buildx", buildx or "MISSING", f"{DOCKER_CLI} buildx"))
    ok &= bool(buildx)

    cosign = packages.cosign_version()
    rows.append(("cosign", cosign or "MISSING", "cosign/trixie: signs and verifies published images"))
    ok &= bool(cosign)

    entry = engine.binfmt_entry()
    rows.append(("binfmt", "enabled" if entry.get("enabled") else "DISABLED",
                 f"qemu-aarch64 flags {entry.get('flags:', '-')}"))
    ok &= bool(entry.get("enabled"))

    if answers:
        for arch in ("amd64", "arm64"):
            data = baseimage.image_info(baseimage.local_tag(arch))
            got = data.get("Architecture") if data else None
            rows.append(("image", "present" if got == arch else "MISSING",
                         f"{baseimage.local_tag(arch)} ({got or '-'})"))
            ok &= got == arch

    for role in ("staging", "hub"):
        port = p.get(role)
        up = bool(port) and registry.v2_ok(port)
        detail = f"{LOOPBACK}:{port} {owner('registry-' + role, up)}"
        if up and role == "staging":
            plats = registry.index_platforms(port)
            detail += f"; {BASE_INDEX_REPO}:{BASE_INDEX_TAG} " + ("+".join(sorted(plats)) if plats else "MISSING")
            ok &= bool(plats) and {"amd64", "arm64"} <= set(plats)
        rows.append((f"registry-{role}", "answering" if up else "DOWN", detail))
        ok &= up

    port = p.get("s3")
    up = bool(port) and s3.s3_answers(port)
    detail = f"http://{LOOPBACK}:{port} {owner('s3', up)}"
    if up:
        has = s3.bucket_exists(port)
        detail += f"; bucket {SCCACHE_BUCKET} " + ("present" if has else "MISSING")
        ok &= has
    rows.append(("s3", "answering" if up else "DOWN", detail))
    ok &= up

    sccache = packages.find_tool("sccache")
    version = packages.sccache_version(sccache) if sccache else None
    rows.append(("sccache", version or "MISSING", str(sccache or "-")))
    ok &= bool(version)

    env_file = localenv.path()
    rows.append(("local.env", "present" if env_file.exists() else "MISSING", str(env_file)))

    width = max(len(r[0]) for r in rows)
    for name, status, detail in rows:
        print(f"{name:<{width}}  {status:<10} {detail}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m infra",
        description="Local infrastructure for ghbuild: dockerd+BuildKit, arm64 emulation, Debian base images, "
        "two registries (staging, hub), S3 (moto) for sccache. State in .ghbuild/.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("up", help="install what is missing and start everything (idempotent)")
    down = sub.add_parser("down", help="stop only the processes `up` started")
    down.add_argument("--purge", action="store_true", help="also delete the registries' stored data")
    sub.add_parser("status", help="print each service and whether it answers (exit 1 if something is down)")
    args = parser.parse_args(argv)
    handler = {"up": cmd_up, "down": cmd_down, "status": cmd_status}[args.command]
    try:
        return handler(args)
    except InfraError as exc:
        print(f"infra: error: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("infra: interrupted", file=sys.stderr, flush=True)
        return 130
    except Exception as exc:
        print(f"infra: error: [{args.command}] {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return 1
