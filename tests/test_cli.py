"""The command line, run as a real subprocess the way a workflow step runs it.

Every run gets a controlled environment: the test process's environment without any GITHUB_* or
GHBUILD_* variable, plus what the test sets, in a temporary working directory.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
EVENTS = REPO_ROOT / "tests" / "fixtures" / "events"
FIXTURES = ["push_master", "push_dev", "pull_request", "pull_request_target", "schedule", "workflow_dispatch"]
SHA = "0123456789abcdef0123456789abcdef01234567"
HEREDOC = re.compile(r"(?P<name>[^\n<]+)<<(?P<delim>ghadelimiter_[0-9a-f-]{36})\n(?P<value>.*?)\n(?P=delim)\n", re.S)

# Flags that make a complete context without any GITHUB_* variable or payload.
LOCAL_PUSH = ["--event", "push", "--repository", "org/project", "--ref", "main", "--sha", SHA,
              "--default-branch", "main"]


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GHBUILD_", "INPUT_"))}
    env.pop("PYTHONWARNINGS", None)
    return env


def fixture_env(name: str) -> dict[str, str]:
    env = {}
    for line in (EVENTS / f"{name}.env").read_text("utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    env["GITHUB_EVENT_PATH"] = str(EVENTS / f"{name}.json")
    return env


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None, event: str | None = None) -> Result:
    full_env = base_env()
    # The tmp directory is no git checkout: keep git from finding one further up.
    full_env["GIT_CEILING_DIRECTORIES"] = str(cwd.parent)
    if event:
        full_env.update(fixture_env(event))
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "ghbuild", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=60)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def project(tmp_path) -> Path:
    """A working directory holding a copy of the repository's own ghbuild.toml."""
    work = tmp_path / "project"
    work.mkdir()
    shutil.copy(REPO_ROOT / "ghbuild.toml", work / "ghbuild.toml")
    return work


def assert_clean_error(result: Result, code: int, kind: str) -> str:
    """One line on stderr, `ghbuild: <kind>: ...`, the kind's exit code, no traceback, nothing on stdout."""
    assert result.returncode == code, result
    assert result.stdout == "", result
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"ghbuild: {kind}: "), lines[0]
    return lines[0]


def assert_no_credential(text: str) -> None:
    """The endpoint cases use `https://user:secret@minio.example.com`: no part of it may be echoed.

    (The word "secret" alone may appear: the advice is to pass credentials as secrets.)
    """
    for part in ("user:secret", "secret@", ":secret", "user:", "minio.example.com"):
        assert part not in text, text


def check_plan_contract(data: dict) -> None:
    ctx = data["context"]
    for key in ("event", "repository", "canonical_repository", "ref", "sha", "scope"):
        assert isinstance(ctx[key], str) and ctx[key], key
    assert ctx["pull_request"] is None or isinstance(ctx["pull_request"], int)
    assert ctx["head_repository"] is None or isinstance(ctx["head_repository"], str)
    assert isinstance(ctx["trusted"], bool)
    assert re.fullmatch(r"[0-9a-f]{40}", ctx["sha"])
    assert isinstance(data["jobs"], list) and data["jobs"]
    for job in data["jobs"]:
        assert isinstance(job["image"], str)
        assert job["arch"] in ("amd64", "arm64")
        assert job["platform"] == f"linux/{job['arch']}"
        assert isinstance(job["runs_on"], list) and job["runs_on"]
        for key in ("tags", "cache_from", "cache_to"):
            assert isinstance(job[key], list) and all(isinstance(x, str) for x in job[key]), key
        for tag in job["tags"]:
            repository, _, tag_text = tag.rpartition(":")
            assert repository and re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}", tag_text), tag


# --------------------------------------------------------------------------- plan --json

@pytest.mark.parametrize("event", FIXTURES)
def test_plan_json_contract_for_every_fixture_event(project, event):
    result = run(["plan", "--json"], project, event=event)
    assert result.returncode == 0, result
    assert "Traceback" not in result.stderr
    data = result.json()
    check_plan_contract(data)
    assert data["context"]["event"] == fixture_env(event)["GITHUB_EVENT_NAME"]
    assert data["context"]["repository"] == "docker/test-docker-action"
    expected = [("cpu", "amd64", ["ubuntu-24.04"]), ("cpu", "arm64", ["ubuntu-24.04-arm"])]
    if not data["context"]["is_fork"]:    # a fork's pull request gets no job on self-hosted runners
        expected += [("rocm-base", "amd64", ["self-hosted", "linux", "rocm"]),
                     ("rocm", "amd64", ["self-hosted", "linux", "rocm"])]
        assert [(j["image"], j["base"], j["identity_prefix"]) for j in data["jobs"]][2:] == [
            ("rocm-base", None, "rocm-base"), ("rocm", "rocm-base", None)]
    assert [(j["image"], j["arch"], j["runs_on"]) for j in data["jobs"]] == expected


@pytest.mark.parametrize("event", ["push_master", "schedule", "workflow_dispatch"])
def test_plan_json_trusted_run_on_the_default_branch_of_the_canonical_repository(project, event):
    result = run(["plan", "--json"], project, event=event,
                 env={"GHBUILD_TRUST_CANONICAL_REPOSITORY": "https://github.com/docker/test-docker-action.git"})
    assert result.returncode == 0, result
    data = result.json()
    sha = fixture_env(event)["GITHUB_SHA"]
    assert data["context"]["trusted"] is True
    assert data["context"]["canonical_repository"] == "docker/test-docker-action"
    assert data["context"]["scope"] == "master"
    cpu_arm = data["jobs"][1]
    assert cpu_arm["tags"] == [f"ghcr.io/docker/ghbuild-cpu:{sha}-arm64"]
    assert cpu_arm["cache_from"] == ["type=gha,scope=master-cpu-arm64",
                                     "type=registry,ref=ghcr.io/docker/ghbuild-cache:master-cpu-arm64"]
    assert cpu_arm["cache_to"] == [
        "type=gha,scope=master-cpu-arm64,mode=max,ignore-error=true",
        "type=registry,ref=ghcr.io/docker/ghbuild-cache:master-cpu-arm64,mode=max,ignore-error=true,"
        "image-manifest=true,oci-mediatypes=true"]


def test_plan_json_outside_the_canonical_repository_is_untrusted(project):
    data = run(["plan", "--json"], project, event="push_master").json()  # canonical is ghbuild/ghbuild
    assert data["context"]["trusted"] is False
    assert data["context"]["scope"].startswith("preview-master-")
    for job in data["jobs"]:
        assert all(data["context"]["scope"] in ref for ref in job["cache_to"])
        assert not any(tag.split(":")[-1].startswith("2665") for tag in job["tags"])


def test_plan_json_fork_pull_request(project):
    data = run(["plan", "--json"], project, event="pull_request").json()
    ctx = data["context"]
    assert (ctx["trusted"], ctx["pull_request"], ctx["head_repository"]) == (
        False, 15, "crazy-max/test-docker-action")
    assert re.fullmatch(r"pr-15-[0-9a-f]{12}", ctx["scope"])
    for job in data["jobs"]:
        assert job["push"] is False
        assert [ref.split(",")[0] for ref in job["cache_to"]] == ["type=gha"]  # no registry cache write
        assert job["cache_from"][0].startswith(f"type=gha,scope={ctx['scope']}-{job['image']}-")


def test_plan_json_fork_pull_request_target_is_read_only_with_a_warning(project):
    result = run(["plan", "--json"], project, event="pull_request_target")
    data = result.json()
    assert data["context"]["trusted"] is False
    for job in data["jobs"]:
        assert job["cache_to"] == [] and job["push"] is False
    assert data["warnings"] and "read-only" in data["warnings"][0]
    assert result.stderr.startswith("ghbuild warning: pull_request_target from fork")


def test_flags_beat_what_github_set(project):
    data = run(["plan", "--json", "--ref", "feature/x", "--sha", SHA], project, event="push_master").json()
    assert data["context"]["ref"] == "refs/heads/feature/x"
    assert data["context"]["sha"] == SHA


# --------------------------------------------------------------------------- plan table

def test_plan_table_for_a_fork_pull_request(project):
    result = run(["plan"], project, event="pull_request")
    assert result.returncode == 0, result
    out = result.stdout
    assert "pull request #15 from crazy-max/test-docker-action:test-pr (fork) into master" in out
    assert re.search(r"^trusted\s+no: ", out, re.M)
    assert re.search(r"^may write\s+registry no, GitHub Actions cache yes, secrets no$", out, re.M)
    rows = {line.split()[0]: line.split() for line in out.splitlines() if re.match(r"(cpu|rocm)-(amd|arm)64 ", line)}
    assert rows["cpu-amd64"][1:4] == ["linux/amd64", "ubuntu-24.04", "no"]
    assert rows["cpu-arm64"][1:4] == ["linux/arm64", "ubuntu-24.04-arm", "no"]
    assert "rocm-amd64" not in rows     # self-hosted runners never run a fork's code
    assert "rocm-amd64: not planned for a pull request from a fork" in result.stderr
    assert "cache to    type=gha,scope=pr-15-" in out
    with pytest.raises(json.JSONDecodeError):
        json.loads(out)


def test_plan_table_for_a_trusted_push(project):
    result = run(["plan"], project, event="push_master", env={"GHBUILD_TRUST_CANONICAL_REPOSITORY":
                                                              "docker/test-docker-action"})
    assert result.returncode == 0, result
    assert re.search(r"^trusted\s+yes: ", result.stdout, re.M)
    assert "ghcr.io/docker/ghbuild-rocm:266574110acf203503badf966df2ea24b5d732d7-x86_64" in result.stdout
    assert result.stderr == ""


def test_plan_table_with_only_local_flags(project):
    result = run(["plan", *LOCAL_PUSH, "--image", "rocm"], project,
                 env={"GHBUILD_TRUST_CANONICAL_REPOSITORY": "org/project"})
    assert result.returncode == 0, result
    assert "rocm-amd64" in result.stdout and "cpu-amd64" not in result.stdout


# --------------------------------------------------------------------------- matrix

def test_matrix_shape(project):
    result = run(["matrix"], project, event="pull_request")
    assert result.returncode == 0, result
    assert result.stdout.count("\n") == 1  # one compact line
    matrix = result.json()
    assert list(matrix) == ["include"]
    assert matrix["include"] == [
        {"id": "cpu-amd64", "image": "cpu", "arch": "amd64", "platform": "linux/amd64",
         "runs_on": ["ubuntu-24.04"], "push": False, "base": ""},
        {"id": "cpu-arm64", "image": "cpu", "arch": "arm64", "platform": "linux/arm64",
         "runs_on": ["ubuntu-24.04-arm"], "push": False, "base": ""},
    ]   # the fork's pull request: nothing on the self-hosted ROCm runners


@pytest.mark.parametrize(("flags", "ids"), [
    (["--image", "rocm"], ["rocm-amd64"]),
    (["--arch", "arm64"], ["cpu-arm64"]),
    (["--image", "cpu", "--arch", "amd64"], ["cpu-amd64"]),
    (["--image", "rocm", "--arch", "arm64"], []),
])
def test_matrix_selection(project, flags, ids):
    result = run(["matrix", *flags], project, event="push_dev")
    assert result.returncode == 0, result
    assert [entry["id"] for entry in result.json()["include"]] == ids


def test_matrix_sets_the_step_outputs_in_the_runner_format(project, tmp_path):
    output = tmp_path / "github_output"
    output.touch()
    result = run(["matrix"], project, event="push_master",
                 env={"GITHUB_OUTPUT": str(output), "GHBUILD_TRUST_CANONICAL_REPOSITORY": "docker/test-docker-action"})
    assert result.returncode == 0, result
    text = output.read_text("utf-8")
    assert text.startswith("matrix<<ghadelimiter_")
    entries = {m["name"]: m["value"] for m in HEREDOC.finditer(text)}
    assert "".join(m.group(0) for m in HEREDOC.finditer(text)) == text
    assert json.loads(entries["matrix"]) == result.json()
    assert entries["trusted"] == "true"
    assert entries["jobs"] == "3"
    assert all(entry["push"] for entry in result.json()["include"])


def test_matrix_without_github_output_writes_no_output_command(project):
    result = run(["matrix"], project, event="push_dev", env={"GITHUB_ACTIONS": "true"})
    assert result.returncode == 0, result
    result.json()  # stdout is nothing but the matrix
    assert "set-output" not in result.stdout + result.stderr


@pytest.mark.parametrize("command", [["matrix"], ["plan", "--json"]])
def test_warnings_in_actions_are_annotations_on_stderr(project, tmp_path, command):
    output = tmp_path / "github_output"
    output.touch()
    result = run(command, project, event="pull_request_target",
                 env={"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(output)})
    assert result.returncode == 0, result
    data = result.json()  # stdout stays parseable JSON
    assert "::" not in result.stdout
    lines = result.stderr.splitlines()
    assert lines and all(line.startswith("::warning::") for line in lines), result.stderr
    assert any("pull_request_target from fork crazy-max/test-docker-action: read-only" in line for line in lines)
    if command == ["matrix"]:
        assert all(entry["push"] is False for entry in data["include"])
        assert "trusted<<ghadelimiter_" in output.read_text("utf-8")


def test_warnings_outside_actions_are_plain_lines(project):
    result = run(["matrix", *LOCAL_PUSH[:-2]], project)  # no default branch: stable branch is a guess
    assert result.returncode == 0, result
    result.json()
    assert result.stderr == ("ghbuild warning: stable branch unknown (no trust.stable-branch, no default branch "
                             "in the payload): assuming 'main'\n")


# --------------------------------------------------------------------------- schema

def test_schema_is_json_that_validates_the_repositorys_config(tmp_path):
    from jsonschema import Draft202012Validator, ValidationError

    result = run(["schema"], tmp_path)  # needs no config and no GitHub context
    assert result.returncode == 0, result
    assert result.stderr == ""
    schema = result.json()
    assert schema == json.loads((REPO_ROOT / "ghbuild" / "resources" / "ghbuild.schema.json").read_text("utf-8"))
    Draft202012Validator.check_schema(schema)
    with (REPO_ROOT / "ghbuild.toml").open("rb") as fh:
        Draft202012Validator(schema).validate(tomllib.load(fh))
    bad = [
        {"images": {"cpu": {"dockerfile": "D", "platforms": ["linux/s390x"]}}},
        {"images": {"cpu": {"dockerfile": "D"}}, "registries": {"gha_cache": True}},
        {"images": {"cpu": {"dockerfile": "D"}}, "publish": {"retention": 0}},
        {"images": {"cpu": {}}},
        {"images": {}},
    ]
    for data in bad:
        with pytest.raises(ValidationError):
            Draft202012Validator(schema).validate(data)


def test_console_script(tmp_path):
    script = Path(sys.executable).with_name("ghbuild")
    assert script.exists(), f"pip installs the console script next to the interpreter: {script} is missing"
    proc = subprocess.run([str(script), "--version"], cwd=tmp_path, env=base_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0
    assert re.fullmatch(r"ghbuild \d+\.\d+\.\d+\S*\n", proc.stdout)


def test_no_command_prints_help_to_stderr(tmp_path):
    result = run([], tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert "usage: ghbuild" in result.stderr


def test_unknown_image_names_the_config_file_and_ghbuild_config(tmp_path, project):
    """A GHBUILD_CONFIG exported for another checkout is the usual reason: the error says which file it read."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "ghbuild.toml").write_text('[images.app]\ndockerfile = "Dockerfile"\n')
    result = run(["plan", "--image", "app", *LOCAL_PUSH], other,
                 env={"GHBUILD_CONFIG": str(project / "ghbuild.toml")})
    message = assert_clean_error(result, 2, "usage error")
    assert f"--image app: no such image in {project / 'ghbuild.toml'} (from GHBUILD_CONFIG) (known: cpu" in message
    result = run(["plan", "--image", "gpu", *LOCAL_PUSH], project)
    assert f"--image gpu: no such image in {project / 'ghbuild.toml'} (known: cpu" in result.stderr


def test_config_flag_from_another_directory(tmp_path):
    (tmp_path / "ci").mkdir()
    shutil.copy(REPO_ROOT / "ghbuild.toml", tmp_path / "ci" / "build.toml")
    result = run(["matrix", "--config", "ci/build.toml", *LOCAL_PUSH], tmp_path)
    assert result.returncode == 0, result
    assert len(result.json()["include"]) == 3


# --------------------------------------------------------------------------- error cases

BAD_CONFIGS = {
    "invalid_toml": '[images.cpu]\ndockerfile = "D\n',
    "unknown_key": '[images.cpu]\ndockerfle = "D"\n',
    "wrong_type": '[images.cpu]\ndockerfile = "D"\nplatforms = "linux/amd64"\n',
    "bad_platform": '[images.cpu]\ndockerfile = "D"\nplatforms = ["linux/amd64", "linux/s390x"]\n',
    "endpoint": '[sccache]\nendpoint = "https://user:secret@minio.example.com"\n[images.cpu]\ndockerfile = "D"\n',
    "shared_staging": '[registries]\nstaging = "ghcr.io/org/ci"\n'
                      '[images.cpu]\ndockerfile = "D"\n[images.rocm]\ndockerfile = "D"\n',
    "secret_build_arg": '[images.cpu]\ndockerfile = "D"\nbuild-args = { GITHUB_TOKEN = "ghp_x" }\n',
}

# (id, args, env, config: key of BAD_CONFIGS / None for the repository's own / "" for none, code, kind, fragments)
ERROR_CASES = [
    ("missing_config", LOCAL_PUSH, {}, "", 3, "config error", ["no configuration", "ghbuild.toml"]),
    ("missing_config_flag", ["--config", "nope.toml", *LOCAL_PUSH], {}, None, 3, "config error",
     ["--config: ", "nope.toml", "does not exist"]),
    ("missing_ghbuild_config", LOCAL_PUSH, {"GHBUILD_CONFIG": "nope.toml"}, None, 3, "config error",
     ["GHBUILD_CONFIG: "]),
    ("invalid_toml", LOCAL_PUSH, {}, "invalid_toml", 3, "config error", ["ghbuild.toml: invalid TOML"]),
    ("unknown_key", LOCAL_PUSH, {}, "unknown_key", 3, "config error",
     ["ghbuild.toml: images.cpu.dockerfle: unknown key (did you mean 'dockerfile'?)"]),
    ("wrong_type", LOCAL_PUSH, {}, "wrong_type", 3, "config error",
     ["ghbuild.toml: images.cpu.platforms: 'linux/amd64' is not a list [...]"]),
    ("bad_platform", LOCAL_PUSH, {}, "bad_platform", 3, "config error",
     ["ghbuild.toml: images.cpu.platforms[1]: 'linux/s390x' is not one of"]),
    ("shared_staging", LOCAL_PUSH, {}, "shared_staging", 3, "config error",
     ["registries.staging: images cpu and rocm would share"]),
    ("secret_build_arg", LOCAL_PUSH, {}, "secret_build_arg", 3, "config error",
     ["images.cpu.build-args.GITHUB_TOKEN: looks like a secret"]),
    ("unknown_image", ["--image", "gpu", *LOCAL_PUSH], {}, None, 2, "usage error",
     ["--image gpu: no such image", "known: cpu, rocm"]),
    ("unknown_setting", LOCAL_PUSH, {"GHBUILD_SCCACHE_KEYPREFIX": "x"}, None, 3, "config error",
     ["GHBUILD_SCCACHE_KEYPREFIX: unknown setting (did you mean GHBUILD_SCCACHE_KEY_PREFIX?)"]),
    ("bad_boolean", LOCAL_PUSH, {"GHBUILD_REGISTRIES_GHA_CACHE": "yes"}, None, 3, "config error",
     ["GHBUILD_REGISTRIES_GHA_CACHE: 'yes': expected one of true, on, 1, false, off, 0"]),
    ("bad_override_item", LOCAL_PUSH, {"GHBUILD_IMAGES_CPU_PLATFORMS": "linux/arm64,linux/riscv64"}, None, 3,
     "config error", ["GHBUILD_IMAGES_CPU_PLATFORMS (overrides images.cpu.platforms[1]): 'linux/riscv64'"]),
    ("endpoint_user_info_file", LOCAL_PUSH, {}, "endpoint", 3, "config error",
     ["sccache.endpoint: endpoint contains user info", "value not shown"]),
    ("endpoint_user_info_env", LOCAL_PUSH, {"GHBUILD_SCCACHE_ENDPOINT": "https://user:secret@minio.example.com"},
     None, 3, "config error",
     ["GHBUILD_SCCACHE_ENDPOINT (overrides sccache.endpoint): endpoint contains user info"]),
    ("unknown_event", ["--event", "release", "--repository", "org/project", "--ref", "main", "--sha", SHA], {},
     None, 4, "context error", ["'release' is not supported"]),
    ("unknown_event_env", [], {"GITHUB_EVENT_NAME": "issue_comment", "GITHUB_REPOSITORY": "org/project"}, None,
     4, "context error", ["'issue_comment' is not supported"]),
    # Outside Actions the event defaults to a push of the checkout; a folder that is not one names no repository.
    ("no_repository_outside_a_checkout", [], {}, None, 4, "context error", ["no git remote 'origin'", "--repository"]),
    ("malformed_payload", [], {"GITHUB_EVENT_NAME": "push", "GITHUB_REPOSITORY": "org/project",
                               "GITHUB_EVENT_PATH": "@payload:{not json"}, None, 4, "context error",
     ["GITHUB_EVENT_PATH: ", "is not valid JSON"]),
    ("payload_not_an_object", [], {"GITHUB_EVENT_NAME": "push", "GITHUB_REPOSITORY": "org/project",
                                   "GITHUB_EVENT_PATH": "@payload:[1, 2]"}, None, 4, "context error",
     ["must be a JSON object"]),
    ("payload_missing", ["--event-path", "nowhere.json", *LOCAL_PUSH], {}, None, 4, "context error",
     ["--event-path: nowhere.json does not exist"]),
    ("pr_payload_without_number", [], {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_REPOSITORY": "org/project",
                                       "GITHUB_EVENT_PATH": '@payload:{"pull_request": {}}'}, None, 4,
     "context error", ["pull_request payload has no pull_request number"]),
    ("invalid_repository", ["--event", "push", "--repository", "not-a-repo", "--ref", "main", "--sha", SHA], {},
     None, 4, "context error", ["--repository: 'not-a-repo' is not a GitHub repository"]),
    ("invalid_sha", ["--event", "push", "--repository", "org/project", "--ref", "main", "--sha", "HEAD"], {},
     None, 4, "context error", ["--sha: 'HEAD' is not a 40-hex commit id"]),
    ("bad_flag", ["--bogus", *LOCAL_PUSH], {}, None, 2, "usage error", ["unrecognized arguments: --bogus"]),
    ("bad_arch", ["--arch", "x86_64", *LOCAL_PUSH], {}, None, 2, "usage error", ["--arch", "invalid choice"]),
    ("bad_pr_number", ["--pr", "fifteen", *LOCAL_PUSH], {}, None, 2, "usage error", ["--pr", "invalid int"]),
]


def _prepare(work: Path, config_key: str | None, env: dict[str, str]) -> dict[str, str]:
    if config_key is None:
        shutil.copy(REPO_ROOT / "ghbuild.toml", work / "ghbuild.toml")
    elif config_key:
        (work / "ghbuild.toml").write_text(BAD_CONFIGS[config_key], "utf-8")
    env = dict(env)
    for key, value in env.items():
        if value.startswith("@payload:"):
            (work / "event.json").write_text(value.removeprefix("@payload:"), "utf-8")
            env[key] = str(work / "event.json")
    return env


# Every error comes out of the same path for each command: spread the cases over the three commands
# (instead of running each case three times) to keep the suite fast.
COMMANDS = [["matrix"], ["plan"], ["plan", "--json"]]


@pytest.mark.parametrize(
    ("command", "args", "env", "config_key", "code", "kind", "fragments"),
    [(COMMANDS[i % 3], *case[1:]) for i, case in enumerate(ERROR_CASES)],
    ids=[f"{case[0]}-{' '.join(COMMANDS[i % 3])}" for i, case in enumerate(ERROR_CASES)])
def test_error_is_one_clean_line_with_its_exit_code(tmp_path, command, args, env, config_key, code, kind, fragments):
    work = tmp_path / "w"
    work.mkdir()
    env = _prepare(work, config_key, env)
    line = assert_clean_error(run([*command, *args], work, env), code, kind)
    for fragment in fragments:
        assert fragment in line, line
    assert_no_credential(line)


def test_plan_json_error_prints_no_json(project):
    result = run(["plan", "--json", "--event", "release", "--repository", "o/r", "--sha", SHA], project)
    assert_clean_error(result, 4, "context error")


def test_deleting_push_is_a_context_error(tmp_path, project):
    payload = json.loads((EVENTS / "push_dev.json").read_text("utf-8"))
    payload.update(deleted=True, after="0" * 40)
    path = tmp_path / "deleted.json"
    path.write_text(json.dumps(payload), "utf-8")
    result = run(["matrix"], project, event="push_dev", env={"GITHUB_EVENT_PATH": str(path)})
    line = assert_clean_error(result, 4, "context error")
    assert "deletes refs/heads/dev" in line


def test_invalid_head_repo_is_a_context_error_naming_the_flag(project):
    result = run(["plan", "--event", "pull_request", "--pr", "3", "--base", "main", "--head-repo", "not-a-repo",
                  "--repository", "org/project", "--sha", SHA], project)
    line = assert_clean_error(result, 4, "context error")
    assert line.startswith("ghbuild: context error: --head-repo: ")


def test_error_in_actions_is_also_an_error_annotation(tmp_path):
    (tmp_path / "ghbuild.toml").write_text(BAD_CONFIGS["endpoint"], "utf-8")
    result = run(["matrix", *LOCAL_PUSH], tmp_path, env={"GITHUB_ACTIONS": "true"})
    assert result.returncode == 3
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    annotation, line = result.stderr.splitlines()
    # on the offending key's line, the file relative to the workspace (GitHub links it to the diff)
    assert annotation.startswith("::error title=ghbuild config error,file=ghbuild.toml,line=2,col=1::")
    assert "sccache.endpoint: endpoint contains user info" in annotation
    assert line.startswith("ghbuild: config error: ")
    assert_no_credential(result.stderr)


def test_error_leaves_github_output_untouched(tmp_path, project):
    output = tmp_path / "github_output"
    output.touch()
    result = run(["matrix", "--event", "release", "--repository", "o/r", "--sha", SHA], project,
                 env={"GITHUB_OUTPUT": str(output)})
    assert_clean_error(result, 4, "context error")
    assert output.read_text("utf-8") == ""


def test_missing_github_output_file_is_a_clean_error(project):
    """A runner file that vanished must give one line, not a traceback from the toolkit underneath."""
    missing = project / "nope" / "output"
    result = run(["matrix"], project, {"GITHUB_OUTPUT": str(missing)}, event="push_master")
    message = assert_clean_error(result, 4, "context error")
    assert f"GITHUB_OUTPUT: {missing} does not exist" in message


# --------------------------------------------------------------------------- image lists, digests

def test_image_accepts_a_comma_or_space_list_as_a_workflow_passes_one_input(project):
    for value in (["--image", "cpu,rocm"], ["--image", "cpu rocm"], ["--image", "cpu", "--image", "rocm"]):
        result = run(["matrix", *LOCAL_PUSH, *value], project)
        assert result.returncode == 0, result
        assert [e["id"] for e in result.json()["include"]] == ["cpu-amd64", "cpu-arm64", "rocm-amd64"]


@pytest.mark.parametrize("command", [["prune"], ["publish", "nightly", "--dry-run", "--sha", SHA]])
def test_publish_and_prune_skip_a_content_addressed_image(project, command):
    result = run([*command, "--image", "rocm-base"], project)
    assert result.returncode == 2, result
    assert "skipping rocm-base: a content-addressed base is not published per commit" in result.stderr
    what = " ".join(command[:2]) if command[0] == "publish" else "prune"
    assert result.stderr.splitlines()[-1] == (f"ghbuild: usage error: --image rocm-base: only content-addressed "
                                              f"bases, nothing to {what}")


def test_matrix_says_whether_jobs_get_secrets(project, tmp_path):
    out = tmp_path / "out"
    out.write_text("")
    result = run(["matrix"], project, event="pull_request", env={"GITHUB_OUTPUT": str(out)})
    assert result.returncode == 0, result
    from conftest import read_outputs

    outputs = read_outputs(out.read_text())
    assert outputs["secrets"] == "false" and outputs["trusted"] == "false"


def test_digests_collects_records_and_lists_every_planned_job(project, tmp_path):
    records = tmp_path / "records"
    records.mkdir()
    ref = "127.0.0.1:5000/ghbuild/cpu@sha256:" + "a" * 64
    (records / "cpu-amd64.json").write_text(json.dumps({"id": "cpu-amd64", "image": "cpu", "arch": "amd64",
                                                        "platform": "linux/amd64", "digest": "sha256:" + "a" * 64,
                                                        "ref": ref}))
    matrix = {"include": [{"id": "cpu-amd64", "platform": "linux/amd64"},
                          {"id": "cpu-arm64", "platform": "linux/arm64"}]}
    summary, out = tmp_path / "summary.md", tmp_path / "out"
    summary.write_text("")
    out.write_text("")
    result = run(["digests", str(records), "--matrix", json.dumps(matrix)], project,
                 env={"GITHUB_STEP_SUMMARY": str(summary), "GITHUB_OUTPUT": str(out), "GITHUB_ACTIONS": "true"})
    assert result.returncode == 0, result
    assert result.json() == {"cpu-amd64": {"image": "cpu", "arch": "amd64", "platform": "linux/amd64",
                                           "digest": "sha256:" + "a" * 64, "ref": ref}}
    assert f"| cpu-amd64 | linux/amd64 | `{ref}` |" in summary.read_text()
    assert "| cpu-arm64 | linux/arm64 | not pushed |" in summary.read_text()
    from conftest import read_outputs

    assert json.loads(read_outputs(out.read_text())["digests"]) == result.json()
    (records / "junk.json").write_text("[1, 2]")
    bad = run(["digests", str(records)], project)
    assert bad.returncode == 2 and "junk.json: not a record" in bad.stderr


def test_plan_table_shows_a_base_under_its_identity_tag(project):
    result = run(["plan", *LOCAL_PUSH], project, env={"GHBUILD_TRUST_CANONICAL_REPOSITORY": "org/project"})
    assert result.returncode == 0, result
    row = next(line for line in result.stdout.splitlines() if line.startswith("rocm-base-amd64"))
    assert row.endswith("ghcr.io/org/ghbuild-rocm-base:rocm-base-IDENTITY (ensure-base)") and " yes " in row
    assert "rocm-amd64: docker/Dockerfile.rocm (target runtime), FROM rocm-base by digest" in result.stdout


def test_one_dispatch_table_serves_every_command():
    from ghbuild import cli

    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(subparsers.choices) == set(cli.COMMANDS)


# --------------------------------------------------------------------------- help

def _commands(parser: argparse.ArgumentParser, prefix: str = ""):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield prefix + name, sub
                yield from _commands(sub, f"{prefix}{name} ")


@pytest.mark.parametrize("name", [name for name, _ in _commands(__import__("ghbuild.cli").cli.build_parser())])
def test_every_command_help_has_a_description_and_an_example(name):
    from ghbuild import cli

    parser = dict(_commands(cli.build_parser()))[name]
    text = parser.format_help()
    assert parser.description and len(parser.description.split()) >= 8, text
    examples = text.split("\nexamples:\n", 1)[1].splitlines()
    assert examples and all(line.startswith("  ") and name.split()[0] in line for line in examples), text


@pytest.mark.parametrize("command", sorted(__import__("ghbuild.cli").cli.COMMANDS))
def test_a_command_run_alone_gets_the_same_parser_as_in_the_whole_command_line(command):
    """main() builds only the parser of the command it runs: its help, its subcommands and their help are
    those of the whole parser."""
    from ghbuild import cli

    whole = {name: sub.format_help() for name, sub in _commands(cli.build_parser())
             if name.split()[0] == command}
    alone = {name: sub.format_help() for name, sub in _commands(cli.build_parser(command))}
    assert alone == whole


def test_prune_takes_dry_run_explicitly_and_refuses_it_with_apply():
    from ghbuild import cli

    assert cli.build_parser().parse_args(["prune", "--dry-run"]).apply is False
    with pytest.raises(cli.UsageError, match="--apply: not allowed with argument --dry-run"):
        cli.build_parser().parse_args(["prune", "--dry-run", "--apply"])


def test_schema_id_is_where_the_file_is_published_and_the_readme_shows_the_editor_hint():
    from ghbuild.config import schema

    canonical = tomllib.loads((REPO_ROOT / "ghbuild.toml").read_text("utf-8"))["trust"]["canonical-repository"]
    schema_id = schema.document()["$id"]
    prefix = f"https://raw.githubusercontent.com/{canonical}/main/"
    assert schema_id.startswith(prefix)
    published = REPO_ROOT / schema_id.removeprefix(prefix)
    assert json.loads(published.read_text("utf-8")) == schema.document()
    assert f"#:schema {schema_id}\n" in (REPO_ROOT / "docs" / "configuration.md").read_text("utf-8")
