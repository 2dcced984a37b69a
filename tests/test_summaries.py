"""Job summaries a user reads in the run's page: the plan job's (trust decision, what may be written, the
jobs) and prune's (kept and deleted per tag, a dry run marked). Everything interpolated is escaped."""

from __future__ import annotations

import dataclasses

from conftest import BASE_REPO, FORK_REPO, read_outputs, run_in_process, write_options

from ghbuild import render

HOSTILE = "x | <img src=x onerror=alert(1)> [click](https://evil.example) # `tick`"


def _matrix_summary(tmp_path, event) -> tuple[str, dict[str, str]]:
    write_options(tmp_path / "project")
    summary, output = tmp_path / "summary.md", tmp_path / "output"
    summary.write_text("")
    output.write_text("")
    env = {**event.environ(), "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary),
           "GITHUB_OUTPUT": str(output)}
    result = run_in_process(tmp_path / "project", "matrix", env=env)
    assert result.returncode == 0, result.stderr
    return summary.read_text(), read_outputs(output.read_text())


def test_matrix_on_a_fork_pull_request_says_why_it_is_untrusted(tmp_path, event):
    text, outputs = _matrix_summary(tmp_path, event("pull_request"))
    assert outputs["trusted"] == "false"
    assert f"Pull request #15 from `{FORK_REPO}` (a fork) into `master`." in text
    assert "| trusted | **no**: pull request #15 from fork crazy-max/test-docker-action" in text
    assert "| may push to registries | no |" in text and "| gets secrets | no |" in text
    rows = [line for line in text.splitlines() if line.startswith("| cpu-") or line.startswith("| rocm-")]
    assert [row.split(" | ")[0] for row in rows] == ["| cpu-amd64", "| cpu-arm64", "| rocm-amd64", "| rocm-arm64"]
    assert all(" | no | " in row for row in rows)   # nothing pushed from a fork


def test_matrix_on_a_push_to_the_default_branch_may_write(tmp_path, event):
    text, outputs = _matrix_summary(tmp_path, event("push_master"))
    assert outputs["trusted"] == "true"
    assert "| trusted | **yes**: " in text and "| may push to registries | yes |" in text
    assert f"| canonical | `{BASE_REPO}`, stable branch `master` |" in text


def test_plan_summary_escapes_what_the_event_and_config_carry(tmp_path, event, plan_for):
    plan = plan_for(event("pull_request"))
    hostile = dataclasses.replace(plan, warnings=(HOSTILE,),
                                  context=dataclasses.replace(plan.context, head_repository=HOSTILE))
    text = render.plan_summary(hostile)
    assert "<img" not in text and "](" not in text.replace("\\](", "")
    assert "- x \\| &lt;img src=x onerror=alert(1)&gt; \\[click\\](https://evil.example) # \\`tick\\`" in text
    assert "<code>x &#124; &lt;img" in text   # the head repository, as a code span that cannot end early
