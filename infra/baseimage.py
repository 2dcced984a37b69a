"""Debian base images without a registry: debootstrap -> cached rootfs tarball -> BuildKit image.

The rootfs uses the same Debian mirror as apt on this machine (read from its sources), so apt
inside builds reaches the same mirror. Tarballs are cached under /var/cache/ghbuild/rootfs.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

from .common import (
    BASE_SUITE,
    DOCKER_CLI,
    LOCAL_IMAGE_REPO,
    InfraError,
    atomic_write_json,
    cache_dir,
    docker_env,
    info,
    logs_dir,
    one_line,
    run,
)

ROOTFS_FORMAT = 1  # bump when the post-processing of the rootfs changes
LABEL_KEY = "org.ghbuild.infra.rootfs-key"
LABEL_SHA = "org.ghbuild.infra.rootfs-sha256"
UNAME = {"amd64": "x86_64", "arm64": "aarch64"}


def local_tag(arch: str) -> str:
    return f"{LOCAL_IMAGE_REPO}:{BASE_SUITE}-{arch}"


# --------------------------------------------------------------------------- apt sources of this machine


def _parse_one_line(text: str) -> list[dict]:
    entries = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        options = {}
        m = re.match(r"^(deb|deb-src)\s+\[([^\]]*)\]\s+(.*)$", line)
        if m:
            kind, opts, rest = m.groups()
            for opt in opts.split():
                k, _, v = opt.partition("=")
                options[k.lower()] = v
        else:
            parts = line.split(None, 1)
            if len(parts) != 2 or parts[0] not in ("deb", "deb-src"):
                continue
            kind, rest = parts
        fields = rest.split()
        if len(fields) < 2:
            continue
        entries.append(
            {"types": [kind], "uris": [fields[0]], "suites": [fields[1]], "components": fields[2:], "options": options}
        )
    return entries


def _parse_deb822(text: str) -> list[dict]:
    entries = []
    for para in re.split(r"\n\s*\n", text):
        fields: dict[str, str] = {}
        key = None
        for raw in para.splitlines():
            if raw.startswith("#"):
                continue
            if raw[:1] in (" ", "\t") and key:
                fields[key] += "\n" + raw.strip()
                continue
            k, sep, v = raw.partition(":")
            if not sep:
                continue
            key = k.strip().lower()
            fields[key] = v.strip()
        if not fields.get("types") or not fields.get("uris"):
            continue
        if fields.get("enabled", "yes").strip().lower() in ("no", "false", "0"):
            continue
        entries.append(
            {
                "types": fields["types"].split(),
                "uris": fields["uris"].split(),
                "suites": fields.get("suites", "").split(),
                "components": fields.get("components", "").split(),
                "options": {k: v for k, v in fields.items() if k not in ("types", "uris", "suites", "components")},
            }
        )
    return entries


def apt_sources() -> list[dict]:
    """Enabled source entries in the order apt reads them (sources.list, then sources.list.d)."""
    etc = Path("/etc/apt")
    entries: list[dict] = []
    main = etc / "sources.list"
    if main.is_file():
        entries += _parse_one_line(main.read_text(errors="replace"))
    parts = etc / "sources.list.d"
    if parts.is_dir():
        for f in sorted(parts.iterdir()):
            # apt only reads *.list and *.sources (e.g. "*.disabled-by-farm" is ignored).
            if f.suffix == ".list":
                entries += _parse_one_line(f.read_text(errors="replace"))
            elif f.suffix == ".sources":
                entries += _parse_deb822(f.read_text(errors="replace"))
    return entries


def apt_config_values() -> dict[str, str]:
    """The few host apt settings worth copying into the images (proxy, Valid-Until check)."""
    try:
        out = subprocess.run(["apt-config", "dump"], capture_output=True, text=True, timeout=30, check=False).stdout
    except OSError:
        return {}
    wanted = {
        "acquire::http::proxy",
        "acquire::https::proxy",
        "acquire::check-valid-until",
        "acquire::check-date",
    }
    values = {}
    for line in out.splitlines():
        m = re.match(r'^(\S+)\s+"(.*)";$', line.strip())
        if m and m.group(1).lower() in wanted and m.group(2):
            values[m.group(1)] = m.group(2)
    return values


def find_mirror(suite: str = BASE_SUITE) -> dict:
    """Debian mirror URIs (main, updates, security) for ``suite`` as configured for apt here."""
    entries = [e for e in apt_sources() if "deb" in e["types"]]

    def score(e: dict) -> int:
        # Prefer the Debian archive over third-party repositories that reuse the suite name
        # (e.g. "<vendor>/debian/12/prod bookworm main"): Debian's keyring or a */debian* path.
        signed_by = e["options"].get("signed-by", "")
        if "debian-archive-keyring" in signed_by or re.search(r"/debian(-security)?/?$", e["uris"][0]):
            return 2
        return 1 if not signed_by else 0

    def uri_for(s: str) -> str | None:
        found = [e for e in entries if s in e["suites"] and ("main" in e["components"] or not e["components"])]
        if not found:
            return None
        best = max(found, key=score)  # max() keeps the first of equal scores: apt's order
        return best["uris"][0].rstrip("/")

    mirror = uri_for(suite)
    updates, security = uri_for(f"{suite}-updates"), uri_for(f"{suite}-security")
    if mirror is None:
        # Host on another Debian release: an entry whose path looks like a Debian archive root.
        mirror = next(
            (u.rstrip("/") for e in entries for u in e["uris"] if re.search(r"/debian/?$", u)), None
        )
        updates = mirror
        security = next(
            (u.rstrip("/") for e in entries for u in e["uris"] if re.search(r"/debian-security/?$", u)), None
        )
    override = os.environ.get("GHBUILD_INFRA_DEBIAN_MIRROR", "").strip().rstrip("/")
    if override:
        mirror = updates = override
        security = os.environ.get("GHBUILD_INFRA_DEBIAN_SECURITY_MIRROR", "").strip().rstrip("/") or security
    if mirror is None:
        # Not a Debian host at all (no Debian archive in its apt sources): the public one.
        mirror = updates = "http://deb.debian.org/debian"
        security = "http://deb.debian.org/debian-security"
        info(f"base-images: no Debian mirror in this machine's apt sources; using {mirror} "
             "(set GHBUILD_INFRA_DEBIAN_MIRROR to override)")
    if not mirror.startswith(("http://", "https://")):
        raise InfraError("base-images", f"apt mirror {mirror!r} is not http(s); debootstrap cannot use it")
    return {
        "suite": suite,
        "mirror": mirror,
        "updates": updates,
        "security": security,
        "apt_conf": apt_config_values(),
    }


def rootfs_key(mirror: dict, arch: str) -> str:
    blob = json.dumps({"format": ROOTFS_FORMAT, "arch": arch, "variant": "minbase", **mirror}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _sources_file(mirror: dict) -> str:
    suite = mirror["suite"]
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    paras = []
    suites = [suite] + ([f"{suite}-updates"] if mirror.get("updates") == mirror["mirror"] else [])
    paras.append(f"Types: deb\nURIs: {mirror['mirror']}\nSuites: {' '.join(suites)}\n"
                 f"Components: main\nSigned-By: {keyring}\n")
    if mirror.get("updates") and mirror["updates"] != mirror["mirror"]:
        paras.append(f"Types: deb\nURIs: {mirror['updates']}\nSuites: {suite}-updates\n"
                     f"Components: main\nSigned-By: {keyring}\n")
    if mirror.get("security"):
        paras.append(f"Types: deb\nURIs: {mirror['security']}\nSuites: {suite}-security\n"
                     f"Components: main\nSigned-By: {keyring}\n")
    return "# written by ghbuild.infra: the mirror apt uses on the machine that made this image\n" + "\n".join(paras)


# --------------------------------------------------------------------------- rootfs cache


def rootfs_dir(arch: str, key: str) -> Path:
    return cache_dir() / "rootfs" / f"debian-{BASE_SUITE}-minbase-{arch}-{key}"


def cached_rootfs(arch: str, key: str) -> dict | None:
    d = rootfs_dir(arch, key)
    try:
        meta = json.loads((d / "meta.json").read_text())
    except (OSError, ValueError):
        return None
    tar = d / "rootfs.tar"
    if not tar.is_file() or tar.stat().st_size != meta.get("size"):
        return None
    return meta


def _umount_below(path: Path) -> None:
    """debootstrap mounts /proc and /sys in the target; make sure nothing is left before rm -rf."""
    real = os.path.realpath(path)
    try:
        mounts = [ln.split()[1] for ln in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return
    for mnt in sorted((m for m in mounts if m == real or m.startswith(real + "/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", mnt], capture_output=True, check=False)


def _rm_tree(path: Path) -> None:
    if path.exists():
        _umount_below(path)
        subprocess.run(["rm", "-rf", "--one-file-system", str(path)], capture_output=True, check=False)


def _postprocess(root: Path, mirror: dict) -> None:
    apt = root / "etc" / "apt"
    (apt / "sources.list.d").mkdir(parents=True, exist_ok=True)
    one_line_list = apt / "sources.list"  # debootstrap's `deb MIRROR SUITE main`
    if one_line_list.exists():
        one_line_list.unlink()
    (apt / "sources.list.d" / "debian.sources").write_text(_sources_file(mirror))
    conf = mirror.get("apt_conf") or {}
    if conf:
        lines = [f'{k} "{v}";' for k, v in sorted(conf.items())]
        (apt / "apt.conf.d").mkdir(parents=True, exist_ok=True)
        (apt / "apt.conf.d" / "99ghbuild-host").write_text(
            "// copied by ghbuild.infra from the host apt config\n" + "\n".join(lines) + "\n")
    # Files copied from the host, and caches from the bootstrap.
    for rel in ("etc/resolv.conf",):
        p = root / rel
        if p.is_symlink() or p.exists():
            p.unlink()
        p.write_text("")
    (root / "etc" / "hosts").write_text("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n")
    (root / "etc" / "hostname").write_text("localhost\n")
    for pattern_dir, keep in (("var/cache/apt/archives", {"partial", "lock"}),
                              ("var/lib/apt/lists", {"partial", "lock"})):
        d = root / pattern_dir
        if d.is_dir():
            for child in d.iterdir():
                if child.name not in keep and (child.is_file() or child.is_symlink()):
                    child.unlink()
    for rel in ("var/cache/apt/pkgcache.bin", "var/cache/apt/srcpkgcache.bin", "var/log/bootstrap.log"):
        p = root / rel
        if p.exists():
            p.unlink()


def _clean_dead_work_dirs() -> None:
    """Remove work dirs left by an interrupted debootstrap (their pid suffix is no longer alive)."""
    base = cache_dir() / "work"
    if not base.is_dir():
        return
    for d in base.iterdir():
        pid = d.name.rsplit("-", 1)[-1]
        if pid.isdigit() and int(pid) != os.getpid() and not Path(f"/proc/{pid}").exists():
            _rm_tree(d)


def make_rootfs(arch: str, mirror: dict, key: str) -> dict:
    """debootstrap --variant=minbase, post-process, tar into the cache (atomic rename)."""
    final = rootfs_dir(arch, key)
    work = cache_dir() / "work" / f"{arch}-{key}-{os.getpid()}"
    _clean_dead_work_dirs()
    root = work / "root"
    _rm_tree(work)
    root.mkdir(parents=True)
    log = logs_dir() / f"debootstrap-{arch}.log"
    started = time.monotonic()
    info(f"base-images: debootstrap --variant=minbase --arch={arch} {mirror['suite']} from {mirror['mirror']} "
         f"(log: {log})")
    env = dict(os.environ)
    env["DEBIAN_FRONTEND"] = "noninteractive"
    proxy = (mirror.get("apt_conf") or {}).get("Acquire::http::Proxy")
    if proxy and proxy.upper() != "DIRECT":
        env.setdefault("http_proxy", proxy)
    try:
        run(
            ["debootstrap", "--variant=minbase", f"--arch={arch}", "--components=main",
             mirror["suite"], str(root), mirror["mirror"]],
            step_name=f"base-images/debootstrap-{arch}",
            env=env,
            log=log,
            timeout=1800,
        )
        _postprocess(root, mirror)
        tar_tmp = work / "rootfs.tar"
        run(
            ["tar", "--numeric-owner", "--xattrs", "--xattrs-include=*", "-C", str(root),
             "--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*", "--exclude=./run/*",
             "--exclude=./tmp/*", "-cf", str(tar_tmp), "."],
            step_name=f"base-images/tar-{arch}",
            log=log,
            timeout=600,
        )
        sha = hashlib.sha256()
        with open(tar_tmp, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                sha.update(chunk)
        meta = {
            "arch": arch,
            "key": key,
            "sha256": sha.hexdigest(),
            "size": tar_tmp.stat().st_size,
            "mirror": mirror,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": round(time.monotonic() - started, 1),
        }
        staged = work / "out"
        staged.mkdir()
        os.replace(tar_tmp, staged / "rootfs.tar")
        (staged / "Dockerfile").write_text("FROM scratch\nADD rootfs.tar /\n")
        (staged / ".dockerignore").write_text("*\n!rootfs.tar\n!Dockerfile\n")
        atomic_write_json(staged / "meta.json", meta)
        _rm_tree(final)
        final.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(staged, final)
        except OSError:
            # Another checkout on this machine finished the same rootfs first: use theirs.
            if cached_rootfs(arch, key) is None:
                raise
            meta = cached_rootfs(arch, key)
    finally:
        _rm_tree(work)
    info(f"base-images: rootfs {arch} cached in {final} ({meta['size'] >> 20} MiB, {meta['seconds']} s)")
    return meta


# --------------------------------------------------------------------------- images


def image_info(tag: str) -> dict | None:
    proc = subprocess.run(
        [DOCKER_CLI, "image", "inspect", tag], capture_output=True, text=True, env=docker_env(), timeout=60, check=False
    )
    if proc.returncode != 0:
        return None
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        return None
    return data[0] if data else None


# This machine reaches PyPI through a TLS-intercepting egress proxy whose CA lives only in the host's
# /usr/local/share/ca-certificates. Builds that fetch from PyPI need it too, so the local base image
# carries the host's extra CAs (installed by ca-certificates' own hook when an image installs it) and
# a pip.conf pointing pip at the system bundle. Public base images on GitHub need neither.
HOST_EXTRA_CA_DIR = Path("/usr/local/share/ca-certificates")
LABEL_CA = "io.ghbuild.infra.extra-ca-sha256"
PIP_CONF = "[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n"


def _extra_cas() -> list[Path]:
    if not HOST_EXTRA_CA_DIR.is_dir():
        return []
    return sorted(p for p in HOST_EXTRA_CA_DIR.glob("*.crt") if p.is_file())


def extra_ca_digest() -> str:
    digest = hashlib.sha256(PIP_CONF.encode())
    for path in _extra_cas():
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def image_ok(arch: str, key: str) -> bool:
    data = image_info(local_tag(arch))
    if not data or data.get("Architecture") != arch or data.get("Os") != "linux":
        return False
    labels = (data.get("Config") or {}).get("Labels") or {}
    return labels.get(LABEL_KEY) == key and labels.get(LABEL_CA) == extra_ca_digest()


def _write_context_extras(context: Path) -> None:
    """Dockerfile, .dockerignore, the host's extra CAs and pip.conf next to rootfs.tar."""
    extra = context / "extra-ca"
    if extra.exists():
        for old in extra.iterdir():
            old.unlink()
    extra.mkdir(exist_ok=True)
    for path in _extra_cas():
        (extra / path.name).write_bytes(path.read_bytes())
    (context / "pip.conf").write_text(PIP_CONF)
    (context / "Dockerfile").write_text(
        "FROM scratch\nADD rootfs.tar /\n"
        "COPY extra-ca/ /usr/local/share/ca-certificates/\n"
        "COPY pip.conf /etc/pip.conf\n")
    (context / ".dockerignore").write_text("*\n!rootfs.tar\n!Dockerfile\n!extra-ca\n!pip.conf\n")


def build_image(arch: str, meta: dict) -> None:
    context = rootfs_dir(arch, meta["key"])
    _write_context_extras(context)
    log = logs_dir() / f"docker-build-{arch}.log"
    info(f"base-images: BuildKit build {local_tag(arch)} (--platform linux/{arch})")
    run(
        [DOCKER_CLI, "build", "--progress=plain", f"--platform=linux/{arch}", "-t", local_tag(arch),
         "--label", f"{LABEL_KEY}={meta['key']}", "--label", f"{LABEL_SHA}={meta['sha256']}",
         "--label", f"{LABEL_CA}={extra_ca_digest()}", str(context)],
        step_name=f"base-images/build-{arch}",
        env=docker_env(),
        log=log,
        timeout=900,
    )
    data = image_info(local_tag(arch))
    if not data or data.get("Architecture") != arch:
        got = data.get("Architecture") if data else "nothing"
        raise InfraError(f"base-images/build-{arch}",
                         f"built {local_tag(arch)} but its architecture is {got}, not {arch}")


def check_uname(arch: str) -> None:
    proc = run(
        [DOCKER_CLI, "run", "--rm", "--network=none", f"--platform=linux/{arch}", local_tag(arch), "uname", "-m"],
        step_name=f"base-images/run-{arch}",
        env=docker_env(),
        timeout=120,
        check=False,
    )
    got = (proc.stdout or "").strip()
    if proc.returncode != 0 or got != UNAME[arch]:
        detail = one_line((proc.stderr or "").strip() or got, 200)
        raise InfraError(
            f"base-images/run-{arch}",
            f"`docker run --platform linux/{arch} {local_tag(arch)} uname -m` gave {got!r}, "
            f"want {UNAME[arch]!r}: {detail}",
        )


def check_apt(arch: str) -> None:
    """apt inside a container of the new image reaches the mirror (bridge network, like builds)."""
    log = logs_dir() / f"apt-in-image-{arch}.log"
    run(
        [DOCKER_CLI, "run", "--rm", f"--platform=linux/{arch}", local_tag(arch), "apt-get", "-q", "update"],
        step_name=f"base-images/apt-{arch}",
        env=docker_env(),
        log=log,
        timeout=600,
    )


def ensure_base_images(arches=("amd64", "arm64")) -> dict[str, dict]:
    mirror = find_mirror()
    info(
        f"base-images: mirror {mirror['mirror']} "
        f"(updates: {mirror['updates'] or '-'}, security: {mirror['security'] or '-'})"
    )
    keys = {arch: rootfs_key(mirror, arch) for arch in arches}
    todo = [a for a in arches if not image_ok(a, keys[a])]
    for arch in arches:
        if arch not in todo:
            info(f"base-images: {local_tag(arch)} present ({arch})")
    metas: dict[str, dict] = {}
    need_bootstrap = []
    for arch in todo:
        meta = cached_rootfs(arch, keys[arch])
        if meta:
            info(f"base-images: using cached rootfs {rootfs_dir(arch, keys[arch])}")
            metas[arch] = meta
        else:
            need_bootstrap.append(arch)
    if need_bootstrap:
        errors: dict[str, BaseException] = {}

        def worker(a: str) -> None:
            try:
                metas[a] = make_rootfs(a, mirror, keys[a])
            except BaseException as exc:
                errors[a] = exc

        # Both debootstraps at once: amd64 is network/dpkg bound, arm64 is emulation bound.
        threads = [threading.Thread(target=worker, args=(a,), daemon=True) for a in need_bootstrap]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for a in need_bootstrap:
            if a in errors:
                exc = errors[a]
                if isinstance(exc, InfraError):
                    raise exc
                raise InfraError(f"base-images/debootstrap-{a}", f"{type(exc).__name__}: {exc}")
    for arch in todo:
        build_image(arch, metas[arch])
        check_apt(arch)
        info(f"base-images: apt-get update inside {local_tag(arch)} works")
    for arch in arches:
        if arch != "amd64" or arch in todo:
            check_uname(arch)
    info("base-images: `docker run --platform linux/arm64 ... uname -m` -> aarch64")
    return {a: {"tag": local_tag(a), "key": keys[a]} for a in arches}

