"""The build job's look at the GitHub Actions cache budget: the usage endpoint against cache.warn-share (through
the GitHub fake), the warning and the one-line note in the build's report and summary."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fakes import github as github_fake
from fakes.httpserver import free_port

from ghbuild import render
from ghbuild.actions_cache import budget
from ghbuild.build import buildjob
from ghbuild.build.report import BuildReport
from ghbuild.config.options import CacheOptions

REPO = "org/project"
TOKEN = "ghs_budgettoken0123"


# --------------------------------------------------------------------------- the usage against the budget

@pytest.fixture
def gh():
    with github_fake.start(tokens=(TOKEN,)) as fake:
        yield fake


def options(share: float = 0.8, size: int = 10_000):
    return SimpleNamespace(cache=CacheOptions(budget=size, warn_share=share))


def env(gh) -> dict[str, str]:
    return {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": gh.url, "GITHUB_ACTIONS": "true"}


def test_over_the_share_is_a_warning_naming_the_way_out(gh):
    gh.add_cache(REPO, "refs/heads/main", "k1", 6_000)
    gh.add_cache(REPO, "refs/pull/3/merge", "k2", 2_500)
    found = budget.check(options(), REPO, env(gh))
    assert (found.size, found.entries, found.share, found.over, found.note) == (8_500, 2, 0.85, True, None)
    assert found.warning.startswith("GitHub Actions cache of org/project: 8.50 kB of 10.00 kB (85%), 2 entries, over "
                                    "cache.warn-share (80%)")
    assert "`ghbuild cache --apply` deletes the entries of closed pull requests" in found.warning
    assert budget.check(options(share=0.9), REPO, env(gh)).warning is None


@pytest.mark.parametrize("setup, fragment", [
    (lambda gh: gh.no_actions.add(TOKEN), "GitHub refused (HTTP 403 Resource not accessible by integration): the "
                                          "token needs actions: read"),
    (lambda gh: gh.fail_next(".*", 500, count=5), "HTTP 500"),
])
def test_an_api_that_cannot_be_read_is_a_note_never_an_error(gh, setup, fragment):
    setup(gh)
    found = budget.check(options(), REPO, env(gh), sleep=lambda seconds: None)
    assert found.size is None and found.warning is None and fragment in found.note
    assert TOKEN not in found.note and "\n" not in found.note


def test_an_unreachable_api_is_a_note():
    found = budget.check(options(), REPO, {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": f"http://127.0.0.1:{free_port()}"},
                         sleep=lambda seconds: None)
    assert found.size is None and "unreachable" in found.note and found.describe().startswith("not read: ")


def _report() -> BuildReport:
    return BuildReport(image="cpu", arch="amd64", platform="linux/amd64", backend="buildx", target=None,
                       command="docker buildx build ...")


def _plan():
    return SimpleNamespace(context=SimpleNamespace(repository=REPO))


def test_the_build_warns_in_its_summary_when_over(gh):
    gh.add_cache(REPO, "refs/heads/main", "k1", 9_000)
    report = _report()
    buildjob._cache_budget(report, options(), _plan(), env(gh))
    assert report.actions_cache["over"] is True and report.warnings == [budget.check(options(), REPO, env(gh)).warning]
    summary = render.build_summary(report)
    assert "| GitHub Actions cache | 9.00 kB of 10.00 kB (90.0 %), 1 entry **over cache.warn-share** |" in summary
    assert "over cache.warn-share (80%)" in summary     # the warning's bullet


def test_the_build_notes_an_unreadable_api_in_one_line(gh, capsys):
    gh.no_actions.add(TOKEN)
    report = _report()
    buildjob._cache_budget(report, options(), _plan(), env(gh))
    assert report.warnings == [] and report.actions_cache["note"]
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ghbuild: note: GitHub Actions cache usage not read: ")
    assert "| GitHub Actions cache | not read: " in render.build_summary(report)


@pytest.mark.parametrize("change", [{"GITHUB_TOKEN": ""}, {"GITHUB_ACTIONS": ""}, {"ACT": "true"}],
                         ids=["no-token", "outside-actions", "act"])
def test_no_token_or_outside_actions_no_check(gh, change):
    """act's GITHUB_API_URL is github.com's and it serves no cache REST API: no request from a test run."""
    report = _report()
    buildjob._cache_budget(report, options(), _plan(), {**env(gh), **change})
    buildjob._cache_budget(report, options(share=0), _plan(), env(gh))
    assert report.actions_cache is None and gh.requests == []
    assert "GitHub Actions cache" not in render.build_summary(report)
