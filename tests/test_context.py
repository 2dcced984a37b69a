"""Reading the GitHub context from real event payloads, GITHUB_* variables and flags."""

from __future__ import annotations

import json

import pytest
from conftest import BASE_REPO, FIXTURE_NAMES, FORK_REPO, FORK_REPO_ID, PR_HEAD_REF, PR_NUMBER

from ghbuild.errors import ContextError
from ghbuild.github.context import ContextFlags, from_environment

SHA_MASTER = "266574110acf203503badf966df2ea24b5d732d7"
SHA_DEV = "860c1904a1ce19322e91ac35af1ab07466440c37"
SHA_PR_MERGE = "a9c8c5828b91be19d9728548b24759e352367ef1"
SHA_PR_HEAD = "3370e228f2209994d57af4427fe64e71bb79ac96"


# --------------------------------------------------------------------------- real payloads

REAL_EVENTS = [
    ("push_master", dict(event="push", ref="refs/heads/master", branch="master", sha=SHA_MASTER,
                         default_branch="master", pull_request=None, base_ref=None, head_ref=None,
                         head_repository=BASE_REPO, is_fork=None, run_id="2188627423", run_attempt="1")),
    ("push_dev", dict(event="push", ref="refs/heads/dev", branch="dev", sha=SHA_DEV, default_branch="master",
                      pull_request=None, head_repository=BASE_REPO, run_id="2188748038")),
    ("pull_request", dict(event="pull_request", ref="refs/pull/15/merge", branch=None, sha=SHA_PR_MERGE,
                          default_branch="master", pull_request=PR_NUMBER, base_ref="master",
                          head_ref=PR_HEAD_REF, head_repository=FORK_REPO, head_sha=SHA_PR_HEAD, is_fork=True)),
    # pull_request_target runs on the base branch: GITHUB_REF/GITHUB_SHA are the base's.
    ("pull_request_target", dict(event="pull_request_target", ref="refs/heads/master", branch="master",
                                 sha=SHA_MASTER, pull_request=PR_NUMBER, base_ref="master",
                                 head_ref=PR_HEAD_REF, head_repository=FORK_REPO, head_sha=SHA_PR_HEAD,
                                 is_fork=True)),
    ("schedule", dict(event="schedule", ref="refs/heads/master", branch="master", sha=SHA_DEV,
                      default_branch="master", pull_request=None, head_repository=BASE_REPO)),
    ("workflow_dispatch", dict(event="workflow_dispatch", ref="refs/heads/master", branch="master", sha=SHA_DEV,
                               default_branch="master", pull_request=None, inputs={"logLevel": "warning"})),
    ("merge_group", dict(event="merge_group",
                         ref=f"refs/heads/gh-readonly-queue/master/pr-15-{SHA_MASTER}",
                         sha="9" * 40, default_branch="master", pull_request=None, base_ref="master",
                         head_repository=BASE_REPO)),
]


def test_every_recorded_payload_and_every_event_is_covered():
    from ghbuild.github.context import EVENTS

    names = [name for name, _ in REAL_EVENTS]
    assert set(FIXTURE_NAMES) <= set(names)
    assert {expected["event"] for _, expected in REAL_EVENTS} == set(EVENTS)


@pytest.mark.parametrize(("name", "expected"), REAL_EVENTS, ids=[name for name, _ in REAL_EVENTS])
def test_reads_each_event_from_its_real_payload_and_env(event, name, expected):
    ctx = event(name).context()
    assert ctx.repository == BASE_REPO
    assert ctx.server_url == "https://github.com"
    for key, value in expected.items():
        assert getattr(ctx, key) == value, key


def test_schedule_payload_has_no_repository_so_the_default_branch_is_the_scheduled_ref(event):
    ev = event("schedule")
    assert "repository" not in ev.payload
    ctx = ev.on_branch("trunk").context()
    assert ctx.default_branch == "trunk"
    assert any("default branch" in note for note in ctx.notes)


def test_fork_detection_comes_from_repository_ids_not_names(event):
    pr = event("pull_request")
    # Same id on both sides: one repository, whatever the names say.
    same_id = pr.edited()
    same_id.payload["pull_request"]["head"]["repo"]["id"] = same_id.payload["pull_request"]["base"]["repo"]["id"]
    assert same_id.context().is_fork is False
    # Different ids: a fork, even under the base's name.
    renamed = pr.same_repo()
    renamed.payload["pull_request"]["head"]["repo"]["id"] = FORK_REPO_ID
    assert renamed.context().is_fork is True


def test_without_repository_ids_the_names_decide(event):
    ev = event("pull_request").same_repo()
    for side in ("head", "base"):
        del ev.payload["pull_request"][side]["repo"]["id"]
    assert ev.context().is_fork is False
    fork = event("pull_request")
    for side in ("head", "base"):
        del fork.payload["pull_request"][side]["repo"]["id"]
    assert fork.context().is_fork is True


@pytest.mark.parametrize("name", ["pull_request", "pull_request_target"])
def test_pull_request_variants(event, name):
    second = event(name).second_fork(number=16, owner="octo-contrib")
    ctx = second.context()
    assert (ctx.pull_request, ctx.head_repository, ctx.head_ref, ctx.is_fork) == (
        16, "octo-contrib/test-docker-action", PR_HEAD_REF, True)

    same = event(name).same_repo(branch="feature/x").context()
    assert (same.head_repository, same.head_ref, same.is_fork) == (BASE_REPO, "feature/x", False)

    deleted = event(name).deleted_fork().context()
    assert deleted.head_repository is None
    assert deleted.is_fork is True
    assert any("deleted" in note for note in deleted.notes)

    other_base = event(name).into_base("release/2.0").context()
    assert other_base.base_ref == "release/2.0"


def test_payload_beats_github_variables(event):
    # A push payload's ref/after win over GITHUB_REF/GITHUB_SHA.
    ctx = event("push_master").context(GITHUB_SHA="b" * 40, GITHUB_REF="refs/heads/elsewhere")
    assert (ctx.ref, ctx.sha) == ("refs/heads/master", SHA_MASTER)
    # The PR payload's base/head refs win over GITHUB_BASE_REF/GITHUB_HEAD_REF.
    ctx = event("pull_request").context(GITHUB_BASE_REF="elsewhere", GITHUB_HEAD_REF="elsewhere")
    assert (ctx.base_ref, ctx.head_ref) == ("master", PR_HEAD_REF)
    # workflow_dispatch: the payload's ref.
    ctx = event("workflow_dispatch").on_branch("dev").context(GITHUB_REF="refs/heads/master")
    assert ctx.ref == "refs/heads/dev"


def test_github_variables_are_used_without_a_payload(tmp_path):
    env = {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_REPOSITORY": BASE_REPO, "GITHUB_SHA": "c" * 40,
           "GITHUB_BASE_REF": "main", "GITHUB_HEAD_REF": "topic", "GITHUB_REF": "refs/pull/7/merge",
           "GITHUB_RUN_ID": "42", "GITHUB_RUN_ATTEMPT": "2"}
    ctx = from_environment(env, ContextFlags(pr=7), cwd=tmp_path)
    assert (ctx.pull_request, ctx.base_ref, ctx.head_ref, ctx.ref, ctx.sha) == (
        7, "main", "topic", "refs/pull/7/merge", "c" * 40)
    assert (ctx.run_id, ctx.run_attempt) == ("42", "2")
    # No payload and no --head-repo: the source is unknown, so it gets the least trust.
    assert ctx.is_fork is True
    assert any("treated as a fork" in note for note in ctx.notes)


# --------------------------------------------------------------------------- flags

@pytest.mark.parametrize(("name", "overrides", "expected"), [
    ("push_master", ContextFlags(ref="feature/x"), dict(ref="refs/heads/feature/x", branch="feature/x")),
    ("push_master", ContextFlags(ref="refs/tags/v1.2.3"), dict(ref="refs/tags/v1.2.3", branch=None)),
    ("push_master", ContextFlags(sha="ABCDEF" + "0" * 34), dict(sha="abcdef" + "0" * 34)),
    ("push_master", ContextFlags(repository="octo/other"), dict(repository="octo/other")),
    # URL forms are accepted and reduced to owner/name (the owner names registry namespaces).
    ("push_master", ContextFlags(repository="https://github.com/Octo/Other.git"), dict(repository="octo/other")),
    ("push_master", ContextFlags(default_branch="trunk"), dict(default_branch="trunk")),
    ("pull_request", ContextFlags(pr=99), dict(pull_request=99)),
    ("pull_request", ContextFlags(base="release"), dict(base_ref="release")),
    ("pull_request", ContextFlags(head_ref="other"), dict(head_ref="other")),
    ("pull_request", ContextFlags(head_repo="someone/else"), dict(head_repository="someone/else", is_fork=True)),
    ("merge_group", ContextFlags(base="refs/heads/release"), dict(base_ref="release")),
    ("merge_group", ContextFlags(sha="1" * 40), dict(sha="1" * 40)),
], ids=lambda v: (",".join(f"{k}={getattr(v, k)}" for k in v._fields if getattr(v, k) is not None)
                  if isinstance(v, ContextFlags) else None))
def test_flags_beat_payload_and_env(event, name, overrides, expected):
    ctx = event(name).context(overrides)
    for key, value in expected.items():
        assert getattr(ctx, key) == value, key


def test_head_repo_flag_can_mark_a_same_repository_pr_as_a_fork(event):
    ev = event("pull_request_target").same_repo()
    assert ev.context().is_fork is False
    assert ev.context(ContextFlags(head_repo=FORK_REPO)).is_fork is True


def test_head_repo_flag_cannot_clear_a_fork_proven_by_the_payload(event):
    # The payload's repository ids say fork; naming the base repository must not buy write access.
    ctx = event("pull_request_target").context(ContextFlags(head_repo=BASE_REPO))
    assert ctx.is_fork is True
    assert any("--head-repo" in note for note in ctx.notes)


def test_event_path_flag_beats_github_event_path(event, tmp_path):
    other = event("push_dev")
    env = event("push_master").environ()
    ctx = from_environment(env, ContextFlags(event_path=str(other.source)), cwd=tmp_path)
    assert ctx.ref == "refs/heads/dev"


def test_event_flag_for_another_event_ignores_githubs_payload(event, tmp_path):
    # GitHub's payload is a pull_request one; read as workflow_dispatch it would be misread.
    env = event("pull_request").environ()
    ctx = from_environment(env, ContextFlags(event="workflow_dispatch", ref="main"), cwd=tmp_path)
    assert (ctx.event, ctx.pull_request, ctx.ref, dict(ctx.inputs)) == ("workflow_dispatch", None,
                                                                        "refs/heads/main", {})


def test_context_round_trips_to_json(event):
    data = event("workflow_dispatch").context().to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["inputs"] == {"logLevel": "warning"}


# --------------------------------------------------------------------------- errors

def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return str(path)


def _drop(env: dict[str, str], *keys: str) -> dict[str, str]:
    return {k: v for k, v in env.items() if k not in keys}


def _error_cases(event, tmp_path):
    """(id, env, overrides, words the message must contain, words it must not)."""
    push = event("push_master")
    pr = event("pull_request")

    no_base = pr.edited()
    del no_base.payload["pull_request"]["base"]
    base_repo_text = pr.edited()
    base_repo_text.payload["pull_request"]["base"]["repo"] = BASE_REPO
    head_repo_text = pr.edited()
    head_repo_text.payload["pull_request"]["head"]["repo"] = FORK_REPO
    no_number = pr.edited()
    del no_number.payload["number"]
    del no_number.payload["pull_request"]["number"]
    bad_head_slug = pr.edited()
    bad_head_slug.payload["pull_request"]["head"]["repo"]["full_name"] = "not a repo"
    bad_after = push.edited()
    bad_after.payload["after"] = "not-a-sha"
    bad_payload_repo = push.edited()
    bad_payload_repo.payload["repository"]["full_name"] = "no slash here"
    deleted = push.edited()
    deleted.payload.update(deleted=True, after="0" * 40)
    merge_group = event("merge_group")
    bad_mq_sha = merge_group.edited()
    bad_mq_sha.payload["merge_group"]["head_sha"] = "zz" * 20

    minimal = {"GITHUB_REPOSITORY": BASE_REPO, "GITHUB_SHA": "a" * 40, "GITHUB_REF": "refs/heads/main"}
    return [
        ("unknown event", {**push.environ(), "GITHUB_EVENT_NAME": "issue_comment"}, None,
         ["issue_comment", "not supported"], []),
        ("unknown --event", push.environ(), ContextFlags(event="release"), ["release", "not supported"], []),
        ("no event in Actions", {**_drop(push.environ(), "GITHUB_EVENT_NAME"), "GITHUB_ACTIONS": "true"}, None,
         ["GITHUB_EVENT_NAME"], []),
        ("malformed JSON", push.environ(GITHUB_EVENT_PATH=_write(tmp_path, "bad.json", '{"ref": ')), None,
         ["GITHUB_EVENT_PATH", "not valid JSON"], []),
        ("malformed JSON via flag", push.environ(),
         ContextFlags(event_path=_write(tmp_path, "bad2.json", "{nope")), ["--event-path", "not valid JSON"], []),
        ("payload missing", push.environ(GITHUB_EVENT_PATH=str(tmp_path / "missing.json")), None,
         ["GITHUB_EVENT_PATH", "does not exist"], []),
        ("payload is a list", push.environ(GITHUB_EVENT_PATH=_write(tmp_path, "list.json", "[1, 2]")), None,
         ["GITHUB_EVENT_PATH", "JSON object"], []),
        ("payload is a string", push.environ(GITHUB_EVENT_PATH=_write(tmp_path, "str.json", '"push"')), None,
         ["GITHUB_EVENT_PATH", "JSON object"], []),
        ("PR payload without base", no_base.environ(), None, ["GITHUB_EVENT_PATH", "pull_request.base"], []),
        ("PR base repo not an object", base_repo_text.environ(), None,
         ["GITHUB_EVENT_PATH", "pull_request.base.repo"], []),
        ("PR head repo not an object", head_repo_text.environ(), None,
         ["GITHUB_EVENT_PATH", "pull_request.head.repo"], []),
        ("PR payload without number", no_number.environ(), None, ["GITHUB_EVENT_PATH", "number"], []),
        ("PR head repo not a slug", bad_head_slug.environ(), None, ["GITHUB_EVENT_PATH", "not a repo"], []),
        ("PR event, no payload, no --pr", {**minimal, "GITHUB_EVENT_NAME": "pull_request",
                                           "GITHUB_BASE_REF": "main"}, None, ["--pr"], []),
        ("PR event, no payload, no base", {**minimal, "GITHUB_EVENT_NAME": "pull_request_target"},
         ContextFlags(pr=3), ["--base", "GITHUB_BASE_REF"], []),
        ("merge_group, no payload, no base", {**minimal, "GITHUB_EVENT_NAME": "merge_group"}, None,
         ["merge_group", "--base"], []),
        ("bad GITHUB_REPOSITORY", push.environ(GITHUB_REPOSITORY="not/a/slug"), None,
         ["GITHUB_REPOSITORY", "not/a/slug"], []),
        ("bad --repository", push.environ(), ContextFlags(repository="owner only"), ["--repository"],
         ["GITHUB_REPOSITORY"]),
        ("bad repository in payload", _drop(bad_payload_repo.environ(), "GITHUB_REPOSITORY"), None,
         ["GITHUB_EVENT_PATH", "no slash here"], ["GITHUB_REPOSITORY"]),
        ("bad --head-repo", pr.environ(), ContextFlags(head_repo="-bad-/x y"), ["--head-repo"], []),
        ("bad GITHUB_SHA", event("schedule").environ(GITHUB_SHA="abc123"), None, ["GITHUB_SHA", "abc123"], []),
        ("bad --sha", push.environ(), ContextFlags(sha="g" * 40), ["--sha"], ["GITHUB_SHA"]),
        ("bad sha in push payload", bad_after.environ(), None, ["GITHUB_EVENT_PATH", "not-a-sha"], ["GITHUB_SHA"]),
        ("bad head_sha in merge_group payload", bad_mq_sha.environ(), None, ["GITHUB_EVENT_PATH", "zz"],
         ["GITHUB_SHA"]),
        ("push deleting the branch", deleted.environ(), None, ["GITHUB_EVENT_PATH", "deletes", "refs/heads/master"],
         []),
        ("no repository", {"GITHUB_EVENT_NAME": "push", "GITHUB_SHA": "a" * 40, "GITHUB_REF": "refs/heads/x"},
         None, ["GITHUB_REPOSITORY", "--repository"], []),
        ("no ref", {"GITHUB_EVENT_NAME": "schedule", "GITHUB_REPOSITORY": BASE_REPO, "GITHUB_SHA": "a" * 40},
         None, ["GITHUB_REF", "--ref"], []),
        ("no sha", {"GITHUB_EVENT_NAME": "schedule", "GITHUB_REPOSITORY": BASE_REPO,
                    "GITHUB_REF": "refs/heads/main"}, None, ["GITHUB_SHA", "--sha"], []),
    ]


@pytest.fixture
def error_cases(event, tmp_path):
    return {case[0]: case[1:] for case in _error_cases(event, tmp_path)}


ERROR_CASE_IDS = [
    "unknown event", "unknown --event", "no event in Actions", "malformed JSON", "malformed JSON via flag",
    "payload missing", "payload is a list", "payload is a string", "PR payload without base",
    "PR base repo not an object", "PR head repo not an object", "PR payload without number", "PR head repo not a slug",
    "PR event, no payload, no --pr", "PR event, no payload, no base", "merge_group, no payload, no base",
    "bad GITHUB_REPOSITORY", "bad --repository", "bad repository in payload", "bad --head-repo", "bad GITHUB_SHA",
    "bad --sha", "bad sha in push payload", "bad head_sha in merge_group payload", "push deleting the branch",
    "no repository", "no ref", "no sha",
]


def test_error_case_table_is_complete(error_cases):
    assert sorted(error_cases) == sorted(ERROR_CASE_IDS)


@pytest.mark.parametrize("case", ERROR_CASE_IDS)
def test_errors_are_context_errors_naming_the_source(error_cases, case, tmp_path):
    env, overrides, words, absent = error_cases[case]
    # cwd: an empty folder outside any git work tree, so no git fallback can fill a gap.
    cwd = tmp_path / "not-a-checkout"
    cwd.mkdir()
    with pytest.raises(ContextError) as info:
        from_environment(env, overrides, cwd=cwd)
    message = str(info.value)
    assert "\n" not in message
    for word in words:
        assert word in message
    for word in absent:
        assert word not in message
    assert info.value.exit_code == 4


def test_event_flag_cannot_change_the_event_inside_actions(event):
    """Inside a real run, --event must not turn a pull_request_target run into a (trusted) push."""
    from ghbuild.errors import TrustError

    env = event("pull_request_target").environ(GITHUB_ACTIONS="true")
    with pytest.raises(TrustError, match="pull_request_target"):
        from_environment(env, ContextFlags(event="push"))
    # The same flag is fine outside Actions (local use) and when it agrees with GitHub.
    env.pop("GITHUB_ACTIONS")
    assert from_environment(env, ContextFlags(event="push")).event == "push"
