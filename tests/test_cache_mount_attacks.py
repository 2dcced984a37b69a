"""Cache-mount entries made to hurt the run that restores them (issue 25's review): links that lead out of the
mount through other links, setuid bits, absolute links a trusted save carried, decompression and member-count
bombs, and the image the steps run in. The entry check runs on real tar+gzip files and GNU tar extracts what it
lets through, as the restore step does; the engine-side restore and save: tests/services/engine/test_57."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from ghbuild.build import cachemounts, mountfiles
from ghbuild.errors import RegistryError
from ghbuild.plan.cachemounts import CacheMountRef

DIGEST = "sha256:" + "ab" * 32


def _gz_tar(path: Path, members, fmt=tarfile.PAX_FORMAT) -> Path:
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=fmt) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _sym(name: str, link: str):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = tarfile.SYMTYPE, link
    return info, None


def _file(name: str, data: bytes = b"x", mode: int = 0o644, uid: int = 0):
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.uid = len(data), mode, uid
    return info, data


def _extract(plain: Path, root: Path) -> Path:
    """GNU tar extracts the checked tar into root/outer/mnt, as the restore step does into the mount."""
    mount = root / "outer" / "mnt"
    mount.mkdir(parents=True)
    subprocess.run(["tar", "-xf", str(plain), "-C", str(mount)], check=True, capture_output=True)
    return mount


def _inside(mount: Path, path: Path) -> bool:
    real = os.path.realpath(path)
    return real == str(mount) or real.startswith(f"{mount}/")


# --------------------------------------------------------------------------- symlinks

@pytest.mark.parametrize("members", [
    [_sym("d", "."), _sym("x", "d/d/..")],                 # each fine by its spelling, out together
    [_sym("x", "d/d/.."), _sym("d", ".")],                 # the same, the link it goes through written later
    [_sym("a", "b/.."), _sym("b", "c"), _sym("c", "..")],  # two hops
    [_sym("loop", "loop/x")],
])
def test_a_link_that_leads_out_through_other_links_is_left_out(tmp_path, members):
    blob = _gz_tar(tmp_path / "e.tar.gz", [_file("keep", b"kept"), *members])
    files, _bytes, skipped = cachemounts._checked_tar(blob, tmp_path / "entry.tar", 10**6)
    assert files == 1 and skipped >= 1
    mount = _extract(tmp_path / "entry.tar", tmp_path)
    assert (mount / "keep").read_bytes() == b"kept"
    for name in os.listdir(mount):
        assert _inside(mount, mount / name), name


def test_links_that_stay_inside_are_restored_after_every_other_member(tmp_path):
    blob = _gz_tar(tmp_path / "e.tar.gz", [_sym("cur", "v1"), _file("v1/a", b"A"), _sym("v1/up", "../v1/a")])
    files, _bytes, skipped = cachemounts._checked_tar(blob, tmp_path / "entry.tar", 10**6)
    assert (files, skipped) == (1, 0)
    with tarfile.open(tmp_path / "entry.tar") as tar:
        assert [m.name for m in tar.getmembers()] == ["v1/a", "cur", "v1/up"]
    mount = _extract(tmp_path / "entry.tar", tmp_path)
    assert (mount / "cur" / "up").read_bytes() == b"A"


@pytest.mark.parametrize(("members", "name"), [
    ([_sym("d", "sub"), _file("d/f")], "d/f"),             # a file written through a link
    ([_sym("d", "."), _sym("d/e", "x")], "d/e"),           # a link below a link
])
def test_nothing_is_written_through_a_link_of_the_entry(tmp_path, members, name):
    blob = _gz_tar(tmp_path / "e.tar.gz", members)
    with pytest.raises(cachemounts._Unusable, match=f"'{name}' .* is below a symlink of the entry"):
        cachemounts._checked_tar(blob, tmp_path / "entry.tar", 10**6)


def test_a_link_over_a_folder_of_the_entry_is_left_out(tmp_path):
    blob = _gz_tar(tmp_path / "e.tar.gz", [_file("d/f", b"F"), _sym("d", "..")])
    assert cachemounts._checked_tar(blob, tmp_path / "entry.tar", 10**6)[2] == 1
    assert (_extract(tmp_path / "entry.tar", tmp_path) / "d" / "f").read_bytes() == b"F"


def test_an_absolute_link_a_trusted_run_carried_is_skipped_not_the_whole_entry(tmp_path):
    """A virtualenv's bin/python -> /usr/bin/python3: the entry restores without it (counted), every run."""
    blob = _gz_tar(tmp_path / "e.tar.gz", [_file("venv/pyvenv.cfg", b"home = /usr/bin\n"),
                                           _sym("venv/bin/python", "/usr/bin/python3")])
    files, _bytes, skipped = cachemounts._checked_tar(blob, tmp_path / "entry.tar", 10**6)
    assert (files, skipped) == (1, 1)
    mount = _extract(tmp_path / "entry.tar", tmp_path)
    assert (mount / "venv" / "pyvenv.cfg").exists() and not (mount / "venv" / "bin" / "python").is_symlink()


def test_the_save_leaves_out_links_that_lead_out_of_the_mount(tmp_path):
    exported, layer = tmp_path / "mount.tar", tmp_path / "layer.tar.gz"
    with tarfile.open(exported, "w") as tar:
        for info, data in [_file("venv/pyvenv.cfg"), _sym("venv/bin/python", "/usr/bin/python3"),
                           _sym("venv/lib64", "lib"), _sym("venv/up", "../..")]:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    selection = cachemounts._capped_layer(exported, layer, 10**6)
    assert selection.dropped_links == 2
    with tarfile.open(layer) as tar:
        assert sorted(m.name for m in tar.getmembers()) == ["venv/lib64", "venv/pyvenv.cfg"]
    assert cachemounts._checked_tar(layer, tmp_path / "entry.tar", 10**6) == (1, 1, 0)


# --------------------------------------------------------------------------- modes

def test_setuid_and_setgid_bits_are_cleared_and_owners_kept(tmp_path):
    blob = _gz_tar(tmp_path / "e.tar.gz", [_file("bin/sh", b"#!/bin/sh\n", mode=0o6755, uid=0),
                                           _file("own", mode=0o640, uid=1000)])
    cachemounts._checked_tar(blob, tmp_path / "entry.tar", 10**6)
    with tarfile.open(tmp_path / "entry.tar") as tar:
        sh, own = tar.getmember("bin/sh"), tar.getmember("own")
    assert (sh.mode, sh.uid) == (0o755, 0) and (own.mode, own.uid) == (0o640, 1000)


# --------------------------------------------------------------------------- sizes and counts

BOMB = """
import resource, sys
from ghbuild.build import cachemounts
resource.setrlimit(resource.RLIMIT_AS, (384 << 20, 384 << 20))    # a process that cannot hold the header
try:
    cachemounts._checked_tar(sys.argv[1], sys.argv[2], 10 * 10**6)
except cachemounts._Unusable as exc:
    print("warning:", exc)
"""


def test_a_huge_pax_header_is_refused_before_it_is_read_whole(tmp_path):
    """512 MB of PAX header in a 0.5 MB gzip, against a 10 MB cap: refused once past the cap and an eighth,
    in a process of 384 MB (tarfile reads a header in one piece: before, a MemoryError and a traceback)."""
    blob = tmp_path / "bomb.tar.gz"
    header = tarfile.TarInfo("././@PaxHeader")
    header.type, header.size = tarfile.XHDTYPE, 512 * 2**20
    with open(blob, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=1) as gz:
        gz.write(header.tobuf(format=tarfile.USTAR_FORMAT))
        for _ in range(512):
            gz.write(bytes(2**20))
    proc = subprocess.run([sys.executable, "-c", BOMB, str(blob), str(tmp_path / "entry.tar")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.startswith("warning: more than 12298576 bytes once decompressed"), \
        proc.stdout + proc.stderr[-500:]


def test_running_out_of_memory_on_an_entry_is_a_refusal_not_a_traceback(tmp_path, monkeypatch):
    blob = _gz_tar(tmp_path / "e.tar.gz", [_file("a")])

    def exhausted(*_args, **_kwargs):
        raise MemoryError

    monkeypatch.setattr(cachemounts._Members, "admit", exhausted)
    with pytest.raises(cachemounts._Unusable, match="out of memory"):
        cachemounts._checked_tar(blob, tmp_path / "entry.tar", 10**6)
    assert MemoryError in cachemounts._TAR_ERRORS       # restore and save turn it into a warning


def test_empty_members_count_against_the_cap(tmp_path):
    blob = _gz_tar(tmp_path / "many.tar.gz", [(tarfile.TarInfo(f"d/{i:09d}"), b"") for i in range(5000)],
                   fmt=tarfile.USTAR_FORMAT)
    with pytest.raises(cachemounts._Unusable, match="more than the cap of 1024 bytes"):
        cachemounts._checked_tar(blob, tmp_path / "entry.tar", 1024)


def test_the_members_of_an_entry_are_bounded_on_restore_and_on_save(tmp_path, monkeypatch):
    monkeypatch.setattr(mountfiles, "MAX_MEMBERS", 10)
    members = [_file(f"f{i}") for i in range(11)]
    blob = _gz_tar(tmp_path / "e.tar.gz", members)
    with pytest.raises(cachemounts._Unusable, match="more than 10 members"):
        cachemounts._checked_tar(blob, tmp_path / "entry.tar", 10**9)
    with tarfile.open(tmp_path / "mount.tar", "w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data))
    with pytest.raises(cachemounts._Unusable, match="more than 10 members"):
        cachemounts._capped_layer(tmp_path / "mount.tar", tmp_path / "layer.tar.gz", 10**9)


def test_what_the_save_keeps_always_passes_the_restores_cap(tmp_path):
    """The save counts each member as it lands in the tar (headers, long names' PAX records, padding), so the
    restore never refuses an entry of the same cap."""
    exported, layer, cap = tmp_path / "mount.tar", tmp_path / "layer.tar.gz", 40_000
    with tarfile.open(exported, "w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(60):
            info, data = _file(f"http-v2/{i:03d}/" + "a" * 120, b"y" * 700)
            info.mtime = 1_700_000_000 + i
            tar.addfile(info, io.BytesIO(data))
    selection = cachemounts._capped_layer(exported, layer, cap)
    assert 0 < selection.dropped_files < 60
    with gzip.open(layer) as raw:
        assert len(raw.read()) <= cap + tarfile.RECORDSIZE
    assert cachemounts._checked_tar(layer, tmp_path / "entry.tar", cap)[0] == selection.files


# --------------------------------------------------------------------------- the steps' image

class _Registry:
    def __init__(self, found: bool = True):
        self.asked: list[tuple[str, str]] = []
        self.found = found

    def resolve(self, repo: str, tag: str):
        self.asked.append((repo, tag))
        if isinstance(self.found, Exception):
            raise self.found
        return SimpleNamespace(digest=DIGEST) if self.found else None


def _run(tmp_path: Path, image: str, registry: _Registry) -> cachemounts.MountRun:
    return cachemounts.MountRun(None, "linux/amd64", image, tmp_path, {}, (), lambda host: registry)  # type: ignore[arg-type]


MOUNT = CacheMountRef(id="pip", target="/root/.cache/pip", max_size=100, read=(), write="r.example/c:t")


def test_a_tag_is_pinned_to_its_digest_before_any_step_runs_and_the_save_uses_the_same(tmp_path):
    registry, warnings = _Registry(), []
    (result,) = cachemounts.restore(_run(tmp_path, "docker.io/library/busybox:1", registry), (MOUNT,), warnings)
    assert registry.asked == [("library/busybox", "1")]
    assert result["image"] == f"docker.io/library/busybox@{DIGEST}"
    assert any("the steps' image docker.io/library/busybox:1 is a tag, resolved now to "
               f"docker.io/library/busybox@{DIGEST}" in w and "build.cache-mount-image" in w for w in warnings)


def test_a_digest_reference_is_used_as_written(tmp_path):
    registry, warnings = _Registry(), []
    image = f"127.0.0.1:5000/base@{DIGEST}"
    (result,) = cachemounts.restore(_run(tmp_path, image, registry), (MOUNT,), warnings)
    assert result["image"] == image and registry.asked == [] and not any("is a tag" in w for w in warnings)


@pytest.mark.parametrize("found, why", [(False, "does not exist in its registry"),
                                        (RegistryError("HTTP 503"), "HTTP 503")])
def test_an_image_that_cannot_be_pinned_carries_no_mount_and_says_so(tmp_path, found, why):
    registry, warnings = _Registry(found), []
    run = _run(tmp_path, "docker.io/library/busybox:1", registry)
    results = cachemounts.restore(run, (MOUNT,), warnings)
    assert results[0]["restored"]["status"].startswith("not restored (the steps' image docker.io/library/busybox:1 "
                                                       "was not pinned to a digest")
    assert [w for w in warnings if why in w and w.startswith("cache mounts: not restored or saved")]
    cachemounts.save(run, (MOUNT,), results, warnings)
    assert results[0]["saved"]["status"] == "not saved (the steps' image was not pinned)"
