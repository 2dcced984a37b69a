"""The `setup` action: install ghbuild from this action's own checkout into $RUNNER_TEMP/ghbuild.

Like cibuildwheel's action: an isolated virtual environment (never the runner's Python, never the
user's environment), created from a known interpreter, with ghbuild installed from the same commit
as this action. Only a `ghbuild` symlink is put on PATH (a folder of its own, so the venv's `python`
and `pip` never shadow the job's). Standard library only: nothing is installed yet when this runs.

A second call in the same job finds the stamp of the first (same sources, same interpreter) and does
nothing. A lock serialises concurrent calls that share one RUNNER_TEMP (a self-hosted runner folder
reused by several runner processes, act).

The installer is uv (https://github.com/astral-sh/uv): `uv` from PATH (setup-uv, a self-hosted runner
image), else the pinned UV_VERSION from the package index with the runner's own `python -m pip` (which
honours the usual PIP_* variables: index, proxy, find-links), else, with no pip either, pip inside the
new environment (slow, but needs nothing). uv honours UV_* variables (UV_INDEX_URL, ...) in the same way.

`--key` prints (and sets as step outputs) the GitHub Actions cache key of the environment this call
would build: the sha256 of the sources, the Python version and the interpreter's path, OS and
architecture. The action restores that key before installing and saves it right after a fresh install,
before any later step of the job has run, and only for events whose cache scope is the run's own
(see CACHE_WRITE_EVENTS).

Where the cache lives, and why not in RUNNER_TEMP: actions/cache keys an entry by its key AND a
"version", the sha256 of the `path` input strings as written. RUNNER_TEMP is a different path on a
self-hosted runner installed elsewhere, in a container job, and under act (a new folder per job), so
a path under it made every such job miss. The environment itself still lives in RUNNER_TEMP (the runner
empties it after every job: nothing one job leaves there is ever used by another); what goes through the
cache is a copy of it in a stage folder whose `path` is written `~/.cache/ghbuild-setup/<key>` (the same
string on every runner) together with a manifest (sha256 and mode of every file, every symlink, and the
environment's path at save time). After a restore, the files the manifest lists, and only those, are copied
into RUNNER_TEMP/ghbuild/venv and checked against it (a stage that another job on the same machine is
writing at that moment fails the check, and this job installs instead); the scripts in bin/ that name the
saving job's environment by path are rewritten to name this one. The key no longer names RUNNER_TEMP.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import platform
import tempfile
import time
import venv
from pathlib import Path

MIN_PYTHON = (3, 11)
UV_VERSION = "0.13.9"
# Events whose GitHub Actions cache scope belongs to the run itself: a push or a dispatch writes its own
# branch's scope (only people who can push to it write there), a pull request writes refs/pull/N/merge,
# which only that pull request reads. pull_request_target, workflow_run, issue_comment and friends run in
# the default branch's scope, readable by every trusted job, with input an outsider controls: an
# environment saved there could poison them, so those runs only restore.
CACHE_WRITE_EVENTS = frozenset({"push", "pull_request", "merge_group", "schedule", "workflow_dispatch"})
# Packages of ghbuild's own start-up path, byte-compiled at install time so that the cached environment
# carries their .pyc files (the others are compiled on first import, when a command needs them).
PRECOMPILE = ("ghbuild", "requests", "urllib3", "idna", "certifi", "charset_normalizer", "jsonschema",
              "jsonschema_specifications", "referencing", "rpds", "attr", "attrs", "packaging", "actions_toolkit")
SOURCES = ("pyproject.toml", "README.md", "ghbuild")   # what `pip install <root>` needs
# Every package installed at run time, by version and sha256 (`make lock`), one file per extras set: what a
# job installs is what this commit of ghbuild says, never what the index serves that day.
LOCKS = Path(__file__).resolve().parent / "requirements"
SKIP = {"__pycache__", ".pytest_cache"}
# botocore ships the models of every AWS service (about 450 folders: 30 MB, 2,900 of the environment's 4,400
# files). ghbuild's environment is its own and calls S3 (sccache) and ECR (logins); botocore's credential
# chain calls STS (assume-role, web identity), SSO and SSO-OIDC (SSO profiles) and Sign-In (login
# profiles). The other models are removed after the install: the cached archive falls from 26 MB to 10 MB
# and unpacks about 4 times faster (docs/benchmarks.md). A model removed by mistake fails loudly
# (UnknownServiceError naming it), never silently.
BOTOCORE_SERVICES = frozenset({"s3", "ecr", "ecr-public", "sts", "sso", "sso-oidc", "signin"})
# The stage folder the GitHub Actions cache saves and restores (see the module docstring). Written with `~`
# in the action's `path` input: actions/cache expands it, and hashes the string as written into the entry's version.
STAGE_ROOT = "~/.cache/ghbuild-setup"
MANIFEST = "manifest.json"
STAGE_MAX_AGE = 24 * 3600       # stage folders older than this (by ctime) are removed by the next --key


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


def requested_extras() -> str:
    """The `extras` input: comma-separated extras of pyproject.toml ("" = the light install)."""
    names = [n.strip() for n in os.environ.get("GHBUILD_SETUP_EXTRAS", "all").split(",") if n.strip()]
    bad = [n for n in names if not n.replace("-", "").replace("_", "").isalnum()]
    if bad:
        fail(f"extras: {', '.join(bad)} is not an extra name (e.g. `all`, `aws,docker`, or empty)")
    return ",".join(sorted(set(names)))


def lock_for(extras: str) -> Path:
    """The hashed lock of an extras set ("" light, aws, docker, all = aws,docker)."""
    names = {name for name in extras.split(",") if name}
    name = "all" if "all" in names or names == {"aws", "docker"} else (names.pop() if names else "light")
    lock = LOCKS / f"{name}.txt"
    if not lock.is_file():
        fail(f"extras: no hashed lock {lock} for [{extras}] (ghbuild's checkout is incomplete; `make lock` writes it)")
    return lock


def fingerprint(root: Path, files: list[Path], extras: str) -> str:
    digest = hashlib.sha256()
    # Not the environment's own path: a restored environment is relocated (see restore_stage).
    digest.update(f"{sys.version}\0{Path(sys.executable).resolve()}\0[{extras}]\0".encode())
    # The lock: the packages (and their hashes) the environment is made of.
    digest.update(hashlib.sha256(lock_for(extras).read_bytes()).digest())
    # This script too: how it installs (e.g. trim_botocore) is part of what the environment is.
    digest.update(hashlib.sha256(Path(__file__).read_bytes()).digest())
    for path in files:
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def cache_key(wanted: str) -> str:
    """What the environment depends on, readable: ghbuild's sources and the interpreter (in `wanted`),
    Python version, OS and architecture (a venv links to its interpreter and holds compiled wheels)."""
    runner = f"{os.environ.get('RUNNER_OS') or platform.system()}-{os.environ.get('RUNNER_ARCH') or platform.machine()}"
    return f"ghbuild-venv-{runner}-py{platform.python_version()}-{wanted[:40]}"


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


def run(argv: list[str], what: str, env: dict[str, str] | None = None) -> None:
    print(f"::group::{what}", flush=True)
    try:
        proc = subprocess.run(argv, env=env)
    finally:
        print("::endgroup::", flush=True)
    if proc.returncode != 0:
        fail(f"{what} failed (exit {proc.returncode}); see the log group above")


def copy_sources(root: Path, files: list[Path], src: Path) -> None:
    # Build from a copy: installers build in place, and the checkout (the job's workspace, or the action's
    # read-only download) must not get build/ or *.egg-info folders.
    for path in files:
        target = src / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def find_uv(home: Path) -> str | None:
    """uv from PATH, else the pinned release installed with the interpreter's own pip; None without pip."""
    on_path = shutil.which("uv")
    if on_path:
        return on_path
    target = home / f"uv-{UV_VERSION}"
    exe = target / "bin" / "uv"
    if exe.is_file():
        return str(exe)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           "--no-input", "--no-deps", "--target", str(target), f"uv=={UV_VERSION}"],
                          capture_output=True, text=True)
    if proc.returncode != 0 or not exe.is_file():
        print(f"uv {UV_VERSION} is not on PATH and `{sys.executable} -m pip` could not install it (exit "
              f"{proc.returncode}: {proc.stderr.strip()[-300:]}); installing with pip instead", flush=True)
        return None
    return str(exe)


def install(root: Path, files: list[Path], home: Path, extras: str) -> str:
    """Create home/venv with ghbuild in it; returns the installer used."""
    env_dir, src = home / "venv", home / "src"
    for path in (env_dir, src):
        shutil.rmtree(path, ignore_errors=True)
    copy_sources(root, files, src)
    uv = find_uv(home)
    try:
        venv.EnvBuilder(with_pip=uv is None, clear=True, symlinks=True).create(env_dir)
    except (OSError, subprocess.CalledProcessError) as exc:
        fail(f"cannot create a virtual environment with {sys.executable} ({exc}); on Debian/Ubuntu "
             "install python3-venv, or pass another interpreter as the `python` input")
    python = env_dir / "bin" / "python"
    lock = lock_for(extras)
    # The dependencies and the build backend from the hashed lock, then ghbuild itself from this checkout,
    # built with that backend: nothing comes from the index unhashed.
    if uv:
        # uv's own cache lives and dies with the job; no byte-compiling of everything (see PRECOMPILE).
        env = {**os.environ, "UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR") or str(home / "uv-cache")}
        base = [uv, "pip", "install", "--python", str(python), "--link-mode", "copy", "--no-progress"]
        run([*base, "--require-hashes", "-r", str(lock)], f"uv pip install {lock.name} into {env_dir}", env)
        run([*base, "--no-deps", "--no-build-isolation", str(src)], f"uv pip install ghbuild into {env_dir}", env)
        installer = f"uv {UV_VERSION if uv.startswith(str(home)) else '(from PATH)'}"
    else:
        # --no-compile: byte-compiling every module of boto3 and friends costs more than it saves.
        base = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--no-compile",
                "--progress-bar", "off"]
        run([*base, "--require-hashes", "-r", str(lock)], f"pip install {lock.name} into {env_dir}")
        run([*base, "--no-deps", "--no-build-isolation", str(src)], f"pip install ghbuild into {env_dir}")
        installer = "pip"
    shutil.rmtree(src, ignore_errors=True)
    trim_botocore(env_dir)
    precompile(python)
    return installer


def trim_botocore(env_dir: Path) -> int:
    """Remove the models of AWS services ghbuild never calls (see BOTOCORE_SERVICES); how many were removed.
    The top-level files of botocore/data (endpoints, partitions, retry and default configuration) stay."""
    removed = 0
    for data in env_dir.glob("lib/python*/site-packages/botocore/data"):
        for entry in data.iterdir():
            if entry.is_dir() and entry.name not in BOTOCORE_SERVICES:
                shutil.rmtree(entry)
                removed += 1
    return removed


def precompile(python: Path) -> None:
    """Byte-compile the start-up path's packages (see PRECOMPILE), quietly and best effort."""
    code = ("import compileall, importlib.util, os, sys\n"
            "for name in sys.argv[1:]:\n"
            "    spec = importlib.util.find_spec(name)\n"
            "    if spec and spec.submodule_search_locations:\n"
            "        for folder in spec.submodule_search_locations:\n"
            "            compileall.compile_dir(folder, quiet=2, workers=os.cpu_count() or 1)\n")
    # -I: the environment's packages, never a same-named folder in the working directory (in ghbuild's own
    # checkout, `ghbuild/` there was compiled instead, and every job then compiled the installed one anew).
    subprocess.run([str(python), "-I", "-c", code, *PRECOMPILE], capture_output=True)


def version_of(exe: Path) -> str:
    proc = subprocess.run([str(exe), "--version"], capture_output=True, text=True)
    words = proc.stdout.split()
    if proc.returncode != 0 or len(words) != 2:
        fail(f"{exe} --version failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return words[1]


def may_save() -> bool:
    return os.environ.get("GITHUB_EVENT_NAME", "") in CACHE_WRITE_EVENTS


def stage_path(key: str) -> str:
    """The cache's `path` input, as written (the same string on every runner: it is part of the entry's version)."""
    return f"{STAGE_ROOT}/{key}"


def _discard(folder: Path) -> None:
    """Remove a stage folder: renamed away first (atomic for anyone looking), then deleted."""
    trash = folder.with_name(f".trash-{folder.name}-{os.getpid()}-{time.monotonic_ns()}")
    with contextlib.suppress(OSError):
        folder.rename(trash)
        shutil.rmtree(trash, ignore_errors=True)


def prune_stages(keep: str) -> None:
    """Stage folders of other keys that nobody touched for a day go (a self-hosted runner keeps its home)."""
    root = Path(STAGE_ROOT).expanduser()
    if not root.is_dir():
        return
    now = time.time()
    for folder in root.iterdir():
        with contextlib.suppress(OSError):
            if folder.name != keep and now - folder.lstat().st_ctime > STAGE_MAX_AGE:
                if folder.name.startswith(".trash-"):
                    shutil.rmtree(folder, ignore_errors=True)
                else:
                    _discard(folder)


def _hash(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _copy_hashed(src: Path, dst: Path, mode: int) -> str:
    """src (never through a symlink or from a FIFO: ValueError) to a new dst with `mode` and src's times; the
    sha256 of the bytes copied. File descriptors throughout: a handful of system calls per file."""
    # O_NOFOLLOW: a symlink planted in the stage fails (ELOOP); O_NONBLOCK: so does a FIFO, instead of hanging.
    fd_in = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd_in)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{src} is not a regular file")
        fd_out = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            digest = hashlib.sha256()
            while chunk := os.read(fd_in, 1 << 20):
                digest.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd_out, view):]
            os.fchmod(fd_out, mode)
            os.utime(fd_out, ns=(st.st_atime_ns, st.st_mtime_ns))   # keeps the .pyc files valid
        finally:
            os.close(fd_out)
    finally:
        os.close(fd_in)
    return digest.hexdigest()


def write_stage(env_dir: Path, key: str) -> Path:
    """Copy the fresh environment into its stage folder, with a manifest, for the save step. The copy is made
    aside and renamed into place, so a job reading the stage of the same key sees one whole copy or none."""
    stage = Path(stage_path(key)).expanduser()
    stage.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=stage.parent))
    files: dict[str, list] = {}
    links: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(env_dir):
        rel_dir = Path(dirpath).relative_to(env_dir)
        (tmp / "venv" / rel_dir).mkdir(parents=True, exist_ok=True)
        for name in dirnames + filenames:
            src, rel = Path(dirpath) / name, str(rel_dir / name)
            if src.is_symlink():
                links[rel] = os.readlink(src)
                (tmp / "venv" / rel).symlink_to(links[rel])
                dirnames[:] = [d for d in dirnames if d != name]
            elif name in filenames:
                mode = src.stat().st_mode & 0o777
                files[rel] = [_copy_hashed(src, tmp / "venv" / rel, mode), mode]
    (tmp / MANIFEST).write_text(json.dumps({"venv": str(env_dir), "files": files, "links": links}), "utf-8")
    _discard(stage)             # a leftover of another job is never what this job saves
    try:
        tmp.rename(stage)
    except OSError:             # a job of the same key put its own whole copy there meanwhile: that one is saved
        shutil.rmtree(tmp, ignore_errors=True)
    return stage


def may_share_stage() -> bool:
    """Whether this job may take its environment from the stage folder at all. On a self-hosted runner
    (RUNNER_ENVIRONMENT=self-hosted) other jobs of the same user share HOME, a pull request's among them, and
    can rewrite a stage together with its manifest between the cache restore and this check: the check
    would accept it, and the job would run it. There the environment is installed every time (from the
    hashed lock); the stage is neither restored nor saved. A job inside Actions without RUNNER_ENVIRONMENT
    (an older GitHub Enterprise Server runner) counts as self-hosted; act (ACT=true) and local runs do not
    (ghbuild's gha.runner_kind: this script imports nothing of ghbuild)."""
    runner = os.environ.get("RUNNER_ENVIRONMENT", "")
    if runner == "github-hosted":
        return True
    return runner != "self-hosted" and not (os.environ.get("GITHUB_ACTIONS") == "true"
                                            and os.environ.get("ACT") != "true")


def may_hard_link() -> bool:
    """Hard links between the stage (~/.cache) and the job's environment share inodes: whoever can write the stage
    writes the environment too, during the job and after it. On a GitHub-hosted runner the machine is this job's
    alone. On a self-hosted runner other jobs of the same user (another runner process, a pull request's job)
    share HOME, so the environment is a copy, checked after copying."""
    return os.environ.get("RUNNER_ENVIRONMENT") == "github-hosted"


RESTORE_THREADS = 8


def _can_hard_link(stage_venv: Path, env_dir: Path) -> bool:
    """Whether the stage and the environment share a file system (one trial link, removed again)."""
    probe = env_dir / ".ghbuild-link-probe"
    try:
        os.link(stage_venv / "pyvenv.cfg", probe)
    except OSError:
        return False
    probe.unlink()
    return True


def _checked_copy(src: Path, dst: Path, sha: str, mode: int, rel: str) -> None:
    """A copy whose bytes must be `sha` (ValueError: they are not)."""
    if _copy_hashed(src, dst, mode) != sha:
        raise ValueError(rel)


def _restore_file(stage_venv: Path, env_dir: Path, rel: str, entry: list, link: bool) -> None:
    """One file of the manifest into env_dir, checked against its sha256 and mode (ValueError: it differs)."""
    sha, mode = entry
    src, dst = stage_venv / rel, env_dir / rel
    if not link:
        _checked_copy(src, dst, sha, mode & 0o777, rel)
        return
    try:
        os.link(src, dst, follow_symlinks=False)    # a planted symlink is linked as one, and refused below
    except OSError:             # e.g. the link count limit: this one is copied
        _checked_copy(src, dst, sha, mode & 0o777, rel)
        return
    st = os.lstat(dst)
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(rel)
    if st.st_mode & 0o777 != mode & 0o777:
        dst.unlink()            # another mode: a copy of its own (a chmod would change the stage's too)
        _checked_copy(src, dst, sha, mode & 0o777, rel)
    elif _hash(dst) != sha:
        raise ValueError(rel)


def restore_stage(key: str, env_dir: Path) -> bool:
    """The restored stage, relocated into env_dir: only the files and links its manifest lists, each checked
    against it. False (and env_dir removed) when the stage is missing, partial or does not match."""
    stage = Path(stage_path(key)).expanduser()
    try:
        manifest = json.loads((stage / MANIFEST).read_text("utf-8"))
        old, files, links = str(manifest["venv"]), dict(manifest["files"]), dict(manifest["links"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"the cache was restored, but {stage} holds no readable manifest ({exc}); installing instead", flush=True)
        return False
    shutil.rmtree(env_dir, ignore_errors=True)
    try:
        for rel in list(files) + list(links):
            if ".." in Path(rel).parts or Path(rel).is_absolute():
                raise ValueError(rel)
        for folder in sorted({(env_dir / rel).parent for rel in list(files) + list(links)}):
            folder.mkdir(parents=True, exist_ok=True)
        # A hard link where the stage and RUNNER_TEMP share a file system (creating ~5000 files costs more
        # than the rest of the restore); checked all the same. A restore into the stage replaces its files (new
        # inodes), so it never changes these. Only on a GitHub-hosted runner (see may_hard_link): elsewhere
        # another job of the same user could write through the stage's inodes.
        link = may_hard_link() and _can_hard_link(stage / "venv", env_dir)
        # Threads: each file is a few system calls and a hash, which release the GIL; one at a time, a
        # self-hosted runner's checked copy of ~1000-3000 files took seconds (bench/ci_nochange.py).
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(max_workers=RESTORE_THREADS)
        try:
            for _ in pool.map(lambda item: _restore_file(stage / "venv", env_dir, item[0], item[1], link),
                              sorted(files.items())):
                pass
        finally:
            pool.shutdown(cancel_futures=True)      # a mismatch stops the rest at once
        for rel, target in links.items():
            (env_dir / rel).symlink_to(target.replace(old, str(env_dir)) if target.startswith(old + "/") else target)
    except (OSError, ValueError) as exc:
        print(f"the restored environment does not match its manifest ({exc}); installing instead", flush=True)
        shutil.rmtree(env_dir, ignore_errors=True)
        return False
    # Scripts (console scripts' shebangs, activate) name the environment they were installed in.
    if old != str(env_dir):
        for script in (env_dir / "bin").iterdir():
            if script.is_file() and not script.is_symlink():
                data = script.read_bytes()
                if old.encode() in data[:65536]:
                    tmp = script.with_name(script.name + ".relocating")
                    tmp.write_bytes(data.replace(old.encode(), str(env_dir).encode()))
                    os.chmod(tmp, script.stat().st_mode & 0o777)
                    tmp.replace(script)
    return True


def print_key(wanted: str) -> int:
    """The cache step's inputs: key, path, and whether this run may write the cache (see CACHE_WRITE_EVENTS)."""
    event = os.environ.get("GITHUB_EVENT_NAME", "")
    shared = may_share_stage()
    write = may_save() and shared
    key = cache_key(wanted)
    prune_stages(keep=key)
    write_command_file("GITHUB_OUTPUT", f"key={key}")
    write_command_file("GITHUB_OUTPUT", f"path={stage_path(key)}")
    write_command_file("GITHUB_OUTPUT", f"restore={'true' if shared else 'false'}")
    write_command_file("GITHUB_OUTPUT", f"save={'true' if write else 'false'}")
    why = ("" if write else " (not used: a self-hosted runner's HOME is shared with other jobs)" if not shared
           else f" (restore only: a {event or 'local'} run does not write the cache its scope shares)")
    print(f"cache key {key}{why}")
    return 0


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
    extras = requested_extras()
    if sys.argv[1:] == ["--key"]:
        return print_key(fingerprint(root, files, extras))
    if sys.argv[1:]:
        fail(f"unknown arguments {sys.argv[1:]} (only --key)")
    installer, restored, staged = "", False, False
    use_cache = os.environ.get("GHBUILD_SETUP_CACHE", "false") == "true" and may_share_stage()
    with locked(home):
        wanted = fingerprint(root, files, extras)
        try:
            stamp = json.loads(stamp_file.read_text("utf-8"))
        except (OSError, ValueError):
            stamp = {}
        cached = stamp.get("fingerprint") == wanted and exe.is_file()
        if not cached:
            stamp_file.unlink(missing_ok=True)
            if use_cache and os.environ.get("GHBUILD_SETUP_RESTORED") == "true":
                restored = restore_stage(cache_key(wanted), home / "venv") and exe.is_file()
            if not restored:
                installer = install(root, files, home, extras)
                if not exe.is_file():
                    fail(f"pip did not install the ghbuild command into {exe.parent}")
                if use_cache and may_save():
                    write_stage(home / "venv", cache_key(wanted))
                    staged = True
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
    write_command_file("GITHUB_OUTPUT", f"cached={'true' if cached or restored else 'false'}")
    write_command_file("GITHUB_OUTPUT", f"staged={'true' if staged else 'false'}")
    # The action installs cosign (signing, `ghbuild verify`) only when asked and the runner has none.
    write_command_file("GITHUB_OUTPUT", f"cosign={shutil.which('cosign') or ''}")
    if restored:
        # The key is the hash of these sources: say which checkout they are, as an install does.
        print(f"ghbuild {version}: the environment of {root}, restored from the GitHub Actions cache into "
              f"{home / 'venv'} ({link}) in {time.monotonic() - started:.1f} s; nothing to install")
    elif cached:
        print(f"ghbuild {version}: already set up ({link}, restored from the cache or by an earlier call in "
              f"this job) in {time.monotonic() - started:.1f} s; nothing to install")
    else:
        print(f"ghbuild {version}: installed from {root} with {sys.executable} and {installer} into "
              f"{home / 'venv'} in {time.monotonic() - started:.1f} s; `ghbuild` is on PATH for the next steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
