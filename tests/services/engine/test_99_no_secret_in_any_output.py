"""Last: across EVERY ghbuild run of this session (cold, cached, degraded, dry, interrupted), no output
line carries a secret value (only the runner's own `::add-mask::` command may), and no run left its
work folder (with the credentials file) behind."""

from __future__ import annotations


def test_no_secret_in_any_ghbuild_output(session):
    if not session.runs:   # this file run alone: give the scan a run to read
        session.ghbuild("secret-scan", "--push", "--dry-run")
    leaks = []
    for run in session.runs:
        for stream, text in (("stdout", run.stdout), ("stderr", run.stderr)):
            for number, line in enumerate(text.splitlines(), 1):
                if line.startswith("::add-mask::"):
                    continue
                if any(secret in line for secret in session.secrets):
                    leaks.append(f"{run.name} {stream}:{number}")
    assert leaks == [], f"secret value printed: {leaks}"


def test_no_run_left_its_work_folder(session):
    left = {run.name: sorted(str(p) for p in run.tmpdir.rglob("*")) for run in session.runs}
    left = {name: paths for name, paths in left.items() if paths}
    assert left == {}, left
