"""Config errors a user can act on: one sentence about the value, and (for annotations) the file, line and
column of the key as written, found by ghbuild.config.toml_position."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_in_process

from ghbuild.config import configfile, toml_position
from ghbuild.errors import ConfigError

TOML = '''\
# a comment = not a key
[trust]
canonical-repository = "org/project"

[images.cpu]
dockerfile = "Dockerfile"
platforms = [
  "linux/amd64",
]
description = """
size-budget = "inside a string"
"""
  size-budget = "huge"
stage-budgets = { runtime = "60MB", "cpp" = { nested = 1 } }
runners.arm64 = ["x"]

[images."quoted.name".identity]
version = "1"
'''


@pytest.mark.parametrize("path, position", [
    (("trust",), (2, 2)),
    (("trust", "canonical-repository"), (3, 1)),
    (("images", "cpu", "platforms"), (7, 1)),
    (("images", "cpu", "size-budget"), (13, 3)),            # not the text inside the multi-line string
    (("images", "cpu", "stage-budgets", "runtime"), (14, 19)),
    (("images", "cpu", "stage-budgets", "cpp", "nested"), (14, 47)),
    (("images", "cpu", "runners", "arm64"), (15, 1)),
    (("images", "quoted.name", "identity", "version"), (18, 1)),
    (("images", "cpu", "runners", "amd64"), (15, 1)),         # not written: its nearest written parent
    (("nothing",), None),
])
def test_locates_keys_as_written(path, position):
    assert toml_position.locate(TOML, path) == position


def test_locates_below_tool_ghbuild_in_pyproject():
    text = '[project]\nname = "x"\n\n[tool.ghbuild.images.cpu]\ndockerfile = 3\n'
    assert toml_position.locate(text, ("images", "cpu", "dockerfile"), prefix=("tool", "ghbuild")) == (5, 1)
    assert toml_position.locate(text, ("project",), prefix=("tool", "ghbuild")) is None


def _error(folder: Path, name: str, content: bytes | str) -> ConfigError:
    path = folder / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    (folder / "Dockerfile").write_text("FROM scratch\n")
    with pytest.raises(ConfigError) as info:
        configfile.load(str(path), {}, folder)
    return info.value


def test_a_schema_failure_is_said_in_words_on_its_line(tmp_path):
    error = _error(tmp_path, "ghbuild.toml", '[images.cpu]\ndockerfile = "Dockerfile"\n\nsize-budget = "huge"\n')
    assert error.message == (f"{tmp_path / 'ghbuild.toml'}: images.cpu.size-budget: 'huge' is not a size such "
                             "as 400MB, 1.5GB or 200MiB (or a number of bytes)")
    assert error.location == {"file": str(tmp_path / "ghbuild.toml"), "line": 4, "col": 1}


def test_a_checked_value_in_pyproject_is_located_too(tmp_path):
    error = _error(tmp_path, "pyproject.toml", '[project]\nname = "x"\n[tool.ghbuild.images.cpu]\n'
                                               'dockerfile = "../outside"\n')
    assert "images.cpu.dockerfile: '../outside' is outside" in error.message
    assert (error.location["line"], error.location["col"]) == (4, 1)


def test_an_override_names_the_variable_and_no_line(tmp_path):
    (tmp_path / "ghbuild.toml").write_text('[images.cpu]\ndockerfile = "Dockerfile"\n')
    with pytest.raises(ConfigError) as info:
        configfile.load(None, {"GHBUILD_IMAGES_CPU_SIZE_BUDGET": "huge"}, tmp_path)
    assert info.value.message.startswith("GHBUILD_IMAGES_CPU_SIZE_BUDGET (overrides images.cpu.size-budget): "
                                         "'huge' is not a size")
    assert info.value.location == {}


@pytest.mark.parametrize("content, words, line, col", [
    ('[images.cpu]\ndockerfile = "Dockerfile"\n'.encode("utf-16"), "UTF-16; TOML files are UTF-8", 1, 1),
    (b'\xef\xbb\xbf[images.cpu]\n', "UTF-8 with a byte-order mark", 1, 1),
    (b'[images.cpu]\ndockerfile = "D\xf6ckerfile"\n', "not UTF-8 text (byte 28 at line 2, column 16)", 2, 16),
    (b'[images.cpu]\ndockerfile = \n', "invalid TOML: Invalid value (at line 2, column 14)", 2, 14),
])
def test_an_unreadable_file_is_one_line_at_its_position(tmp_path, content, words, line, col):
    error = _error(tmp_path, "ghbuild.toml", content)
    assert words in error.message and error.exit_code == 3
    assert (error.location["line"], error.location["col"]) == (line, col)


def test_cli_utf16_config_is_exit_3_with_an_annotation_on_line_1(tmp_path):
    (tmp_path / "ghbuild.toml").write_text('[images.cpu]\ndockerfile = "Dockerfile"\n', "utf-16")
    result = run_in_process(tmp_path, "plan", env={"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(tmp_path)})
    assert result.returncode == 3
    annotation, line = result.stderr.splitlines()
    assert annotation.startswith("::error title=ghbuild config error,file=ghbuild.toml,line=1,col=1::")
    assert line.endswith("ghbuild.toml: UTF-16; TOML files are UTF-8 without a byte-order mark (save it as UTF-8)")


def test_cli_digests_of_a_missing_folder_is_an_error(tmp_path):
    result = run_in_process(tmp_path, "digests", str(tmp_path / "nope"))
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"ghbuild: usage error: records folder {tmp_path / 'nope'} does not exist")
