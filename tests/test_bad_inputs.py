"""Bad input of every kind, run against the CLI: each gets one `ghbuild: <kind>: ...` line and a non-zero
exit code, never a traceback.

Flags, config files (encodings, TOML, values), GHBUILD_* overrides and GitHub variables are each varied
alone, starting from a project that plans cleanly; the cases run in this process (the CLI's own main, its
stdout and stderr captured), so an unexpected exception fails its case with the exception's type.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_in_process, write_project

GOOD_CONFIG = """\
[registries]
staging = "ghcr.io/{owner}/ci-{image}"

[images.app]
dockerfile = "Dockerfile"
platforms = ["linux/amd64"]
"""
CONTEXT = ["--event", "push", "--repository", "org/project", "--ref", "main", "--default-branch", "main",
           "--sha", "0123456789abcdef0123456789abcdef01234567"]
PLAN = ["plan", *CONTEXT]

BAD_FLAGS = [
    ["--no-such-flag"], ["plan", "--no-such-flag"], ["nope"], ["plan", "--arch", "x86"], ["plan", "--pr", "abc"],
    ["plan", *CONTEXT, "--event", "bogus"], ["plan", *CONTEXT, "--repository", "not a slug"],
    ["plan", *CONTEXT, "--sha", "zzz"], ["plan", *CONTEXT, "--ref-protected", "maybe"],
    ["plan", *CONTEXT, "--image", "nope"], ["plan", *CONTEXT, "--event-path", "/nonexistent/event.json"],
    ["plan", *CONTEXT, "--event-path", "garbage.bin"], ["plan", *CONTEXT, "--config", "/nonexistent.toml"],
    ["plan", *CONTEXT, "--config", "."],
    ["matrix", *CONTEXT, "--arch", "riscv"], ["build", *CONTEXT], ["build", "--image", "app", "--arch", "amd64",
                                                                   "--record", "/etc/x.json", *CONTEXT],
    ["build", "--image", "nope", "--arch", "amd64", "--dry-run", *CONTEXT],
    ["identity", "--image", "app", *CONTEXT], ["ensure-base", "--image", "nope", *CONTEXT],
    ["publish"], ["publish", "nightly", "--dry-run", "--image", "nope", *CONTEXT],
    ["publish", "nightly", "--dry-run", "--records", "{bad", *CONTEXT],
    ["publish", "nightly", "--dry-run", "--records", "/nonexistent", *CONTEXT],
    ["publish", "release", "--version", "not a version", "--dry-run", *CONTEXT],
    ["publish", "nightly", *CONTEXT],
    ["prune", "--keep", "0", *CONTEXT], ["prune", "--keep", "many"], ["prune", "--apply", "--dry-run"],
    ["plan", "--event", "pull_request", "--repository", "org/project", "--pr", "1", "--base", "main",
     "--head-ref", "x", "--head-repo", "../x", "--default-branch", "main"],
    ["prune", "--apply", "--event", "pull_request", "--repository", "org/project", "--pr", "1", "--base", "main",
     "--head-ref", "x", "--head-repo", "evil/project", "--default-branch", "main"],
    ["digests", "/nonexistent/records"], ["digests", "garbage.bin"], ["digests", ".", "--matrix", "[1]"],
    ["runner-check", "--gpus", "-1"], ["runner-check", "--min-free-disk", "huge"],
    ["runner-check", "--rocminfo-timeout", "nan"], ["container-flags", "--gid", "abc"],
    ["container-flags", "--gid", "5", "--shm-size", "; rm -rf /"], ["diagnose", "--out", "/etc/ghbuild"],
    ["diagnose", "--out", "../outside"], ["diagnose", "--total-timeout", "-1"],
    ["plan", *CONTEXT, "--image", ",,"], ["matrix", *CONTEXT, "--image", " "], ["prune", "--image", ","],
    ["publish", "nightly", "--dry-run", "--image", ",", *CONTEXT], ["init", "--platform", ","],
]

BAD_FILES = {
    "utf-16": GOOD_CONFIG.encode("utf-16"),
    "utf-8 with a byte-order mark": b"\xef\xbb\xbf" + GOOD_CONFIG.encode(),
    "latin-1": GOOD_CONFIG.replace("Dockerfile", "D\xf6ckerfile").encode("latin-1"),
    "binary": bytes(range(256)),
    "invalid TOML": b"[images.app\ndockerfile = \n",
    "duplicate key": GOOD_CONFIG.encode() + b'[images.app]\ndockerfile = "x"\n',
    "empty": b"",
    "images not a table": b"images = 3\n",
    "no images": b"[images]\n",
}

BAD_VALUES = [
    'size-budget = "huge"', "size-budget = -1", 'stage-budgets = { x = "lots" }', 'platforms = ["linux/s390"]',
    'platforms = "linux/amd64"', "platforms = []", "runners.amd64 = []", 'runners.amd64 = ["a b"]',
    "build-args = { X = 1 }", 'build-args = { "bad name" = "x" }', 'build-args = { GITHUB_TOKEN = "x" }',
    'staging = "{nope}/x"', 'staging = "UPPER/Case"', 'staging = "UPPER/{image}"', 'dockerfile = "../../etc/passwd"',
    'context = "/"',
    'base = "nope"', "identity = { version = 1 }", 'target = ""', 'dockerfle = "x"', "dockerfile = 3",
]
BAD_TOP_LEVEL = [
    '[trust]\ncanonical-repository = "not a slug"', "[publish]\nretention = \"x\"",
    '[publish]\narch-suffixes = { amd64 = "a", arm64 = "a" }', '[sccache]\nendpoint = "ftp://x"',
    "[sccache]\nenabled = \"maybe\"", '[registries]\ncache-mode = "all"', "[build]\nnetwork = 3",
    '[unknown]\nx = 1',
]

BAD_ENV = [
    {"GHBUILD_IMAGES_APP_PLATFORMS": "["}, {"GHBUILD_SCCACHE_ENABLED": "maybe"},
    {"GHBUILD_PUBLISH_RETENTION": "abc"}, {"GHBUILD_PUBLISH_RETENTION": "-5"}, {"GHBUILD_TRUST_FOO": "1"},
    {"GHBUILD_IMAGES_APP_BUILD_ARGS": "noequals"}, {"GHBUILD_IMAGES_APP_BUILD_ARGS": "{\"X\": [1]}"},
    {"GHBUILD_CONFIG": "/nonexistent.toml"}, {"GHBUILD_REGISTRIES_STAGING": "ghcr.io/Org/{image}"},
    {"GHBUILD_IMAGES_APP_SIZE_BUDGET": "huge"}, {"GHBUILD_IMAGES_APP_PLATFORMS": "linux/amd64\nlinux/s390"},
    {"GHBUILD_IMAGES_NOPE_DOCKERFILE": "x"}, {"GHBUILD_IMAGES_APP_RUNNERS_AMD64": "[\"\"]"},
]
BAD_GITHUB_ENV = [
    {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "push"},
    {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": "/nonexistent.json",
     "GITHUB_REPOSITORY": "org/project", "GITHUB_REF": "refs/heads/main", "GITHUB_SHA": "0" * 40},
    {"GITHUB_ACTIONS": "true", "GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": "garbage.bin",
     "GITHUB_REPOSITORY": "org/project", "GITHUB_REF": "refs/heads/main", "GITHUB_SHA": "0" * 40},
    {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": "/nonexistent/output"},
    {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": "/nonexistent/summary"},
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = write_project(tmp_path, GOOD_CONFIG)
    (root / "garbage.bin").write_bytes(b"\xff\xfe\x00{" * 10)
    return root


def assert_one_line_error(project: Path, *args: str, env: dict[str, str] | None = None) -> None:
    try:
        result = run_in_process(project, *args, env=env)
    except SystemExit as exc:   # argparse's --help / --version only
        pytest.fail(f"exited {exc.code} without an error line")
    except Exception as exc:
        pytest.fail(f"traceback: {type(exc).__name__}: {exc}")
    lines = [line for line in result.stderr.splitlines() if line.startswith("ghbuild: ")]
    assert result.returncode not in (0, 1), (result.returncode, result.stderr)   # 1: reserved for bugs
    assert lines and "Traceback" not in result.stderr, result.stderr
    assert len(lines[-1]) < 600 and "\n" not in lines[-1]


def test_the_good_project_plans(project):
    """The baseline every case below changes one thing of."""
    assert run_in_process(project, *PLAN).returncode == 0


@pytest.mark.parametrize("args", BAD_FLAGS, ids=lambda a: " ".join(a)[:60])
def test_bad_flags(project, args):
    assert_one_line_error(project, *args)


@pytest.mark.parametrize("name", BAD_FILES)
def test_bad_config_files(project, name):
    (project / "ghbuild.toml").write_bytes(BAD_FILES[name])
    assert_one_line_error(project, *PLAN)


@pytest.mark.parametrize("line", BAD_VALUES)
def test_bad_image_values(project, line):
    (project / "ghbuild.toml").write_text(GOOD_CONFIG + line + "\n", "utf-8")
    assert_one_line_error(project, *PLAN)


@pytest.mark.parametrize("table", BAD_TOP_LEVEL)
def test_bad_top_level_values(project, table):
    (project / "ghbuild.toml").write_text(GOOD_CONFIG + table + "\n", "utf-8")
    assert_one_line_error(project, *PLAN)


@pytest.mark.parametrize("env", BAD_ENV, ids=lambda e: json.dumps(e)[:60])
def test_bad_ghbuild_variables(project, env):
    assert_one_line_error(project, *PLAN, env=env)


@pytest.mark.parametrize("env", BAD_GITHUB_ENV, ids=lambda e: json.dumps(e)[:60])
def test_bad_github_variables(project, env):
    assert_one_line_error(project, "matrix", env=env)


def error_line(result) -> str:
    return [line for line in result.stderr.splitlines() if line.startswith("ghbuild: ")][-1]


@pytest.mark.parametrize(("where", "env"), [
    ("registries.staging", None), ("images.app.staging", None),
    ("GHBUILD_REGISTRIES_STAGING (overrides registries.staging)", {"GHBUILD_REGISTRIES_STAGING": "UPPER/{image}"}),
])
def test_an_upper_case_owner_is_not_taken_for_a_registry_host(project, where, env):
    """`UPPER/{image}` matches the reference grammar only as host UPPER, which is no host: refused up front,
    naming the key (or variable) and the component, instead of a push to a registry that does not exist."""
    config = GOOD_CONFIG
    if where == "registries.staging":
        config = config.replace("ghcr.io/{owner}/ci-{image}", "UPPER/{image}")
    elif where == "images.app.staging":
        config += 'staging = "UPPER/{image}"\n'
    (project / "ghbuild.toml").write_text(config, "utf-8")
    result = run_in_process(project, *PLAN, env=env)
    line = error_line(result)
    assert result.returncode == 3, result.stderr
    assert line.startswith("ghbuild: config error: ") and f"{where}: 'UPPER/image' starts with 'UPPER'" in line
    assert "neither a registry host" in line and "write 'upper'" in line


@pytest.mark.parametrize("value", [",,", ",", " ", ""])
def test_an_image_list_naming_nothing_is_refused_not_read_as_every_image(project, value):
    result = run_in_process(project, *PLAN, "--image", value)
    assert result.returncode == 2, result.stdout
    assert error_line(result) == (f"ghbuild: usage error: argument --image: {value!r} names nothing (give one or "
                                  "more names separated by commas or spaces, or leave the flag out) "
                                  "(see 'ghbuild plan --help')")
    assert result.stdout == ""


def test_an_image_list_with_empty_entries_keeps_its_names(project):
    """Only a value that names nothing is refused: `app,,` still means app (stray separators from a
    workflow input are harmless)."""
    result = run_in_process(project, *PLAN, "--json", "--image", "app,,", "--image", " app")
    assert result.returncode == 0, result.stderr
    assert [job["image"] for job in json.loads(result.stdout)["jobs"]] == ["app"]
