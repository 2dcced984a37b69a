"""Job summaries a user reads in the run's page: the plan job's (trust decision, what may be written, the
jobs) and prune's (kept and deleted per tag, a dry run marked). Everything interpolated is escaped."""

from __future__ import annotations

from conftest import BASE_REPO, FORK_REPO, read_outputs, run_in_process, write_options

from ghbuild import render

HOSTILE = "x | <img src=x onerror=alert(1)> [click](https://evil.example) # `tick`"


def _matrix_summary(tmp_path, event, **variables: str) -> tuple[str, dict[str, str]]:
    write_options(tmp_path / "project")
    summary, output = tmp_path / "summary.md", tmp_path / "output"
    summary.write_text("")
    output.write_text("")
    env = {**event.environ(), "GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary),
           "GITHUB_OUTPUT": str(output), **variables}
    result = run_in_process(tmp_path / "project", "matrix", env=env)
    assert result.returncode == 0, result.stderr
    return summary.read_text(), read_outputs(output.read_text())


def test_matrix_on_a_fork_pull_request_says_why_it_is_untrusted(tmp_path, event):
    # Inside Actions trust.* comes from variables only (the fork's own config file is not read for it).
    text, outputs = _matrix_summary(tmp_path, event("pull_request"), GHBUILD_TRUST_SELF_HOSTED_FOR_FORKS="true")
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
    hostile = plan._replace(warnings=(HOSTILE,), context=plan.context._replace(head_repository=HOSTILE))
    text = render.plan_summary(hostile)
    assert "<img" not in text and "](" not in text.replace("\\](", "")
    assert "- x \\| &lt;img src=x onerror=alert(1)&gt; \\[click\\](https://evil.example) # \\`tick\\`" in text
    assert "<code>x &#124; &lt;img" in text   # the head repository, as a code span that cannot end early


def test_build_outputs_metadata_in_build_push_actions_shape(tmp_path, monkeypatch):
    import json

    from ghbuild.build import buildjob
    from ghbuild.build.report import BuildReport

    output, summary = tmp_path / "output", tmp_path / "summary"
    output.write_text("")
    summary.write_text("")
    monkeypatch.setenv("GITHUB_OUTPUT", str(output))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    # On the containerd image store the engine's image id is the manifest digest, not the config digest.
    digest, config_digest = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    image_id = digest
    tags = ["ghcr.io/org/ci-cpu:abc-x86_64", "ghcr.io/org/ci-cpu:main-x86_64"]
    report = BuildReport(image="cpu", arch="amd64", platform="linux/amd64", backend="buildx", target=None,
                               command="docker buildx build ...", ref=f"ghcr.io/org/ci-cpu@{digest}", digest=digest,
                               image_id=image_id, config_digest=config_digest, tags=tags, pushed=True)
    buildjob.outputs(report)
    outputs = read_outputs(output.read_text())
    assert json.loads(outputs["metadata"]) == {"containerimage.digest": digest,
                                               "containerimage.config.digest": config_digest,
                                               "image.name": ",".join(tags)}
    assert outputs["digest"] == digest and outputs["image-id"] == image_id   # the names it had stay
    output.write_text("")
    buildjob.outputs(BuildReport(**{**vars(report), "pushed": False, "digest": None, "ref": None}))
    assert json.loads(read_outputs(output.read_text())["metadata"]) == {"containerimage.config.digest": config_digest}
