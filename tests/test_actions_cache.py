"""The GitHub Actions cache budget: the grouping of entries by ref and ghbuild scope (pure), and `ghbuild cache`
end to end through the command line against the GitHub fake (its wire format: pagination with Link headers,
total_count, usage, delete by id, pulls, branches). In-process fakes only: no service."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from conftest import run_in_process
from fakes import github as github_fake

import ghbuild.actions_cache as actions_cache
from ghbuild import naming
from ghbuild.actions_cache import scopes
from ghbuild.actions_cache.scopes import CacheEntry, Repository
from ghbuild.config import configfile, schema
from ghbuild.config.options import CacheOptions
from ghbuild.errors import ConfigError

REPO = "org/project"
CONFIG = """\
[trust]
canonical-repository = "org/project"

[images.cpu]
dockerfile = "Dockerfile"
platforms = ["linux/amd64", "linux/arm64"]

[images.rocm-cpu]
dockerfile = "Dockerfile"
"""
TOKEN, READ_ONLY = "ghs_cachetoken0123", "ghs_readonly0123"
TRUSTED_RUN = ("--event", "push", "--ref", "main", "--default-branch", "main", "--sha", "a" * 40)


def index_key(scope: str, image: str, suffix: str, ref: str) -> str:
    """What BuildKit's gha exporter names the index of `scope=<ghbuild cache key>` written under `ref`."""
    return f"index-{naming.sanitize_tag(scope, suffix=f'-{image}-{suffix}')}-1-{naming.short_hash(ref, 8)}"


def blob_key(n: int) -> str:
    return f"buildkit-blob-1-sha256:{n:064x}"


FACTS = Repository(REPO, "main", "main", True, ("cpu", "rocm-cpu"), ("x86_64", "arm64"))


# --------------------------------------------------------------------------- the grouping (pure)

@pytest.mark.parametrize("ref, facts, expected", [
    ("refs/heads/main", FACTS, ("trusted", "main")),
    ("refs/heads/main", FACTS._replace(canonical=False), ("default branch", "main")),
    ("refs/heads/main", FACTS._replace(stable_branch="release"), ("default branch", "main")),
    ("refs/heads/release", FACTS._replace(stable_branch="release"), ("trusted", "release")),
    ("refs/heads/feature/x", FACTS, ("branch", "feature/x")),
    ("refs/heads/gh-readonly-queue/main/pr-5-" + "a" * 40, FACTS,
     ("merge queue", "gh-readonly-queue/main/pr-5-" + "a" * 40)),
    ("refs/pull/15/merge", FACTS, ("pull request", "15")),
    ("refs/pull/15/head", FACTS, ("pull request", "15")),
    ("refs/pull/x/merge", FACTS, ("other", "refs/pull/x/merge")),
    ("refs/tags/v1.0", FACTS, ("tag", "v1.0")),
    ("main", FACTS, ("other", "main")),
])
def test_the_ref_says_whose_an_entry_is(ref, facts, expected):
    assert scopes.ref_kind(ref, facts) == expected


@pytest.mark.parametrize("scope, image, suffix, kind", [
    (naming.canonical_scope("main"), "cpu", "x86_64", "trusted"),
    (naming.pr_scope(15, "fork/project"), "cpu", "arm64", "pull request"),
    (naming.preview_scope(REPO, "feature/x"), "rocm-cpu", "x86_64", "branch"),
    (naming.merge_queue_scope(REPO, "main"), "cpu", "x86_64", "merge queue"),
])
def test_an_index_key_names_the_ghbuild_scope_image_and_arch(scope, image, suffix, kind):
    """Image names that end alike (cpu, rocm-cpu) are read as the config has them: the scope with ghbuild's shape."""
    key = index_key(scope, image, suffix, "refs/heads/whatever")
    assert scopes.scope_of_key(key, FACTS) == scopes.ScopeKey(scope, kind, image, suffix)
    assert scopes.entry_kind(key) == "index"


def test_blobs_and_other_tools_entries_name_no_scope():
    assert scopes.scope_of_key(blob_key(1), FACTS) is None and scopes.entry_kind(blob_key(1)) == "blob"
    assert scopes.scope_of_key("Linux-pip-0123abcd", FACTS) is None
    assert scopes.entry_kind("Linux-pip-0123abcd") == "other"
    # BuildKit's default scope (no scope= given): an index, of no ghbuild scope.
    assert scopes.scope_of_key("index-buildkit-1-0123abcd", FACTS) == scopes.ScopeKey("buildkit", "other", "", "")


def test_entries_from_the_api_need_an_id_a_ref_and_a_key():
    good = {"id": 7, "ref": "refs/heads/main", "key": "k", "size_in_bytes": 12, "created_at": "2025-01-01T00:00:00Z"}
    assert CacheEntry.from_api(good) == CacheEntry(7, "refs/heads/main", "k", 12, "2025-01-01T00:00:00Z", "")
    for bad in ({**good, "id": "7"}, {**good, "id": True}, {**good, "ref": None}, {"id": 1}, [good], None):
        assert CacheEntry.from_api(bad) is None
    assert CacheEntry.from_api({**good, "size_in_bytes": -5}).size == 0


def _entries() -> list[CacheEntry]:
    pr = naming.pr_scope(5, REPO)
    return [CacheEntry(1, "refs/heads/main", index_key("main", "cpu", "x86_64", "refs/heads/main"), 10),
            CacheEntry(2, "refs/heads/main", blob_key(1), 5000),
            CacheEntry(3, "refs/pull/5/merge", index_key(pr, "cpu", "x86_64", "refs/pull/5/merge"), 10),
            CacheEntry(4, "refs/pull/5/merge", index_key(pr, "cpu", "arm64", "refs/pull/5/merge"), 10),
            CacheEntry(5, "refs/pull/5/merge", blob_key(2), 900),
            CacheEntry(5, "refs/pull/5/merge", blob_key(2), 900),     # listed twice (pages shifted): once
            CacheEntry(6, "refs/heads/gone", "Linux-pip-1", 100)]


def test_groups_by_ref_largest_first_with_the_scopes_their_indexes_name():
    groups = scopes.group_entries(_entries(), FACTS)
    assert [(g.ref, g.size, len(g.entries)) for g in groups] == [
        ("refs/heads/main", 5010, 2), ("refs/pull/5/merge", 920, 3), ("refs/heads/gone", 100, 1)]
    pr = groups[1].to_dict(budget=10_000)
    assert pr["scopes"] == {naming.pr_scope(5, REPO): {"kind": "pull request", "images": ["cpu-arm64", "cpu-x86_64"],
                                                       "indexes": 2}}
    assert (pr["indexes"], pr["blobs"], pr["other"], pr["share"], pr["ids"]) == (2, 1, 0, 0.092, [3, 4, 5])
    assert scopes.by_scope(groups)["main"] == {"kind": "trusted", "refs": ["refs/heads/main"], "images": ["cpu-x86_64"]}
    assert scopes.totals(groups, 10_000)["size"] == 6030


def test_only_closed_pull_requests_and_deleted_branches_go():
    main, pr, gone = scopes.group_entries(_entries(), FACTS)
    assert [scopes.needs_state(g) for g in (main, pr, gone)] == [False, True, True]
    assert scopes.decide(pr, "open").action == "keep"
    assert scopes.decide(pr, "unknown", "HTTP 404").why == "pull request state unknown: HTTP 404"
    assert scopes.decide(pr, "closed").action == "delete"
    assert scopes.decide(gone, "exists").action == "keep"
    assert scopes.decide(gone, "deleted").why == "branch gone no longer exists"
    # The trusted scope stays, whatever a state says.
    assert scopes.decide(main, "deleted").action == "keep" and main.protected


def test_a_trusted_scope_index_under_a_pull_request_ref_is_judged_by_the_ref_and_reported():
    """An index named like the trusted scope's stored under a pull request's ref should not exist; if it does,
    the ref decides (a run on the trusted branch never reads entries stored under refs/pull/N/*, GitHub's cache
    scoping): the closed pull request's entries go, and the run says what it saw."""
    ref = "refs/pull/9/merge"
    junk = [CacheEntry(i, ref, blob_key(i), 500_000_000) for i in range(1, 19)]
    fake = CacheEntry(99, ref, index_key("main", "cpu", "x86_64", ref), 10)
    (group,) = scopes.group_entries([*junk, fake], FACTS)
    assert not group.protected and scopes.needs_state(group)
    assert scopes.decide(group, "open").action == "keep"
    assert scopes.decide(group, "closed").action == "delete" and group.why == "pull request #9 is closed"
    assert scopes.mismatches([group]) == [f"{ref} holds an index of the trusted scope main (judged by its ref alone)"]


def test_the_grouping_module_is_pure():
    from test_layout import IO_MODULES, MODULES, imported

    reached = imported("ghbuild.actions_cache.scopes", MODULES["ghbuild.actions_cache.scopes"], top_level_only=False)
    assert not {m for m in reached if m.split(".")[0] in IO_MODULES}
    assert reached <= {"__future__", "re", "collections.abc", "dataclasses", "typing", "ghbuild", "ghbuild.naming"}


# --------------------------------------------------------------------------- [cache] in the config

def load(tmp_path, text: str, env: dict[str, str] | None = None):
    (tmp_path / "ghbuild.toml").write_text(text + '[images.cpu]\ndockerfile = "Dockerfile"\n', "utf-8")
    (tmp_path / "Dockerfile").write_text("FROM scratch\n", "utf-8")
    return configfile.load(None, env or {}, tmp_path)


def test_the_defaults_are_githubs_budget_and_80_percent(tmp_path):
    options = load(tmp_path, "")
    assert options.cache == CacheOptions() == CacheOptions(budget=10 * 10**9, warn_share=0.8)
    props = schema.document()["properties"]["cache"]["properties"]
    assert configfile.load(None, {}, tmp_path).cache.budget == CacheOptions().budget
    assert props["warn-share"]["default"] == CacheOptions().warn_share
    assert load(tmp_path, f'[cache]\nbudget = "{props["budget"]["default"]}"\n').cache.budget == CacheOptions().budget


def test_the_keys_and_their_variables(tmp_path):
    options = load(tmp_path, '[cache]\nbudget = "20GiB"\nwarn-share = 0.5\n')
    assert options.cache == CacheOptions(budget=20 * 2**30, warn_share=0.5)
    overridden = load(tmp_path, "[cache]\nwarn-share = 0.5\n",
                      {"GHBUILD_CACHE_WARN_SHARE": "0.9", "GHBUILD_CACHE_BUDGET": "15GB"})
    assert overridden.cache == CacheOptions(budget=15 * 10**9, warn_share=0.9)
    assert load(tmp_path, "[cache]\nwarn-share = 1\n").cache.warn_share == 1.0
    assert load(tmp_path, "[cache]\nwarn-share = 0\n").cache.warn_share == 0.0


@pytest.mark.parametrize("text, env, fragment", [
    ("[cache]\nwarn-share = 1.5\n", {}, "ghbuild.toml: cache.warn-share: 1.5 is greater than the maximum of 1"),
    ("[cache]\nwarn-share = nan\n", {}, "ghbuild.toml: cache.warn-share: nan is not a share from 0 to 1"),
    ("[cache]\nwarn-share = \"high\"\n", {}, "ghbuild.toml: cache.warn-share: 'high' is not a number"),
    ("[cache]\nbudget = \"huge\"\n", {}, "ghbuild.toml: cache.budget: 'huge' is not a size"),
    ("[cache]\nbudget = 0\n", {}, "ghbuild.toml: cache.budget: must be more than 0 bytes"),
    ("[cache]\nbuget = \"1GB\"\n", {}, "ghbuild.toml: cache.buget: unknown key (did you mean 'budget'?)"),
    ("", {"GHBUILD_CACHE_WARN_SHARE": "lots"}, "GHBUILD_CACHE_WARN_SHARE: 'lots' is not a number"),
    ("", {"GHBUILD_CACHE_WARN_SHAER": "0.5"}, "GHBUILD_CACHE_WARN_SHAER: unknown setting (did you mean "
                                              "GHBUILD_CACHE_WARN_SHARE?)"),
])
def test_a_bad_value_is_one_line_naming_the_key(tmp_path, text, env, fragment):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text, env)
    assert fragment in str(info.value) and "\n" not in str(info.value)


# --------------------------------------------------------------------------- `ghbuild cache` end to end

@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "ghbuild.toml").write_text(CONFIG, "utf-8")
    (root / "Dockerfile").write_text("FROM scratch\n", "utf-8")
    return root


@pytest.fixture
def gh(monkeypatch):
    monkeypatch.setattr(actions_cache, "PACE", 0.0)
    with github_fake.start(tokens=(TOKEN, READ_ONLY)) as fake:
        fake.actions_read_only.add(READ_ONLY)
        yield fake


def populate(gh) -> dict[str, list[int]]:
    """A repository's caches: the trusted branch's, an open and a closed pull request's, an existing and a deleted
    branch's, a deleted merge-queue branch's, a tag's and another tool's. Returns the ids by ref."""
    gh.add_commits(REPO, "main", ["a" * 40])
    gh.add_commits(REPO, "feature/x", ["b" * 40])
    gh.add_commits(REPO, "gone", ["c" * 40])
    gh.delete_branch(REPO, "gone")
    gh.add_pull(REPO, 5, state="closed", head_repo="fork/project")
    gh.add_pull(REPO, 6)
    queue = "gh-readonly-queue/main/pr-6-" + "d" * 40
    ids: dict[str, list[int]] = {}

    def add(ref: str, key: str, size: int) -> None:
        ids.setdefault(ref, []).append(gh.add_cache(REPO, ref, key, size))

    for ref, scope in (("refs/heads/main", "main"), ("refs/pull/5/merge", naming.pr_scope(5, "fork/project")),
                       ("refs/pull/6/merge", naming.pr_scope(6, REPO)),
                       ("refs/heads/feature/x", naming.preview_scope(REPO, "feature/x")),
                       ("refs/heads/gone", naming.preview_scope(REPO, "gone")),
                       (f"refs/heads/{queue}", naming.merge_queue_scope(REPO, "main"))):
        add(ref, index_key(scope, "cpu", "x86_64", ref), 2_000)
        add(ref, blob_key(len(ids)), 500_000_000)
    add("refs/tags/v1.0", blob_key(99), 1_000)
    add("refs/heads/main", "Linux-pip-0123abcd", 3_000)
    return ids


def cache(project: Path, gh, *args: str, token: str = TOKEN, **env: str):
    return run_in_process(project, "cache", "--repository", REPO, *args,
                          env={"GITHUB_TOKEN": token, "GITHUB_API_URL": gh.url, **env})


GONE = ("refs/pull/5/merge", "refs/heads/gone", "refs/heads/gh-readonly-queue/main/pr-6-" + "d" * 40)


def test_a_dry_run_lists_every_scope_against_the_budget_and_deletes_nothing(project, gh):
    ids = populate(gh)
    before = gh.caches(REPO)
    result = cache(project, gh, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert gh.caches(REPO) == before and data["dry_run"] is True and data["deleted"] == []
    assert sorted(e["id"] for e in data["would_delete"]) == sorted(i for ref in GONE for i in ids[ref])
    kinds = {g["ref"]: (g["kind"], g["state"], g["action"]) for g in data["groups"]}
    assert kinds == {"refs/heads/main": ("trusted", None, "keep"),
                     "refs/pull/5/merge": ("pull request", "closed", "delete"),
                     "refs/pull/6/merge": ("pull request", "open", "keep"),
                     "refs/heads/feature/x": ("branch", "exists", "keep"),
                     "refs/heads/gone": ("branch", "deleted", "delete"),
                     GONE[2]: ("merge queue", "deleted", "delete"),
                     "refs/tags/v1.0": ("tag", None, "keep")}
    assert data["used"] == sum(e["size_in_bytes"] for e in before) and data["budget"] == 10 * 10**9
    assert data["share"] == round(data["used"] / 10**10, 4)
    assert data["scopes"][naming.pr_scope(5, "fork/project")]["refs"] == ["refs/pull/5/merge"]
    assert "(dry run: nothing deleted)" in result.stderr and "would delete 6 entries" in result.stderr
    table = [line for line in result.stderr.splitlines() if line.startswith("  refs/heads/main ")]
    assert re.search(r"trusted\s+500\.00 MB\s+5\.0%\s+3\s+-\s+keep\s+main \(cpu-x86_64\)", table[0]), table
    assert not [r for r in gh.requests if r.method == "DELETE"]


def test_apply_deletes_exactly_the_closed_pull_requests_and_deleted_branches_never_the_trusted_scope(project, gh,
                                                                                                    tmp_path):
    ids = populate(gh)
    summary = tmp_path / "summary.md"
    summary.write_text("")
    result = cache(project, gh, "--apply", "--json", *TRUSTED_RUN, GITHUB_STEP_SUMMARY=str(summary))
    assert result.returncode == 0, result.stderr
    deleted = sorted(r.path.rsplit("/", 1)[1] for r in gh.requests if r.method == "DELETE")
    assert deleted == sorted(str(i) for ref in GONE for i in ids[ref])
    left = {e["ref"] for e in gh.caches(REPO)}
    assert left == {"refs/heads/main", "refs/pull/6/merge", "refs/heads/feature/x", "refs/tags/v1.0"}
    assert len([e for e in gh.caches(REPO) if e["ref"] == "refs/heads/main"]) == 3
    data = json.loads(result.stdout)
    assert data["dry_run"] is False and data["ok"] is True and len(data["deleted"]) == 6
    assert "| `refs/pull/5/merge` | pull request |" in summary.read_text()
    again = cache(project, gh, "--apply", "--json", *TRUSTED_RUN)      # nothing left to delete
    assert again.returncode == 0 and json.loads(again.stdout)["deleted"] == []


def test_apply_only_in_a_trusted_run(project, gh):
    populate(gh)
    result = cache(project, gh, "--apply", "--event", "push", "--ref", "feature/x", "--default-branch", "main",
                   "--sha", "b" * 40)
    assert result.returncode == 6 and result.stderr.startswith("ghbuild: refused: cache --apply: not a trusted run")
    assert not [r for r in gh.requests if r.method == "DELETE"]


def test_apply_and_dry_run_together_is_a_usage_error(project, gh):
    result = cache(project, gh, "--apply", "--dry-run")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "not allowed with argument" in result.stderr


def test_the_listing_follows_every_page(project, gh):
    """250 entries: three pages of 100 through the Link header, every entry once, total_count checked."""
    gh.add_commits(REPO, "main", ["a" * 40])
    gh.add_pull(REPO, 7, state="closed")
    for n in range(240):
        gh.add_cache(REPO, "refs/heads/main", blob_key(n), 1_000)
    pr_ids = [gh.add_cache(REPO, "refs/pull/7/merge", blob_key(1000 + n), 2_000) for n in range(10)]
    result = cache(project, gh, "--json", "--apply", *TRUSTED_RUN)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["listed"]["pages"], data["listed"]["entries"], data["listed"]["total_count"]) == (3, 250, 250)
    assert sorted(e["id"] for e in data["deleted"]) == pr_ids and len(gh.caches(REPO)) == 240
    lists = [parse_qs(urlsplit(r.path).query) for r in gh.requests if "/actions/caches?" in r.path]
    assert [(q["per_page"], q["sort"], q["direction"], q.get("page", ["1"])) for q in lists] == [
        (["100"], ["created_at"], ["asc"], [page]) for page in ("1", "2", "3")]


def test_a_listing_past_the_page_bound_is_judged_and_applied_as_far_as_it_goes(project, gh):
    """Verdicts are per ref and per entry, so a cut listing is safe to act on: what was seen is judged and
    deleted, what was not stays, and a note says where the listing stopped (before: a refusal, nothing done)."""
    gh.add_commits(REPO, "main", ["a" * 40])
    gh.add_pull(REPO, 7, state="closed")
    gh.add_pull(REPO, 8, state="closed")
    seven = [gh.add_cache(REPO, "refs/pull/7/merge", blob_key(n), 2_000) for n in range(150)]
    eight = [gh.add_cache(REPO, "refs/pull/8/merge", blob_key(1000 + n), 2_000) for n in range(100)]
    options = configfile.load(str(project / "ghbuild.toml"), {}, project)
    logs: list[str] = []
    result = actions_cache.run(options, REPO, {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": gh.url}, apply=True,
                               log=logs.append, sleep=lambda _: None, pace=0, max_pages=2)
    assert result.ok and result.pages == 2
    assert sorted(e["id"] for e in result.deleted) == sorted(seven + eight[:50])
    assert sorted(e["id"] for e in gh.caches(REPO)) == sorted(eight[50:])
    (note,) = [n for n in result.notes if "listing stopped" in n]
    assert note.startswith("the listing stopped after 2 pages (200 entries, oldest first)") and "page=3" in note


@pytest.mark.parametrize("token, env, fragment", [
    ("wrong-token", {}, "GitHub rejected the token (HTTP 401 Bad credentials); check GITHUB_TOKEN"),
    ("", {}, "GITHUB_TOKEN is not set: reading the Actions caches needs a token with actions: read"),
])
def test_a_bad_token_is_one_line_and_exit_14(project, gh, token, env, fragment):
    populate(gh)
    result = cache(project, gh, token=token, **env)
    assert result.returncode == 14
    assert result.stderr.splitlines()[-1].startswith("ghbuild: prune error: cache: ")
    assert fragment in result.stderr and "Traceback" not in result.stderr
    assert not token or token not in result.stderr
    assert result.stdout == ""


def test_a_token_without_actions_permission_is_refused_in_one_line(project, gh):
    populate(gh)
    gh.no_actions.add(TOKEN)
    result = cache(project, gh)
    assert result.returncode == 14 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "ghbuild: prune error: cache: listing the Actions caches of org/project: page 1: GitHub refused (HTTP 403 "
        "Resource not accessible by integration): the token needs actions: read to list and read usage, actions: "
        "write to delete")


def test_a_token_that_may_not_delete_stops_at_the_first_refusal(project, gh):
    populate(gh)
    result = cache(project, gh, "--apply", *TRUSTED_RUN, token=READ_ONLY)
    assert result.returncode == 14 and "Traceback" not in result.stderr
    assert len([r for r in gh.requests if r.method == "DELETE"]) == 1
    assert result.stderr.splitlines()[-1].startswith("ghbuild: prune error: cache: 1 entry not deleted: ")
    assert READ_ONLY not in result.stderr


def test_a_token_that_sees_no_branch_deletes_no_branch(project, gh):
    """404 for the default branch too: the token cannot read contents, so a 404 says nothing about a branch."""
    ids = populate(gh)
    gh.hide_branches = True
    result = cache(project, gh, "--apply", "--json", *TRUSTED_RUN)
    assert result.returncode == 0, result.stderr
    deleted = sorted(int(r.path.rsplit("/", 1)[1]) for r in gh.requests if r.method == "DELETE")
    assert deleted == ids["refs/pull/5/merge"]
    assert "the default branch main reads as missing" in result.stderr


def test_rate_limits_are_waited_out(project, gh):
    ids = populate(gh)
    gh.secondary_rate_limit_next(r"/actions/caches/\d+", retry_after=0, method="DELETE")
    gh.secondary_rate_limit_next(r"/pulls/5", status=429, retry_after=0)
    result = cache(project, gh, "--apply", *TRUSTED_RUN)
    assert result.returncode == 0, result.stderr
    assert "retry 1/" in result.stderr
    assert not [e for e in gh.caches(REPO) if e["id"] in ids["refs/pull/5/merge"]]


def test_a_bad_repository_flag_is_one_line_naming_it(project, gh):
    result = run_in_process(project, "cache", "--repository", "not a repo",
                            env={"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": gh.url})
    assert result.returncode == 4 and result.stderr.count("\n") == 1
    assert result.stderr.startswith("ghbuild: context error: --repository: 'not a repo' is not a GitHub repository")
    assert gh.requests == []


def test_hostile_branch_names_cannot_break_the_summary(project, gh, tmp_path):
    gh.add_commits(REPO, "main", ["a" * 40])
    gh.add_cache(REPO, "refs/heads/x|`<b>[l](http://e)", blob_key(1), 10)
    summary = tmp_path / "summary.md"
    summary.write_text("")
    result = cache(project, gh, GITHUB_STEP_SUMMARY=str(summary))
    assert result.returncode == 0, result.stderr
    row = next(line for line in summary.read_text().splitlines() if "refs/heads/x" in line)
    assert len(re.findall(r"(?<!\\)\|", row)) == 10 and "<b>" not in row and not re.search(r"(?<!\\)\]\(", row)


@pytest.mark.parametrize("api, shown", [("ftp://x", "'ftp://x'"), ("https://u:ghs_pw@h", "(value not shown")])
def test_a_bad_api_url_is_one_line_naming_github_api_url(project, api, shown):
    result = run_in_process(project, "cache", "--repository", REPO, env={"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": api})
    lines = result.stderr.splitlines()
    assert result.returncode == 14 and [line for line in lines if line.startswith("ghbuild")] == lines[-1:]
    assert lines[-1].startswith(f"ghbuild: prune error: cache: GITHUB_API_URL {shown}")
    assert "ghs_pw" not in result.stderr
