"""`ghbuild publish nightly` with faults injected between ghbuild and the hub registry.

The per-arch images are staged with the build path as in test_70 (`--target sccache`, small), for two commits:
"old" (published first where a test needs an earlier nightly) and "new". ghbuild publishes to the local hub
through tests/fakes/faultproxy.py (GHBUILD_REGISTRIES_PUBLISH = `127.0.0.1:<proxy port>/...`), which answers
503 / 429 with Retry-After / 500, or resets the connection in the middle of a blob upload; one test reads the
staging images through a second proxy (503 on a lookup and a config read, resets mid-config and mid-layer).
The hub is then checked directly (not through the proxy) through its HTTP API.

What the code promises (ghbuild/publish/promote.py, README "Errors and exit codes"), and what is asserted:
- transient faults (429, 5xx, a reset connection) are retried (4 attempts, 2 s apart, Retry-After wins) and
  the publish completes;
- a failure while copying (before any tag moves) is a registry error, exit 12, one line, and no tag moved;
- a failure while moving tags is a publish error, exit 13: the tags already moved are put back, and a tag
  that did not exist before is named in the error as one that could not be restored (a registry cannot
  delete a single tag; only the new immutable `nightly-<sha>` can be one, as it moves first);
- a rerun without faults publishes everything.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
from fakes.faultproxy import FaultProxy
from fakes.oci import RegistryClient

from ghbuild.publish.lease import LEASE_TAG, LeaseState

from .enginelib import CONTEXT_FLAGS, REPO, ghbuild_argv
from .test_70_publish_nightly import INDEX_TYPES, _push_stage, records_json

ARCH_TAGS = {"amd64": "nightly-x86_64", "arm64": "nightly-arm64"}
ATTEMPTS, DELAY = 4, 2.0          # ghbuild.registry.client.Registry defaults, used by `publish nightly`
RECORDED: dict[str, dict[str, str]] = {}   # sha -> {arch: digest}: what each commit's trusted build recorded


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def hub(session):
    reg = RegistryClient(session.local["GHBUILD_LOCAL_HUB"])
    reg.created = set()           # repositories this module published to
    reg.digests = set()           # manifests it may have pushed there (also the untagged ones)
    yield reg
    for name in sorted(reg.created):
        tags = reg.tags(name) or []
        digests = set(reg.digests)
        for tag in tags:
            digests.add(_digest(reg, name, tag))
        for digest in sorted(d for d in digests if d):
            reg.request("DELETE", f"/v2/{name}/manifests/{digest}")


@pytest.fixture(scope="module")
def staged(session, hub):
    """{"old": (sha, {arch: digest}), "new": (...)}: per-arch staging images of two commits."""
    out = {}
    for label in ("old", "new"):
        sha = session.sha(f"faults-{label}")
        out[label] = (sha, {arch: _push_stage(session, f"faults-{label}", arch, sha) for arch in ARCH_TAGS})
        hub.digests.update(out[label][1].values())
        RECORDED[sha] = out[label][1]
    assert not set(out["old"][1].values()) & set(out["new"][1].values()), "two commits, one image digest"
    return out


@pytest.fixture
def proxy(session):
    with FaultProxy("http://" + session.local["GHBUILD_LOCAL_HUB"]) as fault_proxy:
        yield fault_proxy
    assert not fault_proxy.errors, "\n".join(fault_proxy.errors)


# --------------------------------------------------------------------------- helpers


def _digest(reg: RegistryClient, name: str, ref: str) -> str | None:
    status, headers, _ = reg.manifest(name, ref, method="HEAD")
    return headers.get("docker-content-digest") if status == 200 else None


def _repo(session, hub, suffix: str) -> str:
    name = f"ghbuild-test-{session.sid}-faults-{suffix}/cpu"
    hub.created.add(name)
    return name


def _template(host: str, name: str) -> str:
    return f"{host}/{name.rsplit('/', 1)[0]}/{{image}}"


class Published:
    def __init__(self, proc: subprocess.CompletedProcess, seconds: float):
        self.rc, self.stdout, self.stderr, self.seconds = proc.returncode, proc.stdout, proc.stderr, seconds

    @property
    def result(self) -> dict:
        assert self.rc == 0, self.stderr[-3000:]
        (result,) = json.loads(self.stdout)["images"]
        return result

    @property
    def last_line(self) -> str:
        return self.stderr.strip().splitlines()[-1]


def publish(session, hub, host: str, name: str, sha: str, staging_host: str | None = None) -> Published:
    env = dict(session.base_env)
    env["GHBUILD_REGISTRIES_PUBLISH"] = _template(host, name)
    staging = session.staging_repo
    if staging_host:                       # read the staging images through a proxy too
        staging = env["GHBUILD_REGISTRIES_STAGING"] = staging.replace(session.registry.host, staging_host, 1)
    records = records_json(session, sha, RECORDED[sha], staging=staging)
    start = time.monotonic()
    proc = subprocess.run([*ghbuild_argv(), "publish", "nightly", "--image", "cpu", *CONTEXT_FLAGS, "--sha", sha,
                           "--records", records, "--json"],
                          cwd=REPO, env=env, capture_output=True, text=True, errors="replace", timeout=600)
    run = Published(proc, time.monotonic() - start)
    if run.rc == 0:
        hub.digests.add(run.result["index_digest"])
    return run


def tag_digests(hub, name: str, *shas: str) -> dict[str, str | None]:
    own = [f"nightly-{sha}{suffix}" for sha in shas
           for suffix in ("", *(tag.removeprefix("nightly") for tag in ARCH_TAGS.values()))]
    tags = ["nightly", *ARCH_TAGS.values(), *own]      # a commit's own tags: its index and per-arch images
    return {tag: _digest(hub, name, tag) for tag in tags}


def assert_published(hub, name: str, sha: str, digests: dict[str, str]) -> str:
    """The hub holds a complete, correct nightly of `sha`: the index (exactly amd64 + arm64, the staging
    digests), the per-arch tags, nightly-<sha>, and every blob (content checked). Returns the index digest."""
    status, headers, body = hub.manifest(name, "nightly")
    assert status == 200 and headers["content-type"].split(";")[0] in INDEX_TYPES
    index_digest = headers["docker-content-digest"]
    assert "sha256:" + hashlib.sha256(body).hexdigest() == index_digest
    by_arch = {e["platform"]["architecture"]: e["digest"] for e in json.loads(body)["manifests"]}
    assert by_arch == digests
    assert {tag: _digest(hub, name, tag) for tag in ARCH_TAGS.values()} == \
        {ARCH_TAGS[arch]: digest for arch, digest in digests.items()}
    assert _digest(hub, name, f"nightly-{sha}") == index_digest
    for digest in digests.values():
        status, _, raw = hub.manifest(name, digest)
        assert status == 200 and "sha256:" + hashlib.sha256(raw).hexdigest() == digest
        manifest = json.loads(raw)
        for blob in [manifest["config"], *manifest["layers"]]:
            assert _blob_sha256(hub, name, blob["digest"]) == blob["digest"]
    return index_digest


def _blob_sha256(hub, name: str, digest: str) -> str:
    """Stream the blob from the hub and hash it (never all in memory)."""
    h = hashlib.sha256()
    with urllib.request.urlopen(f"{hub.url}/v2/{name}/blobs/{digest}", timeout=120) as resp:
        while chunk := resp.read(1 << 20):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def assert_one_line_error(run: Published, code: int, kind: str) -> str:
    assert run.rc == code, f"exit {run.rc}, wanted {code}:\n{run.stderr[-3000:]}"
    assert "Traceback" not in run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("ghbuild: ")]
    assert errors == [run.last_line], errors
    assert run.last_line.startswith(f"ghbuild: {kind}: ")
    assert run.stdout.strip() == ""       # no JSON result for a failed publish
    return run.last_line


# --------------------------------------------------------------------------- transient faults


def test_transient_503_and_429_are_retried_and_publish_completes(session, hub, staged, proxy):
    """503s on manifest HEAD and PUT (by digest and the `nightly` tag), a 429 with Retry-After on the first
    blob PATCH: every one is retried, the hub ends complete and correct, and the 429's Retry-After (4 s,
    longer than the 2 s default delay) is what the client waited."""
    sha, digests = staged["new"]
    name = _repo(session, hub, "transient")
    rules = [
        proxy.respond("HEAD", r"/manifests/", 503, count=2),              # the first manifest HEAD, twice
        proxy.respond("PUT", r"/manifests/sha256:", 503),                 # the first manifest push by digest
        proxy.respond("PUT", r"/manifests/nightly$", 503),                # the `nightly` tag, once
        proxy.respond("PATCH", r"/blobs/uploads/", 429, {"Retry-After": "4"}),
    ]
    run = publish(session, hub, proxy.host, name, sha)
    assert run.rc == 0, run.stderr[-3000:]
    assert [r.fired for r in rules] == [2, 1, 1, 1]
    assert_published(hub, name, sha, digests)
    assert run.result["index_digest"] == _digest(hub, name, "nightly")

    # every injected fault was followed by a retry of the same request
    # (the architectures copy side by side, so requests of the other arch may come in between)
    heads = proxy.requests("HEAD", r"/manifests/")
    failed = [e for e in heads if e.status == 503]
    assert len(failed) == 2
    for bad in failed:    # each 503 was retried on the same path, after the retry delay, and then answered
        later = [e for e in heads if e.path == bad.path and e.start > bad.end]
        assert later and later[-1].status in (200, 404) and later[0].start - bad.end >= DELAY - 0.1
    tag_puts = [e.status for e in proxy.requests("PUT", r"/manifests/nightly$")]
    assert tag_puts == [503, 201]

    # Retry-After honoured: the PATCH is retried no sooner than 4 s after the 429 was answered
    patches = proxy.requests("PATCH")
    (limited,) = [e for e in patches if e.status == 429]
    # The other arch copies side by side: a PATCH of another blob of the same length may come in between, so
    # the retry is the one of that length answered 202 after the wait, not merely the next one.
    retries = [e for e in patches if e.start > limited.end and e.content_length == limited.content_length
               and e.status == 202]
    waited = max((e.start - limited.end for e in retries), default=0.0)
    assert waited >= 4 - 0.05, f"no PATCH of that length came 4 s after the 429 (latest {waited:.2f} s)"
    assert "retry 1/3 in 4s: copy blob" in run.stderr
    print(f"429 Retry-After 4: PATCH retried {waited:.2f} s later; publish took {run.seconds:.1f} s")
    assert all(e.status in (200, 201, 202, 204, 404) for e in proxy.log if not e.rule)


def test_connection_reset_mid_blob_is_retried(session, hub, staged, proxy):
    """The connection is reset (TCP RST) halfway through the PATCH of the largest layer, once: the upload
    session is cancelled, the blob sent again from its start, and the publish completes."""
    sha, digests = staged["new"]
    name = _repo(session, hub, "reset")
    layers = {}
    for digest in digests.values():
        manifest = json.loads(session.registry.manifest(f"ghbuild-test-{session.sid}/cpu", digest)[2])
        layers.update({layer["digest"]: layer["size"] for layer in manifest["layers"]})
    largest, size = max(layers.items(), key=lambda item: item[1])
    assert list(layers.values()).count(size) == 1 and size > 1 << 20, layers
    rule = proxy.reset("PATCH", r"/blobs/uploads/", after=size // 2, content_length=size)

    run = publish(session, hub, proxy.host, name, sha)
    assert run.rc == 0, run.stderr[-3000:]
    assert rule.fired == 1
    patches = [e for e in proxy.requests("PATCH") if e.content_length == size]
    assert [(e.action, e.status) for e in patches] == [("reset", None), ("forward", 202)]
    assert patches[0].request_bytes == size // 2 and patches[1].request_bytes == size
    # The broken session itself was cancelled before the blob was sent again. Matched by its upload path, not
    # by time after the reset: the client's DELETE can reach the proxy before the thread that reset the PATCH
    # has logged its end (it did on a loaded CI machine).
    broken = urllib.parse.urlsplit(patches[0].path).path
    cancel = [e for e in proxy.requests("DELETE", r"/blobs/uploads/")
              if urllib.parse.urlsplit(e.path).path == broken]
    assert len(cancel) == 1 and patches[0].start < cancel[0].start < patches[1].start, (broken, cancel)
    assert "retry 1/3 in 2s: copy blob" in run.stderr
    assert_published(hub, name, sha, digests)
    assert _blob_sha256(hub, name, largest) == largest
    print(f"reset after {size // 2:,} of {size:,} B; publish took {run.seconds:.1f} s")


def test_faults_reading_staging_are_retried(session, hub, staged):
    """The same from the other side: staging answers 503 to the lookup of a recorded digest and to an image
    config read, resets the connection in the middle of another config and in the middle of the largest
    layer's download. Each is retried (a config read included) and the publish completes."""
    sha, digests = staged["new"]
    name = _repo(session, hub, "staging")
    staging_name = f"ghbuild-test-{session.sid}/cpu"
    layers = {}
    for digest in digests.values():
        manifest = json.loads(session.registry.manifest(staging_name, digest)[2])
        layers.update({layer["digest"]: layer["size"] for layer in manifest["layers"]})
    largest, size = max(layers.items(), key=lambda item: item[1])
    with FaultProxy("http://" + session.registry.host) as staging:
        rules = [
            staging.respond("GET", rf"/manifests/{digests['amd64']}$", 503),     # publish reads a record's image
            staging.respond("GET", r"/blobs/sha256:", 503),                       # the amd64 config, verify
            staging.reset("GET", r"/blobs/sha256:", after=200, on="response", nth=3),   # the arm64 config
            staging.reset("GET", rf"/blobs/{largest}$", after=size // 2, on="response"),
        ]
        run = publish(session, hub, hub.host, name, sha, staging_host=staging.host)
        log = staging.log
    assert not staging.errors, staging.errors
    assert run.rc == 0, run.stderr[-3000:]
    assert [r.fired for r in rules] == [1, 1, 1, 1]
    config_gets = [(e.action, e.status) for e in log if e.method == "GET" and "/blobs/" in e.path][:4]
    assert config_gets == [("respond", 503), ("forward", 200), ("reset", None), ("forward", 200)]
    layer_gets = [(e.action, e.status, e.response_bytes) for e in log if e.path.endswith(f"/blobs/{largest}")]
    assert layer_gets == [("reset", None, size // 2), ("forward", 200, size)]
    assert "retry 1/3 in 2s: read blob" in run.stderr and "retry 1/3 in 2s: copy blob" in run.stderr
    assert_published(hub, name, sha, digests)
    print(f"staging faults: publish took {run.seconds:.1f} s")


# --------------------------------------------------------------------------- persistent faults


def test_persistent_blob_upload_failure_moves_no_tag_and_rerun_succeeds(session, hub, staged, proxy):
    """Every blob PATCH answers 500: ghbuild gives up after its attempts with one line, exit 12 (a registry
    failed: README "Errors and exit codes"), before any tag moved; an earlier nightly is untouched. A rerun
    without faults publishes everything."""
    old_sha, old = staged["old"]
    sha, new = staged["new"]
    name = _repo(session, hub, "persist")
    assert publish(session, hub, hub.host, name, old_sha).rc == 0
    before = tag_digests(hub, name, old_sha, sha)
    assert before[f"nightly-{sha}"] is None and before["nightly-x86_64"] == old["amd64"]

    proxy.respond("PATCH", r"/blobs/uploads/", 500, count=None)
    run = publish(session, hub, proxy.host, name, sha)
    line = assert_one_line_error(run, 12, "registry error")
    assert line.startswith("ghbuild: registry error: copy blob sha256:")
    assert f"failed after {ATTEMPTS} attempts: PATCH blob" in line and "HTTP 500 UNAVAILABLE" in line
    patches = proxy.requests("PATCH")
    # every blob copy that started (the arches and their blobs copy side by side) tried ATTEMPTS times
    assert len(patches) >= ATTEMPTS and len(patches) % ATTEMPTS == 0 and {e.status for e in patches} == {500}
    assert len(proxy.requests("DELETE", r"/blobs/uploads/")) == len(patches)  # no upload session leaked
    # No manifest, no tag written. The publish lease (taken beside a copy this small) is the only manifest PUT:
    # taken, then given back when the copy failed.
    assert [e.path for e in proxy.requests("PUT", r"/manifests/") if not e.path.endswith("/" + LEASE_TAG)] == []
    status, _, body = hub.manifest(name, LEASE_TAG)
    assert status == 200 and LeaseState.parse(body).token == "", "the lease was not given back"
    assert tag_digests(hub, name, old_sha, sha) == before
    assert all(_digest(hub, name, digest) is None for digest in new.values())

    proxy.clear()
    again = publish(session, hub, proxy.host, name, sha)
    assert again.rc == 0, again.stderr[-3000:]
    index = assert_published(hub, name, sha, new)
    assert _digest(hub, name, f"nightly-{old_sha}") == before["nightly"] != index
    print(f"failed publish {run.seconds:.1f} s, rerun {again.seconds:.1f} s")


@pytest.fixture(scope="module")
def failed_tag_move(session, hub, staged):
    """An old nightly in the hub; the new commit's publish with every PUT of the `nightly` tag failing.
    Returns (repository, tags before, the failed run, tags right after it, the proxy's log)."""
    old_sha, _ = staged["old"]
    sha, _ = staged["new"]
    name = _repo(session, hub, "tags")
    assert publish(session, hub, hub.host, name, old_sha).rc == 0
    before = tag_digests(hub, name, old_sha, sha)
    with FaultProxy("http://" + session.local["GHBUILD_LOCAL_HUB"]) as proxy:
        rule = proxy.respond("PUT", r"/manifests/nightly$", 500, count=None)
        run = publish(session, hub, proxy.host, name, sha)
        after = tag_digests(hub, name, old_sha, sha)
        log = proxy.log
    assert not proxy.errors, proxy.errors
    assert rule.fired == ATTEMPTS
    return name, before, run, after, log


def test_failed_tag_move_rolls_back_and_rerun_succeeds(session, hub, staged, failed_tag_move):
    """The new `nightly-<sha>` first, then the per-arch tags, then `nightly` fails for good: exit 13, one
    line; the per-arch tags point at the OLD digests again and `nightly` never moved. The new immutable
    `nightly-<sha>` stays (complete, and a registry cannot delete a single tag): the error names it. A rerun
    without faults then publishes everything."""
    old_sha, old = staged["old"]
    sha, new = staged["new"]
    name, before, run, after, log = failed_tag_move

    line = assert_one_line_error(run, 13, "publish error")
    assert line.startswith("ghbuild: publish error: moving tags failed (put manifest ")
    assert f":nightly: failed after {ATTEMPTS} attempts: PUT manifest " in line and "HTTP 500" in line
    assert (f"; restored nightly-arm64 (to {old['arm64']}), nightly-x86_64 (to {old['amd64']}); "
            f"could not restore ") in line, line
    own = [f"nightly-{sha}", f"nightly-{sha}-arm64", f"nightly-{sha}-x86_64"]   # the commit's immutable tags
    for tag in own:
        assert f":{tag} (new, holds {after[tag]}: a registry cannot delete a single tag)" in line, line
    assert line.endswith(f":{own[-1]} (new, holds {after[own[-1]]}: a registry cannot delete a single tag)"), line

    # the order on the wire: the new immutable tags, per-arch tags, nightly (x4), then the restores in reverse
    tag_puts = [(e.path.rsplit("/", 1)[1], e.status) for e in log
                if e.method == "PUT" and "/manifests/" in e.path and "sha256:" not in e.path
                and "ghbuild-publish-lease" not in e.path]
    assert tag_puts == [(f"nightly-{sha}-x86_64", 201), (f"nightly-{sha}-arm64", 201), (f"nightly-{sha}", 201),
                        ("nightly-x86_64", 201), ("nightly-arm64", 201),
                        *[("nightly", 500)] * ATTEMPTS, ("nightly-arm64", 201), ("nightly-x86_64", 201)]

    # the moving tags point where they did; only the new commit's own tags exist in addition
    assert after == {**before, **{tag: after[tag] for tag in own}} and all(after[tag] for tag in own)
    assert after["nightly-x86_64"] == old["amd64"] and after["nightly-arm64"] == old["arm64"]
    assert after["nightly"] == after[f"nightly-{old_sha}"] != after[f"nightly-{sha}"]

    again = publish(session, hub, hub.host, name, sha)
    assert again.rc == 0, again.stderr[-3000:]
    new_index = assert_published(hub, name, sha, new)
    assert new_index != before["nightly"]
    assert sorted(again.result["moved"]) == sorted(f"{_template(hub.host, name).format(image='cpu')}:{tag}"
                                                   for tag in ("nightly", *ARCH_TAGS.values()))
    assert _digest(hub, name, f"nightly-{old_sha}") == before["nightly"]
    print(f"failed publish {run.seconds:.1f} s, rerun {again.seconds:.1f} s")
