#!/usr/bin/env python3
"""What signing and verification cost a nightly publish: `ghbuild publish nightly` of one small signed image
(amd64, with BuildKit provenance), staging -> hub, with cosign (a key: GHBUILD_SIGN_KEY, GHBUILD_VERIFY_KEY)
and without, each into a fresh hub repository, against the local registries of `make infra-up`.

The image is built once with buildx (`--provenance=mode=max`, labelled as the trusted build would) and signed with
cosign as `build --record` signs it. Prints the median wall time of each kind and the difference per publish:
one `cosign verify` of the recorded digest plus the provenance reads, then for each published digest (the
per-arch index, the nightly index) a `cosign verify` (a rerun signs nothing twice) and a `cosign sign`. Removes
what it pushed.

    .venv/bin/python bench/publish_signing.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from fakes.oci import RegistryClient  # noqa: E402

from infra import localenv  # noqa: E402

SHA = uuid.uuid4().hex + uuid.uuid4().hex[:8]
SOURCE = "https://github.com/ghbuild/ghbuild"


def run(argv: list[str], env: dict[str, str], cwd: Path = REPO) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv[:3])}...: exit {proc.returncode}: {proc.stderr.strip()[-600:]}")
    return proc


def stage(env: dict[str, str], work: Path, repo: str) -> str:
    """A one-platform index (image + attestation) in staging, signed for SHA; returns its digest."""
    (work / "Dockerfile").write_text(f"FROM {env['GHBUILD_BUILD_BASE_IMAGE']}\nRUN echo bench > /bench\n")
    run([env.get("GHBUILD_DOCKER_CLI", "docker"), "buildx", "build", "--platform", "linux/amd64",
         "--provenance=mode=max", "--label", f"org.opencontainers.image.source={SOURCE}",
         "--label", f"org.opencontainers.image.revision={SHA}", "--metadata-file", str(work / "md.json"),
         "--tag", f"{repo}:{SHA}-x86_64", "--output", "type=image,push=true", str(work)], env)
    digest = json.loads((work / "md.json").read_text())["containerimage.digest"]
    run(["cosign", "sign", "--yes", "--key", env["GHBUILD_SIGN_KEY"], "--tlog-upload=false",
         "-a", f"org.opencontainers.image.source={SOURCE}", "-a", f"org.opencontainers.image.revision={SHA}",
         f"{repo}@{digest}"], env)
    return digest


def publish(env: dict[str, str], records: Path, hub_template: str) -> float:
    argv = [sys.executable, "-m", "ghbuild", "publish", "nightly", "--image", "cpu", "--sha", SHA, "--records",
            str(records), "--event", "push", "--repository", "ghbuild/ghbuild", "--ref", "main",
            "--default-branch", "main"]
    start = time.monotonic()
    run(argv, dict(env, GHBUILD_REGISTRIES_PUBLISH=hub_template))
    return time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    local = localenv.read()
    sid = uuid.uuid4().hex[:8]
    staging = RegistryClient(local["GHBUILD_LOCAL_STAGING"])
    hub = RegistryClient(local["GHBUILD_LOCAL_HUB"])
    created: list[tuple[RegistryClient, str]] = [(staging, f"bench-sign-{sid}/cpu")]
    with tempfile.TemporaryDirectory(prefix="ghbuild-bench-sign-") as tmp:
        work = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GHBUILD_", "GITHUB_"))}
        env.update(local, COSIGN_PASSWORD=uuid.uuid4().hex, GHBUILD_IMAGES_CPU_PLATFORMS="linux/amd64",
                   GHBUILD_REGISTRIES_STAGING=f"{staging.host}/bench-sign-{sid}/{{image}}")
        run(["cosign", "generate-key-pair"], env, cwd=work)
        env.update(GHBUILD_SIGN_KEY=str(work / "cosign.key"))
        try:
            digest = stage(env, work, f"{staging.host}/bench-sign-{sid}/cpu")
            records = work / "records"
            records.mkdir()
            (records / "cpu-amd64.json").write_text(json.dumps({
                "id": "cpu-amd64", "image": "cpu", "arch": "amd64", "platform": "linux/amd64", "digest": digest,
                "ref": f"{staging.host}/bench-sign-{sid}/cpu@{digest}", "sha": SHA, "trusted": True}))
            plain = {k: v for k, v in env.items() if k != "GHBUILD_SIGN_KEY"}
            signed = dict(env, GHBUILD_VERIFY_KEY=str(work / "cosign.pub"))
            times: dict[str, list[float]] = {"unsigned": [], "signed": []}
            for i in range(args.repeats):
                for kind in (("unsigned", "signed") if i % 2 == 0 else ("signed", "unsigned")):
                    name = f"bench-sign-{sid}-{kind}-{i}"
                    created.append((hub, f"{name}/cpu"))
                    times[kind].append(publish(signed if kind == "signed" else plain, records,
                                               f"{hub.host}/{name}/{{image}}"))
        finally:
            for reg, name in created:
                reg.delete_repository_manifests(name)
    unsigned, signed_s = statistics.median(times["unsigned"]), statistics.median(times["signed"])
    print(f"publish nightly, 1 image x 1 arch, median of {args.repeats}:")
    print(f"  without signing/verification: {unsigned:6.2f} s")
    print(f"  verify staging + sign hub:    {signed_s:6.2f} s  (+{signed_s - unsigned:.2f} s per publish, "
          "1 verify + 2 signatures with their checks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
