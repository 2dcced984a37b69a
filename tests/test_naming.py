"""Tag sanitising, scopes and names: property tests plus the reference's known bugs."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from ghbuild import naming
from ghbuild.errors import InvalidReferenceError

# The OCI distribution spec's tag grammar, written independently of naming.TAG_RE.
OCI_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
HEX = re.compile(r"[0-9a-f]+")

PROPS = settings(max_examples=300, deadline=None)

# Raw names: anything a branch or scope could hold, and more (unicode, control characters, surrogates).
raw_text = st.text(max_size=300)
# Branch-like text, biased towards the characters git refs really use, so punctuation cases come up often.
branchy = st.text(alphabet=st.sampled_from("abcXYZ019/-._ @:+~#"), max_size=300)
# Arch/image suffixes as the planner builds them ("-cpu-x86_64"): only tag characters.
suffixes = st.from_regex(r"[A-Za-z0-9_.-]{0,40}", fullmatch=True)
valid_short_tags = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,60}", fullmatch=True)
# GitHub slugs as normalize_slug returns them (lower case, no ':').
slugs = st.builds(
    lambda owner, name: f"{owner}/{name}",
    st.from_regex(r"[a-z0-9][a-z0-9-]{0,38}", fullmatch=True),
    st.from_regex(r"[a-z0-9._-]{1,100}", fullmatch=True),
)


def is_valid_tag(text: str) -> bool:
    return OCI_TAG.fullmatch(text) is not None


# --------------------------------------------------------------------------- sanitize_tag properties

@PROPS
@given(raw=st.one_of(raw_text, branchy), suffix=suffixes)
@example(raw="", suffix="")
@example(raw=".hidden", suffix="-x86_64")
@example(raw="-dash", suffix="")
@example(raw="a" * 200, suffix="-cpu-x86_64")
@example(raw="feat/" + "x" * 123, suffix="-arm64")  # the reference's 136-character tag
def test_sanitized_tag_is_always_a_valid_tag_within_128_with_the_whole_suffix(raw, suffix):
    tag = naming.sanitize_tag(raw, suffix)
    assert is_valid_tag(tag), tag
    assert len(tag) <= 128
    assert tag.endswith(suffix)
    assert tag[0] not in ".-"
    naming.validate_tag(tag)  # the module's own check agrees


@PROPS
@given(raw=raw_text, suffix=suffixes, limit=st.integers(min_value=12, max_value=128))
def test_sanitized_tag_respects_a_smaller_limit(raw, suffix, limit):
    assume(limit - len(suffix) >= 12)
    tag = naming.sanitize_tag(raw, suffix, limit=limit)
    assert len(tag) <= limit
    assert tag.endswith(suffix)
    assert is_valid_tag(tag)


@PROPS
@given(raw=valid_short_tags, suffix=suffixes)
def test_valid_short_names_are_kept_as_they_are(raw, suffix):
    assert naming.sanitize_tag(raw, suffix) == raw + suffix


@PROPS
@given(raw=st.one_of(raw_text, branchy))
def test_sanitising_is_idempotent(raw):
    once = naming.sanitize_tag(raw)
    assert naming.sanitize_tag(once) == once


@PROPS
@given(
    words=st.lists(st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True), min_size=2, max_size=6),
    data=st.data(),
    suffix=suffixes,
)
def test_names_differing_only_in_punctuation_never_collide(words, data, suffix):
    punctuation = st.sampled_from(["/", "-", ".", "_", " ", "@", ":", "+", "~", "--", "//"])
    seps_a = data.draw(st.lists(punctuation, min_size=len(words) - 1, max_size=len(words) - 1))
    seps_b = data.draw(st.lists(punctuation, min_size=len(words) - 1, max_size=len(words) - 1))
    a = words[0] + "".join(s + w for s, w in zip(seps_a, words[1:], strict=True))
    b = words[0] + "".join(s + w for s, w in zip(seps_b, words[1:], strict=True))
    assume(a != b)
    assert naming.sanitize_tag(a, suffix) != naming.sanitize_tag(b, suffix)


@PROPS
@given(prefix=st.text(alphabet="abc-_.", min_size=130, max_size=200),
       tail_a=raw_text, tail_b=raw_text, suffix=suffixes)
def test_names_differing_beyond_the_cut_never_collide(prefix, tail_a, tail_b, suffix):
    assume(tail_a != tail_b)
    assert naming.sanitize_tag(prefix + tail_a, suffix) != naming.sanitize_tag(prefix + tail_b, suffix)


@PROPS
@given(a=st.one_of(raw_text, branchy), b=st.one_of(raw_text, branchy), suffix=suffixes)
def test_distinct_names_give_distinct_tags(a, b, suffix):
    assume(a != b)
    assert naming.sanitize_tag(a, suffix) != naming.sanitize_tag(b, suffix)


@pytest.mark.parametrize(
    ("raw", "suffix", "expected"),
    [
        ("main", "", "main"),
        ("main", "-cpu-x86_64", "main-cpu-x86_64"),
        ("release-1.2", "-arm64", "release-1.2-arm64"),
        ("v1.0_rc", "", "v1.0_rc"),
    ],
)
def test_plain_names_pass_through(raw, suffix, expected):
    assert naming.sanitize_tag(raw, suffix) == expected


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        ("feat/x", "feat_x-"),
        (".hidden", "_hidden-"),
        ("-leading", "_leading-"),
        ("naïve", "na_ve-"),
        ("", "_-"),
    ],
)
def test_changed_names_get_a_10_hex_hash_of_the_raw_name(raw, kept):
    tag = naming.sanitize_tag(raw)
    assert tag.startswith(kept)
    digest = tag[len(kept):]
    assert digest == naming.short_hash(raw, 10)
    assert HEX.fullmatch(digest)


def test_feat_slash_x_and_feat_dash_x_differ():
    # The example of docs/trust.md (Trust and cache scopes).
    assert naming.sanitize_tag("feat/x") != naming.sanitize_tag("feat-x")
    assert naming.sanitize_tag("feat-x") == "feat-x"


def test_long_name_is_cut_before_the_suffix_not_after():
    tag = naming.sanitize_tag("b" * 200, "-rocm-x86_64")
    assert len(tag) == 128
    assert tag.endswith("-rocm-x86_64")
    assert tag.startswith("b" * 100)


@pytest.mark.parametrize("suffix", ["-x86 64", "-arm64\n", "-ä", ":latest", "/x"])
def test_suffix_with_characters_a_tag_cannot_hold_is_refused(suffix):
    with pytest.raises(InvalidReferenceError):
        naming.sanitize_tag("main", suffix)


def test_suffix_leaving_no_room_is_refused():
    with pytest.raises(InvalidReferenceError, match="no room"):
        naming.sanitize_tag("main", "-" + "x" * 120)


# --------------------------------------------------------------------------- validate_tag / repository

@PROPS
@given(text=st.one_of(st.text(max_size=140), valid_short_tags, valid_short_tags.map(lambda t: t + "\n")))
@example(text="main\n")
@example(text="a" * 129)
def test_validate_tag_accepts_exactly_the_oci_grammar(text):
    if is_valid_tag(text):
        assert naming.validate_tag(text) == text
    else:
        with pytest.raises(InvalidReferenceError):
            naming.validate_tag(text)


@pytest.mark.parametrize(
    "name",
    ["ghcr.io/org/ci-cpu", "127.0.0.1:5000/x/y", "localhost:5000/a", "docker.io/org/img", "org/img",
     "img", "registry.example.com/a/b__c/d-e", "[::1]:5000/x"],
)
def test_valid_repositories(name):
    assert naming.validate_repository(name) == name


@pytest.mark.parametrize(
    "name",
    ["", "ghcr.io/Org/ci", "ghcr.io/org/ci:tag", "ghcr.io/org/ci@sha256:" + "0" * 64, "ghcr.io//x",
     "ghcr.io/org/ci\n", "ghcr.io/org/ci ", "-x/y", "x/y-", "a" * 256,
     # not a host (no '.', no port, not localhost), so a path component: Docker reads it as neither
     "UPPER/ci", "Org/img", "LOCALHOST/x"],
)
def test_invalid_repositories(name):
    with pytest.raises(InvalidReferenceError):
        naming.validate_repository(name)


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("ghcr.io/org/ci@sha256:" + "a" * 64, True),
        ("127.0.0.1:5000/x/y@sha256:" + "0" * 64, True),
        ("ghcr.io/org/ci:tag", False),
        ("ghcr.io/org/ci@sha256:" + "A" * 64, False),
        ("ghcr.io/org/ci@sha256:" + "a" * 63, False),
        ("ghcr.io/org/ci@sha256:" + "a" * 64 + "\n", False),
        ("ghcr.io/org/ci:tag@sha256:" + "a" * 64, False),
        ("Bad/Name@sha256:" + "a" * 64, False),
        ("@sha256:" + "a" * 64, False),
    ],
)
def test_digest_refs(ref, expected):
    assert naming.is_digest_ref(ref) is expected


# --------------------------------------------------------------------------- slugs

@pytest.mark.parametrize(
    "value",
    ["Org/Repo", "org/repo", "https://github.com/Org/Repo", "https://github.com/Org/Repo.git",
     "https://github.com/Org/Repo/", "https://github.com/Org/Repo.git/", "http://github.com/org/repo",
     "git@github.com:Org/Repo.git", "ssh://git@github.com/Org/Repo", "ssh://git@github.com/org/repo.git",
     "github.com/org/repo", "  org/repo  ", "HTTPS://GitHub.com/Org/Repo"],
)
def test_slug_forms_normalise_to_one(value):
    assert naming.normalize_slug(value) == "org/repo"


@pytest.mark.parametrize(
    "value",
    ["", "org", "org/", "/repo", "org/repo/extra", "https://gitlab.com/org/repo", "org/re po", "-org/repo",
     "o" * 40 + "/repo", "org/" + "r" * 101, "org/repo\nx"],
)
def test_not_a_slug(value):
    with pytest.raises(InvalidReferenceError):
        naming.normalize_slug(value)


# --------------------------------------------------------------------------- scopes

@PROPS
@given(number=st.integers(min_value=1, max_value=10**7), source=st.one_of(slugs, raw_text))
def test_pr_scope_is_valid_tag_text(number, source):
    scope = naming.pr_scope(number, source)
    assert is_valid_tag(scope)
    assert re.fullmatch(rf"pr-{number}-[0-9a-f]{{12}}", scope)


@PROPS
@given(number=st.integers(min_value=1, max_value=10**7), a=slugs, b=slugs)
def test_pr_scopes_of_distinct_sources_differ(number, a, b):
    assume(a != b)
    assert naming.pr_scope(number, a) != naming.pr_scope(number, b)


def test_pr_scope_is_the_documented_hash_of_the_source_slug():
    assert naming.pr_scope(15, "crazy-max/test-docker-action") == (
        "pr-15-" + naming.short_hash("crazy-max/test-docker-action"))
    assert len(naming.short_hash("x")) == 12


@PROPS
@given(repository=slugs, branch=st.one_of(raw_text, branchy))
@example(repository="org/repo", branch="")
@example(repository="org/repo", branch="...")
@example(repository="org/repo", branch="-" * 30)
def test_preview_scope_is_valid_tag_text(repository, branch):
    for scope in (naming.preview_scope(repository, branch), naming.merge_queue_scope(repository, branch)):
        assert is_valid_tag(scope), scope
        # short enough to carry image, arch and a commit within 128 characters
        assert len(scope) <= len("preview-") + 24 + 1 + 12


@PROPS
@given(repo_a=slugs, repo_b=slugs, branch_a=branchy, branch_b=branchy)
def test_preview_scopes_are_distinct_for_distinct_repo_and_branch(repo_a, repo_b, branch_a, branch_b):
    assume((repo_a, branch_a) != (repo_b, branch_b))
    assert naming.preview_scope(repo_a, branch_a) != naming.preview_scope(repo_b, branch_b)


def test_same_branch_in_two_forks_gets_two_scopes():
    a = naming.preview_scope("alice/project", "feature")
    b = naming.preview_scope("bob/project", "feature")
    assert a != b
    assert a.startswith("preview-feature-") and b.startswith("preview-feature-")


def test_preview_scope_cuts_the_branch_to_24():
    scope = naming.preview_scope("org/repo", "f" * 50)
    assert scope == "preview-" + "f" * 24 + "-" + naming.short_hash("org/repo:" + "f" * 50)


@pytest.mark.parametrize(("branch", "expected"), [("main", "main"), ("master", "master"),
                                                  ("release/1.x", None)])
def test_canonical_scope_is_the_sanitised_stable_branch(branch, expected):
    scope = naming.canonical_scope(branch)
    assert is_valid_tag(scope) and len(scope) <= 64
    if expected:
        assert scope == expected
    else:
        assert scope.startswith("release_1.x-")
