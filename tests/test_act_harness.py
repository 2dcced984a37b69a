"""The act harness's own rules (tests/act/harness.py), checked without act: its rewrite of the matrices and
how it reads what act logged. A harness that let act skip a job silently would make every act test weaker."""
from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
from act import harness
from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[1]

# What act 0.2.89 printed in a CI run of ci.yml where the two build entries raced on runs-on.
RACED_LOG = """\
[images/build images/plan] 🏁  Job succeeded
[images/build images/cpu-amd64-1] ⭐ Run Set up job
[images/build images/cpu-arm64-2] Error while evaluating runs-on: yaml: unmarshal errors:
  line 0: cannot unmarshal !!seq into string
[images/build images/cpu-arm64-2] 🚧  Skipping unsupported platform -- Try running with `-P ubuntu-24.04=...`
[images/build images/cpu-amd64-1]   ✅  Success - Set up job
[images/build images/cpu-amd64-1] 🏁  Job succeeded
[images/build images/summary    ] 🏁  Job succeeded
"""


def _load(path: Path):
    return YAML(typ="safe").load(path.read_text("utf-8"))


@pytest.fixture
def tree(tmp_path):
    shutil.copytree(REPO / ".github" / "workflows", tmp_path / ".github" / "workflows")
    return tmp_path


def test_every_matrix_runs_one_entry_at_a_time_and_nothing_else_changes(tree):
    before = {p.name: _load(p) for p in (tree / ".github" / "workflows").glob("*.yml")}
    counts = harness.serialize_matrices(tree)
    assert counts.get(".github/workflows/build-images.yml") == 4, counts   # bases, build and their -trusted twins
    for name, document in before.items():
        after = _load(tree / ".github" / "workflows" / name)
        expected = copy.deepcopy(document)
        for job in (expected.get("jobs") or {}).values():
            if isinstance(job, dict) and isinstance(job.get("strategy"), dict):
                job["strategy"].setdefault("max-parallel", 1)
        assert after == expected, f"{name}: the rewrite changed more than max-parallel"
        strategies = [job for job in (after.get("jobs") or {}).values() if isinstance(job, dict) and "strategy" in job]
        assert counts.get(f".github/workflows/{name}", 0) == len(strategies), (name, counts)


def test_a_strategy_that_sets_max_parallel_is_left_as_it_is(tmp_path):
    workflows = tmp_path / ".github" / "workflows"
    workflows.mkdir(parents=True)
    text = ("jobs:\n  a:\n    strategy:\n      max-parallel: 3\n      matrix: {x: [1, 2]}\n    runs-on: ubuntu-24.04\n"
            "  b:\n    strategy:   # a comment\n\n      matrix: {x: [1, 2]}\n    runs-on: ${{ matrix.x }}\n")
    (workflows / "w.yml").write_text(text, "utf-8")
    assert harness.serialize_matrices(tmp_path) == {".github/workflows/w.yml": 1}
    jobs = _load(workflows / "w.yml")["jobs"]
    assert jobs["a"]["strategy"] == {"max-parallel": 3, "matrix": {"x": [1, 2]}}
    assert jobs["b"]["strategy"] == {"max-parallel": 1, "matrix": {"x": [1, 2]}}


def _run(log: str, rc: int = 0) -> harness.ActRun:
    return harness.ActRun("ci-push", ["act"], rc, 1.0, log, Path("act.log"), Path("records"), Path("artifacts"))


def test_a_job_act_skipped_for_its_own_evaluation_error_fails_with_acts_line():
    run = _run(RACED_LOG)
    assert run.act_errors == ["images/build images/cpu-arm64: Error while evaluating runs-on: yaml: unmarshal errors:"]
    with pytest.raises(AssertionError, match=r"act could not evaluate the workflow: .*cpu-arm64: Error while "
                                             r"evaluating runs-on"):
        harness.assert_green(run, {"/cpu-amd64", "/cpu-arm64"})


def test_a_clean_run_is_green_and_a_missing_job_is_named():
    log = RACED_LOG.replace("Error while evaluating runs-on", "Skipping step")
    run = _run(log)
    assert run.act_errors == []
    harness.assert_green(run, {"/plan", "/cpu-amd64", "/summary"})
    with pytest.raises(AssertionError, match="no job '/cpu-arm64' ran"):
        harness.assert_green(run, {"/cpu-arm64"})
    with pytest.raises(AssertionError, match="exited 1"):
        harness.assert_green(_run(log, rc=1))
