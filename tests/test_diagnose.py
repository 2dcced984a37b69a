"""`diagnose`: bounded failure diagnostics that write only inside their own folder.

Real processes only: fake `rocminfo` / `amd-smi` / `docker` executables (tests/fakes/rocm_tools.py)
first on PATH that succeed, fail or hang. Asserted: the per-command and total budgets hold in wall
time, hung commands die with their whole process group, commands past the budget are recorded as
skipped, nothing is written outside the output folder (`..`, absolute paths elsewhere, symlinked
components and planted symlinks are refused or neutralised), secrets never reach the files.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from fakes.rocm_tools import (
    ROCMINFO_2_GPUS,
    FakeBin,
    clean_env,
    fake_docker,
    run_cli,
    survivors,
)

from ghbuild.runner import diagnose
from ghbuild.runner.diagnose import DiagCommand

SLACK = 2.0      # in-process: scheduling and file writes only (the machine may be loaded; a hang is 60 s)
CLI_SLACK = 4.0  # plus Python start-up


@pytest.fixture
def work(tmp_path) -> Path:
    """The working directory (the allowed root); tmp_path itself is 'outside'."""
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


@pytest.fixture
def fb(tmp_path) -> FakeBin:
    (tmp_path / "bin").mkdir()
    return FakeBin(tmp_path / "bin")


def snapshot(base: Path, exclude: Path | None = None) -> dict[str, float]:
    """Every path under base (but not under exclude) with its mtime, for 'nothing else changed'."""
    result = {}
    for p in base.rglob("*"):
        if exclude is not None and (p == exclude or exclude in p.parents):
            continue
        result[str(p)] = p.lstat().st_mtime_ns
    return result


def index(out: Path) -> dict:
    return json.loads((out / "index.json").read_text())


# --------------------------------------------------------------------------- budgets

def test_each_command_is_bounded_and_its_process_group_killed(work, fb):
    fb.ok("rocminfo", ROCMINFO_2_GPUS)
    fb.hang("amd-smi")
    fb.fail("rocm-smi", "ERROR: GPU[0]: Unable to read SMI counters\n", code=2)
    cmds = (DiagCommand("rocminfo", ("rocminfo",)), DiagCommand("amd-smi", ("amd-smi", "list")),
            DiagCommand("rocm-smi", ("rocm-smi",)))
    start = time.monotonic()
    result = diagnose.collect("diag", total_budget=10, per_command=1, commands=cmds, env=clean_env(fb.path), cwd=work)
    took = time.monotonic() - start
    assert took < 1 + SLACK, f"one 1 s timeout took {took:.1f} s"
    status = {e.name: e for e in result.entries}
    assert (status["rocminfo"].status, status["amd-smi"].status, status["rocm-smi"].status) == \
        ("ok", "timeout", "failed")
    assert status["rocm-smi"].returncode == 2
    assert 0.9 <= status["amd-smi"].seconds < 1 + SLACK
    pids = fb.pids("amd-smi")
    assert len(pids) == 2 and not survivors(pids), "the hung command's group must be dead"
    out = work / "diag"
    assert "gfx942" in (out / "rocminfo.txt").read_text()
    text = (out / "amd-smi.txt").read_text()
    assert text.startswith("$ amd-smi list\n# status: timeout") and "killed after 1 s" in text
    assert "Unable to read SMI counters" in (out / "rocm-smi.txt").read_text()


def test_total_budget_holds_and_the_rest_is_skipped(work, fb):
    for name in ("h1", "h2", "h3", "h4", "h5", "h6"):
        fb.hang(name)
    cmds = tuple(DiagCommand(n, (n,)) for n in ("h1", "h2", "h3", "h4", "h5", "h6"))
    start = time.monotonic()
    result = diagnose.collect("diag", total_budget=2.5, per_command=1, commands=cmds, env=clean_env(fb.path),
                              cwd=work)
    took = time.monotonic() - start
    assert took < 2.5 + SLACK, f"total budget 2.5 s, took {took:.1f} s"
    statuses = [e.status for e in result.entries]
    assert statuses[:2] == ["timeout", "timeout"]
    assert statuses[-3:] == ["skipped"] * 3, statuses
    assert len(statuses) == 6, "every command is in the index, run or not"
    skipped = [e for e in result.entries if e.status == "skipped"]
    assert all("total budget of 2.5 s was spent" in e.note and e.file is None for e in skipped)
    assert not (work / "diag" / "h6.txt").exists()
    data = index(work / "diag")
    assert [c["status"] for c in data["commands"]] == statuses
    assert data["total_budget"] == 2.5 and data["per_command"] == 1
    for name in ("h1", "h2", "h3"):
        assert not survivors(fb.pids(name))
    assert fb.calls("h6") == [], "a skipped command is never started"


def test_default_commands_with_fakes_and_missing_tools(work, fb):
    """The shipped command list: rocminfo hangs, amd-smi fails, rocm-smi is missing, docker answers."""
    fb.hang("rocminfo")
    fb.fail("amd-smi", "amd-smi: error: could not initialize AMDSMI\n")
    fake_docker(fb)
    env = clean_env(fb.path)
    env["PATH"] = f"{fb.path}:/usr/bin:/bin"
    start = time.monotonic()
    result = diagnose.collect("diag", total_budget=25, per_command=1, env=env, cwd=work)
    assert time.monotonic() - start < 25 + SLACK
    by_name = {e.name: e for e in result.entries}
    assert [e.name for e in result.entries] == [c.name for c in diagnose.DEFAULT_COMMANDS]
    assert by_name["rocminfo"].status == "timeout"
    assert by_name["amd-smi-list"].status == "failed"
    assert by_name["rocm-smi"].status == "not-found"
    assert by_name["uname"].status == "ok"
    names = sorted(p.name for p in (work / "diag").iterdir())
    assert names == sorted([f"{c.name}.txt" for c in diagnose.DEFAULT_COMMANDS] + ["index.json", "summary.md"])
    assert "| `rocminfo` | timeout |" in (work / "diag" / "summary.md").read_text()


# --------------------------------------------------------------------------- where it writes

def test_writes_only_inside_the_folder(tmp_path, work, fb):
    fb.ok("rocminfo", ROCMINFO_2_GPUS)
    (tmp_path / "outside.txt").write_text("keep")
    fb.log.touch()
    before = snapshot(tmp_path, exclude=work / "a")
    diagnose.collect("a/b/diag", commands=(DiagCommand("rocminfo", ("rocminfo",)),), env=clean_env(fb.path),
                     cwd=work)
    after = snapshot(tmp_path, exclude=work / "a")
    # Outside the output folder only the fakes' own log changed (written by the fake, not by diagnose),
    # and the working directory got its one new entry, the folder's first component.
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert changed <= {str(fb.log), str(work)}, changed
    assert [p.name for p in work.iterdir()] == ["a"]
    assert sorted(p.name for p in (work / "a" / "b" / "diag").iterdir()) == ["index.json", "rocminfo.txt",
                                                                             "summary.md"]


def test_absolute_folder_inside_the_working_directory_or_runner_temp(tmp_path, work, fb):
    fb.ok("rocminfo", ROCMINFO_2_GPUS)
    cmds = (DiagCommand("rocminfo", ("rocminfo",)),)
    result = diagnose.collect(str(work / "abs"), commands=cmds, env=clean_env(fb.path), cwd=work)
    assert result.out_dir == work / "abs" and (work / "abs" / "rocminfo.txt").is_file()
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    env = clean_env(fb.path, RUNNER_TEMP=str(temp))
    result = diagnose.collect(str(temp / "diag"), commands=cmds, env=env, cwd=work)
    assert (temp / "diag" / "index.json").is_file()


@pytest.mark.parametrize("out", ["../escape", "a/../../escape", "a/..", ".."])
def test_dotdot_is_refused(tmp_path, work, fb, out):
    with pytest.raises(diagnose.DiagnosePathError, match=re.escape("has a '..' component")):
        diagnose.collect(out, env=clean_env(fb.path), cwd=work)
    assert not (tmp_path / "escape").exists()
    assert list(work.iterdir()) == []


def test_absolute_path_elsewhere_is_refused(tmp_path, work, fb):
    with pytest.raises(diagnose.DiagnosePathError, match="outside the allowed folders"):
        diagnose.collect(str(tmp_path / "elsewhere"), env=clean_env(fb.path), cwd=work)
    with pytest.raises(diagnose.DiagnosePathError, match=re.escape("has a '..' component")):
        diagnose.collect(str(work / ".." / "elsewhere"), env=clean_env(fb.path), cwd=work)
    assert not (tmp_path / "elsewhere").exists()


def test_symlinked_component_is_refused(tmp_path, work, fb):
    outside = tmp_path / "outside"
    outside.mkdir()
    (work / "link").symlink_to(outside)
    (work / "real").mkdir()
    (work / "real" / "diag").symlink_to(outside)
    for out in ("link/diag", "real/diag", str(work / "link" / "x")):
        with pytest.raises(diagnose.DiagnosePathError, match="is a symlink"):
            diagnose.collect(out, env=clean_env(fb.path), cwd=work)
    assert list(outside.iterdir()) == []


def test_planted_symlink_file_is_replaced_not_followed(tmp_path, work, fb):
    fb.ok("rocminfo", ROCMINFO_2_GPUS)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (work / "diag").mkdir()
    (work / "diag" / "rocminfo.txt").symlink_to(victim)
    (work / "diag" / "index.json").symlink_to(victim)
    diagnose.collect("diag", commands=(DiagCommand("rocminfo", ("rocminfo",)),), env=clean_env(fb.path), cwd=work)
    assert victim.read_text() == "precious"
    for name in ("rocminfo.txt", "index.json"):
        assert not (work / "diag" / name).is_symlink()
    assert "gfx942" in (work / "diag" / "rocminfo.txt").read_text()


@pytest.mark.parametrize("name", ["../x", "a/b", ".hidden", "", "a b", ".."])
def test_unsafe_command_names_are_refused(work, fb, name):
    with pytest.raises(diagnose.DiagnosePathError):
        diagnose.collect("diag", commands=(DiagCommand(name, ("true",)),), env=clean_env(fb.path), cwd=work)
    assert not (work / "diag").exists()


# --------------------------------------------------------------------------- secrets

def test_secrets_never_reach_the_files(work, fb):
    token, key = "ghp_0123456789abcdefSECRETTOKEN", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    # A command that prints its environment, a credential URL, and a secret it got some other way.
    leak = fb.path / "leak.txt"
    leak.write_text(f"config says token={token}\n")
    fb.script("envdump", f"env\necho 'registry: https://bot:{token}@ghcr.io/v2/'\n"
                         f"echo 'proxy: http://user:hunter22@proxy.local:3128'\ncat {leak}\n")
    env = clean_env(fb.path, GITHUB_TOKEN=token, AWS_SECRET_ACCESS_KEY=key, ACTIONS_RUNTIME_TOKEN="rt-" + token[:12],
                    MY_VISIBLE="shown")
    diagnose.collect("diag", commands=(DiagCommand("envdump", ("envdump",)),), env=env, cwd=work)
    text = (work / "diag" / "envdump.txt").read_text()
    assert "MY_VISIBLE=shown" in text, "ordinary variables stay"
    for secret in (token, key, "rt-" + token[:12], "hunter22"):
        assert secret not in text, secret
    assert "GITHUB_TOKEN" not in text and "AWS_SECRET_ACCESS_KEY" not in text, "secret variables are not passed on"
    assert "https://***@ghcr.io/v2/" in text and "token=***" in text
    assert token not in (work / "diag" / "index.json").read_text()


# --------------------------------------------------------------------------- the CLI

def test_cli_writes_index_and_summary(work, fb):
    fb.ok("rocminfo", ROCMINFO_2_GPUS)
    fb.hang("amd-smi")
    fake_docker(fb)
    summary = work.parent / "summary.md"
    summary.write_text("")
    env = clean_env(fb.path, GITHUB_ACTIONS="true", GITHUB_STEP_SUMMARY=str(summary))
    res = run_cli(["diagnose", "--out", "diag", "--total-timeout", "4", "--command-timeout", "1", "--json"], env, work)
    assert res.returncode == 0, res.stderr
    assert res.seconds < 4 + CLI_SLACK
    data = json.loads(res.stdout)
    assert data["out_dir"] == str(work / "diag")
    assert {c["name"]: c["status"] for c in data["commands"]}["amd-smi-list"] == "timeout"
    assert data["commands"] == index(work / "diag")["commands"]
    assert "ghbuild diagnose: 12 commands in" in res.stderr and str(work / "diag") in res.stderr
    assert "### Runner diagnostics" in summary.read_text()


@pytest.mark.parametrize("out,needle", [("../x", "has a '..' component"), ("/etc/ghbuild-diag", "outside the allowed")])
def test_cli_refuses_escapes_in_one_line(tmp_path, work, fb, out, needle):
    res = run_cli(["diagnose", "--out", out], clean_env(fb.path), work)
    assert res.returncode == 6, res.stderr
    errors = res.error_lines()
    assert len(errors) == 1 and errors[0].startswith("ghbuild: refused: diagnose --out: ") and needle in errors[0]
    assert "Traceback" not in res.stderr
    assert not Path("/etc/ghbuild-diag").exists() and not (tmp_path / "x").exists()


@pytest.mark.parametrize("flag,value", [("--total-timeout", "0"), ("--command-timeout", "-1"),
                                        ("--total-timeout", "soon")])
def test_cli_refuses_bad_budgets(work, fb, flag, value):
    res = run_cli(["diagnose", flag, value], clean_env(fb.path), work)
    assert res.returncode == 2
    assert len(res.error_lines()) == 1 and "usage error" in res.error_lines()[0]
    assert not (work / "ghbuild-diagnostics").exists()


def test_cli_default_folder(work, fb):
    env = clean_env(fb.path)
    env["PATH"] = str(fb.path)   # nothing to run: every command is not found, quickly
    res = run_cli(["diagnose"], env, work)
    assert res.returncode == 0, res.stderr
    assert (work / "ghbuild-diagnostics" / "index.json").is_file()
    assert os.path.isfile(work / "ghbuild-diagnostics" / "rocminfo.txt")
