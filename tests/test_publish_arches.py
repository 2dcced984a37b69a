"""The per-architecture staging reads of a publish run side by side (publish._per_arch)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from ghbuild.errors import PublishError
from ghbuild.publish import copy, plans
from ghbuild.registry import client as registry

SOURCES = (plans.ArchSource("amd64", "x86_64", "t-x86_64"), plans.ArchSource("arm64", "arm64", "t-arm64"))


class Client:
    def __init__(self, name: str):
        self.name = name

    def clone(self) -> Client:
        return Client(self.name + "+clone")


def test_each_arch_is_read_on_its_own_client_at_the_same_time():
    started = threading.Barrier(2, timeout=5)     # both reads must be in flight together to pass it

    def read(source, client):
        started.wait()
        return source.arch, client.name, threading.current_thread().name

    out = copy._per_arch(read, SOURCES, Client("main"))
    assert out["amd64"] == ("amd64", "main", threading.main_thread().name)
    assert out["arm64"][:2] == ("arm64", "main+clone") and out["arm64"][2] != threading.main_thread().name


def test_a_failure_is_handed_back_per_arch_in_source_order():
    def read(source, client):
        if source.arch == "arm64":
            raise ValueError("arm64 broken")
        return "ok"

    out = copy._per_arch(read, SOURCES, Client("main"))
    assert out["amd64"] == "ok" and isinstance(out["arm64"], ValueError) and list(out) == ["amd64", "arm64"]


def test_an_interrupt_is_raised_at_once_not_after_the_other_reads_and_never_as_a_missing_image():
    """Ctrl-C (SIGTERM becomes KeyboardInterrupt in the CLI) in the main thread's read must end the run at
    once with exit 130, not wait for the other arch's retries or turn into `staging image(s) missing`."""
    def read(source, client):
        if source.arch == "amd64":
            raise KeyboardInterrupt
        time.sleep(3)
        return None                  # "missing": would have won over the interrupt

    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        copy._per_arch(read, SOURCES, Client("main"))
    assert time.monotonic() - start < 2


# --------------------------------------------------------------------------- the checks in every thread

SHA = "c" * 40
SOURCE_URL = "https://github.com/acme/project"
MT = "application/vnd.oci.image.manifest.v1+json"


def _image(arch: str, labels: dict) -> tuple[bytes, bytes]:
    config = json.dumps({"architecture": arch, "os": "linux", "config": {"Labels": labels}}).encode()
    manifest = json.dumps({"schemaVersion": 2, "mediaType": MT,
                           "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                      "digest": registry.sha256_digest(config), "size": len(config)},
                           "layers": []}).encode()
    return manifest, config


class Staging:
    """A staging registry in memory: find_manifest / read_blob / clone, as publish._prepare uses them."""

    host = "staging.example"

    def __init__(self, images: dict[str, tuple[bytes, bytes]]):
        self.manifests = {registry.sha256_digest(m): m for m, _ in images.values()}
        self.blobs = {registry.sha256_digest(c): c for _, c in images.values()}

    def clone(self) -> Staging:
        return self

    def find_manifest(self, repo: str, ref: str):
        raw = self.manifests.get(ref)
        return None if raw is None else registry.Manifest(raw, MT, ref)

    def read_blob(self, repo: str, digest: str) -> bytes:
        return self.blobs[digest]


def _plan(images: dict[str, tuple[bytes, bytes]]) -> plans.PublishPlan:
    sources = tuple(plans.ArchSource(s.arch, s.suffix, s.tag, registry.sha256_digest(images[s.arch][0]))
                    for s in SOURCES)
    return plans.PublishPlan("nightly", "app", SHA, "staging.example/acme/app", "hub.example/acme/app", sources,
                               {"amd64": "nightly-x86_64", "arm64": "nightly-arm64"}, ("nightly",),
                               source_url=SOURCE_URL)


def _labels(revision: str = SHA, source: str = SOURCE_URL) -> dict:
    return {copy.LABEL_REVISION: revision, copy.LABEL_SOURCE: source}


@pytest.mark.parametrize("arm64_labels, refused", [
    (_labels(), None),
    (_labels(source=SOURCE_URL.upper() + "/"), None),                     # how GitHub spells it varies: accepted
    (_labels(revision="d" * 40), "revision='" + "d" * 40),                # built from another commit
    (_labels(revision=SHA.upper()), "revision='" + SHA.upper()),          # not the commit's own spelling
    (_labels(source=SOURCE_URL + "-fork"), "project-fork"),               # a look-alike repository
    (_labels(source="https://github.com/someone/project"), "someone/project"),   # a fork's own build
    ({copy.LABEL_REVISION: SHA}, "source=None"),                       # no source label at all
])
def test_the_arch_read_in_a_thread_is_checked_like_the_first(arm64_labels, refused):
    """The second architecture is read in a thread of its own: its labels must name this commit of this
    repository just the same, or nothing is published."""
    images = {"amd64": _image("amd64", _labels()), "arm64": _image("arm64", arm64_labels)}
    staging = Staging(images)
    plan = _plan(images)
    if refused is None:
        prepared = copy._prepare(plan, lambda host: staging, False, lambda m: None)
        assert set(prepared.manifests) == {"amd64", "arm64"}
    else:
        with pytest.raises(PublishError, match="did not make") as caught:
            copy._prepare(plan, lambda host: staging, False, lambda m: None)
        arm64_digest = registry.sha256_digest(images["arm64"][0])
        assert f"@{arm64_digest}:" in str(caught.value) and refused in str(caught.value)


def test_an_arch_config_that_claims_another_arch_is_refused_in_its_thread():
    images = {"amd64": _image("amd64", _labels()), "arm64": _image("amd64", _labels())}
    with pytest.raises(PublishError, match="claims arm64 but its image config says linux/amd64"):
        copy._prepare(_plan(images), lambda host: Staging(images), False, lambda m: None)
