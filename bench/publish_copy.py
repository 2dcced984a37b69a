#!/usr/bin/env python3
"""Nightly publish of two ~315 MB per-arch images, staging -> hub: ghbuild versus the reference and skopeo.

Everything runs in this one process against the local staging (127.0.0.1:5000) and hub (127.0.0.1:5001)
registries and dockerd from `make infra-up`:

- Two valid Docker schema2 images (amd64, arm64) are written straight into the staging registry through the
  HTTP API, each a per-arch base layer (100 MiB) plus a per-arch app layer (200 MiB) of random, incompressible
  data (gzip level 1). The blobs are generated once and cached under /tmp (see CACHE_DIR).
- Each measurement publishes `nightly-x86_64`, `nightly-arm64`, `nightly-<sha>` and `nightly` into its own fresh
  hub repository, with one of:
    (a) reference: `docker pull` both (no local copy first, as on a fresh runner), `docker tag`, `docker push`,
        `docker manifest create --insecure` + `docker manifest push --insecure` for each index tag;
    (b) peer: `skopeo copy` per arch, then the manifest list by a small HTTP PUT (skopeo 1.9 cannot make one);
    (c) `ghbuild publish nightly --image cpu --sha <sha>`;
    (d) the floor, not a publish: what the hub alone needs to receive the blobs it lacks, one `curl -T <file>`
        PUT per blob, all at once, from the cached blob files (page cache): no source registry, no relay, no
        tool start-up, no manifests. No registry-to-registry copy can beat it on this machine, so
        (a)'s time over (d)'s is the highest ratio any tool could reach in the same run (scenarios 1 and 2).
- Scenarios: (1) empty hub; (2) the hub repository already has the base layers (pre-seeded by a
  cross-repository mount, no bytes through the runner); (3) a republish: the hub already holds this nightly,
  every blob, manifest and tag, as the same tool left it in an untimed run just before (a rerun of a
  nightly job); (4) the hub has every blob but none of the tags (a nightly whose layers all exist: ghbuild
  writes four new tags, so it takes its publish lease, whose settle time dominates). For the reference, the
  seed also holds the engine's own recompressed blobs from scenario 1: `docker push` recompresses layers
  and checks whichever digest its metadata prefers, so this is its best case.
- Wall time: each tool straight to the registries, `--repeats` runs of skopeo, ghbuild and the floor and
  `--reference-runs` of the reference per scenario (median), interleaved (the order flips per round and per
  scenario). Every measurement's hub repository is emptied right after it, so no later run can mount from it
  (the engine and skopeo remember where they pushed a blob and would try).
- "Bytes through the runner": one more run per tool and scenario talks to the registries only through two
  byte-counting TCP relays (loopback, ports chosen by the OS) in front of 5000 and 5001; the engine does the
  reference's transfers, so it is pointed at the relays too (127.0.0.0/8 registries are insecure-allowed).
- Where the time goes: CPU seconds of the tool, dockerd and both registries during each run (/proc), the
  reference's and skopeo's per-command times, ghbuild's own log lines timestamped as they arrive.

Goals (from the issues): ghbuild >= 10x faster than (a), <= 1.2x (b)'s time (scenarios 1, 2), <= 1.5x in a
republish (3), <= 1 % of the image bytes through the runner when the layers already exist. Prints the table
and "goal met/NOT met" lines; exits 0 after printing (a measurement), 2 when the setup itself fails. Deletes
every repository it created (manifests and blob links through the API) and its local images at the end, also
on failure.

ghbuild is the development venv's (.venv/bin/ghbuild, an editable install whose import hook costs every start
~25 ms) unless `--installed`: then the bench first installs ghbuild the way the setup action does in a job
(.github/actions/setup/setup.py, the light install, into a RUNNER_TEMP of its own) and times that `ghbuild`;
the floor of scenario 3 is then that environment's interpreter.

Usage: make infra-up && .venv/bin/python bench/publish_copy.py [--repeats 3] [--reference-runs 2]
       [--scenarios 1,2,3,4] [--no-reference] [--no-floor] [--installed] [--verbose]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import http.client
import json
import os
import resource
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]   # the development-only infra package, tests/fakes

from fakes.oci import RegistryClient, RegistryError  # noqa: E402 - the tests' registry client (setup, checks)

from infra import localenv  # noqa: E402

CACHE_DIR = Path(tempfile.gettempdir()) / "ghbuild-bench-publish"
CACHE_FORMAT = 1
MIB = 1 << 20
BASE_MIB, APP_MIB = 100, 200
ARCHES = ("amd64", "arm64")
SUFFIX = {"amd64": "x86_64", "arm64": "arm64"}
PLATFORM = {"amd64": {"architecture": "amd64", "os": "linux"},
            "arm64": {"architecture": "arm64", "os": "linux", "variant": "v8"}}
STAGING, HUB = 5000, 5001
IMAGE = "cpu"

MT_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
MT_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
MT_CONFIG = "application/vnd.docker.container.image.v1+json"
MT_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"

SCENARIOS = {1: "empty hub", 2: "hub has the base layers", 3: "republish: hub holds this nightly",
             4: "hub has every blob, no tag"}
TOOLS = ("docker", "skopeo", "ghbuild", "floor")
STDLIB_FLOOR = "import argparse, tomllib, json, http.client, hashlib"
TOOL_LABEL = {"docker": "(a) docker pull/tag/push + manifest", "skopeo": "(b) skopeo copy + list PUT",
              "ghbuild": "(c) ghbuild publish nightly", "floor": "(d) floor: hub ingest alone, curl"}
# (d) in scenarios 1 and 2: the hub's ingest; in 3 (nothing to ingest): starting ghbuild's interpreter, doing
# nothing (`python -c pass`), the floor of any Python tool; none in 4.
FLOOR_SCENARIOS = (1, 2, 3)
REPUBLISH = 3                 # seeded by the same tool's own untimed publish
SKOPEO_GOAL = {1: 1.2, 2: 1.2, 3: 1.5}   # ghbuild's time over skopeo's: the issues' goals per scenario
TOOL_TIMEOUT = 600.0


def tool_label(tool: str, scenario: int) -> str:
    return "(d) floor: python -c pass" if tool == "floor" and scenario == REPUBLISH else TOOL_LABEL[tool]


class BenchError(Exception):
    pass


def registry(port: int) -> RegistryClient:
    """Straight to a registry (or through a relay); 600 s: layer uploads are up to 200 MiB."""
    return RegistryClient(f"127.0.0.1:{port}", timeout=600)


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _service_pids() -> dict[str, int]:
    """dockerd and the two registries, found by command line (read-only /proc scan): their CPU time per run."""
    pids: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        cmd = " ".join(a.decode(errors="replace") for a in argv)
        if argv[0].endswith(b"dockerd"):
            pids.setdefault("dockerd", int(entry.name))
        elif b"docker-registry" in argv[0] and "registry-staging" in cmd:
            pids.setdefault("staging", int(entry.name))
        elif b"docker-registry" in argv[0] and "registry-hub" in cmd:
            pids.setdefault("hub", int(entry.name))
    return pids


def _proc_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")   # utime + stime
    except (OSError, IndexError, ValueError):
        return float("nan")


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def local_env() -> dict[str, str]:
    if not localenv.path().exists():
        raise BenchError(".ghbuild/local.env missing: run `make infra-up` (or .venv/bin/python -m infra up)")
    env = {**os.environ, **localenv.read()}
    for key in [k for k in env if k.startswith(("GITHUB_", "GHBUILD_REGISTRIES_", "GHBUILD_IMAGES_"))]:
        # a PR event name would refuse the publish; the registries are set per run; settings for the
        # project's own images (e.g. the ROCm stand-in's) name images the bench's config does not have
        del env[key]
    env.pop("GHBUILD_CONFIG", None)
    return env


# --------------------------------------------------------------------------- source blobs


class _Random:
    """A file-like source of `size` incompressible bytes for tarfile."""

    def __init__(self, size: int):
        self.left = size

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        self.left -= n
        return os.urandom(n)


class _GzipSink:
    """tarfile writes here: hashes the tar (diff_id), gzips it (level 1; 0 stores, 16x faster on random
    data, no larger) to a file, hashes the gzip (digest)."""

    def __init__(self, out, level: int = 1):
        self.out, self.size = out, 0
        self.raw, self.gz = hashlib.sha256(), hashlib.sha256()
        self.zip = zlib.compressobj(level, zlib.DEFLATED, 31)   # gzip wrapper, mtime 0: deterministic header

    def _emit(self, data: bytes) -> None:
        if data:
            self.gz.update(data)
            self.out.write(data)
            self.size += len(data)

    def write(self, data) -> int:
        self.raw.update(data)
        self._emit(self.zip.compress(data))
        return len(data)

    def finish(self) -> None:
        self._emit(self.zip.flush())


def _generate_layer(path: Path, member: str, size: int, level: int = 1) -> dict:
    """One layer blob written to `path` as it is generated (a MiB at a time: never a layer in memory)."""
    tmp = path.with_suffix(".part")
    with open(tmp, "wb") as out:
        sink = _GzipSink(out, level)
        with tarfile.open(fileobj=sink, mode="w|", bufsize=MIB, format=tarfile.PAX_FORMAT,
                          copybufsize=MIB) as tar:
            parts = member.split("/")
            for i in range(1, len(parts)):
                d = tarfile.TarInfo("/".join(parts[:i]))
                d.type, d.mode, d.mtime = tarfile.DIRTYPE, 0o755, 1700000000
                tar.addfile(d)
            info = tarfile.TarInfo(member)
            info.size, info.mode, info.mtime = size, 0o644, 1700000000
            tar.addfile(info, _Random(size))
        sink.finish()
    tmp.rename(path)
    return {"digest": "sha256:" + sink.gz.hexdigest(), "diff_id": "sha256:" + sink.raw.hexdigest(),
            "size": sink.size}


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(4 * MIB):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


LAYER_KINDS = (("base", BASE_MIB * MIB), ("app", APP_MIB * MIB))


def source_layers(kinds: tuple[tuple[str, int], ...] = LAYER_KINDS, cache_dir: Path = CACHE_DIR,
                  level: int = 1) -> dict[str, dict]:
    """name -> {digest, diff_id, size, path} for each (kind, payload bytes) and arch; generated once and cached
    in `cache_dir` (checked by size and digest), gzip `level`."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    wanted = {f"{kind}-{arch}": (f"opt/bench/{kind}-{arch}.bin", size) for arch in ARCHES for kind, size in kinds}
    index_path = cache_dir / "layers.json"
    key = {"format": CACHE_FORMAT, "sizes": {n: s for n, (_, s) in wanted.items()}, "level": level}
    try:
        index = json.loads(index_path.read_text())
        if index.get("key") != key:
            index = {}
    except (OSError, ValueError):
        index = {}
    layers = dict(index.get("layers") or {})

    def ok(name: str) -> bool:
        meta, path = layers.get(name), cache_dir / f"{name}.tar.gz"
        return bool(meta) and path.is_file() and path.stat().st_size == meta["size"]

    with concurrent.futures.ThreadPoolExecutor(2) as pool:   # zlib and hashlib release the GIL
        present = [n for n in wanted if ok(n)]
        digests = dict(zip(present, pool.map(lambda n: _sha256_file(cache_dir / f"{n}.tar.gz"), present),
                           strict=True))
        todo = [n for n in wanted if not (n in digests and digests[n] == layers[n]["digest"])]
        if todo:
            log(f"generating {len(todo)} layer blob(s) into {cache_dir} (random data, gzip -{level}; cached for next "
                "runs)")
            t0 = time.monotonic()
            made = pool.map(lambda n: _generate_layer(cache_dir / f"{n}.tar.gz", *wanted[n], level), todo)
            layers.update(zip(todo, made, strict=True))
            index_path.write_text(json.dumps({"key": key, "layers": {n: layers[n] for n in wanted}}, indent=1))
            log(f"generated in {time.monotonic() - t0:.1f} s")
    return {n: dict(layers[n], path=str(cache_dir / f"{n}.tar.gz")) for n in wanted}


@dataclass
class SourceImage:
    arch: str
    config: bytes
    config_digest: str
    manifest: bytes
    digest: str
    layers: list[dict]                      # in LAYER_KINDS order: base first

    @property
    def blob_bytes(self) -> int:
        return len(self.config) + sum(layer["size"] for layer in self.layers)


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# Publishing promotes only images labelled as the trusted build of the commit from the canonical repository.
BENCH_REPOSITORY = "ghbuild/ghbuild"
BENCH_CONTEXT = ["--event", "push", "--repository", BENCH_REPOSITORY, "--ref", "main", "--default-branch", "main"]


def source_images(layers: dict[str, dict], sha: str,
                  kinds: tuple[str, ...] = ("base", "app")) -> dict[str, SourceImage]:
    images = {}
    for arch in ARCHES:
        ls = [layers[f"{kind}-{arch}"] for kind in kinds]
        config = json.dumps({
            **PLATFORM[arch],
            "created": "2026-01-01T00:00:00Z",
            "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                       "Cmd": ["/opt/bench/none"],
                       "Labels": {"org.ghbuild.bench": "publish_copy", "org.opencontainers.image.revision": sha,
                                  "org.opencontainers.image.source": f"https://github.com/{BENCH_REPOSITORY}"}},
            "rootfs": {"type": "layers", "diff_ids": [layer["diff_id"] for layer in ls]},
            "history": [{"created": "2026-01-01T00:00:00Z", "created_by": f"bench {kind} layer {arch}"}
                        for kind in kinds],
        }, indent=2, sort_keys=True).encode()
        manifest = json.dumps({
            "schemaVersion": 2, "mediaType": MT_MANIFEST,
            "config": {"mediaType": MT_CONFIG, "size": len(config), "digest": sha256(config)},
            "layers": [{"mediaType": MT_LAYER, "size": layer["size"], "digest": layer["digest"]} for layer in ls],
        }, indent=3).encode()
        images[arch] = SourceImage(arch, config, sha256(config), manifest, sha256(manifest), ls)
    return images


# --------------------------------------------------------------------------- byte-counting relay


class Relay:
    """TCP relay 127.0.0.1:<ephemeral> -> 127.0.0.1:<upstream>, counting bytes both ways."""

    def __init__(self, upstream: int):
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.port = self.listener.getsockname()[1]
        self.to_client = 0      # registry -> tool: into the runner
        self.to_server = 0      # tool -> registry: out of the runner
        self.connections = 0
        self._lock = threading.Lock()
        self._socks: set[socket.socket] = set()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name=f"relay-{self.port}").start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(("127.0.0.1", self.upstream), timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._closed:
                    client.close(), server.close()
                    return
                self.connections += 1
                self._socks.update((client, server))
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = [client, server, 2]
            threading.Thread(target=self._pump, args=(client, server, "to_server", pair), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, "to_client", pair), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, counter: str, pair: list) -> None:
        buf = memoryview(bytearray(MIB))
        try:
            while True:
                n = src.recv_into(buf)
                if not n:
                    break
                dst.sendall(buf[:n])
                with self._lock:
                    setattr(self, counter, getattr(self, counter) + n)
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        except OSError:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        finally:
            with self._lock:
                pair[2] -= 1
                done = pair[2] == 0
                if done:
                    self._socks.difference_update(pair[:2])
            if done:
                pair[0].close(), pair[1].close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            socks = list(self._socks)
        try:
            self.listener.close()
        except OSError:
            pass
        for sock in socks:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


# --------------------------------------------------------------------------- measurements


@dataclass
class Measurement:
    scenario: int
    tool: str
    run: int
    repo: str
    counted: bool = False       # through the byte-counting relays (else straight to the registries)
    seconds: float = 0.0
    bytes_in: int = 0
    bytes_out: int = 0
    ok: bool = False
    error: str = ""
    notes: list[str] = field(default_factory=list)
    timeline: list[tuple[float, str]] = field(default_factory=list)   # ghbuild's stderr lines, seconds from start
    cpu: dict[str, float] = field(default_factory=dict)     # CPU seconds during the run: tool, dockerd, registries
    steps: list[tuple[str, float]] = field(default_factory=list)   # the reference's and skopeo's commands, seconds
    peak_rss: int = 0           # ghbuild's peak resident set, bytes (its process's own maxrss, from wait4)

    @property
    def through(self) -> int:
        return self.bytes_in + self.bytes_out


def wait_measured(proc: subprocess.Popen, timeout: float) -> tuple[int, int]:
    """Wait for `proc` by wait4: (exit code, its peak RSS in bytes). RUSAGE_CHILDREN would give the largest of
    every child this bench ever waited for (skopeo, curl), not this one's. Killed after `timeout` seconds."""
    fired = threading.Event()

    def kill() -> None:
        fired.set()
        proc.kill()

    timer = threading.Timer(timeout, kill)
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)   # blocking: no polling delay added to the wall time
    finally:
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)   # Popen must not wait for it again
    if fired.is_set():
        raise subprocess.TimeoutExpired(proc.args, timeout)
    return proc.returncode, usage.ru_maxrss * 1024     # KiB on Linux


class Bench:
    # The layers of each per-arch image, (kind, tar payload bytes); where they are cached; their gzip level.
    layer_kinds: tuple[tuple[str, int], ...] = LAYER_KINDS
    cache_dir = CACHE_DIR
    gzip_level = 1

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.env = local_env()
        self.docker = self.env.get("GHBUILD_DOCKER_CLI") or "/usr/bin/docker"
        self.skopeo = shutil.which("skopeo") or "/usr/bin/skopeo"
        self.curl = shutil.which("curl")
        self.ghbuild = str(ROOT / ".venv" / "bin" / "ghbuild")
        self.installed_in: Path | None = None   # --installed: the RUNNER_TEMP the setup action installed into
        self.run_id = secrets.token_hex(4)
        self.prefix = f"bench-{self.run_id}"
        self.staging_repo = f"{self.prefix}/{IMAGE}"
        self.seed_repo = f"{self.prefix}/seed/{IMAGE}"
        self.sha = secrets.token_hex(20)
        self.staging, self.hub = registry(STAGING), registry(HUB)
        self.tmp = Path(tempfile.mkdtemp(prefix="ghbuild-bench-publish-"))
        self.docker_config = self.tmp / "docker-config"
        self.docker_config.mkdir()
        (self.docker_config / "config.json").write_text("{}")
        self.config_path = self.tmp / "ghbuild.toml"
        self.config_path.write_text(
            "# written by bench/publish_copy.py\n[registries]\n"
            f'staging = "127.0.0.1:{STAGING}/{self.prefix}/{{image}}"\npublish = "127.0.0.1:{HUB}/none/{{image}}"\n'
            '[publish]\nnightly-tag = "nightly"\narch-suffixes = { amd64 = "x86_64", arm64 = "arm64" }\n'
            f'[images.{IMAGE}]\ndockerfile = "Dockerfile"\nplatforms = ["linux/amd64", "linux/arm64"]\n')
        self.images: dict[str, SourceImage] = {}
        self.hub_repos: list[str] = []          # every hub repository created, for cleanup
        self.docker_refs: set[str] = set()
        self.recompressed: dict[str, list[str]] = {}   # arch -> the engine's own layer digests (from scenario 1)
        self.cleaned: set[str] = set()
        self.pids = _service_pids()
        self.measurements: list[Measurement] = []

    # ----- setup

    def check_services(self) -> None:
        for name, reg in (("staging", self.staging), ("hub", self.hub)):
            try:
                status, _, _ = reg.request("GET", "/v2/")
                if status != 200:
                    raise BenchError(f"{name} registry {reg.host}: /v2/ answered {status}")
            except (OSError, http.client.HTTPException) as exc:
                raise BenchError(f"{name} registry {reg.host} not answering ({exc}): run `make infra-up`") from None
        r = subprocess.run([self.docker, "info", "--format", "{{.ServerVersion}}"], env=self.docker_env(),
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise BenchError(f"dockerd not answering via {self.docker}: {r.stderr.strip()[:200]}")
        if self.args.installed:
            self.install_like_the_action()
        for tool in (self.skopeo, self.ghbuild):
            if not Path(tool).exists():
                raise BenchError(f"{tool} missing (skopeo comes with `make infra-up`, ghbuild with `make venv`)")
        if not self.args.no_floor and not self.curl:
            raise BenchError("curl missing: install it or pass --no-floor")

    def install_like_the_action(self) -> None:
        """ghbuild as a job gets it: setup.py's light install into a RUNNER_TEMP of the bench's own."""
        sys.path.insert(0, str(ROOT / "bench"))
        from setup_action import install_like_the_action

        self.installed_in = Path(tempfile.mkdtemp(prefix="ghbuild-bench-runner-temp-"))
        t0 = time.monotonic()
        self.ghbuild = str(install_like_the_action(self.installed_in).with_name("ghbuild"))
        log(f"installed ghbuild as the setup action does in {time.monotonic() - t0:.1f} s: {self.ghbuild}")

    def docker_env(self) -> dict[str, str]:
        return dict(self.env, DOCKER_CONFIG=str(self.docker_config))

    def push_sources(self) -> None:
        t0 = time.monotonic()
        for arch, img in self.images.items():
            self.staging.upload_blob(self.staging_repo, img.config_digest, img.config, len(img.config))
            for layer in img.layers:
                with open(layer["path"], "rb") as f:
                    self.staging.upload_blob(self.staging_repo, layer["digest"], f, layer["size"])
            self.staging.put_manifest(self.staging_repo, f"{self.sha}-{SUFFIX[arch]}", img.manifest, MT_MANIFEST)
        log(f"staging: {self.staging.host}/{self.staging_repo}:{self.sha}-{{x86_64,arm64}} pushed in "
            f"{time.monotonic() - t0:.1f} s")

    def push_seed(self) -> None:
        """Every source blob once into a hub repository of ours, to seed targets by mount (no bytes moved)."""
        t0 = time.monotonic()
        for img in self.images.values():
            self.hub.upload_blob(self.seed_repo, img.config_digest, img.config, len(img.config))
            for layer in img.layers:
                with open(layer["path"], "rb") as f:
                    self.hub.upload_blob(self.seed_repo, layer["digest"], f, layer["size"])
        log(f"hub: seed repository {self.seed_repo} filled in {time.monotonic() - t0:.1f} s")

    def mount(self, repo: str, digest: str, from_repo: str) -> None:
        if not self.hub.mount_blob(repo, digest, from_repo):
            raise BenchError(f"mount {digest[:19]} {from_repo} -> {repo}: not mounted")

    def seed(self, scenario: int, tool: str, repo: str) -> list[str]:
        notes = []
        if scenario == 1:
            return notes
        for arch, img in self.images.items():
            layers = img.layers[:1] if scenario == 2 else img.layers
            blobs = [layer["digest"] for layer in layers] + ([img.config_digest] if scenario >= 3 else [])
            for digest in blobs:
                self.mount(repo, digest, self.seed_repo)
            if tool == "docker":
                own = self.recompressed.get(arch)
                if own:
                    for digest in own[:1] if scenario == 2 else own:
                        self.mount(repo, digest, self.seed_repo)
                else:
                    notes.append(f"{arch}: the engine's recompressed digests are unknown (no scenario 1 run): "
                                 "seeded with the staging blobs only")
        if scenario == REPUBLISH and tool != "floor":
            first = Measurement(scenario, tool, 0, repo)
            getattr(self, f"tool_{tool}")(first, STAGING, HUB)
            notes.append(f"seeded by the tool's own publish ({first.seconds:.2f} s, untimed)")
        return notes

    # ----- the three tools

    def _run(self, cmd: list[str], env: dict[str, str], deadline: float,
             m: Measurement | None = None, step: str = "") -> subprocess.CompletedProcess:
        t0 = time.monotonic()
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=max(5.0, deadline - time.monotonic()))
        if r.returncode != 0:
            tail = (r.stderr.strip() or r.stdout.strip()).splitlines()[-3:]
            raise BenchError(f"{' '.join(cmd[:3])} ... exit {r.returncode}: {' | '.join(tail)}")
        if m is not None:
            m.steps.append((step or cmd[1], time.monotonic() - t0))
        return r

    def remove_local_images(self) -> None:
        """No local copy: every image with one of our config digests as its ID, and every ref we made."""
        env = self.docker_env()
        refs = sorted(self.docker_refs) + [img.config_digest for img in self.images.values()]
        for ref in refs:
            subprocess.run([self.docker, "image", "rm", "-f", ref], env=env, capture_output=True, timeout=120)
        self.docker_refs.clear()
        left = [img.config_digest for img in self.images.values()
                if subprocess.run([self.docker, "image", "inspect", img.config_digest], env=env,
                                  capture_output=True, timeout=60).returncode == 0]
        if left:
            raise BenchError(f"could not remove local images {left}")

    def tool_docker(self, m: Measurement, sp: int, hp: int) -> None:
        env, deadline = self.docker_env(), time.monotonic() + TOOL_TIMEOUT
        self.remove_local_images()   # untimed: start with no local copy
        src = {a: f"127.0.0.1:{sp}/{self.staging_repo}:{self.sha}-{SUFFIX[a]}" for a in ARCHES}
        dst = {a: f"127.0.0.1:{hp}/{m.repo}:nightly-{SUFFIX[a]}" for a in ARCHES}
        lists = [f"127.0.0.1:{hp}/{m.repo}:nightly-{self.sha}", f"127.0.0.1:{hp}/{m.repo}:nightly"]
        self.docker_refs.update(src.values(), dst.values())
        t0 = time.monotonic()
        self._run([self.docker, "pull", src["amd64"]], env, deadline, m, "pull amd64")
        self._run([self.docker, "pull", "--platform", "linux/arm64", src["arm64"]], env, deadline, m, "pull arm64")
        for arch in ARCHES:
            self._run([self.docker, "tag", src[arch], dst[arch]], env, deadline, m, "tag")
        for arch in ARCHES:
            self._run([self.docker, "push", dst[arch]], env, deadline, m, f"push {arch}")
        for ref in lists:
            self._run([self.docker, "manifest", "create", "--insecure", ref, *dst.values()], env, deadline, m,
                      "manifest")
            self._run([self.docker, "manifest", "push", "--insecure", "--purge", ref], env, deadline, m, "manifest")
        m.seconds = time.monotonic() - t0
        for arch in ARCHES:   # the engine accepted both images as what they claim
            r = self._run([self.docker, "image", "inspect", "--format", "{{.Os}}/{{.Architecture}}", src[arch]],
                          env, deadline)
            if r.stdout.strip() != f"linux/{arch}":
                raise BenchError(f"docker pulled {src[arch]} as {r.stdout.strip()}, expected linux/{arch}")
        self.remove_local_images()
        if m.scenario == 1:
            own = {}
            for arch in ARCHES:
                raw = self.hub.get_manifest(m.repo, f"nightly-{SUFFIX[arch]}").body
                own[arch] = [layer["digest"] for layer in json.loads(raw)["layers"]]
            if not self.recompressed:
                # Keep the engine's own blobs for seeding the reference's targets in scenarios 2 and 3.
                for digest in {d for ds in own.values() for d in ds}:
                    self.mount(self.seed_repo, digest, m.repo)
                self.recompressed = own
                same = sum(d == layer["digest"]
                           for a in ARCHES for d, layer in zip(own[a], self.images[a].layers, strict=True))
                m.notes.append(f"the engine pushed its own recompressed layers ({4 - same} of 4 digests differ "
                               "from staging)")
            elif own != self.recompressed:
                m.notes.append("the engine's recompressed digests differ from its previous run's")

    def tool_skopeo(self, m: Measurement, sp: int, hp: int) -> None:
        env, deadline = dict(self.env), time.monotonic() + TOOL_TIMEOUT
        hub = registry(hp)
        t0 = time.monotonic()
        for arch in ARCHES:
            self._run([self.skopeo, "copy", "--src-tls-verify=false", "--dest-tls-verify=false",
                       f"docker://127.0.0.1:{sp}/{self.staging_repo}:{self.sha}-{SUFFIX[arch]}",
                       f"docker://127.0.0.1:{hp}/{m.repo}:nightly-{SUFFIX[arch]}"], env, deadline, m,
                      f"copy {arch}")
        t1 = time.monotonic()
        children = []
        for arch in ARCHES:
            found = hub.descriptor(m.repo, f"nightly-{SUFFIX[arch]}")
            if not found:
                raise BenchError(f"skopeo: {m.repo}:nightly-{SUFFIX[arch]} missing after the copy")
            children.append({**found, "platform": PLATFORM[arch]})
        raw = json.dumps({"schemaVersion": 2, "mediaType": MT_LIST, "manifests": children}, indent=3).encode()
        for tag in (f"nightly-{self.sha}", "nightly"):
            hub.put_manifest(m.repo, tag, raw, MT_LIST)
        m.seconds = time.monotonic() - t0
        m.steps.append(("HEAD x2 + list PUT x2", m.seconds - (t1 - t0)))
        hub.close()

    def tool_ghbuild(self, m: Measurement, sp: int, hp: int) -> None:
        env = dict(self.env,
                   GHBUILD_REGISTRIES_STAGING=f"127.0.0.1:{sp}/{self.prefix}/{{image}}",
                   GHBUILD_REGISTRIES_PUBLISH=f"127.0.0.1:{hp}/{m.repo.rsplit('/', 1)[0]}/{{image}}")
        staging = f"127.0.0.1:{sp}/{self.prefix}/{IMAGE}"
        records = {f"{IMAGE}-{arch}": {"image": IMAGE, "arch": arch, "platform": f"linux/{arch}", "digest": img.digest,
                                       "ref": f"{staging}@{img.digest}", "sha": self.sha, "trusted": True}
                   for arch, img in self.images.items()}
        cmd = [self.ghbuild, "publish", "nightly", "--config", str(self.config_path), "--image", IMAGE,
               "--sha", self.sha, "--records", json.dumps(records), *BENCH_CONTEXT]
        t0 = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, bufsize=1)
        out: list[str] = []
        reader = threading.Thread(target=lambda: out.append(proc.stdout.read()), daemon=True)
        reader.start()
        for line in proc.stderr:             # timestamped as it arrives: where ghbuild's time goes
            m.timeline.append((time.monotonic() - t0, line.rstrip()))
        try:
            rc, m.peak_rss = wait_measured(proc, TOOL_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise BenchError("ghbuild publish nightly timed out") from None
        m.seconds = time.monotonic() - t0
        reader.join(5)
        if rc != 0:
            tail = " | ".join(line for _, line in m.timeline[-3:])
            raise BenchError(f"ghbuild publish nightly exit {rc}: {tail}")
        stats = [line.strip() for _, line in m.timeline if "bytes copied" in line]
        m.notes += stats[-1:]

    def floor_blobs(self, scenario: int) -> list[tuple[str, Path]]:
        """(digest, file) of every blob the hub lacks in this scenario (the configs written to files once)."""
        blobs = []
        for arch, img in self.images.items():
            config = self.tmp / f"config-{arch}.json"
            if not config.exists():
                config.write_bytes(img.config)
            layers = img.layers[1:] if scenario == 2 else img.layers
            blobs += [(img.config_digest, config)] + [(layer["digest"], Path(layer["path"])) for layer in layers]
        return blobs

    def tool_floor(self, m: Measurement, sp: int, hp: int) -> None:
        if m.scenario == REPUBLISH:
            python = str(Path(self.ghbuild).parent / "python")
            t0 = time.monotonic()
            subprocess.run([python, "-c", "pass"], check=True)
            m.seconds = time.monotonic() - t0
            m.steps.append(("python -c pass", m.seconds))
            # Informative, not the floor row's figure: what the standard library alone costs any Python tool that
            # reads a TOML config, parses its arguments and speaks HTTP(S), before its first request.
            t0 = time.monotonic()
            subprocess.run([python, "-c", STDLIB_FLOOR], check=True)
            m.steps.append(("python -c 'import " + STDLIB_FLOOR.split(" ", 1)[1] + "'", time.monotonic() - t0))
            return
        self._ingest_floor(m, hp)

    def _ingest_floor(self, m: Measurement, hp: int, blobs: list[tuple[str, Path]] | None = None,
                      beside: Sequence[Sequence[str]] = ()) -> None:
        """(d) One POST and one `curl -T <file>` PUT ?digest= per missing blob, all at once: the hub receives,
        hashes and stores exactly what a publish makes it receive, with nothing else running (`beside`: other
        commands started with the PUTs and waited for with them)."""
        hub, deadline = registry(hp), time.monotonic() + TOOL_TIMEOUT
        blobs = blobs or self.floor_blobs(m.scenario)
        t0 = time.monotonic()
        procs: list[subprocess.Popen] = []
        try:
            procs += [subprocess.Popen(list(argv), stderr=subprocess.PIPE, text=True) for argv in beside]
            for digest, path in blobs:
                location = hub.upload_url(m.repo)
                url = f"{location}{'&' if '?' in location else '?'}digest={digest}"
                # `Expect:` off: curl would wait for a 100 Continue before each body
                procs.append(subprocess.Popen([self.curl, "-sS", "--fail", "-o", "/dev/null", "-T", str(path),
                                               "-H", "Expect:", "-H", "Content-Type: application/octet-stream", url],
                                              stderr=subprocess.PIPE, text=True))
            failed = [p.stderr.read().strip() for p in procs
                      if p.wait(timeout=max(5.0, deadline - time.monotonic())) != 0]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        m.seconds = time.monotonic() - t0
        m.steps.append((f"{len(blobs)} PUTs at once", m.seconds))
        if failed:
            raise BenchError(f"floor: curl PUT failed: {failed[0][:200]}")
        lacking = [digest for digest, _ in blobs if not hub.blob_exists(m.repo, digest)]
        if lacking:
            raise BenchError(f"floor: {len(lacking)} blob(s) missing after the upload")
        hub.close()

    # ----- one measurement

    def verify(self, m: Measurement) -> None:
        """Every tag is there; nightly is a 2-platform list of the per-arch tags; same images as staging."""
        if m.tool == "floor":
            return       # not a publish: tool_floor checked that every blob arrived
        per_arch = {}
        for arch in ARCHES:
            found = self.hub.descriptor(m.repo, f"nightly-{SUFFIX[arch]}")
            if not found:
                raise BenchError(f"{m.repo}:nightly-{SUFFIX[arch]} missing")
            per_arch[arch] = found["digest"]
            if m.tool != "docker" and found["digest"] != self.images[arch].digest:
                raise BenchError(f"{m.repo}:nightly-{SUFFIX[arch]} is {found['digest']}, "
                                 f"staging has {self.images[arch].digest}")
        for tag in ("nightly", f"nightly-{self.sha}"):
            got = self.hub.get_manifest(m.repo, tag)
            if not got:
                raise BenchError(f"{m.repo}:{tag} missing")
            children = {c["platform"]["architecture"]: c["digest"] for c in got.json().get("manifests", [])}
            if children != per_arch:
                raise BenchError(f"{m.repo}:{tag} lists {children}, per-arch tags are {per_arch}")

    def measure(self, scenario: int, tool: str, run: int, counted: bool) -> Measurement:
        """One publish into a fresh hub repository; through the byte-counting relays when `counted`."""
        repo = f"{self.prefix}/s{scenario}-{tool}-{'bytes' if counted else run}/{IMAGE}"
        self.hub_repos.append(repo)
        m = Measurement(scenario, tool, 0 if counted else run, repo, counted=counted)
        s = h = None
        try:
            m.notes += self.seed(scenario, tool, repo)
            if counted:
                s, h = Relay(STAGING), Relay(HUB)
            before = {name: _proc_cpu(pid) for name, pid in self.pids.items()}
            before["tool"] = _children_cpu()
            getattr(self, f"tool_{tool}")(m, s.port if s else STAGING, h.port if h else HUB)
            m.cpu = {name: _proc_cpu(pid) - before[name] for name, pid in self.pids.items()}
            m.cpu["tool"] = _children_cpu() - before["tool"]
            if counted:
                m.bytes_in, m.bytes_out = s.to_client + h.to_client, s.to_server + h.to_server
            self.verify(m)
            m.ok = True
        except (BenchError, RegistryError, subprocess.SubprocessError, http.client.HTTPException, OSError) as exc:
            m.error = str(exc)[:400]
        finally:
            for relay in (s, h):
                if relay:
                    relay.close()
        # At once, so that no later measurement can mount from it (the engine and skopeo remember where
        # they pushed a blob and try a cross-repository mount from there).
        self.clean_repo(self.hub, repo)
        if not m.ok:
            state = f"FAILED: {m.error}"
        else:
            state = f"{m.seconds:6.2f} s" + (f", {m.through / 1e6:8.1f} MB through the runner" if counted else "")
        log(f"scenario {scenario} {tool:<7} {'bytes run' if counted else f'run {run}':<9}: {state}")
        self.measurements.append(m)
        return m

    def schedule(self, index: int) -> list[tuple[str, int, bool]]:
        """Interleaved: tools alternate inside each round, the order flips per round and per scenario; the
        byte-counting (relay) run of each tool comes last."""
        rounds = max(self.args.repeats, self.args.reference_runs)
        floor = not self.args.no_floor and self.args.scenarios[index] in FLOOR_SCENARIOS
        order: list[tuple[str, int, bool]] = []
        for r in range(rounds):
            tools = [t for t in TOOLS if (r < self.args.repeats if t != "docker" else
                                          r < self.args.reference_runs and not self.args.no_reference)
                     and (t != "floor" or floor)]
            if (r + index) % 2:
                tools.reverse()
            order += [(t, r + 1, False) for t in tools]
        counted = [t for t in TOOLS if t != "floor" and (t != "docker" or not self.args.no_reference)]
        if index % 2:
            counted.reverse()
        return order + [(t, 0, True) for t in counted]

    # ----- cleanup

    def known_blobs(self) -> set[str]:
        blobs = {img.config_digest for img in self.images.values()}
        blobs |= {layer["digest"] for img in self.images.values() for layer in img.layers}
        return blobs | {d for ds in self.recompressed.values() for d in ds}

    def clean_repo(self, reg: RegistryClient, repo: str) -> tuple[int, int, bool]:
        """Delete every manifest (by digest) and blob link of a repository of ours; (manifests, blobs, ok)."""
        manifests = blobs = 0
        try:
            digests: set[str] = {img.digest for img in self.images.values()}
            repo_blobs = self.known_blobs()
            for tag in reg.tags(repo) or []:
                got = reg.get_manifest(repo, tag)
                if not got:
                    continue
                doc = got.json()
                digests.add(sha256(got.body))
                for child in doc.get("manifests", []):
                    digests.add(child["digest"])
                    sub = reg.get_manifest(repo, child["digest"])
                    if sub:
                        sub_doc = sub.json()
                        repo_blobs |= {b["digest"] for b in [sub_doc.get("config", {}), *sub_doc.get("layers", [])]
                                       if b.get("digest")}
                repo_blobs |= {b["digest"] for b in [doc.get("config", {}), *doc.get("layers", [])] if b.get("digest")}
            for digest in digests:
                manifests += reg.delete_manifest(repo, digest)
            for digest in repo_blobs:
                blobs += reg.delete_blob(repo, digest)
            left = reg.tags(repo) or []
            if left:
                log(f"cleanup: {reg.host}/{repo} still has tags {left}")
            self.cleaned.add(f"{reg.host}/{repo}")
            return manifests, blobs, not left
        except (BenchError, RegistryError, OSError, http.client.HTTPException, ValueError) as exc:
            log(f"cleanup: {reg.host}/{repo}: {exc}")
            return manifests, blobs, False

    def cleanup(self) -> None:
        try:
            self.remove_local_images()
        except Exception as exc:
            log(f"cleanup: local images: {exc}")
        repos = [(self.hub, r) for r in dict.fromkeys([*self.hub_repos, self.seed_repo])]
        repos.append((self.staging, self.staging_repo))
        manifests = blobs = failures = 0
        for reg, repo in repos:
            m, b, ok = self.clean_repo(reg, repo)
            manifests, blobs, failures = manifests + m, blobs + b, failures + (not ok)
        shutil.rmtree(self.tmp, ignore_errors=True)
        if self.installed_in is not None:
            shutil.rmtree(self.installed_in, ignore_errors=True)
        log(f"cleanup: {len(repos)} repositories under {self.prefix}/ emptied (the last pass deleted {manifests} "
            f"manifests, {blobs} blob links)" + (f"; {failures} failure(s)" if failures else "")
            + "; blob data stays in the registries' storage until their garbage collection (the next run reuses "
              "the same digests) and the empty names stay in /v2/_catalog")

    # ----- the run

    def make_images(self) -> None:
        layers = source_layers(self.layer_kinds, self.cache_dir, self.gzip_level)
        self.images = source_images(layers, self.sha, tuple(kind for kind, _ in self.layer_kinds))

    def run(self) -> None:
        self.check_services()
        self.make_images()
        total = sum(img.blob_bytes for img in self.images.values())
        log(f"run {self.prefix}, sha {self.sha}; images " + ", ".join(
            f"{a} {img.blob_bytes / 1e6:.1f} MB ({len(img.layers)} layers)" for a, img in self.images.items())
            + f"; total {total / 1e6:.1f} MB")
        self.push_sources()
        if any(s != 1 for s in self.args.scenarios):
            self.push_seed()
        self.hub_repos.append(self.seed_repo)
        for index, scenario in enumerate(self.args.scenarios):
            for tool, run, counted in self.schedule(index):
                self.measure(scenario, tool, run, counted)


# --------------------------------------------------------------------------- report


def summarize(bench: Bench) -> dict:
    out = {}
    for scenario in bench.args.scenarios:
        for tool in TOOLS:
            timed = [m for m in bench.measurements if m.scenario == scenario and m.tool == tool and m.ok
                     and not m.counted]
            counted = [m for m in bench.measurements if m.scenario == scenario and m.tool == tool and m.ok
                       and m.counted]
            if not timed and not counted:
                continue
            row = {"runs": len(timed), "counted": counted[0] if counted else None}
            if timed:
                row.update(seconds=statistics.median(m.seconds for m in timed), min=min(m.seconds for m in timed),
                           max=max(m.seconds for m in timed),
                           median_run=sorted(timed, key=lambda m: m.seconds)[(len(timed) - 1) // 2])
            out[scenario, tool] = row
    return out


def mb(n: float) -> str:
    return f"{n / 1e6:.1f}" if n >= 1e6 or n == 0 else f"{n / 1e6:.3f}"


def report(bench: Bench, command: str) -> None:
    images = bench.images
    total = sum(img.blob_bytes for img in images.values())
    missing = {1: total, 2: sum(img.blob_bytes - img.layers[0]["size"] for img in images.values()), 3: 0, 4: 0}
    rows = summarize(bench)
    print()
    print(f"publish nightly of 2 per-arch images, {total / 1e6:.1f} MB of blobs in all ("
          + ", ".join(f"{a} {img.blob_bytes / 1e6:.1f} MB" for a, img in images.items())
          + f"), staging 127.0.0.1:{STAGING} -> hub 127.0.0.1:{HUB}")
    print(f"command: {command}")
    print(f"wall s: median of the timed runs straight to the registries ({bench.args.repeats} each for (b), (c) "
          "and (d), "
          f"{bench.args.reference_runs} for (a), interleaved); bytes: one more run per tool through byte-counting "
          "relays (its wall time in 'relay s'); (b)'s manifest list: HTTP PUT from this script (skopeo 1.9 cannot "
          "make one)")
    print()
    head = (f"{'scenario':<26} {'tool':<36} {'wall s':>7} {'range s':>10} {'relay s':>7} {'in MB':>7} "
            f"{'out MB':>7} {'runner MB':>9} {'% image':>8} {'time vs (c)':>11}")
    print(head)
    print("-" * len(head))
    for scenario in bench.args.scenarios:
        g = rows.get((scenario, "ghbuild"), {})
        first = True
        for tool in TOOLS:
            r = rows.get((scenario, tool))
            label = f"{scenario} {SCENARIOS[scenario]}" if first else ""
            first = False
            if not r:
                fails = [m.error for m in bench.measurements if m.scenario == scenario and m.tool == tool]
                state = f"FAILED: {fails[0][:90]}" if fails else "not run"
                print(f"{label:<26} {tool_label(tool, scenario):<36} {state}")
                continue
            c = r["counted"]
            wall = f"{r['seconds']:7.2f}" if "seconds" in r else f"{'-':>7}"
            rng = f"{r['min']:.2f}-{r['max']:.2f}" if r["runs"] > 1 else ""
            ratio = f"{r['seconds'] / g['seconds']:.2f}x" if "seconds" in r and "seconds" in g else "-"
            if c:
                moved = (f"{c.seconds:7.2f} {mb(c.bytes_in):>7} {mb(c.bytes_out):>7} {mb(c.through):>9} "
                         f"{100 * c.through / total:7.2f}%")
            else:
                moved = f"{'-':>7} {'-':>7} {'-':>7} {'-':>9} {'-':>8}"
            print(f"{label:<26} {tool_label(tool, scenario):<36} {wall} {rng:>10} {moved} {ratio:>11}")
        print(f"{'':<26} (blobs the hub lacked: {mb(missing[scenario])} MB; a registry-to-registry copy moves them "
              f"in and out: {mb(2 * missing[scenario])} MB)")
    print()
    for m in bench.measurements:
        if m.notes or not m.ok:
            extra = "; ".join(m.notes) + (f"; FAILED: {m.error}" if not m.ok else "")
            print(f"note: scenario {m.scenario} {m.tool} {'bytes run' if m.counted else f'run {m.run}'}: {extra}")
    print()
    verdicts = []
    floors: list[str] = []
    for scenario in bench.args.scenarios:
        d, s, g, f = (rows.get((scenario, t), {}) for t in TOOLS)
        extra = "" if scenario in (1, 2) else " [not a goal in this scenario; informative]"
        if "seconds" in g and "seconds" in d:
            ratio = d["seconds"] / g["seconds"]
            verdicts.append((ratio >= 10, f"scenario {scenario}: ghbuild is {ratio:.1f}x faster than the reference "
                                          f"(goal >= 10x){extra}"))
        if "seconds" in g and "seconds" in s:
            ratio = g["seconds"] / s["seconds"]
            goal = SKOPEO_GOAL.get(scenario)
            verdicts.append((goal is None or ratio <= goal,
                             f"scenario {scenario}: ghbuild takes {ratio:.2f}x skopeo's time, "
                             f"{g['seconds'] - s['seconds']:+.2f} s "
                             + (f"(goal <= {goal}x)" if goal else "[no goal in this scenario; informative]")))
        if scenario == REPUBLISH and "seconds" in f and "seconds" in s:
            floors.append(f"scenario {scenario}: starting ghbuild's interpreter to do nothing takes "
                          f"{f['seconds']:.3f} s, "
                          f"{f['seconds'] / s['seconds']:.2f}x skopeo's whole republish"
                          + (f"; ghbuild takes {g['seconds'] - f['seconds']:+.3f} s over it" if "seconds" in g else ""))
        if "seconds" in f and "seconds" in d:
            floors.append(f"scenario {scenario}: the hub alone needs {f['seconds']:.2f} s to receive the blobs it "
                          f"lacks (d); the reference takes {d['seconds'] / f['seconds']:.1f}x that, the highest "
                          "ratio any registry-to-registry copy could reach in this run"
                          + (f"; ghbuild takes {g['seconds'] / f['seconds']:.2f}x the floor, "
                             f"{g['seconds'] - f['seconds']:+.2f} s" if "seconds" in g else ""))
    for scenario in (2, 3, 4):
        c = (rows.get((scenario, "ghbuild")) or {}).get("counted")
        if scenario not in bench.args.scenarios or not c:
            continue
        pct = 100 * c.through / total
        if scenario == 2:
            verdicts.append((pct <= 1, f"scenario 2: ghbuild moves {pct:.2f} % of the image bytes through the runner "
                                       "with the base layers on the hub (goal <= 1 %, literal reading: out of reach "
                                       "for any tool, the app layers the hub lacks must cross the runner)"))
            excess = c.through - 2 * missing[2]
            verdicts.append((excess <= 0.01 * total,
                             f"scenario 2: beyond the {mb(2 * missing[2])} MB that must move for the missing app "
                             f"layers, ghbuild moves {mb(excess)} MB = {100 * excess / total:.3f} % of the image "
                             "bytes (goal <= 1 %)"))
        else:
            verdicts.append((pct <= 1, f"scenario {scenario}: ghbuild moves {pct:.3f} % of the image bytes through the "
                                       "runner when every layer already exists (goal <= 1 %)"))
    print("where the time goes (median timed run of each tool; CPU seconds during the run, this machine has "
          f"{os.cpu_count()} cores; dockerd and the registries are shared with anything else running):")
    for scenario in bench.args.scenarios:
        for tool in TOOLS:
            m = (rows.get((scenario, tool)) or {}).get("median_run")
            if not m:
                continue
            cpu = ", ".join(f"{k} {v:.1f}" for k, v in
                            sorted(m.cpu.items(), key=lambda kv: ("tool", "dockerd", "staging", "hub").index(kv[0]))
                            if v == v)
            steps: dict[str, float] = {}
            for name, sec in m.steps:
                steps[name] = steps.get(name, 0.0) + sec
            step_text = ", ".join(f"{k} {v:.2f}" for k, v in steps.items())
            if tool == "ghbuild" and m.timeline:
                step_text = f"first log line (interpreter + imports + config) {m.timeline[0][0]:.2f}"
            print(f"  scenario {scenario} {tool:<7} {m.seconds:6.2f} s wall; cpu s: {cpu}"
                  + (f"; steps s: {step_text}" if step_text else ""))
    print()
    for good, text in verdicts:
        print(f"goal {'met' if good else 'NOT met'}: {text}")
    for text in floors:
        print(f"floor: {text}")
    timing_missed = any(not good and ("faster" in text or "skopeo" in text) for good, text in verdicts)
    if bench.args.verbose or timing_missed:
        for scenario in bench.args.scenarios:
            m = (rows.get((scenario, "ghbuild")) or {}).get("median_run")
            if not m:
                continue
            print(f"\nghbuild's own log, scenario {scenario} run {m.run} ({m.seconds:.2f} s), seconds from start as "
                  "each line arrived (the summary it prints at the end is left out):")
            for t, line in m.timeline:
                if line.startswith("ghbuild publish nightly:"):
                    break
                print(f"  {t:6.2f}  {line[:140]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of skopeo and ghbuild per scenario (median)")
    parser.add_argument("--scenarios", default="1,2,3,4", help="comma-separated: 1 empty hub, 2 base layers on "
                        "the hub, 3 a republish (the hub holds the nightly), 4 every blob on the hub, no tag")
    parser.add_argument("--reference-runs", type=int, default=2, help="timed runs of the reference per scenario")
    parser.add_argument("--no-reference", action="store_true", help="skip (a) docker pull/tag/push (quick runs)")
    parser.add_argument("--no-floor", action="store_true",
                        help="skip (d), the hub's ingest floor measured with curl")
    parser.add_argument("--installed", action="store_true", help="time ghbuild installed as the setup action "
                        "installs it in a job (not the development venv's editable install)")
    parser.add_argument("--verbose", action="store_true", help="print ghbuild's timestamped log for every scenario")
    args = parser.parse_args()
    try:
        args.scenarios = sorted({int(x) for x in args.scenarios.split(",") if x.strip()})
    except ValueError:
        parser.error("--scenarios: numbers 1-4, comma-separated")
    if not args.scenarios or any(s not in SCENARIOS for s in args.scenarios) or min(args.repeats,
                                                                                   args.reference_runs) < 1:
        parser.error("--scenarios: numbers 1-4; --repeats and --reference-runs >= 1")
    if any(s != 1 for s in args.scenarios) and 1 not in args.scenarios and not args.no_reference:
        log("note: without scenario 1 the reference's seed lacks the engine's own recompressed blobs")
    return run_bench(Bench, args, report)


def run_bench(make: Callable[[argparse.Namespace], Bench], args: argparse.Namespace,
              report_to: Callable[[Any, str], None]) -> int:
    """Run a bench, clean up whatever happens, then print its report: 0 after a measurement (goals met or
    not), 2 when the setup failed, 130 when interrupted."""
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # so that the cleanup below runs
    command = f"make infra-up && .venv/bin/python bench/{Path(sys.argv[0]).name}" + "".join(
        f" {a}" for a in sys.argv[1:])
    t0 = time.monotonic()
    bench = None
    try:
        bench = make(args)
        bench.run()
    except (BenchError, RegistryError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    finally:
        if bench is not None:
            bench.cleanup()
    report_to(bench, command)
    print(f"\nbench wall time {time.monotonic() - t0:.0f} s (load average now {os.getloadavg()[0]:.1f})")
    return 0

if __name__ == "__main__":
    raise SystemExit(main())
