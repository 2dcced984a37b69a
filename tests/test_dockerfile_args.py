"""How ghbuild reads a Dockerfile, as BuildKit does: heredocs, parser directives, and which variables FROM sees.

FROM sees only the ARGs declared before the first FROM. A variable it uses that none declares expands to
nothing, and BuildKit fails with "base name (${BASE_IMAGE}) should not be blank", after a builder was started and
the context sent. `ghbuild build` (and `--dry-run`) says so first, naming the file, the line and the fix."""

from __future__ import annotations

import pytest
from conftest import run_in_process, write_project

from ghbuild.plan.dockerfile import parse, undeclared_from_args

CONFIG = """\
[images.app]
dockerfile = "Dockerfile"
platforms = ["linux/amd64"]
"""
BUILD = ["build", "--image", "app", "--arch", "amd64", "--dry-run", "--event", "push", "--repository",
         "org/project", "--ref", "main", "--default-branch", "main",
         "--sha", "0123456789abcdef0123456789abcdef01234567"]

# The mistake an adopter makes: BASE_IMAGE declared after the helper's FROM, so inside that stage only.
STAGE_SCOPED = """\
ARG GHBUILD_SCCACHE_IMAGE=ghcr.io/ghbuild/ghbuild-sccache:1
FROM ${GHBUILD_SCCACHE_IMAGE} AS ghbuild-sccache

ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE} AS build
RUN true
"""


@pytest.mark.parametrize("text, found", [
    (STAGE_SCOPED, [(5, "FROM ${BASE_IMAGE} AS build", "BASE_IMAGE")]),
    ("FROM debian:$TAG\n", [(1, "FROM debian:$TAG", "TAG")]),
    ("ARG base_image=x\nFROM ${BASE_IMAGE}\n", [(2, "FROM ${BASE_IMAGE}", "BASE_IMAGE")]),   # names keep case
    ("FROM a AS one\nARG REG=r\nFROM \\\n  $REG/b\n", [(3, "FROM $REG/b", "REG")]),   # continued: first line
    ("ARG A=1\nFROM $A\nFROM ${B}/x:${C}\n", [(3, "FROM ${B}/x:${C}", "B"), (3, "FROM ${B}/x:${C}", "C")]),
])
def test_variables_no_global_arg_declares_are_found(text, found):
    assert undeclared_from_args(text) == found


@pytest.mark.parametrize("text", [
    "ARG BASE_IMAGE=debian\nFROM ${BASE_IMAGE}\n",
    "ARG BASE_IMAGE\nFROM $BASE_IMAGE AS x\n",                          # declared without a default: a build arg
    "# comment\nARG A=1 B=\"two words\"\nFROM $A\nFROM ${B}\n",          # several in one ARG
    "arg REG=r\nfrom ${REG}/x\n",                                        # instructions in any case
    "FROM ${BASE:-debian:bookworm}\n",                                   # a default of its own
    "FROM --platform=$BUILDPLATFORM golang AS tools\nFROM base-${TARGETARCH}\n",   # BuildKit's automatic ARGs
    "FROM --platform=${PLATFORM} debian\n",                              # an empty --platform is the default one
    "FROM scratch\nARG LATER=x\nRUN echo $LATER\n",                      # a stage's ARG used in its stage
    "FROM a AS one\nFROM r/c:${TARGETSTAGE}-${TARGETOSVERSION}-${BUILDOSVERSION}\n",   # newer automatic ARGs
    "\ufeffARG BASE=alpine\nFROM ${BASE}\n",                             # a UTF-8 BOM, which BuildKit drops
    "FROM alpine\nRUN <<EOF\nFROM ${INNER}\nEOF\nCOPY <<-'X' /out/Dockerfile\n\tFROM $Y\n\tX\n",  # heredoc bodies
    "# escape=`\nARG A=1 `\n  BASE=alpine\nFROM ${BASE}\n",                # a backtick continues the ARG
])
def test_what_from_can_see_passes(text):
    assert undeclared_from_args(text) == []


def test_build_names_the_line_and_the_fix_before_any_engine(tmp_path):
    root = write_project(tmp_path, CONFIG)
    (root / "Dockerfile").write_text(STAGE_SCOPED, "utf-8")
    result = run_in_process(root, *BUILD, env={"GHBUILD_DOCKER_CLI": str(tmp_path / "no-docker-here")})
    assert result.returncode == 3, result.stderr
    assert result.stderr.splitlines()[-1] == (
        "ghbuild: config error: Dockerfile:5: `FROM ${BASE_IMAGE} AS build` uses BASE_IMAGE, which no ARG before the "
        "first FROM declares, so FROM sees it empty (an ARG inside a stage is that stage's alone): move "
        "`ARG BASE_IMAGE=<default>` above the first FROM")
    assert "Traceback" not in result.stderr


def test_the_same_dockerfile_with_the_arg_moved_up_gets_past_the_check(tmp_path):
    root = write_project(tmp_path, CONFIG)
    fixed = "ARG BASE_IMAGE=debian:bookworm-slim\n" + STAGE_SCOPED.replace("ARG BASE_IMAGE=debian:bookworm-slim\n", "")
    (root / "Dockerfile").write_text(fixed, "utf-8")
    result = run_in_process(root, *BUILD, env={"GHBUILD_DOCKER_CLI": str(tmp_path / "no-docker-here")})
    assert "BASE_IMAGE" not in result.stderr.splitlines()[-1], result.stderr


def test_in_actions_the_annotation_sits_on_the_line(tmp_path, event):
    """A recorded push event: in Actions the error is also an annotation on the Dockerfile's line."""
    root = write_project(tmp_path, CONFIG)
    (root / "Dockerfile").write_text(STAGE_SCOPED, "utf-8")
    env = event("push_master").environ(GITHUB_ACTIONS="true", GITHUB_WORKSPACE=str(root))
    result = run_in_process(root, *BUILD[:5], "--dry-run", env=env)
    assert result.returncode == 3
    annotation = next(line for line in result.stdout.splitlines() + result.stderr.splitlines()
                      if line.startswith("::error "))
    assert annotation.startswith("::error title=ghbuild config error,file=Dockerfile,line=5::Dockerfile:5: "), \
        annotation


@pytest.mark.parametrize("run", [
    "RUN echo $((1<<BITS)) > /n",            # a shift inside a word
    "RUN python3 -c 'print(1<<n)'",          # quoted
    "RUN echo 'cat <<EOF' > /gen.sh",        # quoted
    'RUN ["sh", "-c", "cat <<EOF"]',         # exec form: no heredocs
    "RUN cat <<EOF > /x",                    # a delimiter that never comes: no heredoc (BuildKit refuses the file)
])
def test_what_is_no_heredoc_leaves_the_stages_after_it(tmp_path, run):
    """Before, any `<<WORD` opened a heredoc and its "body" ran to the end of the file: stage b vanished."""
    path = tmp_path / "Dockerfile"
    path.write_text(f"FROM alpine AS a\n{run}\nFROM a AS b\nRUN make\n")
    assert [(s.label, s.history_entries) for s in parse(path)[1]] == [("a", 1), ("b", 1)]


def test_heredocs_as_buildkit_reads_them(tmp_path):
    """`<< EOF` with a space, several on one line, `<<-` tabs, ONBUILD: each body is its instruction's."""
    path = tmp_path / "Dockerfile"
    path.write_text("FROM alpine AS a\nRUN cat << EOF > /app.py\n#!/usr/bin/env python3\nFROM evil\nEOF\n"
                    "COPY <<-\"A\" /a <<B /b\n\tx\n\tA\ny\nB\nONBUILD RUN <<EOF\nFROM evil\nEOF\nFROM a AS b\n")
    stages = parse(path)[1]
    assert [(s.label, s.history_entries) for s in stages] == [("a", 2), ("b", 0)]
    assert stages[0].text == ("FROM alpine AS a\nRUN cat << EOF > /app.py\n#!/usr/bin/env python3\nFROM evil\nEOF\n"
                              "COPY <<-\"A\" /a <<B /b\n\tx\n\tA\ny\nB\nONBUILD RUN <<EOF\nFROM evil\nEOF\n")


def test_a_backtick_escape_directive_heads_the_preamble(tmp_path):
    """The same text does something else under `# escape=`` ` (ENV P=C:\\$HOME): a base's identity hashes it."""
    path = tmp_path / "Dockerfile"
    path.write_text("# syntax=docker/dockerfile:1\n# escape=`\nARG A=1\nFROM alpine\nENV P=C:\\$HOME\n")
    assert parse(path)[0] == "# escape=`\nARG A=1\n"
    path.write_text("# syntax=docker/dockerfile:1\nARG A=1\nFROM alpine\nENV P=C:\\$HOME\n")
    assert parse(path)[0] == "ARG A=1\n"
    path.write_text("# check=skip=A, B\n# escape=`\nFROM alpine\n")       # a directive's value may hold spaces
    assert parse(path)[0] == "# escape=`\n"
    path.write_text("# a comment\n# escape=`\nFROM alpine\n")             # any other line ends the directives
    assert parse(path)[0] == ""
