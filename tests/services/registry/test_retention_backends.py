"""`ghbuild prune` (ghbuild.retention): retention of nightly tags, against the Docker Hub and GitHub fakes.

Each test that talks to a backend starts its own throwaway distribution registry (`docker-registry`, as in
tests/test_fakes.py) and the fake in front of it; images and indexes are pushed with plain HTTP calls, no
engine. `sleep` is injected everywhere: waits are recorded, never slept. The pure planner is tested in
tests/test_retention_plan.py, the delete loop in tests/test_retention_loop.py.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fakes import dockerhub
from fakes import github as ghfake
from fakes.dockerhub import RegistryClient
from fakes.oci import push_dated

from ghbuild import retention
from ghbuild.config.options import ImageOptions, Options, PublishOptions
from ghbuild.errors import PruneAbort, PruneError
from ghbuild.registry.client import Registry
from ghbuild.retention.dockerhub import DockerHubClient

HUB_USER, HUB_SECRET = "ghbuild", "dckr_pat_test-secret-0123456789"
GH_TOKEN = "ghs_test-token-0123456789"
BASE = datetime(2025, 1, 1, tzinfo=UTC)


def sha(n: int | str) -> str:
    return hashlib.sha1(str(n).encode()).hexdigest()


def options(publish: str, retention: int = 14) -> Options:
    image = ImageOptions(name="app", dockerfile="Dockerfile", platforms=("linux/amd64", "linux/arm64"),
                         publish=publish)
    return Options(config_path=Path("/nonexistent/ghbuild.toml"), images={"app": image},
                   publish=PublishOptions(retention=retention))


def run_prune(*args, **kwargs) -> dict:
    """ghbuild.retention.run, as the JSON object `ghbuild prune --json` prints."""
    return retention.run(*args, **kwargs).to_dict()


class Waits(list):
    """An injected `sleep`: records every wait, sleeps none."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


# --------------------------------------------------------------------------- registry (one per test)


@pytest.fixture
def registry_url(fresh_registry_url: str) -> str:
    return fresh_registry_url


@pytest.fixture
def hub(registry_url):
    with dockerhub.start(registry_url, users={HUB_USER: HUB_SECRET}) as fake:
        yield fake
    assert not fake.errors, "\n".join(fake.errors)


@pytest.fixture
def gh(registry_url):
    # "acme" is a user here (only "someorg" is an organization): /orgs/acme/... is a 404.
    with ghfake.start(registry_url, tokens={GH_TOKEN}, orgs={"someorg"}) as fake:
        yield fake
    assert not fake.errors, "\n".join(fake.errors)


def hub_env(hub, **extra: str) -> dict[str, str]:
    return {"DOCKERHUB_USERNAME": HUB_USER, "DOCKERHUB_TOKEN": HUB_SECRET, "GHBUILD_DOCKERHUB_API": hub.url, **extra}


def push_commit(reg: RegistryClient, repo: str, commit: str, *, amd: dict | None = None, arm: dict | None = None,
                per_arch_tags: bool = False, nightly: str = "nightly") -> tuple[dict, dict, dict]:
    """Per-arch images (untagged unless per_arch_tags) and the index tagged nightly-<sha>."""
    amd = amd or reg.push_image(repo, None, architecture="amd64", payload=f"{commit} amd64".encode())
    arm = arm or reg.push_image(repo, None, architecture="arm64", variant="v8", payload=f"{commit} arm64".encode())
    index = reg.push_index(repo, [amd, arm], f"{nightly}-{commit}")
    if per_arch_tags:
        reg.tag(repo, amd["digest"], f"{nightly}-{commit}-x86_64")
        reg.tag(repo, arm["digest"], f"{nightly}-{commit}-arm64")
    return amd, arm, index


def move_tags(reg: RegistryClient, repo: str, amd: dict, arm: dict, index: dict) -> None:
    reg.tag(repo, index["digest"], "nightly")
    reg.tag(repo, amd["digest"], "nightly-x86_64")
    reg.tag(repo, arm["digest"], "nightly-arm64")


# --------------------------------------------------------------------------- Docker Hub


def test_hub_keeps_newest_14_of_30_over_every_page(hub, reg):
    hub.page_size_max = 10            # Hub caps page_size: 33 tags are 4 pages
    commits = [sha(i) for i in range(30)]
    pushed = [push_commit(reg, "acme/app", c) for c in commits]
    move_tags(reg, "acme/app", *pushed[-1])
    for i, c in enumerate(commits):
        hub.set_pushed("acme", "app", f"nightly-{c}", BASE + timedelta(hours=i))
    for tag in ("nightly", "nightly-x86_64", "nightly-arm64"):
        hub.set_pushed("acme", "app", tag, BASE + timedelta(hours=30))
    hub.clear_requests()
    waits, logs = Waits(), []

    result = run_prune(options("docker.io/acme/{image}"), "app", apply=True, env=hub_env(hub),
                       sleep=waits, log=logs.append, owner="acme")

    assert result["ok"] and result["backend"] == "dockerhub" and not result["dry_run"] and result["keep"] == 14
    listing = [r for r in hub.requests if r.method == "GET"]
    assert len(listing) == 4 and result["stats"]["pages"] == 4 and result["stats"]["tags"] == 33
    assert all(f"page={n}" in listing[n - 1].path for n in (2, 3, 4))
    deleted = [e["tags"][0] for e in result["deleted"]]
    assert sorted(deleted) == sorted(f"nightly-{c}" for c in commits[:16])
    assert {e["tags"][0] for e in result["kept"]} == {f"nightly-{c}" for c in commits[16:]} | {
        "nightly", "nightly-x86_64", "nightly-arm64"}
    assert sorted(reg.tags("acme/app")) == sorted([f"nightly-{c}" for c in commits[16:]]
                                                  + ["nightly", "nightly-x86_64", "nightly-arm64"])
    deletes = [r for r in hub.requests if r.method == "DELETE"]
    assert len(deletes) == 16 and all(r.status == 204 for r in deletes)
    assert all(r.path.startswith("/v2/repositories/acme/app/tags/nightly-") and r.path.endswith("/") for r in deletes)
    assert waits == [0.5] * 15        # paced: 0.5 s between deletes, none before the first
    assert HUB_SECRET not in "\n".join(logs) + json.dumps(result)


def test_hub_never_deletes_moving_tags_or_what_a_kept_tag_refers_to(hub, reg):
    a_amd, _a_arm, _a_index = push_commit(reg, "acme/ref", sha("a"), per_arch_tags=True)
    b_amd, b_arm, b_index = push_commit(reg, "acme/ref", sha("b"))
    # The newest commit's index reuses A's amd64 image (an unchanged, reproducible build).
    _c_amd, c_arm, _c_index = push_commit(reg, "acme/ref", sha("c"), amd=a_amd)
    move_tags(reg, "acme/ref", b_amd, b_arm, b_index)   # the moving tags still point at B
    for n, c in enumerate(("a", "b", "c")):
        for tag in [t for t in reg.tags("acme/ref") if sha(c) in t]:
            hub.set_pushed("acme", "ref", tag, BASE + timedelta(days=n))
    before = sorted(reg.tags("acme/ref"))
    hub.clear_requests()

    # Dry run: reports, deletes nothing.
    dry = run_prune(options("docker.io/acme/ref"), "app", keep=1, env=hub_env(hub), sleep=Waits(),
                    log=lambda m: None)
    assert dry["dry_run"] and dry["deleted"] == [] and dry["ok"]
    assert sorted(e["tags"][0] for e in dry["would_delete"]) == sorted([f"nightly-{sha('a')}",
                                                                       f"nightly-{sha('a')}-arm64"])
    referenced = {e["tags"][0]: e["reason"] for e in dry["skipped_referenced"]}
    assert set(referenced) == {f"nightly-{sha('a')}-x86_64", f"nightly-{sha('b')}"}
    assert f"child of nightly-{sha('c')}" in referenced[f"nightly-{sha('a')}-x86_64"]
    assert "tag nightly" in referenced[f"nightly-{sha('b')}"]
    assert sorted(reg.tags("acme/ref")) == before
    assert not [r for r in hub.requests if r.method == "DELETE"]

    result = run_prune(options("docker.io/acme/ref"), "app", keep=1, apply=True, env=hub_env(hub),
                       sleep=Waits(), log=lambda m: None)
    assert result["ok"] and len(result["deleted"]) == 2
    assert sorted(reg.tags("acme/ref")) == sorted(["nightly", "nightly-x86_64", "nightly-arm64", f"nightly-{sha('c')}",
                                                   f"nightly-{sha('b')}", f"nightly-{sha('a')}-x86_64"])
    assert reg.head_manifest("acme/ref", a_amd["digest"]) is not None     # the kept index is whole
    assert reg.head_manifest("acme/ref", c_arm["digest"]) is not None
    assert reg.head_manifest("acme/ref", "nightly")[0] == b_index["digest"]


def test_hub_missing_token_fails_before_any_request(hub, reg):
    push_commit(reg, "acme/app", sha(1))
    hub.clear_requests()
    for env in ({"GHBUILD_DOCKERHUB_API": hub.url},
                {"GHBUILD_DOCKERHUB_API": hub.url, "DOCKERHUB_USERNAME": HUB_USER},
                {"GHBUILD_DOCKERHUB_API": hub.url, "DOCKERHUB_TOKEN": HUB_SECRET, "DOCKERHUB_USERNAME": ""}):
        with pytest.raises(PruneError) as exc:
            run_prune(options("docker.io/acme/app"), "app", apply=True, env=env, sleep=Waits(), log=lambda m: None)
        assert "DOCKERHUB_" in str(exc.value) and exc.value.exit_code == 14 and exc.value.kind == "prune error"
    with pytest.raises(PruneError):
        DockerHubClient(hub.url, HUB_USER, None)
    with pytest.raises(PruneError):
        DockerHubClient(hub.url, None, HUB_SECRET)
    assert hub.requests == []


def test_hub_rejected_token_fails_without_showing_it(hub, reg):
    push_commit(reg, "acme/app", sha(1))
    push_commit(reg, "acme/app", sha(2))
    hub.set_pushed("acme", "app", f"nightly-{sha(1)}", BASE)
    wrong = "dckr_pat_WRONG-do-not-print-9876"
    with pytest.raises(PruneError) as exc:
        run_prune(options("docker.io/acme/app"), "app", keep=1, apply=True,
                  env=hub_env(hub, DOCKERHUB_TOKEN=wrong), sleep=Waits(), log=lambda m: None)
    message = str(exc.value)
    assert "Docker Hub" in message and HUB_USER in message and "401" in message
    assert wrong not in message
    assert [(r.method, r.status) for r in hub.requests] == [("POST", 401)]
    assert len(reg.tags("acme/app")) == 2


def test_hub_429_retry_after_is_honoured_and_deletes_are_paced(hub, reg):
    commits = [sha(f"r{i}") for i in range(4)]
    for i, c in enumerate(commits):
        push_commit(reg, "acme/app", c)
        hub.set_pushed("acme", "app", f"nightly-{c}", BASE + timedelta(hours=i))
    # Deletes go oldest first: commits[0], [1], [2]. The second is rate limited once, the third hits a 500.
    hub.fail_next(rf"/tags/nightly-{commits[1]}/$", 429, {"Retry-After": "7"}, method="DELETE")
    hub.fail_next(rf"/tags/nightly-{commits[2]}/$", 500, method="DELETE")
    hub.clear_requests()
    waits = Waits()
    result = run_prune(options("docker.io/acme/app"), "app", keep=1, apply=True, env=hub_env(hub),
                       sleep=waits, log=lambda m: None, pace=0.5)
    assert result["ok"], result["errors"]
    assert [e["tags"][0] for e in result["deleted"]] == [f"nightly-{c}" for c in commits[:3]]
    assert waits == [0.5, 7.0, 0.5, 1.0]        # pace, Retry-After, pace, backoff after the 500
    deletes = [(r.path.split("/")[-2], r.status) for r in hub.requests if r.method == "DELETE"]
    assert deletes == [(f"nightly-{commits[0]}", 204), (f"nightly-{commits[1]}", 429), (f"nightly-{commits[1]}", 204),
                       (f"nightly-{commits[2]}", 500), (f"nightly-{commits[2]}", 204)]
    assert reg.tags("acme/app") == [f"nightly-{commits[3]}"]


def test_hub_client_caps_retry_after_and_gives_up(hub, reg):
    push_commit(reg, "acme/cap", sha("x"))
    push_commit(reg, "acme/cap", sha("y"))
    waits = Waits()
    client = DockerHubClient(hub.url, HUB_USER, HUB_SECRET, sleep=waits, pace=0.25, max_wait=30,
                             log=lambda m: None)
    client.login()
    hub.fail_next(r"/tags/", 429, {"Retry-After": "1000"}, method="DELETE")
    assert client.delete_tag("acme", "cap", f"nightly-{sha('x')}") is True
    assert waits == [30]
    assert client.delete_tag("acme", "cap", "no-such-tag") is False           # 404: already gone
    hub.fail_next(r"/tags/", 429, {"Retry-After": "1"}, method="DELETE", count=50)
    with pytest.raises(PruneAbort):
        client.delete_tag("acme", "cap", f"nightly-{sha('y')}")
    hub.clear_faults()
    assert f"nightly-{sha('y')}" in reg.tags("acme/cap")
    # An expired access token is renewed once, transparently.
    hub.tokens.clear()
    assert client.delete_tag("acme", "cap", f"nightly-{sha('y')}") is True


def test_hub_incomplete_listing_is_an_error(hub, reg):
    for i in range(3):
        push_commit(reg, "acme/app", sha(i))
    hub.page_size_max = 1
    hub.fail_next(r"page=2", 502, count=10)
    with pytest.raises(PruneError) as exc:
        run_prune(options("docker.io/acme/app"), "app", keep=1, apply=True, env=hub_env(hub),
                  sleep=Waits(), log=lambda m: None)
    assert "partial list" in str(exc.value)
    assert not [r for r in hub.requests if r.method == "DELETE"] and len(reg.tags("acme/app")) == 3


# --------------------------------------------------------------------------- GHCR


def _ghcr_setup(gh, reg):
    repo = "acme/app"
    z = push_commit(reg, repo, sha("z"))
    a_amd, a_arm, a_index = push_commit(reg, repo, sha("a"))
    b = push_commit(reg, repo, sha("b"))
    c = push_commit(reg, repo, sha("c"), amd=a_amd)        # C's index shares A's amd64 child
    reg.tag(repo, c[2]["digest"], "nightly")
    for n, (amd, arm, index) in enumerate((z, (a_amd, a_arm, a_index), b, c)):
        for d in (amd["digest"], arm["digest"], index["digest"]):
            gh.set_created("acme", "app", d, BASE + timedelta(days=n))
    return z, (a_amd, a_arm, a_index), b, c


def test_ghcr_deletes_old_indexes_with_their_children_and_keeps_kept_children(gh, reg, registry_url):
    z, a, b, c = _ghcr_setup(gh, reg)
    local = registry_url.removeprefix("http://")
    factory = lambda host: Registry(local, log=lambda m: None)  # noqa: E731 - ghcr.io -> the fake's registry
    env = {"GITHUB_TOKEN": GH_TOKEN, "GITHUB_API_URL": gh.url}

    dry = run_prune(options("ghcr.io/{owner}/app"), "app", keep=2, env=env, owner="Acme",
                    registry_factory=factory, sleep=Waits(), log=lambda m: None)
    assert dry["backend"] == "ghcr" and dry["repository"] == "ghcr.io/acme/app" and dry["ok"]
    would = {e["digest"]: e for e in dry["would_delete"]}
    assert set(would) == {z[2]["digest"], z[0]["digest"], z[1]["digest"], a[2]["digest"], a[1]["digest"]}
    assert would[z[2]["digest"]]["tags"] == [f"nightly-{sha('z')}"] and would[z[0]["digest"]]["tags"] == []
    order = [e["digest"] for e in dry["would_delete"]]
    assert order.index(z[2]["digest"]) < order.index(z[0]["digest"])          # index before its children
    shared = [e for e in dry["skipped_referenced"] if e["digest"] == a[0]["digest"]]
    assert shared and "but it is a child of nightly" in shared[0]["reason"]   # nightly = C's index
    assert not [r for r in gh.requests if r.method == "DELETE"]
    assert any(r.path.startswith("/users/acme/packages/container/app/versions") for r in gh.requests)

    gh.secondary_rate_limit_next(r"/versions/\d+$", retry_after=3, method="DELETE")
    waits = Waits()
    result = run_prune(options("ghcr.io/acme/app"), "app", keep=2, apply=True, env=env,
                       registry_factory=factory, sleep=waits, log=lambda m: None)
    assert result["ok"], result["errors"]
    assert {e["digest"] for e in result["deleted"]} == set(would)
    assert waits == [3, 1.0, 1.0, 1.0, 1.0]     # the secondary rate limit, then 1 s between deletes
    for gone in would:
        assert reg.head_manifest("acme/app", gone) is None
    for kept in (a[0], b[0], b[1], b[2], c[1], c[2]):
        assert reg.head_manifest("acme/app", kept["digest"]) is not None
    assert sorted(reg.tags("acme/app")) == sorted(["nightly", f"nightly-{sha('b')}", f"nightly-{sha('c')}"])
    assert GH_TOKEN not in json.dumps(result)


def test_ghcr_missing_or_rejected_token(gh, reg):
    push_commit(reg, "acme/app", sha(1))
    with pytest.raises(PruneError) as exc:
        run_prune(options("ghcr.io/acme/app"), "app", env={"GITHUB_API_URL": gh.url}, sleep=Waits(),
                  log=lambda m: None)
    assert "GITHUB_TOKEN" in str(exc.value)
    assert gh.requests == []
    wrong = "ghs_WRONG-do-not-print"
    with pytest.raises(PruneError) as exc:
        run_prune(options("ghcr.io/acme/app"), "app", apply=True,
                  env={"GITHUB_API_URL": gh.url, "GITHUB_TOKEN": wrong}, sleep=Waits(), log=lambda m: None)
    assert "GitHub rejected the token" in str(exc.value) and wrong not in str(exc.value)
    assert reg.tags("acme/app") == [f"nightly-{sha(1)}"]


# --------------------------------------------------------------------------- plain registry


def test_plain_registry_fallback_deletes_by_digest(reg, registry_url):
    repo, host = "acme/plain", registry_url.removeprefix("http://")
    images = []
    for i in range(4):
        when = BASE + timedelta(days=i)
        amd = images[0][0] if i == 3 else push_dated(reg, repo, "amd64", when, f"{i} amd".encode())  # 3 reuses 0's
        arm = push_dated(reg, repo, "arm64", when, f"{i} arm".encode())
        index = reg.push_index(repo, [amd, arm], f"nightly-{sha(i)}")
        images.append((amd, arm, index))
    move_tags(reg, repo, *images[3])
    waits = Waits()

    dry = run_prune(options(f"{host}/acme/plain"), "app", keep=2, env={}, sleep=waits, log=lambda m: None)
    assert dry["backend"] == "registry" and dry["dry_run"] and dry["deleted"] == []
    expected = {images[0][2]["digest"], images[0][1]["digest"], images[1][2]["digest"], images[1][0]["digest"],
                images[1][1]["digest"]}
    assert {e["digest"] for e in dry["would_delete"]} == expected
    assert any(e["digest"] == images[0][0]["digest"] for e in dry["skipped_referenced"])
    assert len(reg.tags(repo)) == 7

    result = run_prune(options(f"{host}/acme/plain"), "app", keep=2, apply=True, env={}, sleep=waits,
                       log=lambda m: None)
    assert result["ok"] and {e["digest"] for e in result["deleted"]} == expected
    assert waits == [0.5] * 4
    assert sorted(reg.tags(repo)) == sorted(["nightly", "nightly-x86_64", "nightly-arm64",
                                             f"nightly-{sha(2)}", f"nightly-{sha(3)}"])
    for digest in expected:
        assert reg.head_manifest(repo, digest) is None
    assert reg.head_manifest(repo, images[0][0]["digest"]) is not None     # shared with the kept commit 3


def test_plain_registry_without_created_times_keeps_everything(reg, registry_url):
    repo, host = "acme/epoch", registry_url.removeprefix("http://")
    for i in range(3):
        push_commit(reg, repo, sha(i))        # the fake's images say created 1970-01-01: no real time
    outcome = retention.run(options(f"{host}/{repo}"), "app", keep=1, apply=True, env={}, sleep=Waits(),
                            log=lambda m: None)
    result = outcome.to_dict()
    assert result["deleted"] == [] and result["would_delete"] == []
    assert all(e["reason"].startswith("no push time") for e in result["kept"])
    assert len(reg.tags(repo)) == 3
    assert "ghbuild prune" in retention.render(outcome)


# --------------------------------------------------------------------------- the command line

SCHEDULED_RUN = {"GITHUB_EVENT_NAME": "schedule", "GITHUB_REF": "refs/heads/main", "GITHUB_REPOSITORY": "acme/project",
                 "GITHUB_SHA": "a" * 40}


def _cli(tmp_path: Path, env: dict[str, str], *args: str):
    import os
    import subprocess
    import sys

    (tmp_path / "ghbuild.toml").write_text('[registries]\npublish = "docker.io/acme/{image}"\n'
                                           '[images.app]\ndockerfile = "Dockerfile"\n'
                                           'platforms = ["linux/amd64", "linux/arm64"]\n')
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GHBUILD_", "GITHUB_", "DOCKERHUB_"))}
    base.update(SCHEDULED_RUN)   # the nightly workflow's run: --apply is for trusted runs only
    return subprocess.run([sys.executable, "-m", "ghbuild", "prune", "--config", str(tmp_path / "ghbuild.toml"),
                           *args], env={**base, **env}, capture_output=True, text=True, timeout=120)


def test_cli_dry_run_then_apply_then_missing_token(hub, reg, tmp_path):
    commits = [sha(i) for i in range(4)]
    for i, c in enumerate(commits):
        push_commit(reg, "acme/app", c)
        hub.set_pushed("acme", "app", f"nightly-{c}", BASE + timedelta(hours=i))

    dry = _cli(tmp_path, hub_env(hub), "--keep", "2", "--json")
    assert dry.returncode == 0, dry.stderr
    (result,) = json.loads(dry.stdout)
    assert result["dry_run"] and sorted(e["tags"][0] for e in result["would_delete"]) == sorted(
        f"nightly-{c}" for c in commits[:2])
    assert len(reg.tags("acme/app")) == 4                          # nothing deleted

    applied = _cli(tmp_path, hub_env(hub), "--keep", "2", "--apply")
    assert applied.returncode == 0, applied.stderr
    assert sorted(reg.tags("acme/app")) == sorted(f"nightly-{c}" for c in commits[2:])

    branch = _cli(tmp_path, {**hub_env(hub), "GITHUB_EVENT_NAME": "push", "GITHUB_REF": "refs/heads/feature"},
                  "--keep", "1", "--apply")
    assert branch.returncode == 6 and "prune --apply: not a trusted run" in branch.stderr
    assert sorted(reg.tags("acme/app")) == sorted(f"nightly-{c}" for c in commits[2:])   # nothing deleted

    no_token = _cli(tmp_path, {"GHBUILD_DOCKERHUB_API": hub.url, "DOCKERHUB_USERNAME": HUB_USER}, "--apply")
    assert no_token.returncode == 14 and "Traceback" not in no_token.stderr
    assert no_token.stderr.strip().splitlines()[-1].startswith("ghbuild: prune error:")
    assert no_token.stdout == ""
