"""`ghbuild completion bash|zsh`: the script shtab generates from the parser, exercised in a real bash.

The bash script is sourced in `bash --norc` and its completion function called the way bash calls it on
TAB (COMP_WORDS, COMP_CWORD); what lands in COMPREPLY is what the user is offered.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def ghbuild(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ghbuild", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=60)


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory) -> Path:
    result = ghbuild("completion", "bash")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    path = tmp_path_factory.mktemp("completion") / "ghbuild.bash"
    path.write_text(result.stdout, "utf-8")
    return path


def complete(script: Path, line: str, cwd: Path) -> list[str]:
    """What bash offers for TAB at the end of `line` (a trailing space: a new, empty word)."""
    words = shlex.split(line) + ([""] if line.endswith(" ") else [])
    program = f"""
source {shlex.quote(str(script))}
COMP_WORDS=({" ".join(shlex.quote(w) for w in words)})
COMP_CWORD={len(words) - 1}
COMP_LINE={shlex.quote(line)}
COMP_POINT=${{#COMP_LINE}}
$(complete -p ghbuild | sed -n 's/.* -F \\([^ ]*\\) .*/\\1/p') ghbuild "${{COMP_WORDS[COMP_CWORD]}}" \
    "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True,
                            cwd=cwd, timeout=60)
    assert result.returncode == 0, result.stderr
    return sorted(word.strip() for word in result.stdout.splitlines() if word.strip())


@pytest.mark.parametrize(("line", "expected"), [
    ("ghbuild pu", ["publish"]),
    ("ghbuild co", ["completion", "container-flags"]),
    ("ghbuild publish ", ["nightly", "release"]),
    ("ghbuild publish nightly --dr", ["--dry-run"]),
    ("ghbuild prune --a", ["--apply"]),
    ("ghbuild build --arch ", ["amd64", "arm64"]),
    ("ghbuild build --backend ", ["buildx"]),
    ("ghbuild completion ", ["bash", "zsh"]),
])
def test_bash_completes_commands_flags_and_choices(bash_script, tmp_path, line, expected):
    assert complete(bash_script, line, tmp_path) == expected


def test_bash_completes_file_names_for_path_arguments(bash_script, tmp_path):
    (tmp_path / "ghbuild.toml").write_text("", "utf-8")
    (tmp_path / "ghbuild-records").mkdir()
    (tmp_path / "other.toml").write_text("", "utf-8")
    assert complete(bash_script, "ghbuild plan --config gh", tmp_path) == ["ghbuild-records", "ghbuild.toml"]
    assert complete(bash_script, "ghbuild digests gh", tmp_path) == ["ghbuild-records"]


def test_every_command_is_offered(bash_script, tmp_path):
    from ghbuild import cli

    assert complete(bash_script, "ghbuild ", tmp_path) == sorted(cli.COMMANDS)


def test_zsh_script_is_a_compdef_for_ghbuild():
    result = ghbuild("completion", "zsh")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("#compdef ghbuild")
    # A command's menu entry is its one-line help, not a cut first line of its long description.
    assert "    publish:'publish nightly tags and multi-arch manifests from staging'\n" in result.stdout
    assert "    nightly:'nightly-<arch> tags and the nightly / nightly-<sha> manifests'\n" in result.stdout
    assert '"--dry-run[look up, but build and push nothing]"' in result.stdout
    if shutil.which("zsh"):
        check = subprocess.run(["zsh", "-n"], input=result.stdout, capture_output=True, text=True, timeout=60)
        assert check.returncode == 0, check.stderr


def test_an_unknown_shell_is_a_usage_error():
    result = ghbuild("completion", "csh")
    assert result.returncode == 2
    assert result.stderr.startswith("ghbuild: usage error: argument shell: invalid choice: 'csh'")


def test_other_commands_do_not_import_the_completion_library():
    """shtab is imported by `completion` alone: every other command starts as fast as before."""
    probe = ("import sys, contextlib, io\nfrom ghbuild import cli\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n    cli.main(['schema'])\n"
             "print('shtab' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr
