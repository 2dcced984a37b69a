"""The S3 secret key reaches sccache inside the build and nothing else: no layer, no history line,
no log line, no job summary, no step output (credentials only as a BuildKit secret)."""

from __future__ import annotations

import json
import subprocess
import tarfile
import zlib

import pytest

from . import enginelib

# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="session")
def gha_run(session, first_build):
    """The same build as `first_build` (so mostly layer-cached), as a GitHub Actions step would run it."""
    files = session.workdir / "gha-files"
    files.mkdir()
    output, summary = files / "github_output", files / "step_summary"
    output.write_text("")
    summary.write_text("")
    # Inside Actions the run is what GitHub's variables and payload say (context flags are refused there).
    payload = files / "event.json"
    payload.write_text(json.dumps({"ref": "refs/heads/main", "repository": {"full_name": "ghbuild/ghbuild",
                                                                            "default_branch": "main"}}))
    env = session.env(GITHUB_ACTIONS="true", GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(summary),
                      GITHUB_EVENT_NAME="push", GITHUB_EVENT_PATH=str(payload), GITHUB_REPOSITORY="ghbuild/ghbuild",
                      GITHUB_REF="refs/heads/main", GITHUB_REF_NAME="main")
    argv = [arg for arg in session.build_argv("gha", "--push", "--json") if arg not in enginelib.CONTEXT_FLAGS]
    run = session.ghbuild("gha", env=env, argv=argv)
    assert run.rc == 0, run.tail(60)
    return run, output, summary


IMAGE_BUDGET_FAILURE = "image cpu is "


@pytest.fixture(scope="session")
def cpp_stage_build(session, first_build):
    """`--target cpp`: the stage whose RUN mounts the credentials (same inputs as the first build).

    It builds, but ghbuild exits 11 because it applies the image's size-budget to the stage image
    (test_target_stage_is_not_held_to_the_image_size_budget); the report is on stdout either way."""
    run = session.ghbuild("cpp-stage", "--target", "cpp", "--json")
    assert run.rc in (0, 11), run.tail(60)
    report = json.loads(run.stdout)
    assert report["image_id"], run.tail(60)
    assert all(f.startswith(IMAGE_BUDGET_FAILURE) for f in report["budget_failures"]), report["budget_failures"]
    return run, report


def _chunks(stream, size: int = 1 << 20):
    """The member's bytes, gunzipped when they are gzip (the containerd image store saves layers as the
    compressed blobs it holds, in an OCI layout; the classic store saves `<id>/layer.tar`)."""
    first = stream.read(size)
    if first[:2] != b"\x1f\x8b":
        yield first
        yield from iter(lambda: stream.read(size), b"")
        return
    inflate = zlib.decompressobj(wbits=47)
    chunk = first
    while chunk:
        yield inflate.decompress(chunk)
        chunk = stream.read(size)
    yield inflate.flush()


def scan_image(session, image: str, needles: dict[str, str]) -> tuple[int, dict[str, list[str]]]:
    """`docker save` streamed through tarfile: (layer tars seen, {needle label: [archive members holding it]}).
    A layer is a member that is (once gunzipped) a tar archive."""
    proc = subprocess.Popen([session.docker, "save", image], env=session.base_env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    encoded = {label: text.encode() for label, text in needles.items()}
    overlap = max(len(n) for n in encoded.values())
    layers, found = 0, {label: [] for label in needles}
    assert proc.stdout is not None
    with tarfile.open(fileobj=proc.stdout, mode="r|") as outer:
        for member in outer:
            if not member.isfile():
                continue
            stream = outer.extractfile(member)
            assert stream is not None
            # A layer tar stores each file's bytes contiguously: a plain byte search sees them all.
            tail, head = b"", b""
            for chunk in _chunks(stream):
                if len(head) < 512:
                    head += chunk[:512]
                window = tail + chunk
                for label, needle in encoded.items():
                    if needle in window and member.name not in found[label]:
                        found[label].append(member.name)
                tail = window[-overlap:]
            if head[257:262] == b"ustar":
                layers += 1
    rc = proc.wait(timeout=600)
    assert rc == 0, proc.stderr.read().decode(errors="replace") if proc.stderr else rc
    return layers, found


def secret_needles(session) -> dict[str, str]:
    return {f"secret #{i}": value for i, value in enumerate(sorted(session.secrets))}


def unique_layers(session, image: str) -> int:
    return len(set(session.image_inspect(image)["RootFS"]["Layers"]))


def history(session, image: str) -> str:
    proc = session.docker_run("history", "--no-trunc", image, check=True)
    fmt = session.docker_run("history", "--no-trunc", "--format", "{{json .}}", image, check=True)
    return proc.stdout + fmt.stdout


# --------------------------------------------------------------------------- layers and history

def test_no_secret_in_any_layer_of_the_runtime_image(session, first_build):
    image = first_build.report["image_id"]
    # Control: a string that IS in a layer (the example's selftest source) must be found.
    control = {"control": "ghbuild-example selftest:"}
    layers, found = scan_image(session, image, {**secret_needles(session), **control})
    assert layers >= unique_layers(session, image), f"only {layers} layer tars in docker save"
    assert found.pop("control"), "the scan did not see layer contents (control string not found)"
    assert all(not where for where in found.values()), f"secret found in the saved image: {found}"


def test_no_secret_in_any_layer_of_the_cpp_stage(session, first_build, cpp_stage_build):
    """The compile stage mounted the secret: its own layers must not have kept a copy."""
    _, report = cpp_stage_build
    # Its layers are the first build's (same sources, and no setting is in the cache key): there the step ran
    # in read-write, with the credentials mounted.
    cpp = report["sccache"]["stages"]["cpp"]
    assert report["target"] == "cpp" and (cpp["mode"] == "read-write" or cpp["from_layer_cache"]), cpp
    assert first_build.report["sccache"]["stages"]["cpp"]["mode"] == "read-write"
    control = {"control": "nc_selftest"}     # a symbol of libnativecore.so, installed in /out
    layers, found = scan_image(session, report["image_id"], {**secret_needles(session), **control})
    assert layers >= unique_layers(session, report["image_id"]), f"only {layers} layer tars in docker save"
    assert found.pop("control"), "the scan did not see layer contents (control string not found)"
    assert all(not where for where in found.values()), f"secret found in the saved cpp stage: {found}"


def test_no_secret_in_image_history(session, first_build, cpp_stage_build):
    for image in (first_build.report["image_id"], cpp_stage_build[1]["image_id"]):
        text = history(session, image)
        for secret in session.secrets:
            assert secret not in text, f"secret in `docker history --no-trunc {image}`"
        assert "AWS_SECRET_ACCESS_KEY" not in text and "AWS_SESSION_TOKEN" not in text
    # Sanity: the history of the compile stage does show its wrapped step, and no sccache setting at all
    # (they travel in the secret with the credentials, never as build args).
    cpp_history = history(session, cpp_stage_build[1]["image_id"])
    assert "ghbuild-sccache run cpp --" in cpp_history
    assert "GHBUILD_SCCACHE_MODE" not in cpp_history and session.key_prefix not in cpp_history


def test_command_passes_credentials_only_as_a_secret(first_build, session):
    command = first_build.report["command"]
    assert "--secret id=ghbuild_sccache,src=" in command
    for secret in session.secrets:
        assert secret not in command
    assert "AWS_" not in command and "SCCACHE_" not in command.replace("GHBUILD_SCCACHE_IMAGE=", "")


# --------------------------------------------------------------------------- GitHub Actions run

def test_actions_run_masks_secrets_before_any_build_output(gha_run, session):
    run, _, _ = gha_run
    lines = run.stderr.splitlines()
    for secret in (session.base_env["AWS_SECRET_ACCESS_KEY"], session.base_env["AWS_SESSION_TOKEN"]):
        mask = f"::add-mask::{secret}"
        assert mask in lines, f"no ::add-mask:: for a secret; stderr starts:\n{run.stderr[:1500]}"
        first_group = next((i for i, line in enumerate(lines) if line.startswith("::group::")), None)
        assert first_group is not None, "no ::group:: around the build log"
        assert lines.index(mask) < first_group, "the mask came after build output had started"


def test_actions_run_logs_no_secret(gha_run, session):
    run, _, _ = gha_run
    leaks = [line[:80] for line in run.output_lines()
             if not line.startswith("::add-mask::") and any(s in line for s in session.secrets)]
    assert leaks == [], leaks


def test_actions_job_summary_and_outputs_hold_no_secret(gha_run, session):
    run, output, summary = gha_run
    report = run.report
    summary_text, output_text = summary.read_text(), output.read_text()
    assert "### ghbuild: cpu (amd64)" in summary_text
    assert report["ref"] in summary_text
    assert "sccache per stage" in summary_text
    for secret in session.secrets:
        assert secret not in summary_text, "secret in the job summary"
        assert secret not in output_text, "secret in GITHUB_OUTPUT"
    # Step outputs: the digest is the one the registry has (set-output file format: name<<delim).
    assert "digest<<" in output_text and report["digest"] in output_text
    assert report["pushed"] and report["digest"]


# --------------------------------------------------------------------------- layer audit

def test_layer_audit_attributes_shared_stages_the_same_for_every_target(first_build, cpp_stage_build):
    """os-base and the external base are the same layers in the runtime and the cpp images:
    the audit must give them the same sizes whichever target was built."""
    runtime, cpp = first_build.report["stages"], cpp_stage_build[1]["stages"]
    assert runtime["os-base"]["size"] > 0
    assert cpp.get("os-base", {}).get("size") == runtime["os-base"]["size"], (cpp.get("os-base"), runtime["os-base"])
    assert cpp["base image"]["size"] == runtime["base image"]["size"]


def test_target_stage_is_not_held_to_the_image_size_budget(cpp_stage_build):
    run, report = cpp_stage_build
    assert report["budget_failures"] == [] and run.rc == 0, report["budget_failures"]
