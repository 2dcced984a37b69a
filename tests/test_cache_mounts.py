"""Cache mounts carried between runs, the pure parts: the config key, the plan's refs per scope and trust, the cap
(the oldest files left out), the member check, the steps' Dockerfiles and the summary. The real restore and save
against the engine and the registry: tests/services/engine/test_57_cache_mounts.py."""

from __future__ import annotations

import pytest
from conftest import write_options

from ghbuild import render
from ghbuild.build import mountfiles
from ghbuild.build.report import BuildReport
from ghbuild.config import configfile
from ghbuild.errors import ConfigError
from ghbuild.plan import cachemounts, planner

MOUNTS = """
[[images.cpu.cache-mounts]]
target = "/root/.cache/pip"
max-size = "2GB"

[[images.cpu.cache-mounts]]
id = "triton"
target = "/root/.triton"
uid = 1000
gid = 1000
mode = "0755"
"""


def _options(tmp_path, extra: str = MOUNTS):
    return write_options(tmp_path / "project", extra=extra)


def test_config_reads_the_mounts_with_their_defaults(tmp_path):
    image = _options(tmp_path).images["cpu"]
    pip, triton = image.cache_mounts
    assert (pip.id, pip.target, pip.max_size, pip.uid) == ("/root/.cache/pip", "/root/.cache/pip", 2 * 10**9, None)
    assert (triton.id, triton.max_size, triton.uid, triton.gid, triton.mode) == ("triton", 10**9, 1000, 1000, "0755")
    assert _options(tmp_path).images["rocm"].cache_mounts == ()


def test_an_environment_variable_sets_the_mounts_as_json(tmp_path):
    write_options(tmp_path / "p")
    env = {"GHBUILD_IMAGES_CPU_CACHE_MOUNTS": '[{"target": "/root/.cargo/registry", "max-size": "300MB"}]'}
    options = configfile.load(str(tmp_path / "p" / "ghbuild.toml"), env=env, cwd=tmp_path / "p")
    (mount,) = options.images["cpu"].cache_mounts
    assert (mount.id, mount.max_size) == ("/root/.cargo/registry", 300 * 10**6)


@pytest.mark.parametrize(("entry", "key", "words"), [
    ('target = "relative/path"', "images.cpu.cache-mounts[0].target", "is not allowed here"),
    ('target = "/root/.cache,id=x"', "images.cpu.cache-mounts[0].target", "is not allowed here"),
    ('target = "/"', "images.cpu.cache-mounts[0].target", "not a folder a cache mount can be"),
    ('target = "/a/../etc"', "images.cpu.cache-mounts[0].target", "not a folder a cache mount can be"),
    ('target = "/ghbuild-cache-in"', "images.cpu.cache-mounts[0].target", "is in /ghbuild-cache-in, where ghbuild"),
    ('target = "/ghbuild-cache-out/x/"', "images.cpu.cache-mounts[0].target", "is in /ghbuild-cache-out, where"),
    ('target = "/a"\nmax-size = "huge"', "images.cpu.cache-mounts[0].max-size", "is not a size"),
    ('target = "/a"\nmax-size = 0', "images.cpu.cache-mounts[0].max-size", "more than 0 bytes"),
    ('target = "/a"\nuid = -1', "images.cpu.cache-mounts[0].uid", "-1"),
    ('target = "/a"\nmode = "rwx"', "images.cpu.cache-mounts[0].mode", "is not allowed here"),
    ('target = "/a"\nsize = "1GB"', "images.cpu.cache-mounts[0].size", "unknown key"),
    ('id = "x"', "images.cpu.cache-mounts[0]", "'target' is a required property"),
])
def test_a_bad_mount_is_one_line_naming_file_and_key(tmp_path, entry, key, words):
    with pytest.raises(ConfigError) as raised:
        _options(tmp_path, f"\n[[images.cpu.cache-mounts]]\n{entry}\n")
    message = str(raised.value)
    assert "\n" not in message and key in message and words in message, message
    assert str(tmp_path / "project" / "ghbuild.toml") in message


def test_two_mounts_with_one_id_are_refused(tmp_path):
    extra = '\n[[images.cpu.cache-mounts]]\ntarget = "/a"\n\n[[images.cpu.cache-mounts]]\nid = "/a"\ntarget = "/b"\n'
    with pytest.raises(ConfigError, match=r"cache-mounts\[1\]\.id: '/a' is also the id of cache-mounts\[0\]"):
        _options(tmp_path, extra)


# --------------------------------------------------------------------------- the plan

PIP = f"mount-root_.cache_pip-{cachemounts.mount_slug('/root/.cache/pip').rsplit('-', 1)[1]}"


def test_a_trusted_push_reads_and_writes_the_canonical_entry(event, tmp_path):
    plan = planner.plan(event("push_master").context(), _options(tmp_path))
    pip, triton = plan.job("cpu", "amd64").cache_mounts
    assert pip.read == (f"ghcr.io/docker/ci-cache:master-cpu-x86_64-{PIP}",)
    assert pip.write == pip.read[0]
    assert triton.write and triton.write.startswith("ghcr.io/docker/ci-cache:master-cpu-x86_64-mount-triton-")
    arm = plan.job("cpu", "arm64").cache_mounts[0]
    assert arm.write == f"ghcr.io/docker/ci-cache:master-cpu-arm64-{PIP}"    # one entry per arch


def test_an_untrusted_branch_writes_only_its_own_repository_and_reads_it_first(event, tmp_path):
    plan = planner.plan(event("push_dev").context(), _options(tmp_path))
    assert not plan.trust.trusted
    pip = plan.job("cpu", "amd64").cache_mounts[0]
    own = f"ghcr.io/docker/ci-cache-untrusted:{plan.trust.scope}-cpu-x86_64-{PIP}"
    assert pip.read == (own, f"ghcr.io/docker/ci-cache:master-cpu-x86_64-{PIP}")
    assert pip.write == own
    assert "ci-cache:" not in pip.write


@pytest.mark.parametrize("name", ["pull_request", "pull_request_target"])
def test_a_fork_reads_the_canonical_entry_and_writes_nothing(event, tmp_path, name):
    plan = planner.plan(event(name).context(), _options(tmp_path))
    pip = plan.job("cpu", "amd64").cache_mounts[0]
    assert pip.write is None
    assert pip.read[-1] == f"ghcr.io/docker/ci-cache:master-cpu-x86_64-{PIP}"


def test_mounts_change_no_layer_cache_ref_and_no_build_input(event, tmp_path):
    ctx = event("push_dev").context()
    without = planner.plan(ctx, write_options(tmp_path / "without")).job("cpu", "amd64")
    with_mounts = planner.plan(ctx, _options(tmp_path)).job("cpu", "amd64")
    assert with_mounts._replace(cache_mounts=()) == without
    assert planner.Plan(ctx, planner.decide_trust(ctx, _options(tmp_path))[0], (with_mounts,)).to_dict()[
        "jobs"][0]["cache_mounts"][0]["write"] == with_mounts.cache_mounts[0].write


def test_without_a_cache_repository_there_is_nothing_to_read_or_write(event, tmp_path):
    options = _options(tmp_path)
    options = options._replace(registries=options.registries._replace(cache=None))
    pip = planner.plan(event("push_master").context(), options).job("cpu", "amd64").cache_mounts[0]
    assert (pip.read, pip.write) == ((), None)


def test_mount_tags_are_valid_and_distinct():
    ids = ["/root/.cache/pip", "root.cache.pip", "/root/.cache/pip/", "x" * 300]
    tags = {cachemounts.mount_key("preview-" + "b" * 200, "cpu", "x86_64", i) for i in ids}
    assert len(tags) == len(ids)
    for tag in tags:
        assert len(tag) <= 128 and "-cpu-x86_64-mount-" in tag


# --------------------------------------------------------------------------- the cap

def _file(name: str, size: int, mtime: float) -> mountfiles.FileEntry:
    """A file that takes `size` bytes in the tar (the ordering tests; the header's cost is tested below)."""
    return mountfiles.FileEntry(name, size, mtime, True, stored=size)


def test_under_the_cap_everything_is_kept():
    entries = [mountfiles.FileEntry("d/", 0, 1, False, stored=0), _file("d/a", 10, 1), _file("d/b", 10, 2)]
    selection = mountfiles.select_within(entries, cap=20)
    assert selection.keep == {"d/", "d/a", "d/b"} and selection.dropped_files == 0 and selection.bytes == 20


def test_over_the_cap_the_oldest_files_are_left_out_first():
    entries = [mountfiles.FileEntry("d/", 0, 0, False, stored=0), _file("d/new", 40, 300), _file("d/old", 40, 100),
               _file("d/mid", 40, 200), mountfiles.FileEntry("d/link", 0, 50, False, link="d/old", stored=0)]
    selection = mountfiles.select_within(entries, cap=85)
    assert selection.keep == {"d/", "d/new", "d/mid"}          # the hard link to the left-out file goes too
    assert (selection.files, selection.bytes, selection.dropped_files, selection.dropped_bytes) == (2, 80, 1, 40)


def test_a_big_new_file_pushes_out_all_older_ones_and_one_over_the_cap_goes_too():
    selection = mountfiles.select_within([_file("a", 5, 1), _file("b", 5, 2), _file("c", 90, 3)], cap=94)
    assert selection.keep == {"c"} and selection.dropped_files == 2
    assert mountfiles.select_within([_file("a", 5, 1), _file("c", 90, 3)], cap=80).keep == set()
    same_time = mountfiles.select_within([_file("b", 5, 1), _file("a", 5, 1)], cap=5)
    assert same_time.keep == {"b"}                                # ties: by name


def test_every_member_costs_its_header_against_the_cap():
    """Without a measured size a member takes its bytes and a 512-byte header: folders and links count too."""
    folders = [mountfiles.FileEntry(f"d{i}/", 0, 0, False) for i in range(3)]
    files = [mountfiles.FileEntry("old", 100, 1, True), mountfiles.FileEntry("new", 100, 2, True)]
    selection = mountfiles.select_within([*folders, *files], cap=5 * 512 + 150)
    assert selection.keep == {"d0/", "d1/", "d2/", "new"} and (selection.files, selection.bytes) == (1, 100)


@pytest.mark.parametrize(("name", "kind", "link", "ok"), [
    ("a/b", "file", None, True), ("a/", "dir", None, True), ("a/l", "symlink", "../b", True),
    ("a/l", "symlink", "../../b", False), ("l", "symlink", "/etc/passwd", False), ("../x", "file", None, False),
    ("/abs", "file", None, False), ("dev", "other", None, False), ("h", "hardlink", "a/b", True),
    ("h", "hardlink", "../b", False),
])
def test_only_members_that_stay_inside_the_mount_pass(name, kind, link, ok):
    assert mountfiles.safe_member(name, kind, link) is ok


# --------------------------------------------------------------------------- the steps and the artifact

def _ref(**kw) -> cachemounts.CacheMountRef:
    return cachemounts.CacheMountRef(id=kw.pop("id", "pip"), target="/root/.cache/pip", max_size=100,
                                     read=(), write=None, **kw)


def test_the_steps_mount_the_same_cache_as_the_dockerfile():
    assert mountfiles.mount_flag(_ref()) == "--mount=type=cache,id=pip,target=/root/.cache/pip,sharing=locked"
    assert mountfiles.mount_flag(_ref(uid=1000, gid=1000, mode="0755")).endswith(",uid=1000,gid=1000,mode=0755")
    restore = mountfiles.restore_dockerfile(_ref(), "busybox:1")
    assert restore.startswith("FROM busybox:1\nRUN --mount=type=cache,id=pip,") and "tar -xf" in restore
    save = mountfiles.save_dockerfile(_ref(), "busybox:1")
    assert "cp -a /root/.cache/pip/. " in save and "FROM scratch" in save


def test_an_entry_that_is_not_ghbuilds_is_refused():
    raw = mountfiles.manifest(b"{}", "sha256:" + "0" * 64, "sha256:" + "1" * 64, 10)
    import json

    data = json.loads(raw)
    assert mountfiles.entry_layer(data, max_blob=10) == ("sha256:" + "1" * 64, 10)
    with pytest.raises(ValueError, match="over the cap"):
        mountfiles.entry_layer(data, max_blob=9)
    data["config"]["mediaType"] = "application/vnd.oci.image.config.v1+json"
    with pytest.raises(ValueError, match="not a ghbuild cache-mount artifact"):
        mountfiles.entry_layer(data, max_blob=10)


def test_the_summary_and_the_terminal_show_bytes_and_seconds_per_mount():
    report = BuildReport("cpu", "amd64", "linux/amd64", "buildx", None, "docker buildx build")
    report.cache_mounts = [{"id": "/root/.cache/pip", "restored": {"status": "restored", "bytes": 12_300_000,
                                                                   "blob_bytes": 4_100_000, "seconds": 0.8},
                            "saved": {"status": "saved", "bytes": 13_000_000, "blob_bytes": 4_500_000,
                                      "seconds": 1.2, "dropped_files": 2, "dropped_bytes": 1_000_000}}]
    summary = render.build_summary(report)
    assert "#### Cache mounts" in summary and "restored 12.30 MB (4.10 MB compressed) in 0.8 s" in summary
    assert "2 oldest files left out" in summary
    text = render.build_text(report)
    assert "  mount    /root/.cache/pip: restored 12.30 MB" in text


def test_the_restore_steps_answer_is_read_from_its_output_not_its_command_line():
    log = ("#6 [2/2] RUN set -eu; if ...; then echo 'ghbuild-cache-mount: kept'; else ...; "
           "echo 'ghbuild-cache-mount: restored'; fi\n#6 0.128 ghbuild-cache-mount: restored\n#6 DONE 0.2s\n")
    assert mountfiles.step_said(log) == mountfiles.RESTORED
    assert mountfiles.step_said(log.replace("0.128 ghbuild-cache-mount: restored", "0.1 ghbuild-cache-mount: kept")) \
        == mountfiles.KEPT
    assert mountfiles.step_said(log.splitlines()[0]) is None
