"""Publishing and retention never leave a mixed or broken state: lost replies, concurrent runs, a prune
racing a publish, indexes of indexes, manifests missing under a kept index.

Each test starts a throwaway distribution registry; staging images are pushed to `stage/<image>` with plain
HTTP calls (no engine), and `ghbuild.publish.promote.run` publishes to `hub/<image>` on the same registry, usually
through tests/fakes/faultproxy.py, which can let a request take effect and then lose its reply (reset, or a
502 instead of the registry's answer). Afterwards the registry itself is read directly, not through the proxy.
"""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fakes.faultproxy import FaultProxy
from fakes.oci import RegistryClient, push_dated

from ghbuild import retention
from ghbuild.config.options import ImageOptions, Options, PublishOptions
from ghbuild.errors import PublishError
from ghbuild.publish import promote, results, tag_moves
from ghbuild.publish.lease import LEASE_TAG
from ghbuild.registry.client import Registry
from ghbuild.registry.copy import CopyStats, copy_image

SUFFIX = {"amd64": "x86_64", "arm64": "arm64"}
MOVING = ("nightly", "nightly-x86_64", "nightly-arm64")
FAST_LEASE = {"max_write": 1.0, "settle": 1.2, "poll": 0.2, "wait": 60.0}
BASE = datetime(2025, 1, 1, tzinfo=UTC)


def sha(n: object) -> str:
    return hashlib.sha1(str(n).encode()).hexdigest()


@pytest.fixture
def registry_url(fresh_registry_url: str) -> str:
    return fresh_registry_url


@pytest.fixture
def proxy(registry_url):
    with FaultProxy(registry_url) as fp:
        yield fp
    assert not fp.errors, fp.errors


def host_of(url: str) -> str:
    return url.removeprefix("http://")


def options(staging_host: str, publish_host: str, images=("app",)) -> Options:
    made = {name: ImageOptions(name=name, dockerfile="Dockerfile", platforms=("linux/amd64", "linux/arm64"),
                               staging=f"{staging_host}/stage/{{image}}", publish=f"{publish_host}/hub/{{image}}")
            for name in images}
    return Options(config_path=Path("/nonexistent/ghbuild.toml"), images=made, publish=PublishOptions())


def factory():
    clients: dict[str, Registry] = {}

    def make(host: str) -> Registry:
        if host not in clients:
            clients[host] = Registry(host, attempts=3, delay=0.05, log=lambda m: None)
        return clients[host]

    return make


def stage(reg: RegistryClient, staging_host: str, commit: str, images=("app",)) -> dict[str, dict]:
    """Per-arch staging images of `commit` (tags <sha>-<suffix>) and their trusted build records."""
    records = {}
    for image in images:
        for arch, suffix in SUFFIX.items():
            desc = reg.push_image(f"stage/{image}", f"{commit}-{suffix}", architecture=arch,
                                  payload=f"{image} {commit} {arch}".encode())
            records[f"{image}-{arch}"] = {"image": image, "arch": arch, "digest": desc["digest"], "sha": commit,
                                          "ref": f"{staging_host}/stage/{image}@{desc['digest']}", "trusted": True}
    return records


def run_nightly(opts: Options, commit: str, records: dict, *, commit_time: int | None = None,
                images=("app",), **lease) -> results.PublishRun:
    return promote.run(opts, "nightly", list(images), sha=commit, owner="acme", env={}, records=records,
                       factory=factory(), commit_time=commit_time, lease_options={**FAST_LEASE, **lease})


def tags_of(reg: RegistryClient, repo: str) -> dict[str, str]:
    """Every tag of `repo` with its digest, read directly from the registry (the lease tag left out)."""
    out = {}
    for tag in reg.tags(repo) or []:
        if tag != LEASE_TAG:
            found = reg.head_manifest(repo, tag)
            out[tag] = found[0] if found else None
    return out


def published(run: results.PublishRun, image: str = "app") -> dict[str, str]:
    result = next(r for r in run.results if r.image == image)
    return {ref.rpartition(":")[2]: digest for ref, digest in result.tags.items()}


@pytest.fixture
def old_nightly(reg, registry_url):
    """Commit A published as the nightly, straight to the registry (no faults)."""
    host = host_of(registry_url)
    commit = sha("A")
    run = run_nightly(options(host, host), commit, stage(reg, host, commit), commit_time=1000)
    return published(run)


# --------------------------------------------------------------------------- lost replies


@pytest.mark.parametrize("tag,status", [("nightly", 502), ("nightly-x86_64", 0)],
                         ids=["index-tag-502", "arch-tag-reset"])
def test_a_tag_write_whose_reply_is_lost_is_restored_with_the_others(reg, registry_url, proxy, old_nightly,
                                                                    tag, status):
    host = host_of(registry_url)
    commit = sha("B")
    records = stage(reg, host, commit)
    proxy.lose_reply("PUT", rf"/hub/app/manifests/{tag}$", status=status, count=None)

    with pytest.raises(PublishError) as failed:
        run_nightly(options(host, proxy.host), commit, records, commit_time=2000)

    assert any(e.action == "lose_reply" for e in proxy.log), "the fault never fired"
    now = tags_of(reg, "hub/app")
    assert {t: now[t] for t in MOVING} == {t: old_nightly[t] for t in MOVING}, "moving tags left mixed"
    message = str(failed.value)
    assert f"{tag} (to {old_nightly[tag]})" in message, message
    # The new immutable tag stays (complete content, harmless); it is named as one a registry cannot delete.
    index = reg.head_manifest("hub/app", f"nightly-{commit}")
    assert index is not None and f"nightly-{commit}" not in message.split("could not restore")[0].split("restored")[0]


def test_tags_move_immutable_first_then_moving_per_arch_then_the_index_tag(reg, registry_url, proxy, old_nightly):
    host = host_of(registry_url)
    commit = sha("B")
    records = stage(reg, host, commit)
    run_nightly(options(host, proxy.host), commit, records, commit_time=2000)
    puts = [e.path.rpartition("/")[2] for e in proxy.log if e.method == "PUT" and "/hub/app/manifests/" in e.path
            and not e.path.rpartition("/")[2].startswith("sha256:") and LEASE_TAG not in e.path]
    # The commit's own tags first (its per-arch images, then its index: immutable), then the moving ones.
    assert puts == [f"nightly-{commit}-x86_64", f"nightly-{commit}-arm64", f"nightly-{commit}", "nightly-x86_64",
                    "nightly-arm64", "nightly"]


def test_release_with_the_reply_to_latest_lost_keeps_latest_on_the_previous_release(reg, registry_url, proxy):
    host = host_of(registry_url)
    first, second = sha("R1"), sha("R2")
    opts = options(host, host)
    promote.run(opts, "release", ["app"], sha=first, owner="acme", env={}, version="1.0.0", github_release=False,
                records=stage(reg, host, first), factory=factory(), lease_options=FAST_LEASE)
    before = tags_of(reg, "hub/app")
    proxy.lose_reply("PUT", r"/hub/app/manifests/latest$", status=502, count=None)

    with pytest.raises(PublishError, match=r"restored latest"):
        promote.run(options(host, proxy.host), "release", ["app"], sha=second, owner="acme", env={}, version="1.1.0",
                    github_release=False, records=stage(reg, host, second), factory=factory(),
                    lease_options=FAST_LEASE)

    now = tags_of(reg, "hub/app")
    assert now["latest"] == before["latest"] == before["v1.0.0"]
    # every v1.1.0 tag went in before latest was touched: complete, only `latest` was at stake
    assert {"v1.1.0", "v1.1.0-x86_64", "v1.1.0-arm64"} <= set(now)
    puts = [e.path.rpartition("/")[2] for e in proxy.log if e.method == "PUT" and "/manifests/" in e.path
            and not e.path.rpartition("/")[2].startswith("sha256:") and LEASE_TAG not in e.path]
    assert puts[:4] == ["v1.1.0-x86_64", "v1.1.0-arm64", "v1.1.0", "latest"]


def test_a_release_tag_is_never_moved_to_other_content(reg, registry_url):
    host = host_of(registry_url)
    opts = options(host, host)
    first = promote.run(opts, "release", ["app"], sha=sha("R1"), owner="acme", env={}, version="1.0.0",
                        github_release=False, records=stage(reg, host, sha("R1")), factory=factory(),
                        lease_options=FAST_LEASE)
    clashing = stage(reg, host, sha("R9"))
    with pytest.raises(PublishError, match=r"release tags exist already with other content.*v1\.0\.0"):
        promote.run(opts, "release", ["app"], sha=sha("R9"), owner="acme", env={}, version="1.0.0",
                    github_release=False, records=clashing, factory=factory(), lease_options=FAST_LEASE)
    assert tags_of(reg, "hub/app") == published(first)
    # Refused before the copies: not even the clashing release's per-arch images reached the hub.
    assert [reg.head_manifest("hub/app", r["digest"]) for r in clashing.values()] == [None] * len(clashing)


# --------------------------------------------------------------------------- compare before restore


def test_rollback_leaves_a_tag_that_another_writer_moved_since(reg, registry_url, proxy, old_nightly):
    """The failing run put nightly-x86_64 on B; another writer then moved it to C; the run fails on
    `nightly`: nightly-x86_64 must stay on C (only tags holding this run's digest go back)."""
    host = host_of(registry_url)
    other = reg.push_image("hub/app", None, architecture="amd64", payload=b"someone else's build")
    commit = sha("B")
    records = stage(reg, host, commit)
    proxy.respond("PUT", r"/hub/app/manifests/nightly$", 500, count=None)
    dst = Registry(proxy.host, attempts=2, delay=0.05, log=lambda m: None)
    index = reg.get_manifest("hub/app", old_nightly["nightly"])
    amd = reg.get_manifest("stage/app", records["app-amd64"]["digest"])
    arm = reg.get_manifest("stage/app", records["app-arm64"]["digest"])
    for manifest in (amd, arm):     # what the copy phase would have put there
        copy_image(Registry(host, log=lambda m: None), "stage/app", manifest.digest, dst, "hub/app", (),
                   CopyStats())
    moves = tag_moves.read_previous([
        tag_moves.TagMove("hub/app", "hub/app", dst, "nightly-x86_64", amd.digest, amd.body, amd.media_type,
                          tag_moves.MOVING_ARCH),
        tag_moves.TagMove("hub/app", "hub/app", dst, "nightly-arm64", arm.digest, arm.body, arm.media_type,
                          tag_moves.MOVING_ARCH),
        tag_moves.TagMove("hub/app", "hub/app", dst, "nightly", "sha256:" + "0" * 64, index.body, index.media_type,
                          tag_moves.MOVING_INDEX)])

    def another_writer(move):
        if move.tag == "nightly":
            reg.tag("hub/app", other["digest"], "nightly-x86_64")

    with pytest.raises(PublishError) as failed:
        tag_moves.apply(moves, check_lease=another_writer)

    now = tags_of(reg, "hub/app")
    assert now["nightly-x86_64"] == other["digest"], "the rollback overwrote another writer's tag"
    assert now["nightly-arm64"] == old_nightly["nightly-arm64"]
    assert now["nightly"] == old_nightly["nightly"]
    assert "nightly-arm64 (to" in str(failed.value) and "nightly-x86_64 (to" not in str(failed.value)


# --------------------------------------------------------------------------- concurrent publishes


@pytest.mark.parametrize("first", ["older", "newer"])
def test_two_concurrent_nightlies_leave_every_moving_tag_on_the_newer_commit(reg, registry_url, proxy, old_nightly,
                                                                           first):
    host = host_of(registry_url)
    older, newer = sha(f"C-{first}"), sha(f"D-{first}")
    records = {older: stage(reg, host, older), newer: stage(reg, host, newer)}
    times = {older: 3000, newer: 4000}
    # Slow tag writes widen every window in which two tag phases could interleave.
    proxy.delay("PUT", r"/hub/app/manifests/nightly", 0.3, count=None)
    outcomes: dict[str, object] = {}
    start = threading.Barrier(2)

    def one(commit: str, head_start: float) -> None:
        start.wait()
        threading.Event().wait(head_start)
        try:
            outcomes[commit] = run_nightly(options(host, proxy.host), commit, records[commit],
                                           commit_time=times[commit])
        except Exception as exc:
            outcomes[commit] = exc

    order = [older, newer] if first == "older" else [newer, older]
    threads = [threading.Thread(target=one, args=(commit, 0.05 * i)) for i, commit in enumerate(order)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(isinstance(o, results.PublishRun) for o in outcomes.values()), outcomes

    now = tags_of(reg, "hub/app")
    winner = published(outcomes[newer])
    assert {t: now[t] for t in MOVING} == {t: winner[t] for t in MOVING}
    assert now[f"nightly-{older}"] and now[f"nightly-{newer}"] == winner["nightly"]
    # the older commit's run moved every moving tag (it went first) or none (it came second, saw the newer)
    loser = outcomes[older].results[0]
    moved = {ref.rpartition(":")[2] for ref in loser.moved} & set(MOVING)
    left = {a.split()[1].rpartition(":")[2] for a in loser.actions if a.startswith("leave ")}
    assert (moved, left) in ((set(MOVING), set()), (set(), set(MOVING))), (moved, left)


def test_an_older_commit_published_after_a_newer_one_leaves_the_moving_tags(reg, registry_url, old_nightly):
    host = host_of(registry_url)
    newer, older = sha("N"), sha("O")
    run_nightly(options(host, host), newer, stage(reg, host, newer), commit_time=7000)
    before = tags_of(reg, "hub/app")
    warnings: list[str] = []

    late = promote.run(options(host, host), "nightly", ["app"], sha=older, owner="acme", env={},
                       records=stage(reg, host, older), factory=factory(), commit_time=6000,
                       lease_options=FAST_LEASE, warn=warnings.append)

    now = tags_of(reg, "hub/app")
    assert {t: now[t] for t in MOVING} == {t: before[t] for t in MOVING}
    assert now[f"nightly-{older}"] == published(late)["nightly"]      # its own immutable tag is there
    assert late.results[0].moved == [f"{host}/hub/app:nightly-{older}-x86_64", f"{host}/hub/app:nightly-{older}-arm64",
                                     f"{host}/hub/app:nightly-{older}"]      # only its own immutable tags
    assert any(newer in w and "newer commit" in w for w in warnings), warnings


def test_a_commit_dated_far_in_the_future_does_not_freeze_the_moving_tags(reg, registry_url, old_nightly):
    """A wrong commit date (`git commit --date`, a skewed clock) recorded in the lease is not a newer commit:
    the next nightly moves the tags and says why it ignored the record."""
    import time

    host = host_of(registry_url)
    future, today = sha("F"), sha("T")
    run_nightly(options(host, host), future, stage(reg, host, future), commit_time=int(time.time()) + 400 * 86400)
    warnings: list[str] = []

    run = promote.run(options(host, host), "nightly", ["app"], sha=today, owner="acme", env={},
                      records=stage(reg, host, today), factory=factory(), commit_time=int(time.time()),
                      lease_options=FAST_LEASE, warn=warnings.append)

    now = tags_of(reg, "hub/app")
    assert now["nightly"] == published(run)["nightly"] and now["nightly"] == now[f"nightly-{today}"]
    assert any(future in w and "in the future: ignored" in w for w in warnings), warnings


def test_a_held_lease_makes_the_other_publish_wait_then_fail_without_moving_anything(reg, registry_url,
                                                                                      old_nightly):
    from ghbuild.publish.lease import Lease

    host = host_of(registry_url)
    holder = Lease(Registry(host, log=lambda m: None), "hub/app", "hub/app", "a stuck run", **FAST_LEASE)
    holder.acquire()
    commit = sha("E")
    with pytest.raises(PublishError, match=r"another publish \(a stuck run\) holds the lease"):
        run_nightly(options(host, host), commit, stage(reg, host, commit), commit_time=5000, wait=1.0)
    assert tags_of(reg, "hub/app") == old_nightly
    holder.release()
    run_nightly(options(host, host), commit, stage(reg, host, commit), commit_time=5000)
    assert tags_of(reg, "hub/app")["nightly"] != old_nightly["nightly"]


# --------------------------------------------------------------------------- several images


def test_a_multi_image_nightly_publishes_nothing_when_one_image_is_incomplete(reg, registry_url):
    host = host_of(registry_url)
    commit = sha("M")
    records = stage(reg, host, commit, images=("app", "app2"))
    reg.delete_manifest("stage/app2", records["app2-arm64"]["digest"])

    with pytest.raises(PublishError, match=r"staging image\(s\) missing: .*stage/app2@"):
        run_nightly(options(host, host, images=("app", "app2")), commit, records, images=("app", "app2"))

    assert not reg.tags("hub/app") and not reg.tags("hub/app2")
    assert reg.head_manifest("hub/app", records["app-amd64"]["digest"]) is None, "app was copied before app2 failed"


# --------------------------------------------------------------------------- retention


def nightlies(reg: RegistryClient, repo: str, count: int) -> list[tuple[dict, dict, dict]]:
    out = []
    for i in range(count):
        when = BASE + timedelta(days=i)
        amd = push_dated(reg, repo, "amd64", when, f"{i} amd".encode())
        arm = push_dated(reg, repo, "arm64", when, f"{i} arm".encode())
        out.append((amd, arm, reg.push_index(repo, [amd, arm], f"nightly-{sha(i)}")))
    amd, arm, index = out[-1]
    reg.tag(repo, index["digest"], "nightly")
    reg.tag(repo, amd["digest"], "nightly-x86_64")
    reg.tag(repo, arm["digest"], "nightly-arm64")
    return out


def prune(registry_url: str, keep: int, sleep=lambda s: None, apply: bool = True) -> dict:
    host = host_of(registry_url)
    return retention.run(options(host, host), "app", keep=keep, apply=apply, env={}, sleep=sleep,
                         log=lambda m: None, registry_factory=factory()).to_dict()


def test_prune_stops_when_a_release_tags_what_it_planned_to_delete(reg, registry_url):
    commits = nightlies(reg, "hub/app", 4)
    doomed_later = commits[1][2]["digest"]       # commit 1's index: deleted after commit 0's manifests

    def release_meanwhile(seconds: float) -> None:   # the pause between two deletes
        if "v1.0.0" not in (reg.tags("hub/app") or []):
            reg.tag("hub/app", doomed_later, "v1.0.0")

    result = prune(registry_url, keep=2, sleep=release_meanwhile)

    assert not result["ok"]
    assert any("changed since the plan" in e["error"] and "+v1.0.0" in e["error"] for e in result["errors"])
    assert reg.head_manifest("hub/app", "v1.0.0") is not None
    for child in (commits[1][0], commits[1][1]):
        assert reg.head_manifest("hub/app", child["digest"]) is not None
    assert doomed_later not in {e["digest"] for e in result["deleted"]}

    again = prune(registry_url, keep=2)      # a rerun plans again: the release keeps commit 1
    assert again["ok"] and reg.head_manifest("hub/app", "v1.0.0") is not None


def test_prune_protects_what_a_kept_index_of_indexes_refers_to_at_any_depth(reg, registry_url):
    commits = nightlies(reg, "hub/app", 3)
    old_amd = commits[0][0]
    inner = reg.push_index("hub/app", [old_amd])                          # an index of commit 0's amd64 image
    outer = reg.push_index("hub/app", [{**inner, "platform": {"architecture": "amd64", "os": "linux"}}], "bundle")

    result = prune(registry_url, keep=1)

    assert result["ok"], result["errors"]
    for digest in (outer["digest"], inner["digest"], old_amd["digest"]):
        assert reg.head_manifest("hub/app", digest) is not None, f"{digest} deleted under the kept tag `bundle`"
    assert reg.head_manifest("hub/app", commits[0][2]["digest"]) is None     # commit 0's own index went
    assert reg.head_manifest("hub/app", commits[0][1]["digest"]) is None     # with its unprotected child


def test_a_kept_index_missing_a_child_is_reported_and_the_prune_goes_on(reg, registry_url):
    commits = nightlies(reg, "hub/app", 3)
    lost = push_dated(reg, "hub/app", "arm64", BASE, b"lost")
    broken = reg.push_index("hub/app", [commits[2][0], lost], "broken")
    reg.delete_manifest("hub/app", lost["digest"])

    result = prune(registry_url, keep=1)

    assert result["ok"], result["errors"]
    assert result["dangling"] == [{"digest": lost["digest"], "referenced_by": broken["digest"]}]
    assert reg.head_manifest("hub/app", commits[0][2]["digest"]) is None
    assert reg.head_manifest("hub/app", "broken") is not None


def test_a_publish_terminated_in_its_tag_phase_puts_its_tags_back_and_frees_the_lease(reg, registry_url, proxy,
                                                                                     old_nightly, tmp_path):
    """SIGTERM (what a cancelled job gets) while `nightly` is being written: the per-arch tags go back,
    the lease is given up, and the next publish neither waits nor finds a mixed state."""
    import os
    import signal
    import subprocess
    import sys
    import time

    host = host_of(registry_url)
    commit = sha("T")
    records = stage(reg, host, commit)
    # The check of `nightly` right before its write (its third lookup, after the two reads of the phase's start)
    # takes 3 s: the window to terminate it in. A read: arriving after the client died, it changes nothing.
    proxy.delay("HEAD", r"/hub/app/manifests/nightly$", 3.0, nth=3)
    script = tmp_path / "publish.py"
    script.write_text(f"""
import json, sys
sys.path[:0] = {[str(Path(__file__).parent), str(Path(__file__).parents[2])]!r}
from ghbuild.cli import interrupt_on_sigterm
from test_publish_consistency import options, run_nightly
interrupt_on_sigterm()
print("publishing", flush=True)
try:
    run_nightly(options({host!r}, {proxy.host!r}), {commit!r}, json.loads(sys.argv[1]), commit_time=9000)
except KeyboardInterrupt:
    sys.exit(130)
""")
    proc = subprocess.Popen([sys.executable, str(script), json.dumps(records)], cwd=Path(__file__).parents[3],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 60
    new_arm = records["app-arm64"]["digest"]
    while (reg.head_manifest("hub/app", "nightly-arm64") or (None,))[0] != new_arm:   # the last per-arch tag moved
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            output = proc.communicate(timeout=10)[0]
            pytest.fail(f"the publish never moved nightly-arm64 (exit {proc.poll()}): {output}")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGTERM)       # while it checks the lease before `nightly`
    out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 130, out

    now = tags_of(reg, "hub/app")
    assert {t: now[t] for t in MOVING} == {t: old_nightly[t] for t in MOVING}
    lease = json.loads(reg.get_manifest("hub/app", LEASE_TAG).body)["annotations"]
    assert lease["dev.ghbuild.lease.token"] == ""
    again = run_nightly(options(host, host), commit, records, commit_time=9000, wait=1.0)
    assert tags_of(reg, "hub/app")["nightly"] == published(again)["nightly"]


def test_a_multi_image_nightly_moves_each_rank_for_every_image_before_the_next(reg, registry_url, proxy):
    host = host_of(registry_url)
    commit = sha("MM")
    records = stage(reg, host, commit, images=("app", "app2"))
    run_nightly(options(host, proxy.host, images=("app", "app2")), commit, records, images=("app", "app2"))
    puts = [e.path.split("/")[-3] + ":" + e.path.rpartition("/")[2] for e in proxy.log
            if e.method == "PUT" and "/manifests/" in e.path and "sha256:" not in e.path and LEASE_TAG not in e.path]
    own = [f"app:nightly-{commit}-x86_64", f"app:nightly-{commit}-arm64", f"app2:nightly-{commit}-x86_64",
           f"app2:nightly-{commit}-arm64", f"app:nightly-{commit}", f"app2:nightly-{commit}"]
    assert puts == [*own, "app:nightly-x86_64", "app:nightly-arm64", "app2:nightly-x86_64", "app2:nightly-arm64",
                    "app:nightly", "app2:nightly"]
