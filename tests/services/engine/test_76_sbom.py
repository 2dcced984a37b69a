"""SBOM attestations for real: a trusted, signed build of the small os-base stage with `attest.sbom = true` runs the
local SBOM generator (docker/sbom-scanner, which `make infra-up` pushes and local.env names as
build.sbom-generator; BuildKit's default generator is on Docker Hub, out of reach here) through BuildKit's
scanner protocol. Its SPDX document sits beside the provenance in the image's attestation manifest, lists what
dpkg says is installed in the image, and stays there through `ghbuild publish nightly`; `ghbuild verify` still
passes (it checks the signature and the provenance, and carries the SBOM without reading it).

One architecture (amd64) keeps it fast; the per-arch attestation path is the same for arm64.
"""

from __future__ import annotations

import json

import pytest

from .test_74_signed_publish import _hub, hub, keys, publish, verify  # noqa: F401 (fixtures)

SPDX = "https://spdx.dev/Document"
PROVENANCE = "https://slsa.dev/provenance/v0.2"


@pytest.fixture(scope="module")
def sbom_build(session, keys):  # noqa: F811
    """`build --push --record` of os-base, trusted and signed, with an SBOM from the local generator."""
    sha = session.sha("sbom")
    records = session.workdir / "records-sbom"
    env = dict(keys, GHBUILD_IMAGES_CPU_ATTEST_SBOM="true")
    run = session.ghbuild("sbom-amd64", "--target", "os-base", "--push", "--json", "--record",
                          str(records / "cpu-amd64.json"), sha=sha, env=env, timeout=1200)
    assert run.rc == 0, "\n".join(run.stderr.splitlines()[-30:])
    return sha, json.loads(run.stdout)["digest"], records, run


def attestations(reg, name: str, ref: str) -> tuple[str, dict[str, dict]]:
    """The amd64 image's digest in the index `ref`, and its attestation manifest's statements by predicate type."""
    index = json.loads(reg.manifest(name, ref)[2])
    (image,) = [e for e in index["manifests"] if e["platform"]["architecture"] == "amd64"]
    (attestation,) = [e for e in index["manifests"]
                      if (e.get("annotations") or {}).get("vnd.docker.reference.type") == "attestation-manifest"]
    assert attestation["annotations"]["vnd.docker.reference.digest"] == image["digest"]
    assert attestation["platform"] == {"architecture": "unknown", "os": "unknown"}
    layers = json.loads(reg.manifest(name, attestation["digest"])[2])["layers"]
    return image["digest"], {layer["annotations"]["in-toto.io/predicate-type"]: reg.blob_json(name, layer["digest"])
                             for layer in layers}


def installed(session, ref: str) -> dict[str, str]:
    """name -> purl of every package dpkg says is installed in the image `ref` (asked inside it)."""
    ran = session.docker_run("run", "--rm", "--platform", "linux/amd64", ref, "dpkg-query", "-W", "-f",
                             "${db:Status-Status} ${Package} ${Version} ${Architecture}\n", timeout=300)
    assert ran.returncode == 0, ran.stderr
    rows = [line.split() for line in ran.stdout.splitlines()]
    return {name: f"pkg:deb/debian/{name}@{version}?arch={arch}" for status, name, version, arch in rows
            if status == "installed"}


def test_the_trusted_build_attaches_an_sbom_of_the_image_beside_its_provenance(session, sbom_build):
    _, digest, _, run = sbom_build
    generator = session.local["GHBUILD_BUILD_SBOM_GENERATOR"]
    command = json.loads(run.stdout)["command"]
    assert "@sha256:" in generator and f"--sbom=generator={generator}" in command, command
    name = f"ghbuild-test-{session.sid}/cpu"
    image, statements = attestations(session.registry, name, digest)
    assert set(statements) == {SPDX, PROVENANCE}
    sbom = statements[SPDX]
    assert sbom["subject"][0]["digest"] == {"sha256": image.split(":", 1)[1]}   # BuildKit names the image
    document = sbom["predicate"]
    assert document["spdxVersion"] == "SPDX-2.3"
    assert "Tool: ghbuild-sbom-scanner-1" in document["creationInfo"]["creators"]
    listed = {p["name"]: p["externalRefs"][0]["referenceLocator"] for p in document["packages"]}
    assert {"bash", "libc6", "python3"} <= set(listed), sorted(listed)
    # exactly what dpkg in the built image says is installed, name, version and architecture
    assert listed == installed(session, f"{session.registry.host}/{name}@{image}")


def test_the_published_nightly_keeps_the_sbom_and_verifies(session, hub, keys, sbom_build):  # noqa: F811
    sha, digest, records, _ = sbom_build
    template, repo = _hub(session, hub, "-sbom")
    proc = publish("nightly", keys, template, records, "--sha", sha, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (result,) = json.loads(proc.stdout)["images"]
    assert result["arch_digests"] == {"amd64": digest}
    name = f"ghbuild-test-{session.sid}/cpu"
    _, staged = attestations(session.registry, name, digest)
    for tag in ("nightly", "nightly-x86_64"):
        _, published = attestations(hub, repo.split("/", 1)[1], tag)
        assert published == staged, tag          # the SBOM and the provenance, byte for byte the build's
    said = verify(f"{repo}:nightly", keys, "--sha", sha)
    assert said.returncode == 0, said.stderr
    line = said.stdout.strip()
    assert line.startswith(f"verified {repo}@{result['index_digest']}: ") and f" {sha} " in line, line
    assert line.endswith("provenance of linux/amd64 names that commit"), line
