"""One error hierarchy: every exit code is defined in ghbuild/errors.py, one code per meaning, and the
README and `ghbuild --help` show the same table."""

from __future__ import annotations

import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ghbuild
from ghbuild import errors

ROOT = Path(__file__).resolve().parents[1]


def _all_modules():
    for info in pkgutil.walk_packages(ghbuild.__path__, "ghbuild."):
        if not info.name.endswith("__main__"):   # importing it would run the CLI
            yield importlib.import_module(info.name)


def test_every_error_class_with_an_exit_code_lives_in_errors():
    found = set()
    for module in _all_modules():
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, errors.GhbuildError):
                found.add(value)
                assert value.__module__ == "ghbuild.errors", f"{value.__qualname__} is defined in {value.__module__}"
    assert errors.RegistryError in found and errors.PruneError in found   # the walk saw the users of errors


def test_no_module_but_errors_assigns_an_exit_code():
    offenders = [f"{path.relative_to(ROOT)}:{n}" for path in sorted((ROOT / "ghbuild").rglob("*.py"))
                 if path.name != "errors.py"
                 for n, line in enumerate(path.read_text("utf-8").splitlines(), 1) if "exit_code =" in line]
    assert offenders == []


def test_one_code_per_meaning():
    table = errors.exit_codes()
    codes = [code for code, _, _ in table]
    kinds = [kind for _, kind, _ in table]
    assert len(set(codes)) == len(codes) and len(set(kinds)) == len(kinds)
    assert {code: kind for code, kind, _ in table} == {
        2: "usage error", 3: "config error", 4: "context error", 5: "invalid name", 6: "refused",
        10: "engine error", 11: "over budget", 12: "registry error", 13: "publish error", 14: "prune error",
        15: "runner check failed", 16: "base missing"}
    # A confirmed missing base is not a registry failure: the workflow tells them apart by code.
    assert errors.BaseMissingError.exit_code != errors.RegistryError.exit_code
    # Narrower causes keep their parent's code and kind.
    for cls, parent in ((errors.AuthError, errors.RegistryError), (errors.TransientError, errors.RegistryError),
                        (errors.DigestMismatch, errors.RegistryError), (errors.BaseMismatchError, errors.RegistryError),
                        (errors.PruneAbort, errors.PruneError), (errors.GitError, errors.ContextError),
                        (errors.DiagnosePathError, errors.TrustError)):
        assert (cls.exit_code, cls.kind) == (parent.exit_code, parent.kind)


def test_readme_table_is_the_table_of_errors_py():
    text = (ROOT / "README.md").read_text("utf-8")
    rows = re.findall(r"^\| (\d+) \| ([^|]+) \| (.+) \|$", text, re.M)
    assert [(int(c), k.strip(), m.strip()) for c, k, m in rows] == errors.exit_codes()


def test_help_ends_with_the_exit_codes():
    proc = subprocess.run([sys.executable, "-m", "ghbuild", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0
    tail = proc.stdout[proc.stdout.index("exit codes:"):].splitlines()
    assert tail[1].split() == ["0", "success"] and tail[-1].split() == ["130", "interrupted"]
    for code, kind, _ in errors.exit_codes():
        assert any(line.split(None, 1) == [str(code), line.split(None, 1)[1]] and f"{kind}:" in line
                   for line in tail), (code, kind)


def test_a_missing_extra_is_one_line_naming_the_extra_to_install():
    from ghbuild.errors import UsageError, require

    assert require("json", "aws", "anything").dumps([]) == "[]"
    with pytest.raises(UsageError) as info:
        require("ghbuild_no_such_module", "aws", "the sccache S3 check")
    message = str(info.value)
    assert "\n" not in message and info.value.exit_code == 2
    assert "the sccache S3 check needs the Python package 'ghbuild_no_such_module'" in message
    assert "install 'ghbuild[aws]'" in message
