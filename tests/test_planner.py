"""The planner against real event payloads: who reads/writes which cache and
trust, edge branch names, isolation between forks, and the `plan --json` contract.

Expected scopes are computed here from the documented formulas (sha256 via hashlib), not with
ghbuild.naming, so a change in the naming code that breaks the contract fails these tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable

import pytest
from conftest import BASE_REPO, FORK_REPO, FORK_REPO_ID, Event, event_loader, merge_group_event, write_options

from ghbuild import cli
from ghbuild.errors import UsageError
from ghbuild.github.context import EVENTS, ContextFlags, from_environment
from ghbuild.naming import TAG_RE
from ghbuild.plan import planner

IMAGES = ("cpu", "rocm")
SUFFIX = {"amd64": "x86_64", "arm64": "arm64"}
SHA_RE = re.compile(r"^[0-9a-f]{40}$")
SHA_MASTER = "266574110acf203503badf966df2ea24b5d732d7"


def h12(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def preview(repo: str, branch: str) -> str:
    cut = re.sub(r"[^A-Za-z0-9_.-]", "_", branch)[:24].strip("-.") or "_"
    return f"preview-{cut}-{h12(repo + ':' + branch)}"


def pr(number: int, source: str) -> str:
    return f"pr-{number}-{h12(source)}"


PR15 = pr(15, FORK_REPO)
DEV = preview(BASE_REPO, "dev")


def gha_scopes(entries) -> list[str]:
    return [e.split("scope=", 1)[1].split(",", 1)[0] for e in entries if e.startswith("type=gha,")]


def registry_refs(entries) -> list[str]:
    return [e.split("ref=", 1)[1].split(",", 1)[0] for e in entries if e.startswith("type=registry,")]


def tag_of(reference: str) -> str:
    return reference.rsplit(":", 1)[1]


def cache_keys(entries) -> list[str]:
    return gha_scopes(entries) + [tag_of(r) for r in registry_refs(entries)]


# --------------------------------------------------------------------------- cache scopes

def test_push_to_the_default_branch_writes_and_reads_the_main_scope(event, plan_for):
    p = plan_for(event("push_master"))
    job = p.job("cpu", "amd64")
    assert job.cache_to == (
        "type=gha,scope=master-cpu-x86_64,mode=max,ignore-error=true",
        "type=registry,ref=ghcr.io/docker/ci-cache:master-cpu-x86_64,mode=max,ignore-error=true,"
        "image-manifest=true,oci-mediatypes=true",
    )
    # De-duplicated: one ref per cache type, not the same scope three times.
    assert job.cache_from == (
        "type=gha,scope=master-cpu-x86_64",
        "type=registry,ref=ghcr.io/docker/ci-cache:master-cpu-x86_64",
    )


def test_push_to_another_branch_writes_its_scope_and_reads_it_then_main(event, plan_for):
    p = plan_for(event("push_dev"))
    job = p.job("rocm", "arm64")
    assert gha_scopes(job.cache_to) == [f"{DEV}-rocm-arm64"]
    # Untrusted scopes live in a repository of their own; the canonical one is read from the trusted one.
    assert registry_refs(job.cache_to) == [f"ghcr.io/docker/ci-cache-untrusted:{DEV}-rocm-arm64"]
    assert job.cache_from == (
        f"type=gha,scope={DEV}-rocm-arm64",
        f"type=registry,ref=ghcr.io/docker/ci-cache-untrusted:{DEV}-rocm-arm64",
        "type=gha,scope=master-rocm-arm64",
        "type=registry,ref=ghcr.io/docker/ci-cache:master-rocm-arm64",
    )


@pytest.mark.parametrize("name", ["pull_request", "pull_request_target"])
def test_pull_request_into_the_default_branch_reads_pr_then_main(event, plan_for, name):
    # A same-repository PR: the case that may write (a fork's writes are checked below).
    ev = event(name).same_repo(branch="feature")
    own = pr(15, BASE_REPO)
    p = plan_for(ev)
    assert p.trust.read_scopes == (own, "master")
    job = p.job("cpu", "arm64")
    # pull_request_target's GitHub Actions cache entries would be stored under the base branch's scope.
    assert gha_scopes(job.cache_to) == ([] if name == "pull_request_target" else [f"{own}-cpu-arm64"])
    assert registry_refs(job.cache_to) == [f"ghcr.io/docker/ci-cache-untrusted:{own}-cpu-arm64"]
    # Nor reads: reading needs the runtime token, which can write.
    assert gha_scopes(job.cache_from) == ([] if name == "pull_request_target" else [f"{own}-cpu-arm64",
                                                                                  "master-cpu-arm64"])
    assert registry_refs(job.cache_from) == [f"ghcr.io/docker/ci-cache-untrusted:{own}-cpu-arm64",
                                             "ghcr.io/docker/ci-cache:master-cpu-arm64"]


@pytest.mark.parametrize("name", ["pull_request", "pull_request_target"])
def test_pull_request_into_another_branch_reads_pr_then_base_then_main(event, plan_for, name):
    ev = event(name).same_repo(branch="feature").into_base("dev")
    own = pr(15, BASE_REPO)
    p = plan_for(ev)
    assert p.trust.read_scopes == (own, DEV, "master")
    job = p.job("rocm", "amd64")
    assert gha_scopes(job.cache_to) == ([] if name == "pull_request_target" else [f"{own}-rocm-x86_64"])
    assert gha_scopes(job.cache_from) == ([] if name == "pull_request_target" else
                                          [f"{own}-rocm-x86_64", f"{DEV}-rocm-x86_64", "master-rocm-x86_64"])
    assert registry_refs(job.cache_from) == [f"ghcr.io/docker/ci-cache-untrusted:{own}-rocm-x86_64",
                                             f"ghcr.io/docker/ci-cache-untrusted:{DEV}-rocm-x86_64",
                                             "ghcr.io/docker/ci-cache:master-rocm-x86_64"]


def test_pull_request_reads_exactly_what_pushes_to_its_base_write(event, plan_for):
    """The read chain is useful only if its refs are the ones the base branch's pushes write."""
    for base, push in (("master", event("push_master")), ("dev", event("push_dev"))):
        pushed = plan_for(push)
        pull = plan_for(event("pull_request").into_base(base))
        for job in pull.jobs:
            to = pushed.job(job.image, job.arch).cache_to
            assert len(to) == 2
            assert set(gha_scopes(to)) <= set(gha_scopes(job.cache_from)), base
            assert set(registry_refs(to)) <= set(registry_refs(job.cache_from)), base


# --------------------------------------------------------------------------- trust table

def _push_tag(event) -> Event:
    ev = event("push_master")
    ev = ev.edited(GITHUB_REF="refs/tags/v1.0", GITHUB_REF_NAME="v1.0")
    ev.payload["ref"] = "refs/tags/v1.0"
    return ev


def _fork_push(event, branch: str = "master") -> Event:
    ev = event("push_master").in_repository(FORK_REPO, FORK_REPO_ID)
    return ev if branch == "master" else ev.on_branch(branch)


W = dict(registry_write=True, gha_write=True, secrets=True, push=True)      # may write its own scope
FORK = dict(registry_write=False, gha_write=True, secrets=False, push=False)  # fork pull_request
READ_ONLY = dict(registry_write=False, gha_write=False, secrets=False, push=False)
PRT_SAME = dict(registry_write=True, gha_write=False, secrets=True, push=True)    # same-repo pull_request_target

# id: (event builder, make_options kwargs, trusted, write permissions, own scope, read chain)
TRUST_CASES: dict[str, tuple[Callable, dict, bool, dict, str | None, tuple[str, ...] | None]] = {
    "push default branch": (lambda e: e("push_master"), {}, True, W, "master", ("master",)),
    "push other branch": (lambda e: e("push_dev"), {}, False, W, DEV, (DEV, "master")),
    "push tag": (_push_tag, {}, False, W, preview(BASE_REPO, "v1.0"), (preview(BASE_REPO, "v1.0"), "master")),
    "schedule default branch": (lambda e: e("schedule"), {}, True, W, "master", ("master",)),
    "dispatch default branch": (lambda e: e("workflow_dispatch"), {}, True, W, "master", ("master",)),
    "dispatch other branch": (lambda e: e("workflow_dispatch").on_branch("dev"), {}, False, W, DEV, (DEV, "master")),
    "pull_request fork": (lambda e: e("pull_request"), {}, False, FORK, PR15, (PR15, "master")),
    "pull_request second fork": (lambda e: e("pull_request").second_fork(), {}, False, FORK,
                                 pr(16, "octo-contrib/test-docker-action"), None),
    "pull_request same repo": (lambda e: e("pull_request").same_repo(), {}, False, W, pr(15, BASE_REPO),
                               (pr(15, BASE_REPO), "master")),
    "pull_request deleted fork": (lambda e: e("pull_request").deleted_fork(), {}, False, FORK, None, None),
    "pull_request fork into other base": (lambda e: e("pull_request").into_base("dev"), {}, False, FORK, PR15,
                                          (PR15, DEV, "master")),
    "pull_request_target fork": (lambda e: e("pull_request_target"), {}, False, READ_ONLY, PR15, (PR15, "master")),
    "pull_request_target second fork": (lambda e: e("pull_request_target").second_fork(), {}, False, READ_ONLY,
                                        pr(16, "octo-contrib/test-docker-action"), None),
    "pull_request_target deleted fork": (lambda e: e("pull_request_target").deleted_fork(), {}, False,
                                         READ_ONLY, None, None),
    "pull_request_target fork into other base": (lambda e: e("pull_request_target").into_base("dev"), {}, False,
                                                 READ_ONLY, PR15, (PR15, DEV, "master")),
    # Its GitHub Actions cache writes would land in the base branch's scope: no GHA cache writes.
    "pull_request_target same repo": (lambda e: e("pull_request_target").same_repo(), {}, False, PRT_SAME,
                                      pr(15, BASE_REPO), (pr(15, BASE_REPO), "master")),
    "merge_group": (lambda e: e("merge_group"), {}, False, W, f"mq-master-{h12(BASE_REPO + ':master')}",
                    (f"mq-master-{h12(BASE_REPO + ':master')}", "master")),
    "merge_group other base": (lambda e: merge_group_event(e("push_master"), base="dev"), {}, False, W,
                               f"mq-dev-{h12(BASE_REPO + ':dev')}", (f"mq-dev-{h12(BASE_REPO + ':dev')}", DEV,
                                                                     "master")),
    "fork push to its default branch": (_fork_push, {}, False, W, preview(FORK_REPO, "master"),
                                        (preview(FORK_REPO, "master"), "master")),
    "fork push to another branch": (lambda e: _fork_push(e, "dev"), {}, False, W, preview(FORK_REPO, "dev"),
                                    (preview(FORK_REPO, "dev"), "master")),
    "fork schedule": (lambda e: e("schedule").in_repository(FORK_REPO, FORK_REPO_ID), {}, False, W,
                      preview(FORK_REPO, "master"), None),
    # trust.canonical-repository unset: the repository the workflow runs in is canonical for itself.
    "fork push, no canonical configured": (_fork_push, {"canonical": None}, True, W, "master", ("master",)),
    "canonical is another repository": (lambda e: e("push_master"), {"canonical": "docker/other"}, False, W,
                                        preview(BASE_REPO, "master"), (preview(BASE_REPO, "master"), "master")),
    "default branch main: push main": (lambda e: e("push_master").default_branch("main").on_branch("main"), {},
                                       True, W, "main", ("main",)),
    "default branch main: push master": (lambda e: e("push_master").default_branch("main"), {}, False, W,
                                         preview(BASE_REPO, "master"), (preview(BASE_REPO, "master"), "main")),
    "default branch main: PR into master": (lambda e: e("pull_request").default_branch("main"), {}, False, FORK,
                                            PR15, (PR15, preview(BASE_REPO, "master"), "main")),
    "stable-branch set: push default branch": (lambda e: e("push_master"), {"stable": "release"}, False, W,
                                               preview(BASE_REPO, "master"),
                                               (preview(BASE_REPO, "master"), "release")),
    "stable-branch set: push stable, protected": (
        lambda e: e("push_master").on_branch("release").edited(GITHUB_REF_PROTECTED="true"), {"stable": "release"},
        True, W, "release", ("release",)),
    # Trust never comes from the checkout alone: an unprotected branch that names itself stable is not trusted.
    "stable-branch set: push stable, not protected": (
        lambda e: e("push_master").on_branch("release").edited(GITHUB_REF_PROTECTED="false"), {"stable": "release"},
        False, W, preview(BASE_REPO, "release"), (preview(BASE_REPO, "release"), "master")),
    "stable-branch set: push stable, protection not reported": (
        lambda e: e("push_master").on_branch("release"), {"stable": "release"},
        False, W, preview(BASE_REPO, "release"), (preview(BASE_REPO, "release"), "master")),
    "a branch's config names that branch stable": (lambda e: e("push_dev"), {"stable": "dev"}, False, W, DEV,
                                                   (DEV, "master")),
    "stable-branch is the default branch": (lambda e: e("push_master"), {"stable": "master"}, True, W, "master",
                                            ("master",)),
    "stable-branch set: PR into stable": (lambda e: e("pull_request").into_base("release"), {"stable": "release"},
                                          False, FORK, PR15, (PR15, "release")),
}


@pytest.mark.parametrize("case", list(TRUST_CASES))
def test_trust(event, make_options, case):
    build, option_kwargs, trusted, perms, scope, reads = TRUST_CASES[case]
    p = planner.plan(build(event).context(), make_options(**option_kwargs))
    t = p.trust
    assert t.trusted is trusted
    assert (t.registry_write, t.gha_write, t.secrets) == (perms["registry_write"], perms["gha_write"],
                                                          perms["secrets"])
    if scope is not None:
        assert t.scope == scope
    if reads is not None:
        assert t.read_scopes == reads
    assert t.write_scope == (None if perms == READ_ONLY else t.scope)
    for job in p.jobs:
        assert job.push is perms["push"]
        assert job.secrets is perms["secrets"]
        expected_to = []
        key = f"{t.scope}-{job.image}-{SUFFIX[job.arch]}"
        if perms["gha_write"]:
            expected_to.append(key)
        if perms["registry_write"]:
            expected_to.append(key)
        assert cache_keys(job.cache_to) == expected_to
        assert job.gha_scope == (key if perms["gha_write"] else None)
        # Trusted: <sha>-<suffix>; anything else: the run's own scope first.
        sha = p.context.sha
        tag = f"{sha}-{SUFFIX[job.arch]}" if trusted else f"{t.scope}-{sha}-{SUFFIX[job.arch]}"
        assert job.tags == (f"{job.staging_repository}:{tag}",)


def test_pull_request_target_runs_on_the_stable_branch_yet_is_never_trusted(event, plan_for):
    ev = event("pull_request_target").same_repo()
    ctx = ev.context()
    assert ctx.branch == "master" == ctx.default_branch  # GITHUB_REF is the base branch
    assert plan_for(ctx).trust.trusted is False


@pytest.mark.parametrize("variant", ["fork", "second fork", "deleted fork", "fork into other base",
                                     "fork, --head-repo names the base"])
def test_pull_request_target_with_a_fork_head_is_read_only_with_a_warning(event, plan_for, variant):
    ev = event("pull_request_target")
    overrides = None
    if variant == "second fork":
        ev = ev.second_fork()
    elif variant == "deleted fork":
        ev = ev.deleted_fork()
    elif variant == "fork into other base":
        ev = ev.into_base("release/2.x")
    elif variant == "fork, --head-repo names the base":
        overrides = ContextFlags(head_repo=BASE_REPO)
    p = plan_for(ev.context(overrides))
    assert p.trust.trusted is False
    assert p.trust.secrets is False
    assert p.trust.write_scope is None
    for job in p.jobs:
        assert job.cache_to == ()
        assert job.push is False
        assert job.secrets is False
        assert job.gha_scope is None
        assert job.cache_from  # it may still read
    assert len(p.warnings) == 1
    assert "pull_request_target" in p.warnings[0] and "fork" in p.warnings[0]
    data = p.to_dict()
    assert (data["context"]["registry_write"], data["context"]["gha_write"], data["context"]["secrets"]) == (
        False, False, False)


@pytest.mark.parametrize("canonical", [
    "docker/test-docker-action",
    "Docker/Test-Docker-Action",
    "https://github.com/docker/test-docker-action",
    "https://github.com/Docker/test-docker-action.git",
    "https://github.com/docker/test-docker-action/",
    "http://github.com/docker/test-docker-action.git/",
    "git@github.com:docker/test-docker-action.git",
    "ssh://git@github.com/docker/test-docker-action.git",
    "github.com/docker/test-docker-action",
])
def test_canonical_repository_given_as_url_is_normalised(event, make_options, canonical):
    options = make_options(canonical=canonical)
    assert options.trust.canonical_repository == BASE_REPO
    p = planner.plan(event("push_master").context(), options)
    assert p.trust.trusted is True
    assert p.trust.canonical_repository == BASE_REPO
    # GitHub spells the running repository its own way; the comparison ignores case.
    shouted = event("push_master").edited(GITHUB_REPOSITORY="DOCKER/Test-Docker-Action")
    assert planner.plan(shouted.context(), options).trust.trusted is True


@pytest.mark.parametrize("canonical", ["docker/test-docker-action2", "docker-x/test-docker-action",
                                       "https://github.com/docker/test-docker"])
def test_a_similar_but_different_canonical_repository_is_not_trusted(event, make_options, canonical):
    p = planner.plan(event("push_master").context(), make_options(canonical=canonical))
    assert p.trust.trusted is False


def test_without_any_stable_branch_information_main_is_assumed_with_a_warning(tmp_path, make_options):
    """Without a payload GitHub has not said which branch is the default: `main` names the canonical scope,
    but no run is trusted on that assumption (--default-branch or the payload makes it known)."""
    options = make_options()
    for ref, trusted in (("main", False), ("master", False)):
        ctx = from_environment({}, ContextFlags(event="push", repository=BASE_REPO, ref=ref, sha="a" * 40),
                               cwd=tmp_path)
        assert ctx.default_branch is None
        p = planner.plan(ctx, options)
        assert p.trust.stable_branch == "main"
        assert p.trust.trusted is trusted
        assert any("main" in w and "stable branch" in w for w in p.warnings)


def test_a_fork_push_reads_the_canonical_cache_of_the_canonical_owner(event, plan_for):
    p = plan_for(_fork_push(event, "dev"))
    job = p.job("cpu", "amd64")
    own = preview(FORK_REPO, "dev")
    # Writes go to the fork's own namespace; the fallback is the cache the canonical repository writes.
    assert registry_refs(job.cache_to) == [f"ghcr.io/crazy-max/ci-cache-untrusted:{own}-cpu-x86_64"]
    assert registry_refs(job.cache_from) == [f"ghcr.io/crazy-max/ci-cache-untrusted:{own}-cpu-x86_64",
                                             "ghcr.io/docker/ci-cache:master-cpu-x86_64"]
    canonical = plan_for(event("push_master")).job("cpu", "amd64")
    assert set(registry_refs(canonical.cache_to)) <= set(registry_refs(job.cache_from))
    assert job.tags == (f"ghcr.io/crazy-max/ci-cpu-untrusted:{own}-{SHA_MASTER}-x86_64",)


# --------------------------------------------------------------------------- invariants over many runs

EDGE_BRANCHES = [
    "a" * 250,                                   # long: beyond any tag limit
    "a" * 30 + "1",                              # long, same 24-char prefix as the next one
    "a" * 30 + "2",
    "feature/ünïcødé-分支",                       # unicode
    "🚀/rocket",
    "a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q/r/s/t",   # slash-filled
    "dependabot/pip/torch-2.5.1",
    "-leading-dash",                             # starts with punctuation
    ".leading-dot",
    "_leading-underscore",
    "#123-hash",
    "+plus",
    "release/1.2",                               # differ only in punctuation / case
    "release_1.2",
    "release-1.2",
    "release.1.2",
    "Release/1.2",
]


def _edge_runs() -> dict[str, Callable]:
    runs: dict[str, Callable] = {}
    for i, name in enumerate(EDGE_BRANCHES):
        runs[f"push {i}"] = lambda e, n=name: e("push_master").on_branch(n)
        runs[f"fork push {i}"] = lambda e, n=name: _fork_push(e, n)
        runs[f"dispatch {i}"] = lambda e, n=name: e("workflow_dispatch").on_branch(n)
        runs[f"PR into {i}"] = lambda e, n=name: e("pull_request").into_base(n)
        runs[f"PR from {i}"] = lambda e, n=name: e("pull_request").head_branch(n)
        runs[f"PRT fork into {i}"] = lambda e, n=name: e("pull_request_target").into_base(n)
        runs[f"PRT same repo from {i}"] = lambda e, n=name: e("pull_request_target").same_repo(branch=n)
        runs[f"merge queue into {i}"] = lambda e, n=name: merge_group_event(e("push_master"), base=n)
        runs[f"default branch {i}"] = lambda e, n=name: e("push_master").default_branch(n).on_branch(n)
    return runs


RUNS: dict[str, Callable] = {
    **{case: spec[0] for case, spec in TRUST_CASES.items() if not spec[1]},
    **_edge_runs(),
}


@pytest.fixture(scope="module")
def all_plans(tmp_path_factory):
    """Every run above, planned once (module scope keeps the suite fast)."""
    tmp = tmp_path_factory.mktemp("plans")
    load = event_loader(tmp / "events")
    options = write_options(tmp / "project")
    return {run_id: planner.plan(build(load).context(), options) for run_id, build in RUNS.items()}


def _canonical_keys(p: planner.Plan) -> set[str]:
    return {f"{p.trust.canonical_scope}-{image}-{suffix}" for image in IMAGES for suffix in SUFFIX.values()}


def test_every_tag_is_a_valid_tag_of_at_most_128_characters(all_plans):
    for run_id, p in all_plans.items():
        for job in p.jobs:
            refs = list(job.tags) + registry_refs(job.cache_from) + registry_refs(job.cache_to)
            assert refs, run_id
            for ref in refs:
                tag = tag_of(ref)
                assert len(tag) <= 128, (run_id, ref)
                assert TAG_RE.match(tag), (run_id, ref)
            for key in gha_scopes(job.cache_from) + gha_scopes(job.cache_to):
                assert TAG_RE.match(key), (run_id, key)


def test_untrusted_plans_write_nothing_canonical(all_plans):
    for run_id, p in all_plans.items():
        if p.trust.trusted:
            continue
        assert p.trust.write_scope != p.trust.canonical_scope, run_id
        canonical = _canonical_keys(p)
        for job in p.jobs:
            assert not canonical & set(cache_keys(job.cache_to)), run_id
            for ref in job.tags:
                tag = tag_of(ref)
                assert not re.match(r"^[0-9a-f]{40}-", tag), (run_id, ref)  # no bare <sha>-<suffix>
                # The run's own scope, then the commit: <scope>-<sha>-<suffix>.
                assert tag == f"{p.trust.scope}-{p.context.sha}-{SUFFIX[job.arch]}", (run_id, ref)


def test_trusted_plans_write_the_canonical_scope_and_plain_commit_tags(all_plans):
    trusted = {run_id: p for run_id, p in all_plans.items() if p.trust.trusted}
    assert {"push default branch", "schedule default branch", "dispatch default branch"} <= set(trusted)
    for run_id, p in trusted.items():
        assert p.context.event in ("push", "schedule", "workflow_dispatch"), run_id
        assert p.context.branch == p.trust.stable_branch
        assert p.trust.read_scopes == (p.trust.canonical_scope,)
        for job in p.jobs:
            assert job.tags == (f"{job.staging_repository}:{p.context.sha}-{SUFFIX[job.arch]}",)
            assert set(cache_keys(job.cache_to)) == {f"{p.trust.canonical_scope}-{job.image}-{SUFFIX[job.arch]}"}


def test_no_fork_pull_request_gets_secrets_or_registry_writes(all_plans):
    for run_id, p in all_plans.items():
        if p.context.event in ("pull_request", "pull_request_target") and p.context.is_fork:
            assert p.trust.secrets is False, run_id
            assert p.trust.registry_write is False, run_id
            for job in p.jobs:
                assert registry_refs(job.cache_to) == [], run_id
                assert job.push is False
            if p.context.event == "pull_request_target":
                assert all(job.cache_to == () for job in p.jobs), run_id
                assert p.warnings, run_id


def test_read_lists_are_ordered_and_de_duplicated(all_plans):
    for run_id, p in all_plans.items():
        reads = p.trust.read_scopes
        assert len(reads) == len(set(reads)), run_id
        assert reads[0] == p.trust.scope and reads[-1] == p.trust.canonical_scope, run_id
        for job in p.jobs:
            suffix = f"-{job.image}-{SUFFIX[job.arch]}"
            # No type=gha read without the right to write: the runtime token it needs could write.
            assert gha_scopes(job.cache_from) == ([s + suffix for s in reads] if p.trust.gha_write else []), run_id
            keys = [tag_of(r) for r in registry_refs(job.cache_from)]
            assert keys == [s + suffix for s in reads], run_id
            assert len(job.cache_from) == len(set(job.cache_from)), run_id


def test_cache_scopes_are_unique_per_image_arch_within_a_plan(all_plans):
    for run_id, p in all_plans.items():
        assert len(p.jobs) == 4, run_id
        assert {(j.image, j.arch) for j in p.jobs} == {(i, a) for i in IMAGES for a in SUFFIX}
        written = [k for job in p.jobs for k in gha_scopes(job.cache_to)]
        assert len(written) == len(set(written)), run_id
        for job in p.jobs:
            # Every cache key a job touches carries its own image and arch.
            for key in cache_keys(job.cache_from) + cache_keys(job.cache_to):
                assert key.endswith(f"-{job.image}-{SUFFIX[job.arch]}"), (run_id, key)


def test_cache_scopes_differ_per_ref_so_runs_never_overwrite_each_other(all_plans):
    """Runs on different refs never write the same GitHub Actions cache scope or registry cache tag."""
    owners: dict[str, str] = {}
    for run_id, p in all_plans.items():
        if p.trust.write_scope is None:
            continue
        if p.context.pull_request is not None:
            # Both PR events of one pull request are the same source: the same scope is expected.
            source = f"pull request {p.context.pull_request} from {p.context.head_repository}"
        else:
            source = p.context.ref
        ref = (p.context.repository.lower(), source)
        for job in p.jobs:
            for key in cache_keys(job.cache_to):
                where = f"{ref}|{job.image}|{job.arch}"
                assert owners.setdefault(key, where) == where, (run_id, key, owners[key])


def test_edge_branch_names_get_distinct_well_formed_scopes(all_plans):
    for kind in ("push", "fork push", "PR into", "merge queue into", "default branch"):
        scopes = {}
        for i, name in enumerate(EDGE_BRANCHES):
            p = all_plans[f"{kind} {i}"]
            scope = p.trust.scope if kind in ("push", "fork push", "merge queue into", "default branch") \
                else p.trust.read_scopes[1]
            assert TAG_RE.match(scope) and len(scope) <= 64, (kind, name, scope)
            scopes[name] = scope
        assert len(set(scopes.values())) == len(EDGE_BRANCHES), kind
    for i, name in enumerate(EDGE_BRANCHES):
        repo = BASE_REPO
        assert all_plans[f"push {i}"].trust.scope == preview(repo, name)
        assert all_plans[f"PR into {i}"].trust.read_scopes == (PR15, preview(repo, name), "master")
        assert all_plans[f"fork push {i}"].trust.scope == preview(FORK_REPO, name)
        # The head branch of a PR is not part of its scope: the number and source repository are.
        assert all_plans[f"PR from {i}"].trust.scope == PR15
        assert all_plans[f"default branch {i}"].trust.trusted is True


def test_two_forks_with_the_same_branch_name_never_share_a_scope_or_tag(event, plan_for):
    runs = {
        "fork A #15": event("pull_request"),
        "fork B #16": event("pull_request").second_fork(number=16),
        # Even under the same number (a re-created PR, another base repository's numbering),
        # the source repository keeps them apart.
        "fork B #15": event("pull_request").second_fork(number=15),
        "target fork A": event("pull_request_target"),
        "target fork B": event("pull_request_target").second_fork(number=16),
    }
    plans = {run_id: plan_for(ev) for run_id, ev in runs.items()}
    assert {p.context.head_ref for p in plans.values()} == {"test-pr"}
    scopes = {run_id: p.trust.scope for run_id, p in plans.items()}
    assert len({scopes["fork A #15"], scopes["fork B #16"], scopes["fork B #15"]}) == 3
    assert scopes["target fork A"] == scopes["fork A #15"]  # the same PR, the same scope
    # Neither reads the other's scope.
    assert scopes["fork B #16"] not in plans["fork A #15"].trust.read_scopes
    assert scopes["fork A #15"] not in plans["fork B #16"].trust.read_scopes
    a, b = plans["fork A #15"], plans["fork B #16"]
    assert not {t for j in a.jobs for t in j.tags} & {t for j in b.jobs for t in j.tags}
    keys_a = {k for j in a.jobs for k in cache_keys(j.cache_to)}
    assert not (keys_a & {k for j in b.jobs for k in cache_keys(j.cache_to)})


def test_a_deleted_fork_gets_its_own_pull_request_scope(event, plan_for):
    deleted = plan_for(event("pull_request").deleted_fork()).trust.scope
    assert deleted.startswith("pr-15-")
    # Neither the live fork's scope nor the scope of a branch of the base repository.
    assert deleted not in (PR15, pr(15, BASE_REPO))


def test_two_forks_pushing_the_same_branch_name_never_share_a_scope(event, plan_for):
    one = plan_for(_fork_push(event, "fix/bug"))
    other = plan_for(event("push_master").in_repository("octo-contrib/test-docker-action", 1).on_branch("fix/bug"))
    assert one.trust.scope != other.trust.scope
    assert not ({k for j in one.jobs for k in cache_keys(j.cache_to)}
                & {k for j in other.jobs for k in cache_keys(j.cache_to)})


def test_plan_is_deterministic(event, plan_for):
    assert plan_for(event("pull_request")).to_dict() == plan_for(event("pull_request")).to_dict()


def test_image_and_arch_selection(event, options):
    p = planner.plan(event("push_master").context(), options, images=["rocm"], arches=["arm64"])
    assert [(j.image, j.arch, j.platform, j.runs_on) for j in p.jobs] == [
        ("rocm", "arm64", "linux/arm64", ("ubuntu-24.04-arm",))]
    assert planner.plan(event("push_master").context(), options, images=["rocm"], arches=["amd64"]).jobs[0].runs_on \
        == ("self-hosted", "linux", "rocm")
    with pytest.raises(UsageError, match="--image gpu"):
        planner.plan(event("push_master").context(), options, images=["gpu"])


# --------------------------------------------------------------------------- the `plan --json` contract

CONTRACT_EVENTS = {
    "push": (lambda e: e("push_master"), True),
    "pull_request": (lambda e: e("pull_request"), False),
    "pull_request_target": (lambda e: e("pull_request_target"), False),
    "schedule": (lambda e: e("schedule"), True),
    "workflow_dispatch": (lambda e: e("workflow_dispatch"), True),
    "merge_group": (lambda e: e("merge_group"), False),
}


def test_contract_covers_every_supported_event():
    assert set(CONTRACT_EVENTS) == set(EVENTS)


@pytest.mark.parametrize("name", list(CONTRACT_EVENTS))
def test_plan_json_contract(event, options, monkeypatch, capsys, name):
    build, trusted = CONTRACT_EVENTS[name]
    env = build(event).environ()
    for key in list(os.environ):
        if key.startswith(("GITHUB_", "GHBUILD_", "RUNNER_", "INPUT_")):
            monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(options.config_path.parent)

    assert cli.main(["plan", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)

    ctx = data["context"]
    types = {"event": str, "repository": str, "canonical_repository": str, "ref": str, "sha": str,
             "trusted": bool, "scope": str}
    for key, kind in types.items():
        assert isinstance(ctx[key], kind), key
    assert ctx["event"] == name
    assert SHA_RE.match(ctx["sha"])
    assert ctx["ref"].startswith("refs/")
    assert ctx["canonical_repository"] == BASE_REPO
    assert ctx["trusted"] is trusted
    assert ctx["head_repository"] is None or isinstance(ctx["head_repository"], str)
    if name in ("pull_request", "pull_request_target"):
        assert type(ctx["pull_request"]) is int and ctx["pull_request"] == 15
    else:
        assert ctx["pull_request"] is None
    assert TAG_RE.match(ctx["scope"])

    jobs = data["jobs"]
    assert len(jobs) == 4
    for job in jobs:
        assert isinstance(job["image"], str) and job["image"] in IMAGES
        assert job["arch"] in ("amd64", "arm64")
        assert job["platform"] == f"linux/{job['arch']}"
        for key in ("runs_on", "tags", "cache_from", "cache_to"):
            assert isinstance(job[key], list) and all(isinstance(x, str) for x in job[key]), key
        assert job["runs_on"]
        assert job["cache_from"]
        for tag in job["tags"]:
            repository, _, tag_text = tag.rpartition(":")
            assert repository.startswith("ghcr.io/docker/ci-") and TAG_RE.match(tag_text), tag
    assert len({(j["image"], j["arch"]) for j in jobs}) == 4


# --------------------------------------------------------------------------- content-addressed bases

BASES = """
[images.rocm-base]
dockerfile = "docker/Dockerfile.rocm_base"
platforms = ["linux/amd64"]
identity = { version = "1", inputs = ["docker/rocm/**"] }

[images.app]
dockerfile = "docker/Dockerfile.app"
platforms = ["linux/amd64"]
base = "rocm-base"
"""
IDENT = "f" * 64


def test_bases_are_not_in_the_build_matrix_and_consumers_name_them(event, plan_for, make_options):
    p = plan_for(event("push_master"), make_options(extra=BASES))
    ids = [e["id"] for e in p.matrix()["include"]]
    assert "rocm-base-amd64" not in ids
    assert {e["id"]: e["base"] for e in p.matrix()["include"]}["app-amd64"] == "rocm-base"
    assert p.bases_matrix({"rocm-base-amd64": IDENT})["include"] == [
        {"id": "rocm-base-amd64", "image": "rocm-base", "arch": "amd64", "platform": "linux/amd64",
         "runs_on": ["ubuntu-24.04"], "identity": IDENT, "group": f"master-rocm-base-amd64-{IDENT}"}]
    # selecting the consumer plans its base too (ensure-base runs before it)
    only_app = planner.plan(event("push_master").context(), make_options(extra=BASES), images=["app"])
    assert {j.image for j in only_app.jobs} == {"app", "rocm-base"}


def test_trusted_base_refs_read_and_write_only_the_canonical_tag(event, plan_for, make_options):
    p = plan_for(event("push_master"), make_options(extra=BASES))
    refs = planner.base_refs(p, p.job("rocm-base", "amd64"), IDENT)
    assert refs.read == (f"ghcr.io/docker/ci-rocm-base:rocm-base-{IDENT}",)
    assert refs.write == refs.read[0]


@pytest.mark.parametrize("name", ["push_dev", "pull_request"])
def test_untrusted_base_refs_read_canonical_first_and_write_only_their_own(event, plan_for, make_options, name):
    p = plan_for(event(name), make_options(extra=BASES))
    job = p.job("rocm-base", "amd64")
    refs = planner.base_refs(p, job, IDENT)
    canonical = f"ghcr.io/docker/ci-rocm-base:rocm-base-{IDENT}"
    assert refs.read[0] == canonical
    own = refs.read[1]
    scope = DEV if name == "push_dev" else PR15
    assert tag_of(own).startswith(scope) and tag_of(own).endswith(f"-rocm-base-{IDENT}")
    assert TAG_RE.match(tag_of(own)) and len(tag_of(own)) <= 128
    # a fork PR has no registry credentials: it writes nothing; a branch of the repository writes its own ref
    assert refs.write == (None if name == "pull_request" else own)
    assert refs.write != canonical


def test_a_fork_push_reads_the_canonical_owner_and_writes_its_own_namespace(event, plan_for, make_options):
    fork_push = event("push_master").in_repository(FORK_REPO, FORK_REPO_ID)
    p = plan_for(fork_push, make_options(extra=BASES))
    refs = planner.base_refs(p, p.job("rocm-base", "amd64"), IDENT)
    assert refs.read[0] == f"ghcr.io/docker/ci-rocm-base:rocm-base-{IDENT}"
    assert refs.write and refs.write.startswith("ghcr.io/crazy-max/ci-rocm-base-untrusted:")


@pytest.mark.parametrize("name", ["push_dev", "pull_request same repo", "pull_request_target same repo",
                                  "merge_group", "tag"])
def test_no_untrusted_run_writes_a_repository_a_trusted_run_reads(event, plan_for, make_options, name):
    """The trusted build imports its cache and finds its bases in the trusted repositories; every repository an
    untrusted run writes (cache, per-commit and base-identity tags) is another one, so that the trusted ones can
    be read-only to any credential an untrusted job holds (docs/trust.md: Who can write what)."""
    options = make_options(extra=BASES)
    untrusted_ev = {"push_dev": lambda: event("push_dev"),
                    "pull_request same repo": lambda: event("pull_request").same_repo(),
                    "pull_request_target same repo": lambda: event("pull_request_target").same_repo(),
                    "merge_group": lambda: event("merge_group"), "tag": lambda: _push_tag(event)}[name]()
    trusted, untrusted = plan_for(event("push_master"), options), plan_for(untrusted_ev, options)
    assert trusted.trust.trusted and not untrusted.trust.trusted
    read = {ref.split(":", 1)[0] for job in trusted.jobs for ref in registry_refs(job.cache_from)}
    read |= {job.staging_repository for job in trusted.jobs}
    read |= {planner.base_refs(trusted, job, IDENT).read[0].split(":", 1)[0] for job in trusted.jobs
             if job.identity_prefix}
    written = {ref.split(":", 1)[0] for job in untrusted.jobs for ref in registry_refs(job.cache_to)}
    written |= {tag.split(":", 1)[0] for job in untrusted.jobs for tag in job.tags}
    written |= {(planner.base_refs(untrusted, job, IDENT).write or ":").split(":", 1)[0]
                for job in untrusted.jobs if job.identity_prefix}
    assert written and read and not (read & written), read & written
    assert all(repo.endswith("-untrusted") for repo in written - {""})


def test_base_refs_refuse_an_image_without_identity(event, plan_for, make_options):
    p = plan_for(event("push_master"), make_options(extra=BASES))
    with pytest.raises(UsageError, match="not content-addressed"):
        planner.base_refs(p, p.job("app", "amd64"), IDENT)


def test_a_fork_pull_request_plans_nothing_on_self_hosted_runners_by_default(event, make_options):
    """Default trust.self-hosted-for-forks = false: a fork's code never runs on a persistent runner."""
    options = make_options(extra=BASES)
    options = options._replace(trust=type(options.trust)(
        canonical_repository=options.trust.canonical_repository, stable_branch=options.trust.stable_branch))
    fork = planner.plan(event("pull_request").context(), options)
    assert "rocm-amd64" not in [j.id for j in fork.jobs] and "cpu-amd64" in [j.id for j in fork.jobs]
    assert any("rocm-amd64: not planned for a pull request from a fork" in w for w in fork.warnings)
    same_repo = planner.plan(event("pull_request").same_repo().context(), options)
    assert "rocm-amd64" in [j.id for j in same_repo.jobs]


def test_a_branch_naming_itself_stable_is_warned_about_and_gets_no_canonical_write(event, make_options):
    """A feature branch whose ghbuild.toml says stable-branch = <itself>: no canonical scope, no staging
    <sha>-<arch> tag (what nightlies publish), a warning naming the setting."""
    p = planner.plan(event("push_dev").context(), make_options(stable="dev"))
    assert p.trust.trusted is False and p.trust.write_scope == DEV and "master" in p.trust.read_scopes
    assert any("trust.stable-branch = 'dev' ignored" in w and "GITHUB_REF_PROTECTED" in w for w in p.warnings)
    sha = event("push_dev").env["GITHUB_SHA"]
    assert all(not tag.endswith(f":{sha}-x86_64") for job in p.jobs for tag in job.tags)
    assert all("scope=master-" not in ref and ":master-" not in ref for job in p.jobs for ref in job.cache_to)


@pytest.mark.parametrize("labels", [["Self-Hosted", "linux", "rocm"], ["SELF-HOSTED"], ["linux", "rocm"],
                                    ["gpu-runner"], ["ubuntu-24.04", "gpu"], ["my-ubuntu-24.04"]])
def test_a_fork_pull_request_plans_nothing_that_is_not_github_hosted_however_spelt(event, make_options, labels):
    """GitHub matches labels case-insensitively, and custom labels alone route to self-hosted runners."""
    options = make_options(extra=f"\n[images.gpu]\ndockerfile = \"docker/Dockerfile.gpu\"\n"
                                 f"platforms = [\"linux/amd64\"]\nrunners.amd64 = {json.dumps(labels)}\n")
    options = options._replace(trust=type(options.trust)(
        canonical_repository=options.trust.canonical_repository, stable_branch=options.trust.stable_branch))
    fork = planner.plan(event("pull_request").context(), options)
    assert "gpu-amd64" not in [j.id for j in fork.jobs]
    assert "gpu-amd64" in [j.id for j in planner.plan(event("pull_request").same_repo().context(), options).jobs]


@pytest.mark.parametrize("label", ["ubuntu-24.04", "UBUNTU-24.04-ARM", "ubuntu-latest", "windows-2022",
                                   "macos-15", "macos-14-xlarge", "ubuntu-26.04", "macos-15-intel", "ubuntu-slim"])
def test_github_hosted_labels_are_recognised_in_any_case(label):
    assert planner.github_hosted([label]) and not planner.github_hosted([label, "self-hosted"])


@pytest.mark.parametrize("label", ["ubuntu-99.04", "ubuntu-20.04", "windows-3000", "macos-99-xlarge", "macos-1",
                                   "ubuntu-24.04-16core", "ubuntu\u201024.04", "ubuntu-24.04-"])
def test_a_label_that_only_looks_hosted_counts_as_self_hosted(label):
    """GitHub's list of hosted labels, not a pattern: an unknown or retired name may be a self-hosted runner's own
    label. Larger runners (names an organization picks) are hosted only when listed in trust.hosted-runner-labels."""
    assert not planner.github_hosted([label])
    assert planner.github_hosted(["Ubuntu-24.04-16core"], extra=("ubuntu-24.04-16core",))
    assert not planner.github_hosted(["ubuntu-24.04-16core", "gpu"], extra=("ubuntu-24.04-16core",))
    assert not planner.github_hosted(["ubuntu-24.04", "ubuntu-24.04"])    # two labels, even the same one
