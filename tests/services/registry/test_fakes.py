"""Tests of the API fakes in tests/fakes/ against a real, throwaway distribution registry.

The registry (`docker-registry`, distribution 2.8) runs on a free loopback port with its storage in a
temporary folder; test images are pushed with plain OCI HTTP calls (blob uploads and manifest PUTs), so
no Docker engine is needed. Without the binary these tests skip, except under CI=true where they fail.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import github
import pytest
import requests
from fakes import dockerhub  # tests/ is on sys.path (rootdir-relative import mode)
from fakes import github as ghfake
from fakes.oci import MT_OCI_INDEX, MT_OCI_MANIFEST, RegistryClient

HUB_USER, HUB_SECRET = "ghbuild", "dckr_pat_test"
GH_TOKEN = "t"
BASE_TIME = datetime(2025, 1, 1, tzinfo=UTC)
HUB_TAG_FIELDS = {
    "creator", "id", "images", "last_updated", "last_updater", "last_updater_username", "name", "repository",
    "full_size", "v2", "tag_status", "tag_last_pulled", "tag_last_pushed", "media_type", "content_type", "digest",
}
HUB_IMAGE_FIELDS = {
    "architecture", "features", "variant", "digest", "os", "os_features", "os_version", "size", "status",
    "last_pulled", "last_pushed",
}
GH_VERSION_FIELDS = {"id", "name", "url", "package_html_url", "created_at", "updated_at", "html_url", "metadata"}


# ---------------------------------------------------------------------------------------------
# The registry and the fakes
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def hub(registry_url: str):
    with dockerhub.start(registry_url, users={HUB_USER: HUB_SECRET}) as fake:
        yield fake
    assert not fake.errors, "\n".join(fake.errors)


@pytest.fixture
def gh(registry_url: str):
    with ghfake.start(registry_url, tokens={GH_TOKEN}) as fake:
        yield fake
    assert not fake.errors, "\n".join(fake.errors)


@pytest.fixture
def gh_api():
    """The GitHub fake without a registry: repositories and releases need none."""
    with ghfake.start(None, tokens={GH_TOKEN}) as fake:
        yield fake
    assert not fake.errors, "\n".join(fake.errors)


def push_app(reg: RegistryClient, name: str) -> tuple[dict, dict, dict]:
    """Per-arch images tagged nightly-x86_64 / nightly-arm64, and an index of both tagged nightly and
    nightly-abc1234 (two tags, one digest)."""
    amd = reg.push_image(name, "nightly-x86_64", architecture="amd64", payload=name.encode() + b" amd64")
    arm = reg.push_image(name, "nightly-arm64", architecture="arm64", variant="v8", payload=name.encode() + b" arm64")
    index = reg.push_index(name, [amd, arm], "nightly")
    reg.tag(name, "nightly", "nightly-abc1234")
    return amd, arm, index


def hub_token(hub: dockerhub.DockerHubFake) -> str:
    resp = requests.post(hub.url + "/v2/auth/token", json={"identifier": HUB_USER, "secret": HUB_SECRET}, timeout=10)
    assert resp.status_code == 200, resp.text
    return resp.json()["access_token"]


def gh_headers(token: str = GH_TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json"}


# ---------------------------------------------------------------------------------------------
# Docker Hub
# ---------------------------------------------------------------------------------------------


def test_hub_auth_token_and_login(hub):
    token = hub_token(hub)
    assert token in hub.tokens and token.count(".") == 2  # a JWT: header.payload.signature

    bad = requests.post(hub.url + "/v2/auth/token", json={"identifier": HUB_USER, "secret": "nope"}, timeout=10)
    assert bad.status_code == 401 and bad.headers["Content-Type"].startswith("application/json")
    assert "access_token" not in bad.json()

    login = requests.post(hub.url + "/v2/users/login/", json={"username": HUB_USER, "password": HUB_SECRET}, timeout=10)
    assert login.status_code == 200 and login.json()["token"] in hub.tokens
    assert requests.post(hub.url + "/v2/users/login", json={"username": HUB_USER, "password": "x"},
                         timeout=10).status_code == 401


def test_hub_pagination_walks_every_page(hub, reg):
    first = reg.push_image("acme/many", "t000", payload=b"many")
    manifest = reg.get_manifest("acme/many", first["digest"])
    names = [f"t{i:03d}" for i in range(250)]
    for name in names[1:]:
        reg.put_manifest("acme/many", name, manifest.body, manifest.media_type)
    for i, name in enumerate(names):
        hub.set_pushed("acme", "many", name, BASE_TIME + timedelta(minutes=i))

    hub.clear_requests()
    url = hub.url + "/v2/namespaces/acme/repositories/many/tags?page_size=100"
    pages = []
    for _ in range(10):  # bounded: 3 pages expected
        resp = requests.get(url, timeout=30)
        assert resp.status_code == 200, resp.text
        pages.append(resp.json())
        url = pages[-1]["next"]
        if url is None:
            break
    assert [len(p["results"]) for p in pages] == [100, 100, 50]
    assert all(p["count"] == 250 for p in pages)
    assert pages[0]["previous"] is None and pages[1]["previous"] and pages[2]["next"] is None
    assert pages[1]["next"].startswith(hub.url + "/v2/namespaces/acme/repositories/many/tags?")
    walked = [tag["name"] for p in pages for tag in p["results"]]
    assert walked == list(reversed(names))  # default ordering: newest last_updated first
    assert pages[0]["results"][0]["last_updated"] == "2025-01-01T04:09:00.000000Z"
    log = [r for r in hub.requests if r.method == "GET"]
    assert [r.status for r in log] == [200, 200, 200]
    assert "page=2" in log[1].path and "page=3" in log[2].path
    assert log[0].time <= log[1].time <= log[2].time

    capped = requests.get(hub.url + "/v2/namespaces/acme/repositories/many/tags?page_size=1000", timeout=30).json()
    assert len(capped["results"]) == hub.page_size_max == 100 and capped["next"]
    old = requests.get(hub.url + "/v2/repositories/acme/many/tags/?page_size=100&page=3", timeout=30)
    assert old.status_code == 200 and len(old.json()["results"]) == 50
    past = requests.get(hub.url + "/v2/repositories/acme/many/tags/?page_size=100&page=4", timeout=30)
    assert past.status_code == 404 and past.json()["message"] == "httperror 404: object not found"
    filtered = requests.get(hub.url + "/v2/namespaces/acme/repositories/many/tags?name=t24&ordering=name",
                            timeout=30).json()
    assert filtered["count"] == 10 and [t["name"] for t in filtered["results"]] == [f"t24{i}" for i in range(10)]


def test_hub_tag_objects_describe_index_and_platforms(hub, reg):
    amd, arm, index = push_app(reg, "acme/fields")
    hub.set_pushed("acme", "fields", "nightly", BASE_TIME)

    tag = requests.get(hub.url + "/v2/namespaces/acme/repositories/fields/tags/nightly", timeout=10).json()
    assert set(tag) == HUB_TAG_FIELDS
    assert tag["name"] == "nightly" and tag["digest"] == index["digest"] and tag["media_type"] == MT_OCI_INDEX
    assert tag["last_updated"] == tag["tag_last_pushed"] == "2025-01-01T00:00:00.000000Z"
    assert all(set(image) == HUB_IMAGE_FIELDS for image in tag["images"])
    by_arch = {image["architecture"]: image for image in tag["images"]}
    assert by_arch["amd64"]["digest"] == amd["digest"] and by_arch["amd64"]["variant"] is None
    assert by_arch["arm64"]["digest"] == arm["digest"] and by_arch["arm64"]["variant"] == "v8"
    assert all(image["os"] == "linux" and image["size"] > 0 for image in tag["images"])

    single = requests.get(hub.url + "/v2/repositories/acme/fields/tags/nightly-arm64/", timeout=10).json()
    assert single["media_type"] == MT_OCI_MANIFEST and single["digest"] == arm["digest"]
    images = [(i["architecture"], i["variant"], i["digest"]) for i in single["images"]]
    assert images == [("arm64", "v8", arm["digest"])]
    missing = requests.get(hub.url + "/v2/repositories/acme/fields/tags/nope/", timeout=10)
    assert missing.status_code == 404


def test_hub_delete_needs_a_bearer_token(hub, reg):
    push_app(reg, "acme/auth")
    target = hub.url + "/v2/repositories/acme/auth/tags/nightly-abc1234/"
    assert requests.delete(target, timeout=10).status_code == 401
    assert requests.delete(target, headers={"Authorization": "Bearer not-a-token"}, timeout=10).status_code == 401
    assert requests.delete(target, headers={"Authorization": f"Basic {HUB_SECRET}"}, timeout=10).status_code == 401
    assert "nightly-abc1234" in reg.tags("acme/auth")
    # A bad token is refused even where no token is needed (listing a public repository).
    listing = hub.url + "/v2/namespaces/acme/repositories/auth/tags"
    assert requests.get(listing, headers={"Authorization": "Bearer stale"}, timeout=10).status_code == 401
    assert requests.get(listing, timeout=10).status_code == 200

    token = hub_token(hub)
    unknown = requests.delete(hub.url + "/v2/repositories/acme/auth/tags/nope/",
                              headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert unknown.status_code == 404
    hub.tokens.clear()  # every token expired
    assert requests.delete(target, headers={"Authorization": f"Bearer {token}"}, timeout=10).status_code == 401
    assert "nightly-abc1234" in reg.tags("acme/auth")


def test_hub_delete_removes_only_that_tag(hub, reg):
    amd, arm, index = push_app(reg, "acme/del")
    hub.set_pushed("acme", "del", "nightly", BASE_TIME)
    auth = {"Authorization": f"Bearer {hub_token(hub)}"}

    resp = requests.delete(hub.url + "/v2/repositories/acme/del/tags/nightly-abc1234/", headers=auth, timeout=10)
    assert resp.status_code == 204 and resp.content == b""
    assert sorted(reg.tags("acme/del")) == ["nightly", "nightly-arm64", "nightly-x86_64"]
    assert reg.head_manifest("acme/del", "nightly") == (index["digest"], MT_OCI_INDEX)  # sibling kept, same digest
    kept = requests.get(hub.url + "/v2/repositories/acme/del/tags/nightly/", timeout=10).json()
    assert kept["last_updated"] == "2025-01-01T00:00:00.000000Z"  # not "re-pushed"

    # A per-arch tag whose manifest the kept index refers to: the tag goes, the manifest stays.
    resp = requests.delete(hub.url + "/v2/repositories/acme/del/tags/nightly-x86_64/", headers=auth, timeout=10)
    assert resp.status_code == 204
    assert sorted(reg.tags("acme/del")) == ["nightly", "nightly-arm64"]
    assert reg.head_manifest("acme/del", amd["digest"]) is not None
    kept = requests.get(hub.url + "/v2/repositories/acme/del/tags/nightly/", timeout=10).json()
    assert {i["digest"] for i in kept["images"]} == {amd["digest"], arm["digest"]}

    resp = requests.delete(hub.url + "/v2/repositories/acme/del/tags/nightly", headers=auth, timeout=10)
    assert resp.status_code == 204
    assert reg.tags("acme/del") == ["nightly-arm64"]
    assert reg.head_manifest("acme/del", index["digest"]) is None


def test_hub_concurrent_deletes_of_tags_sharing_a_digest(hub, reg):
    image = reg.push_image("acme/race", "keep", payload=b"race")
    for n in range(6):
        reg.tag("acme/race", "keep", f"nightly-{n}")
    auth = {"Authorization": f"Bearer {hub.issue_token()}"}
    statuses: list[int] = []

    def delete(tag: str) -> None:
        statuses.append(requests.delete(f"{hub.url}/v2/repositories/acme/race/tags/{tag}/", headers=auth,
                                        timeout=30).status_code)

    threads = [threading.Thread(target=delete, args=(f"nightly-{n}",)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert statuses == [204] * 6
    assert reg.tags("acme/race") == ["keep"]
    assert reg.head_manifest("acme/race", "keep")[0] == image["digest"]


def test_hub_injected_faults_and_request_log(hub, reg):
    reg.push_image("acme/faults", "nightly", payload=b"faults")
    listing = hub.url + "/v2/namespaces/acme/repositories/faults/tags?page_size=100"
    hub.fail_next(r"/faults/tags\?", 429, {"Retry-After": "1", "X-RateLimit-Remaining": "0"})
    hub.clear_requests()
    limited = requests.get(listing, timeout=10)
    assert limited.status_code == 429 and limited.headers["Retry-After"] == "1"
    assert limited.json()["message"] == "Too Many Requests"
    assert requests.get(listing, timeout=10).status_code == 200  # only the next one

    hub.fail_next(r"/tags/nightly/$", 500, count=2, method="DELETE")
    auth = {"Authorization": f"Bearer {hub.issue_token()}"}
    target = hub.url + "/v2/repositories/acme/faults/tags/nightly/"
    assert [requests.delete(target, headers=auth, timeout=10).status_code for _ in range(3)] == [500, 500, 204]
    assert [(r.method, r.status) for r in hub.requests] == [
        ("GET", 429), ("GET", 200), ("DELETE", 500), ("DELETE", 500), ("DELETE", 204)]
    assert reg.tags("acme/faults") == []


def test_fake_binds_loopback_and_stop_ends_its_threads(registry_url):
    fake = dockerhub.start(registry_url)
    assert fake.url.startswith("http://127.0.0.1:")
    session = requests.Session()  # keeps its connection open: stop() must still end the handler thread
    assert session.post(fake.url + "/v2/auth/token", json={}, timeout=10).status_code == 400
    fake.stop()
    session.close()
    alive = [t.name for t in threading.enumerate() if t.name.startswith("DockerHubFake-")]
    assert alive == []
    with pytest.raises(requests.ConnectionError):
        requests.get(fake.url + "/v2/", timeout=2)


# ---------------------------------------------------------------------------------------------
# GitHub
# ---------------------------------------------------------------------------------------------


def test_ghcr_versions_include_untagged_children(gh, reg):
    amd = reg.push_image("acme/ghcr-app", None, architecture="amd64", payload=b"ghcr amd64")
    arm = reg.push_image("acme/ghcr-app", None, architecture="arm64", variant="v8", payload=b"ghcr arm64")
    index = reg.push_index("acme/ghcr-app", [amd, arm], "latest")
    reg.tag("acme/ghcr-app", "latest", "v1.0.0")
    gh.set_created("acme", "ghcr-app", index["digest"], BASE_TIME + timedelta(days=1))
    gh.set_created("acme", "ghcr-app", amd["digest"], BASE_TIME)
    gh.set_created("acme", "ghcr-app", arm["digest"], BASE_TIME)

    url = gh.url + "/orgs/acme/packages/container/ghcr-app/versions?per_page=2"
    first = requests.get(url, headers=gh_headers(), timeout=10)
    assert first.status_code == 200 and len(first.json()) == 2
    assert first.links["next"]["url"].endswith("page=2") and first.links["last"]["url"].endswith("page=2")
    second = requests.get(first.links["next"]["url"], headers=gh_headers(), timeout=10)
    assert "next" not in second.links and second.links["prev"]["url"].endswith("page=1")
    versions = first.json() + second.json()
    assert all(set(v) == GH_VERSION_FIELDS for v in versions)
    by_digest = {v["name"]: v for v in versions}
    assert set(by_digest) == {index["digest"], amd["digest"], arm["digest"]}
    assert versions[0]["name"] == index["digest"]  # newest first
    assert by_digest[index["digest"]]["metadata"] == {"package_type": "container",
                                                      "container": {"tags": ["latest", "v1.0.0"]}}
    assert by_digest[amd["digest"]]["metadata"]["container"]["tags"] == []
    assert by_digest[arm["digest"]]["metadata"]["container"]["tags"] == []
    assert by_digest[index["digest"]]["created_at"] == "2025-01-02T00:00:00Z"
    arm_version = by_digest[arm["digest"]]
    assert arm_version["url"] == f"{gh.url}/orgs/acme/packages/container/ghcr-app/versions/{arm_version['id']}"

    # The same package through the user path, and a slash in a package name (percent-encoded).
    as_user = requests.get(gh.url + "/users/acme/packages/container/ghcr-app/versions", headers=gh_headers(),
                           timeout=10)
    assert {v["id"] for v in as_user.json()} == {v["id"] for v in versions}
    reg.push_image("acme/tools/ci", "x", payload=b"nested")
    nested = requests.get(gh.url + "/orgs/acme/packages/container/tools%2Fci/versions", headers=gh_headers(),
                          timeout=10)
    assert nested.status_code == 200 and nested.json()[0]["metadata"]["container"]["tags"] == ["x"]
    missing = requests.get(gh.url + "/orgs/acme/packages/container/nope/versions", headers=gh_headers(), timeout=10)
    assert missing.status_code == 404 and missing.json()["message"] == "Package not found."

    # Deleting needs auth, and deletes the digest in the registry.
    version_url = f"{gh.url}/orgs/acme/packages/container/ghcr-app/versions/{arm_version['id']}"
    denied = requests.delete(version_url, timeout=10)
    assert denied.status_code == 401 and denied.json()["message"] == "Bad credentials"
    assert requests.delete(version_url, headers=gh_headers(), timeout=10).status_code == 204
    assert reg.head_manifest("acme/ghcr-app", arm["digest"]) is None
    assert requests.delete(version_url, headers=gh_headers(), timeout=10).status_code == 404
    after = requests.get(gh.url + "/orgs/acme/packages/container/ghcr-app/versions", headers=gh_headers(), timeout=10)
    assert {v["name"] for v in after.json()} == {index["digest"], amd["digest"]}
    deleted = requests.get(gh.url + "/orgs/acme/packages/container/ghcr-app/versions?state=deleted",
                           headers=gh_headers(), timeout=10)
    assert [v["id"] for v in deleted.json()] == [arm_version["id"]]

    # Moving both tags away leaves the old index as an untagged version (it is still in the registry).
    newer = reg.push_image("acme/ghcr-app", "latest", payload=b"ghcr newer")
    reg.tag("acme/ghcr-app", "latest", "v1.0.0")
    now = requests.get(gh.url + "/orgs/acme/packages/container/ghcr-app/versions", headers=gh_headers(), timeout=10)
    tags = {v["name"]: v["metadata"]["container"]["tags"] for v in now.json()}
    assert tags == {newer["digest"]: ["latest", "v1.0.0"], index["digest"]: [], amd["digest"]: []}


def test_github_auth_and_rate_limits(gh_api):
    gh = gh_api
    repo_url = gh.url + "/repos/acme/app"
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        resp = requests.get(repo_url, headers=headers, timeout=10)
        assert resp.status_code == 401
        assert resp.json()["message"] == "Bad credentials" and "documentation_url" in resp.json()
    ok = requests.get(repo_url, headers={"Authorization": f"token {GH_TOKEN}"}, timeout=10)
    assert ok.status_code == 200
    body = ok.json()
    assert body["full_name"] == "acme/app" and body["default_branch"] == "main" and body["url"] == repo_url
    assert int(ok.headers["x-ratelimit-remaining"]) < int(ok.headers["x-ratelimit-limit"])

    gh.set_rate_limit(0, reset_in=0.5)
    limited = requests.get(repo_url, headers=gh_headers(), timeout=10)
    assert limited.status_code == 403 and limited.headers["x-ratelimit-remaining"] == "0"
    reset = int(limited.headers["x-ratelimit-reset"])
    assert "rate limit" in limited.json()["message"]
    time.sleep(max(0.0, reset - time.time()) + 0.05)
    assert requests.get(repo_url, headers=gh_headers(), timeout=10).status_code == 200

    gh.secondary_rate_limit_next(r"/releases", status=429, retry_after=1)
    secondary = requests.get(repo_url + "/releases", headers=gh_headers(), timeout=10)
    assert secondary.status_code == 429 and secondary.headers["retry-after"] == "1"
    assert "secondary rate limit" in secondary.json()["message"]
    assert requests.get(repo_url + "/releases", headers=gh_headers(), timeout=10).status_code == 200
    assert [r.status for r in gh.requests][-2:] == [429, 200]


def test_pygithub_release_round_trip(gh_api):
    gh = gh_api
    g = github.Github(base_url=gh.url, auth=github.Auth.Token(GH_TOKEN), per_page=2,
                      seconds_between_requests=0, seconds_between_writes=0)
    repo = g.get_repo("acme/app")
    assert repo.full_name == "acme/app" and repo.default_branch == "main"

    created = repo.create_git_release("v1.0.0", name="v1.0.0", message="first", make_latest="true")
    assert created.tag_name == "v1.0.0" and created.target_commitish == "main" and not created.draft
    fetched = repo.get_release("v1.0.0")
    assert fetched.id == created.id and fetched.body == "first" and fetched.author.login == gh.login
    assert fetched.published_at is not None and fetched.html_url.endswith("/acme/app/releases/tag/v1.0.0")
    assert repo.get_release(created.id).tag_name == "v1.0.0"

    for n in range(2, 6):
        repo.create_git_release(f"v1.0.{n}", name=f"v1.0.{n}", message="", prerelease=(n == 5))
    assert repo.get_latest_release().tag_name == "v1.0.4"
    gh.clear_requests()
    assert [r.tag_name for r in repo.get_releases()] == ["v1.0.5", "v1.0.4", "v1.0.3", "v1.0.2", "v1.0.0"]
    assert sum("/releases" in r.path for r in gh.requests) == 3  # followed the Link header over 3 pages

    repo.create_git_release("v2.0.0", name="v2.0.0", message="wip", draft=True)
    with pytest.raises(github.UnknownObjectException):
        repo.get_release("v2.0.0")  # drafts are not found by tag
    with pytest.raises(github.GithubException) as exc:
        repo.create_git_release("v1.0.0", name="again", message="")
    assert exc.value.status == 422
    with pytest.raises(github.BadCredentialsException):
        github.Github(base_url=gh.url, auth=github.Auth.Token("wrong")).get_repo("acme/app")
