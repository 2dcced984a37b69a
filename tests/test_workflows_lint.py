""".github/ as code: zizmor (offline, default persona) finds nothing, GitHub's schemas accept every
workflow and action, the rules of issue 6 hold (SHA pins, least privilege, no expressions in `run:`,
action bodies that only call ghbuild, no runtime token in GITHUB_ENV), and the two pieces of action
code work: the build-image JavaScript action (with node, against a fake `ghbuild`) and the setup
action's caching (a second setup in a job does nothing).

No network, no engine: these run in every `make test`. The workflows are run for real by
tests/services/engine/test_90_workflows_act.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

REPO = Path(__file__).resolve().parents[1]
GITHUB = REPO / ".github"
BIN = Path(sys.executable).parent
WORKFLOWS = sorted((GITHUB / "workflows").glob("*.yml"))
ACTIONS = sorted((GITHUB / "actions").glob("*/action.yml"))
BUILD_IMAGE_JS = GITHUB / "actions" / "build-image" / "index.js"
SETUP_PY = GITHUB / "actions" / "setup" / "setup.py"
SHA_PIN = re.compile(r"^[\w.-]+/[\w.-]+(/[^@\s]*)?@[0-9a-f]{40}$")
VERSION_COMMENT = re.compile(r"#\s*v\d+(\.\d+){0,2}\s*$")


def load(path: Path) -> dict:
    """YAML 1.2, as GitHub reads it (`on:` stays a string key)."""
    return YAML(typ="safe", pure=True).load(path.read_text("utf-8"))


def tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{name} is not installed in {BIN} (it is in the test extra of pyproject.toml)", pytrace=False)
    return str(path)


def test_the_expected_files_exist():
    assert {p.name for p in WORKFLOWS} >= {"build-images.yml", "ci.yml", "nightly.yml", "release.yml"}
    assert {p.parent.name for p in ACTIONS} >= {"setup", "plan", "build-image", "publish", "diagnose"}


# --------------------------------------------------------------------------- linters


@pytest.mark.parametrize("persona", ["regular", "pedantic", "auditor"])
def test_zizmor_offline_reports_nothing(persona):
    proc = subprocess.run([tool("zizmor"), "--offline", "--strict-collection", "--no-ignores", "--persona", persona,
                           "--format", "json", str(GITHUB)], capture_output=True, text=True, timeout=300)
    try:
        findings = json.loads(proc.stdout or "[]")
    except json.JSONDecodeError:
        pytest.fail(f"zizmor exited {proc.returncode}, output is not JSON:\n{proc.stdout[-2000:]}\n"
                    f"{proc.stderr[-3000:]}")
    summary = [f"{f['ident']}: {f['locations'][0]['symbolic']['key']}" for f in findings]
    assert findings == [], "zizmor findings:\n" + "\n".join(map(str, summary))
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.parametrize("schema,files", [("vendor.github-workflows", WORKFLOWS), ("vendor.github-actions", ACTIONS)],
                         ids=["workflows", "actions"])
def test_github_schemas_accept_every_file(schema, files):
    proc = subprocess.run([tool("check-jsonschema"), "--builtin-schema", schema, *map(str, files)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------- the rules of the issue


def all_steps():
    """(file, job or None, step) for every step of every workflow and composite action."""
    for path in WORKFLOWS:
        for job_id, job in (load(path).get("jobs") or {}).items():
            for step in job.get("steps") or []:
                yield path, job_id, step
    for path in ACTIONS:
        for step in (load(path).get("runs") or {}).get("steps") or []:
            yield path, None, step


def test_every_action_input_and_output_is_described():
    missing = []
    for path in ACTIONS:
        data = load(path)
        assert data.get("description"), f"{path}: no description"
        for kind in ("inputs", "outputs"):
            for name, spec in (data.get(kind) or {}).items():
                if not (isinstance(spec, dict) and str(spec.get("description") or "").strip()):
                    missing.append(f"{path.parent.name}: {kind}.{name}")
    assert missing == []


def test_every_remote_action_is_pinned_by_sha_with_a_version_comment():
    bad = []
    for path in [*WORKFLOWS, *ACTIONS]:
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            m = re.match(r"^\s*(?:-\s*)?uses:\s*(\S+)(.*)$", line)
            if not m or m.group(1).startswith(("./", "$/")):
                continue
            if not SHA_PIN.match(m.group(1)) or not VERSION_COMMENT.search(m.group(2)):
                bad.append(f"{path.name}:{number}: {line.strip()}")
    assert bad == []


# The runtime of every third-party release pinned here, read from its action.yml at that commit (`runs.using`)
# when the pin was chosen: GitHub removed Node 20 from its runners on 2026-09-16, so a pin is checked offline
# against this table, and a new pin (or a bumped one) must be added to it with its runtime.
PINNED_RUNTIMES = {
    ("actions/checkout", "08c6903cd8c0fde910a37f88322edcfb5dd907a8"): ("v5.0.0", "node24"),
    ("actions/cache/restore", "27d5ce7f107fe9357f9df03efb73ab90386fccae"): ("v5.0.5", "node24"),
    ("actions/cache/save", "27d5ce7f107fe9357f9df03efb73ab90386fccae"): ("v5.0.5", "node24"),
    ("docker/login-action", "4907a6ddec9925e35a0a9e82d7399ccc52663121"): ("v4.1.0", "node24"),
    ("actions/upload-artifact", "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f"): ("v7.0.0", "node24"),
    ("actions/download-artifact", "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c"): ("v8.0.1", "node24"),
    # a composite action that runs a container: no Node runtime
    ("pypa/gh-action-pypi-publish", "76f52bc884231f62b9a034ebfe128415bbaabdfc"): ("v1.12.4", "composite"),
    # composite (bash): installs cosign v2.5.3, checked against the sha256 its action.yml pins
    ("sigstore/cosign-installer", "d58896d6a1865668819e1d91763c7751a165e159"): ("v3.9.2", "composite"),
    # composite: actions/attest-build-provenance/predicate and actions/attest v3.2.0, both node24
    ("actions/attest-build-provenance", "96278af6caaf10aea03fd8d33a09a777ca52d62f"): ("v3.2.0", "composite"),
    # Releases that run on Node 20, kept so that going back to one fails with the reason.
    ("docker/login-action", "5e57cd118135c172c3672efd75eb46360885c0ef"): ("v3.6.0", "node20"),
    ("actions/upload-artifact", "ea165f8d65b6e75b540449e92b4886f43607fa02"): ("v4.6.2", "node20"),
    ("actions/download-artifact", "d3f86a106a0bac45b974a628896c90dbdf5c8093"): ("v4.3.0", "node20"),
}
MIN_NODE = 24


def node_major(using: str) -> int | None:
    m = re.fullmatch(r"node(\d+)", using.strip())
    return int(m.group(1)) if m else None


def remote_pins():
    """(file name, line number, action, sha, version comment) of every pinned third-party `uses:`."""
    for path in [*WORKFLOWS, *ACTIONS]:
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            m = re.match(r"^\s*(?:-\s*)?uses:\s*([^@\s]+)@([0-9a-f]{40})\s*#\s*(\S+)", line)
            if m and not m.group(1).startswith(("./", "$/")):
                yield path.name, number, m.group(1), m.group(2), m.group(3)


def pin_problems(pins) -> list[str]:
    bad = []
    for name, number, action, sha, comment in pins:
        known = PINNED_RUNTIMES.get((action, sha))
        if known is None:
            bad.append(f"{name}:{number}: {action}@{sha} is not in PINNED_RUNTIMES: read `runs.using` of its "
                       "action.yml at that commit and add it")
        elif (node_major(known[1]) or MIN_NODE) < MIN_NODE:
            bad.append(f"{name}:{number}: {action} {known[0]} runs on {known[1]}; GitHub's runners no longer "
                       f"have it: pin a release that runs on node{MIN_NODE}")
        elif comment != known[0]:
            bad.append(f"{name}:{number}: {action}@{sha} is {known[0]}, the comment says {comment}")
    return bad


def test_every_pinned_action_runs_on_node24_or_newer():
    pins = list(remote_pins())
    assert pins, "no pinned third-party action found: the pattern above is out of date"
    assert pin_problems(pins) == []


def test_the_pin_check_refuses_node20_unknown_and_mislabelled_pins():
    login_v3 = "5e57cd118135c172c3672efd75eb46360885c0ef"
    problems = pin_problems([("a.yml", 1, "docker/login-action", login_v3, "v3.6.0"),
                             ("a.yml", 2, "docker/login-action", "0" * 40, "v9.9.9"),
                             ("a.yml", 3, "docker/login-action", "4907a6ddec9925e35a0a9e82d7399ccc52663121", "v3.6.0")])
    assert len(problems) == 3
    assert "v3.6.0 runs on node20" in problems[0]
    assert "not in PINNED_RUNTIMES" in problems[1]
    assert "is v4.1.0, the comment says v3.6.0" in problems[2]


def test_own_javascript_actions_run_on_node24_or_newer():
    for path in ACTIONS:
        using = str(load(path)["runs"]["using"])
        if using.startswith("node"):
            assert (node_major(using) or 0) >= MIN_NODE, f"{path.parent.name}: runs.using {using}"


def test_own_actions_and_workflows_are_referenced_by_self_repository():
    """`$/` resolves to this repository at the running commit, also when another repository calls
    build-images.yml (so its actions always match it); `./` would resolve in the caller's workspace."""
    for path in WORKFLOWS:
        text = path.read_text("utf-8")
        assert "uses: ./" not in text, path
    assert "uses: $/.github/actions/build-image" in (GITHUB / "workflows" / "build-images.yml").read_text()


def test_least_privilege_permissions():
    for path in WORKFLOWS:
        data = load(path)
        assert data.get("permissions") == {}, f"{path.name}: top-level permissions must be {{}}"
        for job_id, job in data["jobs"].items():
            perms = job.get("permissions")
            assert isinstance(perms, dict), f"{path.name}: job {job_id} has no permissions block"
            for scope, level in perms.items():
                assert level in ("read", "write"), (path.name, job_id, scope, level)
                if level == "write":
                    # ghbuild's own release: the helper image, the tag, and PyPI's OIDC token.
                    allowed = {"release.yml": {"contents"},
                               "ghbuild-release.yml": {"packages", "contents", "id-token"}}.get(path.name, {"packages"})
                    if scope == "id-token" and _oidc_allowed(path.name, job):
                        continue
                    if scope == "attestations" and _attestations_allowed(path.name, job):
                        continue
                    assert scope in allowed, f"{path.name}: job {job_id} writes {scope}"
    # The jobs that never write say so.
    build = load(GITHUB / "workflows" / "build-images.yml")["jobs"]
    assert build["plan"]["permissions"] == {"contents": "read", "packages": "read"}
    assert build["summary"]["permissions"] == {}


def _oidc_allowed(workflow: str, job: dict) -> bool:
    """`id-token: write` (aws-role-to-assume, keyless signing): in build-images.yml only a job that runs for the
    trusted run alone; the publishing job of nightly.yml and release.yml (the `publish` environment, the publish
    action: keyless verification and signing); elsewhere only a call of build-images.yml, whose own jobs decide
    (a caller's permissions only cap them)."""
    if workflow == "build-images.yml":
        return "needs.plan.outputs.trusted == 'true'" in str(job.get("if", "")) \
            and job.get("environment") == "${{ inputs.trusted-environment }}"
    if workflow in ("nightly.yml", "release.yml") and job.get("environment") == "publish":
        return any(str(step.get("uses", "")) == "$/.github/actions/publish" for step in job.get("steps") or [])
    return str(job.get("uses", "")).endswith("/.github/workflows/build-images.yml")


def _attestations_allowed(workflow: str, job: dict) -> bool:
    """`attestations: write` (GitHub's artifact attestations): only the publishing job of nightly.yml and release.yml,
    which runs the publish action and then actions/attest-build-provenance on what that step published."""
    steps = job.get("steps") or []
    publish = [i for i, step in enumerate(steps) if str(step.get("uses", "")) == "$/.github/actions/publish"]
    attest = [i for i, step in enumerate(steps)
              if str(step.get("uses", "")).startswith("actions/attest-build-provenance@")]
    return (workflow in ("nightly.yml", "release.yml") and job.get("environment") == "publish"
            and len(publish) == 1 and len(attest) == 1 and publish[0] < attest[0])


SIGNING_SECRETS = ("COSIGN_PRIVATE_KEY", "COSIGN_PASSWORD", "COSIGN_PUBLIC_KEY")


def test_only_the_publishing_jobs_get_an_oidc_token_and_the_signing_secrets():
    for name, publishing in (("nightly.yml", "publish"), ("release.yml", "release")):
        jobs = load(GITHUB / "workflows" / name)["jobs"]
        with_token = {job_id for job_id, job in jobs.items()
                      if (job.get("permissions") or {}).get("id-token") and "uses" not in job}
        assert with_token == {publishing}, name
        steps = jobs[publishing]["steps"]
        setup = next(step for step in steps if step.get("uses") == "$/.github/actions/setup")
        assert setup["with"]["cosign"] is True
        # the signing secrets reach the publish step alone, through env (never a `run:` line, never the job)
        holders = [step.get("name") for step in steps if any(k in str(step.get("env") or {}) for k in SIGNING_SECRETS)]
        assert holders == [f"Publish the {'nightly' if name == 'nightly.yml' else 'release'}"], (name, holders)
        assert not any(k in str(jobs[publishing].get("env") or {}) for k in SIGNING_SECRETS)
        env = next(step for step in steps if step.get("uses") == "$/.github/actions/publish")["env"]
        assert env["GHBUILD_SIGN_KEY"] == "${{ secrets.COSIGN_PRIVATE_KEY != '' && 'env://COSIGN_PRIVATE_KEY' || '' }}"
        assert env["GHBUILD_REQUIRE_SIGNATURE"] == "${{ vars.GHBUILD_REQUIRE_SIGNATURE }}"
        # GitHub's artifact attestations: the publishing job alone, of exactly what its publish step published
        attesting = {job_id for job_id, job in jobs.items() if (job.get("permissions") or {}).get("attestations")}
        assert attesting == {publishing} and _attestations_allowed(name, jobs[publishing]), name
        publish = next(step for step in steps if step.get("uses") == "$/.github/actions/publish")
        attest = next(step for step in steps
                      if str(step.get("uses", "")).startswith("actions/attest-build-provenance@"))
        assert attest["with"] == {"subject-checksums": f"${{{{ steps.{publish['id']}.outputs.subject-checksums }}}}"}
        assert attest["if"].startswith(f"steps.{publish['id']}.outputs.subject-checksums != ''"), attest["if"]
    # build-images.yml: the shared build steps hand the key only to the trusted run, which installs cosign
    build = load(GITHUB / "workflows" / "build-images.yml")["jobs"]["build"]["steps"]
    env = next(step for step in build if step.get("id") == "build")["env"]
    for key in ("COSIGN_PRIVATE_KEY", "COSIGN_PASSWORD", "GHBUILD_SIGN_KEY"):
        assert env[key].strip().startswith("${{ needs.plan.outputs.trusted == 'true' && "), key
    setup = next(step for step in build if step.get("uses") == "$/.github/actions/setup")
    assert setup["with"]["cosign"] == "${{ needs.plan.outputs.trusted == 'true' }}"


def test_only_the_trusted_jobs_can_have_an_oidc_token():
    jobs = load(GITHUB / "workflows" / "build-images.yml")["jobs"]
    with_token = {name for name, job in jobs.items() if (job.get("permissions") or {}).get("id-token")}
    assert with_token == {"bases-trusted", "build-trusted"}
    for name in ("bases", "build"):
        assert "needs.plan.outputs.trusted != 'true'" in jobs[name]["if"] and "environment" not in jobs[name]
        # The same steps, run by a job of each kind: the trusted one differs in its permissions and environment.
        assert jobs[f"{name}-trusted"]["steps"] == jobs[name]["steps"]
        assert _oidc_allowed("build-images.yml", jobs[f"{name}-trusted"])
        assert not _oidc_allowed("build-images.yml", {**jobs[f"{name}-trusted"], "if": jobs[name]["if"]})
    steps = [step for step in jobs["build"]["steps"] if step.get("id") == "build"]
    assert steps[0]["env"]["GHBUILD_AWS_ROLE_ARN"] == "${{ inputs.aws-role-to-assume }}"
    assert steps[0]["env"]["GITHUB_TOKEN"] == "${{ github.token }}"
    assert jobs["build"]["permissions"]["actions"] == "read"


def test_no_expression_reaches_a_shell_directly():
    """Values reach `run:` only through `env:` (no template injection, untrusted or not)."""
    bad = [f"{path.name} {job or ''}: {step.get('name') or step['run'][:60]}"
           for path, job, step in all_steps() if "run" in step and "${{" in step["run"]]
    assert bad == []


def test_action_bodies_only_call_ghbuild():
    for path in ACTIONS:
        data = load(path)
        runs = data["runs"]
        if runs["using"] != "composite":
            continue
        for step in runs["steps"]:
            if path.parent.name == "setup" and "uses" in step:   # the environment's cache, and cosign when asked
                assert re.fullmatch(r"actions/cache/(restore|save)@[0-9a-f]{40}|sigstore/cosign-installer@[0-9a-f]{40}",
                                    step["uses"]), step["uses"]
                continue
            assert "uses" not in step, f"{path}: composite actions here call no other action"
            command = " ".join(step["run"].split())
            if path.parent.name == "setup":
                # -I: isolated (no user site-packages or PYTHON* variables from a self-hosted runner's HOME).
                assert command in ('"$GHBUILD_SETUP_PYTHON" -I "$GITHUB_ACTION_PATH/setup.py"',
                                   '"$GHBUILD_SETUP_PYTHON" -I "$GITHUB_ACTION_PATH/setup.py" --key'), command
            else:
                assert command.startswith("ghbuild ") and not re.search(r"[;&|`]|\$\(|\bif\b|\bfor\b", command), \
                    f"{path.parent.name}: {command}"


def test_build_image_is_a_dependency_free_node_action():
    data = load(GITHUB / "actions" / "build-image" / "action.yml")
    # GitHub's runners run JavaScript actions on node24 (Node 20 was removed from them on 2026-09-16).
    assert data["runs"] == {"using": "node24", "main": "index.js"}
    source = BUILD_IMAGE_JS.read_text("utf-8")
    requires = set(re.findall(r"require\(['\"]([^'\"]+)['\"]\)", source))
    assert requires <= {"child_process", "fs", "path"}, requires
    assert not (BUILD_IMAGE_JS.parent / "package.json").exists()


def test_nothing_writes_github_env():
    """The runtime token must reach the build step only; nothing here exports anything to later steps
    through GITHUB_ENV (setup puts one folder on GITHUB_PATH, that is all)."""
    code = "\n".join(line for line in BUILD_IMAGE_JS.read_text("utf-8").splitlines()
                     if not line.lstrip().startswith("//"))
    assert "GITHUB_ENV" not in code
    assert "GITHUB_ENV" not in SETUP_PY.read_text("utf-8")
    for path, job, step in all_steps():
        assert "GITHUB_ENV" not in str(step.get("run", "")), (path.name, job, step.get("name"))


def test_nightly_and_release_share_one_publish_group_and_nightly_runs_alone():
    nightly, release = load(GITHUB / "workflows" / "nightly.yml"), load(GITHUB / "workflows" / "release.yml")
    assert nightly["concurrency"]["cancel-in-progress"] is False
    assert nightly["jobs"]["publish"]["needs"] == "build"
    assert nightly["jobs"]["publish"]["concurrency"]["group"] == release["jobs"]["release"]["concurrency"]["group"]
    assert release["on"]["workflow_dispatch"]["inputs"]["version"]["required"] is True


def test_reusable_workflow_contract():
    data = load(GITHUB / "workflows" / "build-images.yml")
    call = data["on"]["workflow_call"]
    assert {"config", "images", "push"} <= set(call["inputs"])
    assert all(not spec.get("required") for spec in call["secrets"].values()), "a fork without secrets must build"
    assert "digests" in call["outputs"]
    jobs = data["jobs"]
    assert set(jobs) >= {"plan", "build", "summary"}
    assert jobs["build"]["runs-on"] == "${{ matrix.runs_on }}"
    assert jobs["build"]["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert "matrix.group" in jobs["bases"]["concurrency"]["group"]


# --------------------------------------------------------------------------- build-image (node)


@pytest.fixture()
def node():
    path = shutil.which("node")
    if not path:
        pytest.fail("node is not on PATH (GitHub runners have it; act runs JavaScript actions with it)",
                    pytrace=False)
    return path


@pytest.fixture()
def fake_ghbuild(tmp_path):
    """A `ghbuild` on PATH that records its argv and the runtime variables it was given."""
    folder = tmp_path / "bin"
    folder.mkdir()
    script = folder / "ghbuild"
    script.write_text(f"""#!{sys.executable}
import json, os, sys
with open(os.environ["FAKE_RECORD"], "w") as fh:
    json.dump({{"argv": sys.argv[1:], "token": os.environ.get("ACTIONS_RUNTIME_TOKEN"),
               "results": os.environ.get("ACTIONS_RESULTS_URL")}}, fh)
with open(os.environ["GITHUB_OUTPUT"], "a") as fh:
    fh.write("digest=sha256:" + "a" * 64 + "\\n")
sys.exit(int(os.environ.get("FAKE_EXIT", "0")))
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return folder


def run_build_image(node, tmp_path, path_dir, inputs: dict[str, str], **env: str):
    output, github_env = tmp_path / "output", tmp_path / "github_env"
    output.write_text("")
    github_env.write_text("")
    full_env = {"PATH": f"{path_dir}:/usr/bin:/bin", "GITHUB_OUTPUT": str(output), "GITHUB_ENV": str(github_env),
                "FAKE_RECORD": str(tmp_path / "record.json"),
                **{f"INPUT_{k.upper()}": v for k, v in inputs.items()}, **env}
    proc = subprocess.run([node, str(BUILD_IMAGE_JS)], env=full_env, capture_output=True, text=True, timeout=60)
    record = json.loads((tmp_path / "record.json").read_text()) if (tmp_path / "record.json").exists() else None
    return proc, record, output.read_text(), github_env.read_text()


def test_build_image_hands_the_runtime_variables_to_ghbuild_only(node, tmp_path, fake_ghbuild):
    proc, record, output, github_env = run_build_image(
        node, tmp_path, fake_ghbuild,
        {"image": "cpu", "arch": "arm64", "push": "true", "base-image": "r/base@sha256:" + "b" * 64,
         "require-digest-base": "true", "config": "ci/ghbuild.toml", "kind": "image", "record": "/t/cpu-arm64.json",
         "gha-cache": "true"},
        ACTIONS_RUNTIME_TOKEN="runtime-token-value", ACTIONS_RESULTS_URL="https://results.example/")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert record["argv"] == ["build", "--image", "cpu", "--arch", "arm64", "--push", "--require-digest-base",
                              "--record", "/t/cpu-arm64.json", "--base-image", "r/base@sha256:" + "b" * 64,
                              "--config", "ci/ghbuild.toml"]
    assert record["token"] == "runtime-token-value" and record["results"] == "https://results.example/"
    assert github_env == "", "the runtime variables must never go to GITHUB_ENV"
    assert "gha-cache=available" in output and "digest=sha256:" in output
    assert "runtime-token-value" not in proc.stdout + proc.stderr


def test_build_image_reports_a_gha_cache_that_would_be_dropped(node, tmp_path, fake_ghbuild):
    proc, record, output, _ = run_build_image(node, tmp_path, fake_ghbuild,
                                              {"image": "cpu", "arch": "amd64", "gha-cache": "true"},
                                              ACTIONS_RUNTIME_TOKEN="t")
    assert proc.returncode == 0, proc.stderr
    assert record["argv"] == ["build", "--image", "cpu", "--arch", "amd64"]
    assert "gha-cache=unavailable" in output
    assert "ACTIONS_RESULTS_URL or ACTIONS_CACHE_URL not in this action's environment" in proc.stdout


def test_build_image_hands_over_the_legacy_cache_url_as_act_serves_it(node, tmp_path, fake_ghbuild):
    """act (and GitHub Enterprise Server) serve the legacy cache API at ACTIONS_CACHE_URL, no results URL."""
    proc, record, output, _ = run_build_image(node, tmp_path, fake_ghbuild,
                                              {"image": "cpu", "arch": "amd64", "gha-cache": "true"},
                                              ACTIONS_RUNTIME_TOKEN="t", ACTIONS_CACHE_URL="http://127.0.0.1:9/x/")
    assert proc.returncode == 0, proc.stderr
    assert "gha-cache=available" in output and record["token"] == "t"
    assert "ACTIONS_RUNTIME_TOKEN and ACTIONS_CACHE_URL handed to this ghbuild run only" in proc.stdout


@pytest.mark.parametrize("gha_cache", ["", "false", "FALSE"])
def test_build_image_withholds_the_runtime_token_when_the_plan_forbids_cache_writes(node, tmp_path, fake_ghbuild,
                                                                                   gha_cache):
    """pull_request_target from a fork: the token would write the base branch's GitHub Actions cache."""
    proc, record, output, github_env = run_build_image(
        node, tmp_path, fake_ghbuild, {"image": "cpu", "arch": "amd64", "gha-cache": gha_cache},
        ACTIONS_RUNTIME_TOKEN="runtime-token-value", ACTIONS_RESULTS_URL="https://results.example/",
        ACTIONS_CACHE_URL="https://cache.example/", ACTIONS_ID_TOKEN_REQUEST_TOKEN="oidc")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert record["token"] is None and record["results"] is None
    assert "gha-cache=withheld" in output and github_env == ""


def test_the_workflow_hands_the_plans_gha_write_to_every_build_image_step():
    workflow = load(GITHUB / "workflows" / "build-images.yml")
    assert workflow["jobs"]["plan"]["outputs"]["gha-write"] == "${{ steps.plan.outputs.gha-write }}"
    for job in workflow["jobs"].values():
        for step in job.get("steps", []):
            if str(step.get("uses", "")).endswith("/actions/build-image"):
                if step["with"].get("lookup-only"):   # builds nothing: the token is withheld (the default)
                    assert "gha-cache" not in step["with"], step
                else:
                    assert step["with"]["gha-cache"] == "${{ needs.plan.outputs.gha-write }}", step


def test_build_image_runs_ensure_base_for_a_base(node, tmp_path, fake_ghbuild):
    proc, record, _, _ = run_build_image(node, tmp_path, fake_ghbuild,
                                         {"image": "rocm-base", "arch": "amd64", "kind": "base", "push": "true"})
    assert proc.returncode == 0, proc.stderr
    assert record["argv"] == ["ensure-base", "--image", "rocm-base", "--arch", "amd64"]
    proc, record, _, _ = run_build_image(node, tmp_path, fake_ghbuild,
                                         {"image": "rocm-base", "arch": "amd64", "kind": "base", "lookup-only": "true"})
    assert proc.returncode == 0, proc.stderr
    assert record["argv"] == ["ensure-base", "--image", "rocm-base", "--arch", "amd64", "--lookup-only"]


def test_build_image_passes_ghbuilds_exit_code_through(node, tmp_path, fake_ghbuild):
    proc, _, _, _ = run_build_image(node, tmp_path, fake_ghbuild, {"image": "cpu", "arch": "amd64"}, FAKE_EXIT="11")
    assert proc.returncode == 11


@pytest.mark.parametrize("inputs,message", [
    ({"image": "cpu", "arch": "amd64", "push": "yes please"}, "input push: 'yes please' is not true or false"),
    ({"image": "cpu", "arch": "amd64", "kind": "nightly"}, "input kind: 'nightly' is not image or base"),
    ({"arch": "amd64"}, "input image is required"),
])
def test_build_image_refuses_bad_inputs(node, tmp_path, fake_ghbuild, inputs, message):
    proc, record, _, _ = run_build_image(node, tmp_path, fake_ghbuild, inputs)
    assert proc.returncode == 1 and record is None
    assert f"::error title=ghbuild build-image::{message}" in proc.stdout


def test_build_image_without_setup_says_what_to_do(node, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc, record, _, _ = run_build_image(node, tmp_path, empty, {"image": "cpu", "arch": "amd64"})
    assert proc.returncode == 1 and record is None
    assert "run the setup action" in proc.stdout


# --------------------------------------------------------------------------- setup (caching)


def fake_toolkit(tmp_path: Path) -> Path:
    """A minimal ghbuild checkout: the setup action, pyproject, README, the package."""
    root = tmp_path / "toolkit"
    (root / ".github" / "actions" / "setup").mkdir(parents=True)
    shutil.copy2(SETUP_PY, root / ".github" / "actions" / "setup" / "setup.py")
    # Locks of nothing: the fake project has no dependencies (the real locks are checked on their own below).
    (root / ".github" / "actions" / "setup" / "requirements").mkdir()
    for extras in ("light", "aws", "docker", "all"):
        (root / ".github" / "actions" / "setup" / "requirements" / f"{extras}.txt").write_text(f"# {extras}\n")
    (root / "ghbuild").mkdir()
    (root / "ghbuild" / "__init__.py").write_text('__version__ = "0.1.0"\n')
    (root / "pyproject.toml").write_text('[project]\nname = "ghbuild"\nversion = "0.1.0"\n')
    (root / "README.md").write_text("ghbuild\n")
    return root


def run_setup(root: Path, runner_temp: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict]:
    output = tmp_path / "setup-output"
    output.write_text("")
    path_file = tmp_path / "setup-path"
    env = {"PATH": os.environ.get("PATH", ""), "RUNNER_TEMP": str(runner_temp), "GITHUB_OUTPUT": str(output),
           "GITHUB_PATH": str(path_file), "GITHUB_ACTION_PATH": str(root / ".github" / "actions" / "setup"),
           # Nothing may be installed in this test: a real pip run would need the network.
           "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "no-wheels")}
    proc = subprocess.run([sys.executable, str(root / ".github" / "actions" / "setup" / "setup.py")], env=env,
                          capture_output=True, text=True, timeout=120)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return proc, outputs


def plant_install(root: Path, runner_temp: Path) -> None:
    """What a first setup leaves: the venv's ghbuild and the stamp of the sources it came from."""
    import importlib.util

    # The toolkit's own copy: its locks are the toolkit's.
    spec = importlib.util.spec_from_file_location("ghbuild_setup_action", root / ".github/actions/setup/setup.py")
    setup_module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup_module)
    home = runner_temp / "ghbuild"
    exe = home / "venv" / "bin" / "ghbuild"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\necho 'ghbuild 0.1.0'\n")
    exe.chmod(0o755)
    fingerprint = setup_module.fingerprint(root, setup_module.source_files(root), "all")
    (home / "setup.json").write_text(json.dumps({"fingerprint": fingerprint}))


def test_a_second_setup_in_the_same_job_does_nothing(tmp_path):
    root, runner_temp = fake_toolkit(tmp_path), tmp_path / "runner-temp"
    plant_install(root, runner_temp)
    proc, outputs = run_setup(root, runner_temp, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert outputs["cached"] == "true" and outputs["version"] == "0.1.0", outputs
    assert "already set up" in proc.stdout and "pip install" not in proc.stdout
    link = runner_temp / "ghbuild" / "bin" / "ghbuild"
    assert outputs["ghbuild"] == str(link) and link.resolve() == (runner_temp / "ghbuild/venv/bin/ghbuild").resolve()
    # Only that folder goes on PATH: the venv's python and pip never shadow the job's.
    assert (tmp_path / "setup-path").read_text().splitlines() == [str(link.parent)]
    assert sorted(p.name for p in link.parent.iterdir()) == ["ghbuild"]


def test_setup_reinstalls_when_the_sources_change(tmp_path):
    root, runner_temp = fake_toolkit(tmp_path), tmp_path / "runner-temp"
    plant_install(root, runner_temp)
    (root / "ghbuild" / "new.py").write_text("x = 1\n")
    proc, _ = run_setup(root, runner_temp, tmp_path)
    # Not cached any more: it tries to install (and fails here, offline with no wheels), and says so.
    assert proc.returncode == 1
    assert "pip install ghbuild into" in proc.stdout and "::error title=ghbuild setup::" in proc.stdout


def setup_key(root: Path, runner_temp: Path, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, dict]:
    output = tmp_path / "key-output"
    output.write_text("")
    proc = subprocess.run([sys.executable, str(root / ".github" / "actions" / "setup" / "setup.py"), "--key"],
                          env={"PATH": os.environ.get("PATH", ""), "RUNNER_TEMP": str(runner_temp),
                               "GITHUB_OUTPUT": str(output), **env}, capture_output=True, text=True, timeout=60)
    return proc, dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)


def test_setup_cache_key_names_what_the_environment_depends_on(tmp_path):
    root, runner_temp = fake_toolkit(tmp_path), tmp_path / "runner-temp"
    proc, push = setup_key(root, runner_temp, tmp_path, GITHUB_EVENT_NAME="push", RUNNER_OS="Linux",
                           RUNNER_ARCH="ARM64")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    version = ".".join(map(str, sys.version_info[:3]))
    assert push["key"].startswith(f"ghbuild-venv-Linux-ARM64-py{version}-"), push["key"]
    assert push["path"] == f"~/.cache/ghbuild-setup/{push['key']}" and push["save"] == "true"
    _, light = setup_key(root, runner_temp, tmp_path, GITHUB_EVENT_NAME="push", RUNNER_OS="Linux",
                         RUNNER_ARCH="ARM64", GHBUILD_SETUP_EXTRAS="")
    (root / "ghbuild" / "new.py").write_text("x = 1\n")
    _, changed = setup_key(root, runner_temp, tmp_path, GITHUB_EVENT_NAME="push", RUNNER_OS="Linux",
                           RUNNER_ARCH="ARM64")
    assert len({push["key"], light["key"], changed["key"]}) == 3, "extras and sources must change the key"


@pytest.mark.parametrize("event,save", [("push", "true"), ("pull_request", "true"), ("schedule", "true"),
                                        ("pull_request_target", "false"), ("workflow_run", "false"),
                                        ("issue_comment", "false"), ("", "false")])
def test_setup_saves_the_cache_only_from_runs_that_own_their_scope(tmp_path, event, save):
    """pull_request_target and friends run in the default branch's cache scope, which trusted jobs read."""
    proc, outputs = setup_key(fake_toolkit(tmp_path), tmp_path / "rt", tmp_path, GITHUB_EVENT_NAME=event)
    assert proc.returncode == 0 and outputs["save"] == save, proc.stdout
    assert ("restore only" in proc.stdout) == (save == "false")


STANDIN_CACHE = REPO / "tests" / "act" / "standins" / "cache" / "cache.js"
# `uv` for these tests: "installs" a ghbuild console script that names its environment's python by path, as a
# real install does, and logs each call.
FAKE_UV = """#!/bin/sh
echo "$@" >> "$FAKE_UV_LOG"
py="$4"
printf '#!%s\\nprint("ghbuild 0.1.0")\\n' "$py" > "$(dirname "$py")/ghbuild"
chmod +x "$(dirname "$py")/ghbuild"
"""


class SetupJob:
    """One job's run of the setup action's steps (key, restore, install, save: action.yml's conditions), with
    the act stand-in for actions/cache (an entry found by key and path version, as on GitHub)."""

    def __init__(self, node: str, tmp_path: Path, store: Path):
        self.node, self.tmp, self.store, self.root = node, tmp_path, store, fake_toolkit(tmp_path)
        bin_dir = tmp_path / "fake-uv"
        bin_dir.mkdir()
        (bin_dir / "uv").write_text(FAKE_UV)
        (bin_dir / "uv").chmod(0o755)
        self.uv_log = tmp_path / "uv.log"
        self.base = {"PATH": f"{bin_dir}:{os.environ.get('PATH', '')}", "HOME": str(tmp_path / "home"),
                     "FAKE_UV_LOG": str(self.uv_log), "RUNNER_OS": "Linux", "RUNNER_ARCH": "X64",
                     "GITHUB_ACTION_PATH": str(self.root / ".github" / "actions" / "setup")}

    def step(self, argv: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess, dict]:
        output = self.tmp / "step-output"
        output.write_text("")
        proc = subprocess.run(argv, env={**self.base, "GITHUB_OUTPUT": str(output),
                                         "GITHUB_PATH": str(self.tmp / "step-path"), **env},
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc, dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)

    def cache(self, mode: str, key: str, path: str) -> dict:
        code = f"require({json.dumps(str(STANDIN_CACHE))}).run({json.dumps(mode)})"
        return self.step([self.node, "-e", code], {"GHBUILD_ACT_CACHE": str(self.store), "INPUT_KEY": key,
                                                   "INPUT_PATH": path, "GITHUB_WORKSPACE": str(self.tmp)})[1]

    def run(self, runner_temp: Path, event: str) -> dict:
        runner_temp.mkdir(parents=True)
        env = {"RUNNER_TEMP": str(runner_temp), "GITHUB_EVENT_NAME": event}
        setup = str(self.root / ".github" / "actions" / "setup" / "setup.py")
        _, key = self.step([sys.executable, setup, "--key"], env)
        # As action.yml: the restore step runs only when the key step says the stage may be used.
        restore = self.cache("restore", key["key"], key["path"]) if key["restore"] == "true" else {"cache-hit": ""}
        proc, install = self.step([sys.executable, setup], {**env, "GHBUILD_SETUP_CACHE": "true",
                                                            "GHBUILD_SETUP_RESTORED": restore["cache-hit"]})
        saved = key["save"] == "true" and install["staged"] == "true"
        if saved:
            self.cache("save", key["key"], key["path"])
        return {**key, **install, "hit": restore["cache-hit"], "saved": saved, "log": proc.stdout}


def test_a_second_job_restores_the_environment_wherever_its_runner_temp_is(node, tmp_path):
    """RUNNER_TEMP is another folder in every act job, on a self-hosted runner installed elsewhere and in a
    container job; actions/cache finds an entry by key AND the `path` strings. Neither may name RUNNER_TEMP."""
    job = SetupJob(node, tmp_path, tmp_path / "cache-store")
    first = job.run(tmp_path / "job1" / "tmp", "push")
    assert first["hit"] == "false" and first["cached"] == "false" and first["saved"], first
    assert job.uv_log.read_text().count("--no-build-isolation") == 1
    shutil.rmtree(tmp_path / "job1")            # the runner empties RUNNER_TEMP after the job
    second = job.run(tmp_path / "elsewhere" / "job2" / "tmp", "push")
    assert (second["key"], second["path"]) == (first["key"], first["path"]), "the same environment, the same entry"
    assert second["hit"] == "true" and second["cached"] == "true" and not second["saved"], second
    assert "restored from the GitHub Actions cache" in second["log"]
    assert job.uv_log.read_text().count("--no-build-isolation") == 1, "nothing installed by the second job"
    # Relocated: the console script names the second job's interpreter, and runs.
    exe = tmp_path / "elsewhere" / "job2" / "tmp" / "ghbuild" / "venv" / "bin" / "ghbuild"
    assert exe.read_text().startswith(f"#!{exe.parent / 'python'}\n")
    assert subprocess.run([second["ghbuild"], "--version"], capture_output=True, text=True).stdout == "ghbuild 0.1.0\n"


def test_an_untrusted_job_restores_but_never_saves(node, tmp_path):
    job = SetupJob(node, tmp_path, tmp_path / "cache-store")
    untrusted = job.run(tmp_path / "job1" / "tmp", "pull_request_target")
    assert untrusted["hit"] == "false" and untrusted["save"] == "false" and untrusted["staged"] == "false"
    assert not untrusted["saved"] and not any((tmp_path / "cache-store").glob("*")), "nothing in the cache"
    assert not (tmp_path / "home" / ".cache" / "ghbuild-setup" / untrusted["key"]).exists(), "nothing staged"
    job.run(tmp_path / "job2" / "tmp", "push")
    later = job.run(tmp_path / "job3" / "tmp", "workflow_run")
    assert later["hit"] == "true" and later["cached"] == "true" and not later["saved"]


def test_a_self_hosted_job_never_runs_an_environment_from_the_shared_stage(node, tmp_path):
    """On a self-hosted runner another job of the same user (a pull request's) can rewrite the stage in the
    shared HOME together with its manifest, which the check would then accept: there the stage is neither
    restored nor saved, and a stage planted there is never run; the environment is installed each time."""
    hosted = SetupJob(node, tmp_path, tmp_path / "cache-store")
    first = hosted.run(tmp_path / "job1" / "tmp", "push")          # a stage and a cache entry exist
    assert first["saved"]
    job = hosted
    job.base["RUNNER_ENVIRONMENT"] = "self-hosted"
    second = job.run(tmp_path / "job2" / "tmp", "push")
    assert (second["restore"], second["save"], second["hit"], second["cached"]) == ("false", "false", "", "false")
    assert job.uv_log.read_text().count("--no-build-isolation") == 2, "installed again, not restored"
    # Even told the cache was restored (the step's output is the workflow's to set), the stage is not read.
    runner_temp = tmp_path / "job3" / "tmp"
    runner_temp.mkdir(parents=True)
    setup = str(job.root / ".github" / "actions" / "setup" / "setup.py")
    proc, out = job.step([sys.executable, setup], {"RUNNER_TEMP": str(runner_temp), "GITHUB_EVENT_NAME": "push",
                                                   "GHBUILD_SETUP_CACHE": "true", "GHBUILD_SETUP_RESTORED": "true"})
    assert out["cached"] == "false" and "restored from the GitHub Actions cache" not in proc.stdout


@pytest.mark.parametrize("runner, shared", [("", False), ("github-hosted", True)])
def test_only_a_github_hosted_job_shares_inodes_with_the_stage(node, tmp_path, runner, shared):
    """On a self-hosted runner HOME (and the stage in ~/.cache) is shared with other jobs of the same user, a
    pull request's among them: a hard-linked environment would change with the stage. There it is a copy."""
    job = SetupJob(node, tmp_path, tmp_path / "cache-store")
    job.base["RUNNER_ENVIRONMENT"] = runner
    job.run(tmp_path / "job1" / "tmp", "push")
    shutil.rmtree(tmp_path / "job1")
    second = job.run(tmp_path / "job2" / "tmp", "push")
    assert second["hit"] == "true" and second["cached"] == "true", second
    exe = tmp_path / "job2" / "tmp" / "ghbuild" / "venv" / "bin" / "python"
    stage = tmp_path / "home" / ".cache" / "ghbuild-setup" / second["key"] / "venv"
    restored = [p for p in (tmp_path / "job2" / "tmp" / "ghbuild" / "venv").rglob("*")
                if p.is_file() and not p.is_symlink() and p != exe]
    staged = {(p.stat().st_dev, p.stat().st_ino) for p in stage.rglob("*") if p.is_file() and not p.is_symlink()}
    assert restored and staged
    linked = [p for p in restored if (p.stat().st_dev, p.stat().st_ino) in staged]
    assert bool(linked) == shared, (runner, linked[:3])


def test_a_restored_stage_that_does_not_match_its_manifest_is_installed_instead(node, tmp_path):
    job = SetupJob(node, tmp_path, tmp_path / "cache-store")
    job.run(tmp_path / "job1" / "tmp", "push")
    saved = next(p for p in (tmp_path / "cache-store").rglob("ghbuild") if p.parent.name == "bin")
    saved.write_text("#!/bin/sh\necho 'ghbuild 6.6.6'\n")        # changed after the save
    again = job.run(tmp_path / "job2" / "tmp", "push")
    assert again["hit"] == "true" and again["cached"] == "false" and again["version"] == "0.1.0", again
    assert "does not match its manifest" in again["log"]
    assert job.uv_log.read_text().count("--no-build-isolation") == 2


# Self-hosted runners never use the stage (test_a_self_hosted_job_never_runs_an_environment_from_the_shared_stage).
@pytest.mark.parametrize("runner", ["", "github-hosted"])
@pytest.mark.parametrize("planted", ["symlink", "fifo"])
def test_a_stage_file_replaced_by_a_symlink_or_a_fifo_is_never_followed(node, tmp_path, runner, planted):
    """Another job of the same user can write the stage in ~/.cache: a link to a file of its choosing, or a FIFO
    that would hang the job, in place of a listed file. Neither is read; the environment is installed instead."""
    job = SetupJob(node, tmp_path, tmp_path / "cache-store")
    job.base["RUNNER_ENVIRONMENT"] = runner
    first = job.run(tmp_path / "job1" / "tmp", "push")
    shutil.rmtree(tmp_path / "job1")
    runner_temp = tmp_path / "job2" / "tmp"
    runner_temp.mkdir(parents=True)
    env = {"RUNNER_TEMP": str(runner_temp), "GITHUB_EVENT_NAME": "push"}
    assert job.cache("restore", first["key"], first["path"])["cache-hit"] == "true"
    stage = tmp_path / "home" / ".cache" / "ghbuild-setup" / first["key"] / "venv"
    victim = next(p for p in sorted(stage.rglob("*")) if p.is_file() and not p.is_symlink() and p.name != "pyvenv.cfg")
    victim.unlink()                             # between the restore and setup.py: another job's write
    if planted == "symlink":
        (tmp_path / "theirs.py").write_text("print('not ghbuild')\n")
        victim.symlink_to(tmp_path / "theirs.py")
    else:
        os.mkfifo(victim)
    setup = str(job.root / ".github" / "actions" / "setup" / "setup.py")
    proc, out = job.step([sys.executable, setup], {**env, "GHBUILD_SETUP_CACHE": "true",
                                                   "GHBUILD_SETUP_RESTORED": "true"})
    assert out["cached"] == "false" and out["version"] == "0.1.0", out
    assert "does not match its manifest" in proc.stdout
    assert job.uv_log.read_text().count("--no-build-isolation") == 2


def test_setup_refuses_a_bad_extras_input(tmp_path):
    proc, _ = setup_key(fake_toolkit(tmp_path), tmp_path / "rt", tmp_path, GHBUILD_SETUP_EXTRAS="aws; rm -rf /")
    assert proc.returncode == 1 and "is not an extra name" in proc.stdout


def test_setup_refuses_a_folder_that_is_not_ghbuild(tmp_path):
    root = tmp_path / "other"
    (root / ".github" / "actions" / "setup").mkdir(parents=True)
    shutil.copy2(SETUP_PY, root / ".github" / "actions" / "setup" / "setup.py")
    # Locks of nothing: the fake project has no dependencies (the real locks are checked on their own below).
    (root / ".github" / "actions" / "setup" / "requirements").mkdir()
    for extras in ("light", "aws", "docker", "all"):
        (root / ".github" / "actions" / "setup" / "requirements" / f"{extras}.txt").write_text(f"# {extras}\n")
    proc, _ = run_setup(root, tmp_path / "rt", tmp_path)
    assert proc.returncode == 1 and "is not a ghbuild checkout" in proc.stdout


# --------------------------------------------------------------------------- the documented caller


def doc_caller(tmp_path: Path) -> Path:
    text = (REPO / "README.md").read_text("utf-8").split("## The caller workflow", 1)[1]
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    path = tmp_path / "images.yml"
    path.write_text(re.sub(r"(build-images\.yml@)\S+", r"\g<1>" + "0" * 40, block), "utf-8")
    return path


def test_the_documented_caller_is_fifteen_lines_github_accepts(tmp_path):
    path = doc_caller(tmp_path)
    lines = [line for line in path.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(lines) == 15, lines
    proc = subprocess.run([tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run([tool("zizmor"), "--offline", "--no-ignores", "--format", "json", str(path)],
                          capture_output=True, text=True, timeout=120)
    assert json.loads(proc.stdout or "[]") == [], proc.stdout[-3000:]
    # Every secret it passes is one the reusable workflow declares.
    declared = set(load(GITHUB / "workflows" / "build-images.yml")["on"]["workflow_call"]["secrets"])
    assert set(load(path)["jobs"]["images"]["secrets"]) <= declared


def test_branch_guards_compare_full_refs_and_publishing_jobs_run_in_an_environment():
    """`github.ref_name` is a tag's name too: a tag named like the default branch would pass a short-name guard.
    Every job that publishes (images, the sccache helper, the GitHub release) runs in an environment, whose
    deployment-branch rule holds whatever a branch's copy of the workflow says."""
    short = [f"{path.name}: {line.strip()}" for path in WORKFLOWS
             for line in path.read_text("utf-8").splitlines()
             if re.search(r"\bref_name\s*==|==\s*github\.ref_name\b", line)]
    assert short == []
    publishing = {("nightly.yml", "publish"), ("release.yml", "release"), ("sccache-helper.yml", "build"),
                  ("sccache-helper.yml", "index"), ("ghbuild-release.yml", "tag"), ("ghbuild-release.yml", "pypi")}
    for workflow, job_id in publishing:
        job = load(GITHUB / "workflows" / workflow)["jobs"][job_id]
        assert job.get("environment"), f"{workflow}: job {job_id} publishes outside an environment"
    guard = load(GITHUB / "workflows" / "ghbuild-release.yml")["jobs"]["check"]["if"]
    assert "refs/heads/" in guard


def test_setup_installs_only_what_its_hashed_lock_names(node, tmp_path):
    """Nothing installed at run time floats: the dependencies and the build backend come from the extras' lock
    with --require-hashes, ghbuild itself from the action's checkout without dependencies or build isolation
    (which would fetch setuptools unhashed), and the lock's bytes are part of the environment's cache key."""
    job = SetupJob(node, tmp_path, tmp_path / "cache-store")
    job.run(tmp_path / "job" / "tmp", "push")
    calls = job.uv_log.read_text().splitlines()
    lock = job.root / ".github" / "actions" / "setup" / "requirements" / "all.txt"
    assert calls[0].endswith(f"--require-hashes -r {lock}"), calls
    assert "--no-deps --no-build-isolation" in calls[1] and len(calls) == 2, calls
    root, runner_temp = job.root, tmp_path / "key-temp"
    _, before = setup_key(root, runner_temp, tmp_path, GITHUB_EVENT_NAME="push", RUNNER_OS="Linux", RUNNER_ARCH="X64")
    lock.write_text(lock.read_text() + "# a changed lock\n")
    _, after = setup_key(root, runner_temp, tmp_path, GITHUB_EVENT_NAME="push", RUNNER_OS="Linux", RUNNER_ARCH="X64")
    assert before["key"] != after["key"]


@pytest.mark.parametrize("extras", ["light", "aws", "docker", "all"])
def test_each_lock_pins_every_dependency_by_hash(extras):
    """The locks `make lock` writes: every package pinned (==) with at least one sha256, the project's
    dependencies (and the extras' packages, and the build backend) all in it."""
    import tomllib

    text = (SETUP_PY.parent / "requirements" / f"{extras}.txt").read_text("utf-8")
    entries = re.findall(r"^([A-Za-z0-9_.-]+)==([^ \\;]+)(.*?)(?=^\S|\Z)", text, re.M | re.S)
    pinned = {name.lower().replace("_", "-") for name, _, _ in entries}
    assert entries and all("--hash=sha256:" in rest for _, _, rest in entries)
    project = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    wanted = list(project["project"]["dependencies"]) + list(project["build-system"]["requires"])
    extra = project["project"]["optional-dependencies"]
    by_extras = {"light": [], "aws": extra["aws"], "docker": extra["docker"], "all": extra["aws"] + extra["docker"]}
    wanted += by_extras[extras]
    names = {re.match(r"[A-Za-z0-9_.-]+", req).group(0).lower().replace("_", "-") for req in wanted}
    assert names <= pinned, names - pinned


def test_the_smoke_test_output_cannot_run_workflow_commands():
    """The smoke test prints what the built image prints (a pull request's code): inside stop-commands."""
    steps = load(GITHUB / "workflows" / "build-images.yml")["jobs"]["build"]["steps"]
    smoke = [step for step in steps if str(step.get("name", "")).startswith("Smoke test")]
    assert len(smoke) == 2
    for step in smoke:
        lines = step["run"].splitlines()
        start = next(i for i, line in enumerate(lines) if line.startswith('echo "::stop-commands::$stop"'))
        run = next(i for i, line in enumerate(lines) if "docker run" in line)
        end = next(i for i, line in enumerate(lines) if line == 'echo "::$stop::"')
        assert start < run < end and "/dev/urandom" in step["run"]


@pytest.mark.parametrize("variables, restore", [
    ({"GITHUB_ACTIONS": "true"}, "false"),
    ({"GITHUB_ACTIONS": "true", "ACT": "true"}, "true"),
    ({"GITHUB_ACTIONS": "true", "RUNNER_ENVIRONMENT": "github-hosted"}, "true"),
    ({}, "true")])
def test_a_job_inside_actions_that_does_not_say_its_runner_counts_as_self_hosted(tmp_path, variables, restore):
    """RUNNER_ENVIRONMENT unset inside Actions (an older GitHub Enterprise Server runner): fail closed."""
    root = fake_toolkit(tmp_path)
    _, key = setup_key(root, tmp_path / "runner-temp", tmp_path, GITHUB_EVENT_NAME="push", **variables)
    assert key["restore"] == restore and (key["save"] == "true") == (restore == "true"), key
