"""sccache degraded modes: S3 trouble never fails a build; it says which mode it fell back to
and why. A bad endpoint is refused before anything runs, without printing it.

Builds here build the configured target (runtime) without pushing. `--target cpp` would be smaller
but cannot succeed: the example's 400 MB image size-budget is applied to the cpp stage image (1 GB
with its toolchain), exit 11 (see test_20_secrets.py), and the layer audit builds the budgeted
`runtime` stage anyway. The sccache settings reach the build in a secret (no build arg), so each build
here gets fresh compile layers (session.cold_build) to make its compile stages run in the mode under test.
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import uuid
from pathlib import Path

import pytest
from fakes.httpserver import LoopbackService, free_port, reply
from fakes.moto_auth import authenticating_moto


def assert_degraded(run, mode: str, cause: str):
    """Success, the expected mode everywhere, and the documented warning naming the cause."""
    assert run.rc == 0, run.tail(60)
    report = run.report
    sc = report["sccache"]
    assert sc["mode"] == mode, sc
    assert cause in sc["reason"], sc["reason"]
    assert f"sccache {mode}: {sc['reason']}" in report["warnings"], report["warnings"]
    assert f"ghbuild warning: sccache {mode}: {sc['reason']}" in run.stderr
    assert set(sc["stages"]) == {"cpp", "rust"}, sc["stages"].keys()
    for name, stage in sc["stages"].items():
        assert stage["mode"] == mode, (name, stage)
        assert stage["requested_mode"] == mode, (name, stage)
    return report


def assert_no_remote_args(command: str):
    """Settings never travel as build args: the mode is in the secret, whatever it is."""
    for arg in ("SCCACHE_ENDPOINT", "SCCACHE_BUCKET", "SCCACHE_S3_KEY_PREFIX", "GHBUILD_SCCACHE_MODE"):
        assert arg not in command, f"{arg} in a build command"
    assert "--secret id=ghbuild_sccache," in command


# --------------------------------------------------------------------------- S3 with real authentication

@pytest.fixture(scope="module")
def auth_s3(session):
    """Our own moto S3 on a free loopback port WITH request authentication (the shared one accepts any
    key pair, so it cannot tell wrong credentials): bucket, IAM user and its key, S3 policy."""
    moto = Path(session.base_env.get("SCCACHE_PATH", "")).with_name("moto_server")
    if not moto.exists():
        moto = Path(sys.executable).with_name("moto_server")
    # The four set-up calls below pass unauthenticated; every request after them is checked.
    with authenticating_moto(moto, session.workdir / "moto-auth.log", 4, session.base_env) as endpoint:
        import boto3

        bootstrap = dict(endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bootstrap",
                         aws_secret_access_key="bootstrap")
        bucket = session.base_env["GHBUILD_SCCACHE_BUCKET"]
        boto3.client("s3", **bootstrap).create_bucket(Bucket=bucket)
        iam = boto3.client("iam", **bootstrap)
        iam.create_user(UserName="ghbuild")
        key = iam.create_access_key(UserName="ghbuild")["AccessKey"]
        iam.put_user_policy(UserName="ghbuild", PolicyName="s3", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        # Control: the right key works, so a refusal below is about the key, not the server.
        good = session.s3(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
        good.head_bucket(Bucket=bucket)
        wrong = f"wrong-{uuid.uuid4().hex}"
        from botocore.exceptions import ClientError

        with pytest.raises(ClientError):
            session.s3(endpoint, key["AccessKeyId"], wrong).head_bucket(Bucket=bucket)
        yield endpoint, key["AccessKeyId"], wrong, key["SecretAccessKey"]


# --------------------------------------------------------------------------- ghbuild decides before the build

def test_s3_down_builds_with_the_local_cache(session, first_build):
    """Endpoint on a closed loopback port: local disk cache, and the build succeeds."""
    port = free_port()
    run = session.cold_build("s3-down", "--json",
                             env=session.env(GHBUILD_SCCACHE_ENDPOINT=f"http://127.0.0.1:{port}"))
    report = assert_degraded(run, "local", "not reachable (cannot connect)")
    assert_no_remote_args(report["command"])
    assert report["image_id"]


def test_wrong_credentials_build_with_the_local_cache(session, auth_s3, first_build):
    endpoint, key_id, wrong, _ = auth_s3
    env = session.env(GHBUILD_SCCACHE_ENDPOINT=endpoint, AWS_ACCESS_KEY_ID=key_id, AWS_SECRET_ACCESS_KEY=wrong,
                      AWS_SESSION_TOKEN=None)
    run = session.cold_build("wrong-creds", "--json", env=env)
    report = assert_degraded(run, "local", "403")
    assert_no_remote_args(report["command"])
    assert wrong not in run.stdout and wrong not in run.stderr


@pytest.mark.parametrize("key, prefix, mode", [
    ("right", "ghbuild", "read-write"), ("right", "", "read-write"), ("wrong", "ghbuild", "local"),
    ("none", "ghbuild", "local")])
def test_preflight_signs_as_s3_checks(session, auth_s3, key, prefix, mode):
    """The preflight's own SigV4 requests against an S3 that checks signatures: the right key reads and writes;
    a wrong one is refused (403), and nothing is read anonymously (moto answers an unsigned HEAD 500)."""
    from types import SimpleNamespace

    from ghbuild.build import s3probe

    endpoint, key_id, wrong, right = auth_s3
    options = SimpleNamespace(bucket=session.base_env["GHBUILD_SCCACHE_BUCKET"], region="us-east-1",
                              endpoint=endpoint, key_prefix=prefix)
    creds = None if key == "none" else {"AWS_ACCESS_KEY_ID": key_id,
                                        "AWS_SECRET_ACCESS_KEY": right if key == "right" else wrong}
    got, reason = s3probe.probe(options, creds, "no AWS credentials in the environment", 5.0)
    assert got == mode, reason
    if key == "wrong":
        assert "not reachable (" in reason and "(403)" in reason, reason


def test_empty_endpoint_is_not_passed_to_the_build(session, first_build):
    """GHBUILD_SCCACHE_ENDPOINT="" means AWS's own endpoint. To stay on loopback, the AWS SDK's
    standard AWS_ENDPOINT_URL_S3 points "AWS" at a closed local port: S3 is unreachable."""
    env = session.env(GHBUILD_SCCACHE_ENDPOINT="", AWS_ENDPOINT_URL_S3=f"http://127.0.0.1:{free_port()}")
    run = session.cold_build("empty-endpoint", "--json", env=env)
    report = assert_degraded(run, "local", "not reachable")
    assert "SCCACHE_ENDPOINT" not in report["command"]
    assert_no_remote_args(report["command"])


@pytest.mark.parametrize("endpoint, hidden", [
    ("http://user:pass@127.0.0.1:5002", ("user:pass", "pass@", "@127.0.0.1")),
    ("http://ghbuild:S3cr3t-Pa55w0rd@127.0.0.1:5002", ("S3cr3t-Pa55w0rd", "ghbuild:S3")),
    ("http://127.0.0.1:5002/?X-Amz-Credential=leak-me", ("leak-me", "X-Amz")),
    ("http://127.0.0.1:5002/#leak-me", ("leak-me",)),
    ("http://127.0.0.1:5002/\nleak-me", ("leak-me",)),
], ids=["user-info", "user-info-2", "query", "fragment", "newline"])
@pytest.mark.parametrize("actions", [False, True], ids=["terminal", "actions"])
def test_bad_endpoint_is_refused_without_printing_it(session, endpoint, hidden, actions):
    extra = {"GITHUB_ACTIONS": "true"} if actions else {}
    run = session.ghbuild("bad-endpoint", "--push", "--json", timeout=120,
                          env=session.env(GHBUILD_SCCACHE_ENDPOINT=endpoint, **extra))
    assert run.rc == 3, run.stderr
    assert run.stdout == ""
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    plain = [line for line in lines if not line.startswith("::")]
    assert len(plain) == 1, lines
    assert plain[0].startswith("ghbuild: config error: GHBUILD_SCCACHE_ENDPOINT"), plain[0]
    assert "value not shown" in plain[0]
    if actions:
        assert len(lines) == 2 and lines[0].startswith("::error "), lines
    for text in hidden:
        assert text not in run.stderr, f"{text!r} printed"
    assert "#1 [internal]" not in run.stderr


# --------------------------------------------------------------------------- S3 fails after the preflight

class _ProbeThenDown(LoopbackService):
    """An HTTP proxy to the real S3 that serves ghbuild's preflight (HEAD bucket, PUT and DELETE of the
    write probe), then stops listening: S3 "goes down" between the preflight and the build."""

    def __init__(self, upstream: str):
        super().__init__()
        self.upstream = upstream.removeprefix("http://")
        self.down = threading.Event()

    def handle(self, h):
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else None
        upstream = http.client.HTTPConnection(self.upstream, timeout=30)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in ("connection", "expect")}
        upstream.request(h.command, h.path, body=body, headers=headers)
        resp = upstream.getresponse()
        data = resp.read()
        h.close_connection = True
        dropped = ("connection", "transfer-encoding", "content-length", "date")
        reply(h, resp.status, data, {**{k: v for k, v in resp.getheaders() if k.lower() not in dropped},
                                     "Connection": "close"})
        upstream.close()
        if h.command == "DELETE" and h.path.split("?")[0].endswith(".ghbuild-write-probe"):
            self.down.set()


@pytest.fixture
def s3_that_dies_after_the_preflight(session):
    server = _ProbeThenDown(session.base_env["GHBUILD_SCCACHE_ENDPOINT"]).start()

    def stopper():
        server.down.wait(timeout=600)
        server.stop()                # the port is closed from now on

    threading.Thread(target=stopper, daemon=True).start()
    yield server.url, server
    server.down.set()


def test_s3_down_at_build_time_falls_back_inside_the_build(session, first_build, s3_that_dies_after_the_preflight):
    """The preflight passes (read-write), then S3 is gone: the compile stages must not fail on sccache;
    the helper steps down (read-write -> anonymous -> local) and the report says so per stage."""
    endpoint, server = s3_that_dies_after_the_preflight
    run = session.cold_build("s3-dies", "--json",
                             env=session.env(GHBUILD_SCCACHE_ENDPOINT=endpoint))
    assert server.down.is_set(), "the preflight never deleted its write probe"
    assert run.rc == 0, run.tail(60)
    report = run.report
    assert report["sccache"]["mode"] == "read-write"          # what the preflight saw
    assert "--secret id=ghbuild_sccache" in report["command"]
    cpp = report["sccache"]["stages"]["cpp"]
    assert cpp["from_layer_cache"] is False, "the compile stage did not run"
    assert (cpp["requested_mode"], cpp["mode"], cpp["fallbacks"]) == ("read-write", "local",
                                                                       ["read-write", "anonymous"]), cpp
    for stage in ("cpp", "rust"):
        assert f"sccache in stage {stage}: fell back from read-write, anonymous to local" in report["warnings"]
        assert f"ghbuild-sccache: {stage}: mode read-write failed:" in run.stderr
        assert f"ghbuild-sccache: {stage}: mode local in /root/.cache/sccache (requested read-write" in run.stderr
    assert report["sccache"]["stages"]["rust"]["mode"] == "local"


# --------------------------------------------------------------------------- the wrapper itself

@pytest.fixture(scope="module")
def unreachable_s3_start(session, helper_dir):
    """The helper's wrapper with the real sccache in a Debian container, requested read-write with
    credentials, when S3 refuses connections at start."""
    secret_file = session.workdir / "helper-secret"
    secret_file.write_text("GHBUILD_SCCACHE_MODE=read-write\nSCCACHE_BUCKET=ghbuild-sccache\nSCCACHE_REGION=us-east-1\n"
                           f"SCCACHE_ENDPOINT=http://127.0.0.1:{free_port()}\nSCCACHE_S3_USE_SSL=false\n"
                           f"SCCACHE_S3_KEY_PREFIX=x\nAWS_ACCESS_KEY_ID=x\nAWS_SECRET_ACCESS_KEY={session.secret}\n")
    secret_file.chmod(0o644)
    proc = session.docker_run("run", "--rm", "--network", "none", "-v", f"{helper_dir}:/opt/ghbuild/bin:ro",
                              "-v", f"{secret_file}:/run/secrets/ghbuild_sccache:ro",
                              session.local["GHBUILD_BUILD_BASE_IMAGE"],
                              "/opt/ghbuild/bin/ghbuild-sccache", "run", "t", "--", "sh", "-c",
                              'echo "LAUNCHER=$GHBUILD_SCCACHE_LAUNCHER"; env | grep -c "^AWS_" || true',
                              timeout=120)
    secret_file.unlink()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_wrapper_steps_down_to_local_when_s3_fails_at_start(unreachable_s3_start, session):
    proc = unreachable_s3_start
    assert "LAUNCHER=/opt/ghbuild/bin/sccache" in proc.stdout
    assert proc.stdout.split()[-1] == "0", "the build command saw AWS_* variables"
    line = next(x for x in proc.stderr.splitlines() if x.startswith("ghbuild-sccache-stats "))
    stats = json.loads(line.split(" ", 1)[1])
    assert (stats["requested_mode"], stats["mode"], stats["fallbacks"]) == ("read-write", "local",
                                                                           "read-write,anonymous")
    assert "Local disk" in stats["sccache"]["cache_location"]
    assert "t: mode read-write failed:" in proc.stderr and "falling back to anonymous" in proc.stderr
    assert "t: mode anonymous failed:" in proc.stderr and "falling back to local" in proc.stderr
    assert session.secret not in proc.stdout + proc.stderr


def test_wrapper_fallback_message_names_the_cause(unreachable_s3_start):
    failed = [line for line in unreachable_s3_start.stderr.splitlines() if "failed:" in line]
    assert len(failed) == 2, unreachable_s3_start.stderr
    for line in failed:
        assert "<unknown>" not in line, line
        assert any(word in line for word in ("storage", "Connection refused", "error")), line
