"""Which cache mounts a build's steps used, read from BuildKit's plain progress output: a mount no step that ran
mounted is not saved again (ghbuild.build.buildjob._save_cache_mounts)."""

from __future__ import annotations

from ghbuild.build import buildjob, buildlog
from ghbuild.build.report import BuildReport
from ghbuild.plan.cachemounts import CacheMountRef

RAN = """\
#7 [os-base 2/3] RUN --mount=type=cache,target=/var/cache/apt,sharing=locked     \
--mount=type=cache,target=/var/lib/apt/lists,sharing=locked     apt-get update
#7 0.512 Get:1 http://deb.debian.org/debian bookworm InRelease
#7 DONE 4.1s

#8 [rust 2/2] RUN --mount=type=cache,id=cargo-registry,target=/root/.cargo/registry,sharing=locked cargo build
#8 CACHED

#9 [cpp 2/2] RUN --mount=type=bind,source=src,target=/src --mount=type=cache,dst=/root/.cache/sccache make
#9 ERROR: process "/bin/sh -c make" did not complete successfully: exit code: 2
"""


def test_steps_that_ran_count_and_cached_ones_do_not():
    assert buildlog.cache_mounts_used(RAN) == {"/var/cache/apt", "/var/lib/apt/lists", "/root/.cache/sccache"}


def test_a_fully_cached_build_used_no_mount():
    cached = "\n".join(line if not line.endswith(("DONE 4.1s",)) and "ERROR" not in line else
                       line.split(" ")[0] + " CACHED" for line in RAN.splitlines())
    assert buildlog.cache_mounts_used(cached) == set()


def test_bind_and_secret_mounts_are_not_cache_mounts():
    log = ("#3 [a 1/1] RUN --mount=type=bind,target=/var/lib/apt/lists --mount=type=secret,id=x true\n"
           "#3 DONE 0.1s\n")
    assert buildlog.cache_mounts_used(log) == set()


def _mount(target: str, write: str | None = "reg/cache:mount") -> CacheMountRef:
    return CacheMountRef(id=target, target=target, max_size=1 << 20, read=("reg/cache:mount",), write=write)


def test_only_used_mounts_are_saved(monkeypatch):
    saved: list[tuple[tuple[CacheMountRef, ...], list[dict]]] = []
    monkeypatch.setattr(buildjob.cachemounts, "save",
                        lambda run, mounts, results, warnings: saved.append((mounts, results)))
    mounts = (_mount("/var/lib/apt/lists"), _mount("/root/.cache/pip"), _mount("/root/.cache/x", write=None))
    report = BuildReport(image="cpu", arch="amd64", platform="linux/amd64", backend="buildx", target=None,
                         command="", builder="default", tags=[], cache_from=[], cache_to=[], skipped=[], warnings=[])
    report.cache_mounts = [{"id": m.id, "restored": {"status": "restored"}} for m in mounts]
    job = type("Job", (), {"cache_mounts": mounts})()
    buildjob._save_cache_mounts(report, object(), job, RAN)
    assert report.cache_mounts[1]["saved"]["status"] == "unchanged (no step that mounts it ran)"
    assert [m.id for m in saved[0][0]] == ["/var/lib/apt/lists", "/root/.cache/x"]
    assert saved[0][1] == [report.cache_mounts[0], report.cache_mounts[2]]


def test_a_step_cannot_fake_cached_for_itself_or_another_step():
    """What a step prints comes with its timestamp (`#7 0.5 ...`): a `#N CACHED` in its output matches nothing, so
    a build's own step cannot make a mount that it used look unused (and skip the save of a changed mount)."""
    log = RAN.replace("#7 0.512 Get:1", "#7 0.511 #7 CACHED\n#7 0.512 #8 DONE 0.1s\n#7 0.513 Get:1")
    assert buildlog.cache_mounts_used(log) == buildlog.cache_mounts_used(RAN)
