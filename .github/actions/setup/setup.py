"""The `setup` action: install ghbuild from this action's own checkout into $RUNNER_TEMP/ghbuild.

Like cibuildwheel's action: an isolated virtual environment (never the runner's Python, never the
user's environment), created from a known interpreter, with ghbuild installed from the same commit
as this action. Only a `ghbuild` symlink is put on PATH (a folder of its own, so the venv's `python`
and `pip` never shadow the job's). Standard library only: nothing is installed yet when this runs.

A second call in the same job finds the stamp of the first (same sources, same interpreter) and does
nothing. A lock serialises concurrent calls that share one RUNNER_TEMP (a self-hosted runner folder
reused by several runner processes, act).

pip honours the usual PIP_* variables (index, proxy, find-links, cache), so an offline or mirrored
installation is configured in the environment, not here.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

MIN_PYTHON = (3, 11)
SOURCES = ("pyproject.toml", "README.md", "ghbuild")   # what `pip install <root>` needs
SKIP = {"__pycache__", ".pytest_cache"}


def fail(message: str) -> None:
    text = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    print(f"::error title=ghbuild setup::{text}", flush=True)
    raise SystemExit(1)


def toolkit_root() -> Path:
    action_dir = Path(os.environ.get("GITHUB_ACTION_PATH") or Path(__file__).parent).resolve()
    root = action_dir.parents[2]               # <root>/.github/actions/setup
    if not (root / "pyproject.toml").is_file() or not (root / "ghbuild" / "__init__.py").is_file():
        fail(f"{root} is not a ghbuild checkout (no pyproject.toml / ghbuild package next to "
             ".github/actions/setup); use the action from the ghbuild repository")
    return root


def source_files(root: Path) -> list[Path]:
    files: list[Path] = []
    for name in SOURCES:
        path = root / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += sorted(p for p in path.rglob("*")
                            if p.is_file() and not SKIP.intersection(p.relative_to(root).parts)
                            and p.suffix not in (".pyc", ".pyo"))
        else:
            fail(f"{path} is missing from the ghbuild checkout")
    return files


def fingerprint(root: Path, files: list[Path]) -> str:
    digest = hashlib.sha256()
    digest.update(f"{sys.version}\0{Path(sys.executable).resolve()}\0".encode())
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def write_command_file(var: str, line: str) -> None:
    path = os.environ.get(var)
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")


@contextlib.contextmanager
def locked(home: Path):
    home.mkdir(parents=True, exist_ok=True)
    with open(home / ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def run(argv: list[str], what: str) -> None:
    print(f"::group::{what}", flush=True)
    try:
        proc = subprocess.run(argv)
    finally:
        print("::endgroup::", flush=True)
    if proc.returncode != 0:
        fail(f"{what} failed (exit {proc.returncode}); see the log group above")


def install(root: Path, files: list[Path], home: Path) -> None:
    env_dir, src = home / "venv", home / "src"
    for path in (env_dir, src):
        shutil.rmtree(path, ignore_errors=True)
    try:
        venv.EnvBuilder(with_pip=True, clear=True, symlinks=True).create(env_dir)
    except (OSError, subprocess.CalledProcessError) as exc:
        fail(f"cannot create a virtual environment with {sys.executable} ({exc}); on Debian/Ubuntu "
             "install python3-venv, or pass another interpreter as the `python` input")
    # Build from a copy: pip builds in place, and the checkout (the job's workspace, or the action's
    # read-only download) must not get build/ or *.egg-info folders.
    for path in files:
        target = src / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    python = env_dir / "bin" / "python"
    # --no-compile: the venv lives for one job; byte-compiling every module of boto3 and friends up
    # front costs more than compiling the few that ghbuild imports when it imports them.
    run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-compile",
         "--progress-bar", "off", str(src)], f"pip install ghbuild into {env_dir}")
    shutil.rmtree(src, ignore_errors=True)


def version_of(exe: Path) -> str:
    proc = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    words = proc.stdout.split()
    if proc.returncode != 0 or len(words) != 2:
        fail(f"{exe} --version failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return words[1]


def main() -> int:
    if sys.version_info < MIN_PYTHON:
        fail(f"ghbuild needs Python {'.'.join(map(str, MIN_PYTHON))} or newer; {sys.executable} is "
             f"{sys.version.split()[0]} (pass another interpreter as the `python` input, e.g. the "
             "python-path output of actions/setup-python)")
    started = time.monotonic()
    root = toolkit_root()
    home = Path(os.environ.get("RUNNER_TEMP") or tempfile.gettempdir()) / "ghbuild"
    files = source_files(root)
    stamp_file = home / "setup.json"
    exe = home / "venv" / "bin" / "ghbuild"
    with locked(home):
        wanted = fingerprint(root, files)
        try:
            stamp = json.loads(stamp_file.read_text("utf-8"))
        except (OSError, ValueError):
            stamp = {}
        cached = stamp.get("fingerprint") == wanted and exe.is_file()
        if not cached:
            stamp_file.unlink(missing_ok=True)
            install(root, files, home)
            if not exe.is_file():
                fail(f"pip did not install the ghbuild command into {exe.parent}")
        version = version_of(exe)
        bin_dir = home / "bin"
        bin_dir.mkdir(exist_ok=True)
        link = bin_dir / "ghbuild"
        if not (link.is_symlink() and os.readlink(link) == str(exe)):
            link.unlink(missing_ok=True)
            link.symlink_to(exe)
        if not cached:
            stamp_file.write_text(json.dumps({"fingerprint": wanted, "version": version, "source": str(root),
                                              "python": sys.executable}) + "\n", "utf-8")
    if str(bin_dir) not in os.environ.get("PATH", "").split(os.pathsep):
        write_command_file("GITHUB_PATH", str(bin_dir))
    write_command_file("GITHUB_OUTPUT", f"ghbuild={link}")
    write_command_file("GITHUB_OUTPUT", f"version={version}")
    write_command_file("GITHUB_OUTPUT", f"cached={'true' if cached else 'false'}")
    if cached:
        print(f"ghbuild {version}: already set up in this job ({link}); nothing to do")
    else:
        print(f"ghbuild {version}: installed from {root} with {sys.executable} into {home / 'venv'} "
              f"in {time.monotonic() - started:.1f} s; `ghbuild` is on PATH for the next steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
