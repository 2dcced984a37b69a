"""The runner protocol (gha.py): files only when the runner gave them, `::` commands only in Actions.

What is checked is what the runner reads: the GITHUB_OUTPUT / GITHUB_STEP_SUMMARY files and the
`::command::` lines on the process's output streams.
"""

from __future__ import annotations

import json

import pytest
from conftest import HEREDOC
from conftest import read_outputs as read_outputs_from

from ghbuild.github import gha


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("GITHUB_ACTIONS", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY", "GITHUB_ENV", "GITHUB_STATE"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def in_actions(monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")


def read_outputs(path) -> dict[str, str]:
    text = path.read_text("utf-8")
    outputs = {m["name"]: m["value"] for m in HEREDOC.finditer(text)}
    # nothing in the file but well-formed heredoc entries
    assert "".join(m.group(0) for m in HEREDOC.finditer(text)) == text
    return outputs


# --------------------------------------------------------------------------- outputs

def test_set_output_writes_the_runner_heredoc_format(tmp_path, monkeypatch, capsys):
    out = tmp_path / "output"
    out.touch()
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    assert gha.set_output("jobs", "3") is True
    assert gha.set_output("matrix", {"include": [{"id": "cpu-amd64", "runs_on": ["ubuntu-24.04"]}]}) is True
    assert gha.set_output("notes", "line one\nline two") is True
    assert read_outputs(out) == {
        "jobs": "3",
        "matrix": '{"include":[{"id":"cpu-amd64","runs_on":["ubuntu-24.04"]}]}',
        "notes": "line one\nline two",
    }
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_set_output_appends_to_what_earlier_steps_wrote(tmp_path, monkeypatch):
    out = tmp_path / "output"
    out.write_text("earlier<<EOF\nvalue\nEOF\n", "utf-8")
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    gha.set_output("trusted", "true")
    text = out.read_text("utf-8")
    assert text.startswith("earlier<<EOF\nvalue\nEOF\n")
    assert read_outputs_from(text.removeprefix("earlier<<EOF\nvalue\nEOF\n")) == {"trusted": "true"}


@pytest.mark.parametrize("actions", [False, True])
def test_set_output_without_an_output_file_writes_nothing_anywhere(monkeypatch, capsys, actions):
    # No deprecated `::set-output` on stdout: stdout belongs to --json and matrix output.
    if actions:
        monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert gha.set_output("matrix", {"include": []}) is False
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_output_value_cannot_forge_another_output(tmp_path, monkeypatch):
    out = tmp_path / "output"
    out.touch()
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    gha.set_output("branch", "x\nEOF\ntrusted<<EOF\ntrue\nEOF")
    assert read_outputs(out) == {"branch": "x\nEOF\ntrusted<<EOF\ntrue\nEOF"}


# --------------------------------------------------------------------------- summary

def test_summary_is_appended_to_the_summary_file(tmp_path, monkeypatch, capsys):
    summary = tmp_path / "summary.md"
    summary.touch()
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    assert gha.add_summary("# Plan\n\n| job |\n|---|\n") is True
    assert gha.add_summary("done") is True
    assert summary.read_text("utf-8") == "# Plan\n\n| job |\n|---|\n\ndone\n\n"
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_summary_without_the_file_is_a_no_op(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.chdir(tmp_path)
    assert gha.add_summary("# Plan") is False
    assert list(tmp_path.iterdir()) == []
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


# --------------------------------------------------------------------------- masks

def test_mask_in_actions_goes_to_stderr_line_by_line(in_actions, capsys):
    gha.mask("first-secret\n\nsecond-secret\n")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == ["::add-mask::first-secret", "::add-mask::second-secret"]


def test_mask_outside_actions_prints_nothing(capsys):
    gha.mask("s3cr3t")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_mask_of_an_empty_value_prints_nothing(in_actions, capsys):
    gha.mask("")
    assert capsys.readouterr().err == ""


# --------------------------------------------------------------------------- annotations

def test_annotation_in_actions(in_actions, capsys):
    gha.annotate("warning", "stable branch unknown: assuming 'main'", title="ghbuild", file="ghbuild.toml",
                 line=3)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "::warning title=ghbuild,file=ghbuild.toml,line=3::stable branch unknown: assuming 'main'\n"


def test_annotation_escapes_what_would_break_the_command(in_actions, capsys):
    gha.annotate("error", "100% broken\nsecond line", title="a: b, c")
    assert capsys.readouterr().err == "::error title=a%3A b%2C c::100%25 broken%0Asecond line\n"


def test_annotation_outside_actions_is_a_plain_stderr_line(capsys):
    gha.annotate("warning", "careful", file="ghbuild.toml")
    gha.annotate("notice", "fyi")
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == "ghbuild warning: ghbuild.toml: careful\nghbuild notice: fyi\n"
    assert "::" not in captured.err


@pytest.mark.parametrize("value", ["1", "yes", "TRUE", ""])
def test_only_github_actions_true_means_actions(monkeypatch, capsys, value):
    monkeypatch.setenv("GITHUB_ACTIONS", value)
    assert gha.in_actions() is False
    gha.annotate("warning", "x")
    assert capsys.readouterr().err == "ghbuild warning: x\n"


def test_in_actions_reads_a_given_mapping():
    assert gha.in_actions({"GITHUB_ACTIONS": "true"}) is True
    assert gha.in_actions({}) is False


def test_unknown_annotation_level():
    with pytest.raises(ValueError):
        gha.annotate("debug", "x")


# --------------------------------------------------------------------------- groups and inputs

def test_group_in_actions(in_actions, capsys):
    with gha.group("Build cpu-amd64"):
        print("inside", flush=True)
    captured = capsys.readouterr()
    assert captured.out == "inside\n"
    assert captured.err == "::group::Build cpu-amd64\n::endgroup::\n"


def test_group_is_closed_when_the_body_fails(in_actions, capsys):
    with pytest.raises(RuntimeError), gha.group("Build"):
        raise RuntimeError("boom")
    assert capsys.readouterr().err.endswith("::endgroup::\n")


def test_group_outside_actions(capsys):
    with gha.group("Build"):
        pass
    captured = capsys.readouterr()
    assert captured.err == "--- Build\n" and captured.out == ""


def test_inputs_follow_the_runner_naming(monkeypatch):
    monkeypatch.setenv("INPUT_CONFIG-PATH", "  ci/ghbuild.toml \n")
    monkeypatch.setenv("INPUT_IMAGE_NAME", "cpu")
    monkeypatch.delenv("INPUT_MISSING", raising=False)
    assert gha.get_input("config-path") == "ci/ghbuild.toml"
    assert gha.get_input("image name") == "cpu"
    assert gha.get_input("missing", "default") == "default"


def test_json_output_is_compact_json(tmp_path, monkeypatch):
    out = tmp_path / "output"
    out.touch()
    monkeypatch.setenv("GITHUB_OUTPUT", str(out))
    gha.set_output("list", ["a", "b"])
    assert json.loads(read_outputs(out)["list"]) == ["a", "b"]
    assert read_outputs(out)["list"] == '["a","b"]'


def test_commands_off_brackets_untrusted_output_with_an_unguessable_token(in_actions, capsys):
    with gha.commands_off():
        print("::error::forged by a RUN step", file=__import__("sys").stderr)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("::stop-commands::") and lines[1] == "::error::forged by a RUN step"
    token = lines[0].removeprefix("::stop-commands::")
    assert len(token) == 32 and lines[2] == f"::{token}::"
    with gha.commands_off():
        pass
    assert token not in capsys.readouterr().err       # a fresh token every time


def test_commands_off_prints_nothing_outside_actions(capsys):
    with gha.commands_off():
        pass
    assert capsys.readouterr().err == ""
