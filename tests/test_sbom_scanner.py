"""The local SBOM generator (docker/sbom-scanner/scan.sh, BuildKit's scanner protocol) run with the host's sh and awk
on made-up root filesystems, and `build.sbom-generator`, the default generator of every image. BuildKit running it
in a real build: tests/services/engine/test_76_sbom.py."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

from conftest import write_options

from ghbuild.build import buildjob
from ghbuild.config import configfile

SCAN = Path(__file__).resolve().parents[1] / "docker" / "sbom-scanner" / "scan.sh"
STATUS = """\
Package: bash
Status: install ok installed
Priority: required
Architecture: amd64
Version: 5.2.15-2+b13
Description: GNU Bourne Again SHell
 Bash is an sh-compatible command language interpreter.

Package: libstdc++6
Status: install ok installed
Architecture: amd64
Multi-Arch: same
Version: 12.2.0-14
Depends: gcc-12-base (= 12.2.0-14)

Package: gone
Status: deinstall ok config-files
Architecture: all
Version: 1.0-1

Package: adduser
Status: install ok installed
Architecture: all
Version: 1:3.134
"""


def rootfs(folder: Path, status: str | None, os_id: str = "debian") -> Path:
    if status is not None:
        (folder / "var/lib/dpkg").mkdir(parents=True)
        (folder / "var/lib/dpkg/status").write_text(status)
    (folder / "etc").mkdir(parents=True, exist_ok=True)
    (folder / "etc/os-release").write_text(f'PRETTY_NAME="x"\nID={os_id}\nVERSION_ID="12"\n')
    return folder


def scan(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", str(SCAN)], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True,
                          timeout=60, cwd=tmp_path)


def test_the_scan_lists_the_installed_debian_packages_as_an_spdx_statement(tmp_path):
    source = rootfs(tmp_path / "src" / "sbom", STATUS)
    extras = tmp_path / "extras"
    rootfs(extras / "sbom-builder", None, os_id="ubuntu")
    out = tmp_path / "out"
    out.mkdir()
    done = scan(tmp_path, BUILDKIT_SCAN_SOURCE=str(source), BUILDKIT_SCAN_DESTINATION=str(out),
                BUILDKIT_SCAN_SOURCE_EXTRAS=str(extras))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["sbom-builder.spdx.json", "sbom.spdx.json"]
    statement = json.loads((out / "sbom.spdx.json").read_text())
    assert statement["_type"] == "https://in-toto.io/Statement/v0.1"
    assert statement["predicateType"] == "https://spdx.dev/Document"
    doc = statement["predicate"]
    assert (doc["spdxVersion"], doc["SPDXID"], doc["name"]) == ("SPDX-2.3", "SPDXRef-DOCUMENT", "sbom")
    assert doc["creationInfo"]["creators"] == ["Tool: ghbuild-sbom-scanner-1"]
    purls = {p["name"]: p["externalRefs"][0]["referenceLocator"] for p in doc["packages"]}
    assert purls == {"bash": "pkg:deb/debian/bash@5.2.15-2+b13?arch=amd64",
                     "libstdc++6": "pkg:deb/debian/libstdc++6@12.2.0-14?arch=amd64",
                     "adduser": "pkg:deb/debian/adduser@1:3.134?arch=all"}      # not the deinstalled one
    assert {p["name"]: p["versionInfo"] for p in doc["packages"]}["adduser"] == "1:3.134"
    ids = [p["SPDXID"] for p in doc["packages"]]
    assert len(set(ids)) == 3 and all(re.fullmatch(r"SPDXRef-[A-Za-z0-9.-]+", i) for i in ids), ids
    assert [r["relatedSpdxElement"] for r in doc["relationships"]] == ids
    # an extra filesystem without dpkg: scanned, nothing found
    extra = json.loads((out / "sbom-builder.spdx.json").read_text())["predicate"]
    assert (extra["name"], extra["packages"], extra["relationships"]) == ("sbom-builder", [], [])
    # the same filesystem names the same document
    again = tmp_path / "again"
    again.mkdir()
    assert scan(tmp_path, BUILDKIT_SCAN_SOURCE=str(source), BUILDKIT_SCAN_DESTINATION=str(again)).returncode == 0
    assert (json.loads((again / "sbom.spdx.json").read_text())["predicate"]["documentNamespace"]
            == doc["documentNamespace"])


def test_the_distribution_names_the_purl_namespace(tmp_path):
    source = rootfs(tmp_path / "sbom", "Package: bash\nStatus: install ok installed\nArchitecture: arm64\n"
                                       "Version: 5.2.21-2ubuntu4\n", os_id="ubuntu")
    done = scan(tmp_path, BUILDKIT_SCAN_SOURCE=str(source), BUILDKIT_SCAN_DESTINATION=str(tmp_path))
    assert done.returncode == 0, done.stderr
    (package,) = json.loads((tmp_path / "sbom.spdx.json").read_text())["predicate"]["packages"]
    assert package["externalRefs"][0]["referenceLocator"] == "pkg:deb/ubuntu/bash@5.2.21-2ubuntu4?arch=arm64"


def test_the_scan_outside_buildkit_says_what_is_missing(tmp_path):
    done = scan(tmp_path, BUILDKIT_SCAN_SOURCE=str(tmp_path))
    assert done.returncode != 0
    assert "BUILDKIT_SCAN_DESTINATION is not set" in done.stderr


def _generator(options, image: str = "cpu") -> str | None:
    trusted = SimpleNamespace(trust=SimpleNamespace(trusted=True))
    job = SimpleNamespace(image=image)
    return buildjob._attestations(trusted, options, job, True, {})["sbom"]


def test_build_sbom_generator_is_every_images_default_and_an_images_own_wins(tmp_path):
    options = write_options(tmp_path / "a", extra='[images.cpu.attest]\nsbom = true\n[build]\n'
                                                  'sbom-generator = "registry.example/scan@sha256:' + "1" * 64 + '"\n')
    assert _generator(options) == "registry.example/scan@sha256:" + "1" * 64
    own = write_options(tmp_path / "b", extra='[images.cpu.attest]\nsbom = true\nsbom-generator = "mine:1"\n'
                                              '[build]\nsbom-generator = "global:1"\n')
    assert _generator(own) == "mine:1"
    # the variable local.env sets; an image without attest.sbom gets no SBOM whatever the default
    path = tmp_path / "a" / "ghbuild.toml"
    from_env = configfile.load(str(path), env={"GHBUILD_BUILD_SBOM_GENERATOR": "local:1"}, cwd=path.parent)
    assert _generator(from_env) == "local:1"
    assert _generator(from_env, "rocm") is None
    # unset: BuildKit's default generator ("")
    assert _generator(write_options(tmp_path / "c", extra="[images.cpu.attest]\nsbom = true\n")) == ""
