"""Keyless AWS credentials, the parts that need no STS: the job's OIDC token fetched from a stand-in of GitHub's
token endpoint (tests/fakes/github_oidc.py), its error lines, the masks, the role settings and what a dry
run says. The exchange with STS itself runs against moto in tests/services/registry/test_aws_role_sts.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fakes.github_oidc import GitHubOidcFake, claims_of
from fakes.httpserver import FakeServer, Response, free_port

from ghbuild.build import aws_role, sccache
from ghbuild.errors import ConfigError
from ghbuild.github import oidc

ROLE = "arn:aws:iam::123456789012:role/ghbuild-sccache"
WHY = "GHBUILD_AWS_ROLE_ARN (aws-role-to-assume)"


@pytest.fixture
def github():
    with GitHubOidcFake() as fake:
        yield fake


def no_sleep(seconds: float) -> None:
    pass


def test_the_token_is_fetched_for_the_audience_and_masked(github, monkeypatch, capsys):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    jwt = oidc.request_token(github.env(), "sts.amazonaws.com", why=WHY)
    assert github.issued == [jwt] and github.audiences == ["sts.amazonaws.com"]
    assert claims_of(jwt)["sub"] == "repo:ghbuild/ghbuild:environment:ghbuild-trusted"
    err = capsys.readouterr().err
    assert f"::add-mask::{jwt}" in err.splitlines()
    assert github.request_token not in err


@pytest.mark.parametrize("change, fragment", [
    (lambda g: {"ACTIONS_ID_TOKEN_REQUEST_TOKEN": "ghs_wrong_request_token"}, ": HTTP 401 (the request token was "
                                                                              "refused)"),
    (lambda g: {"ACTIONS_ID_TOKEN_REQUEST_URL": g.url + "/elsewhere?api-version=2.0"}, ": HTTP 404"),
    (lambda g: {"ACTIONS_ID_TOKEN_REQUEST_URL": f"http://127.0.0.1:{free_port()}/t?api-version=2.0"},
     "GitHub's OIDC token endpoint unreachable after 3 attempts"),
    (lambda g: {"ACTIONS_ID_TOKEN_REQUEST_URL": "ftp://example.org/t"},
     "ACTIONS_ID_TOKEN_REQUEST_URL is not an http:// or https:// URL without user info"),
])
def test_a_token_that_cannot_be_had_is_one_line_without_the_request_token(github, change, fragment):
    env = github.env(**change(github))
    with pytest.raises(ConfigError) as err:
        oidc.request_token(env, "sts.amazonaws.com", why=WHY, sleep=no_sleep)
    line = str(err.value)
    assert line.startswith(WHY + ": ") and fragment in line, line
    assert "\n" not in line and github.request_token not in line and "ghs_wrong" not in line
    assert err.value.exit_code == 3 and github.issued == []


def test_a_job_without_id_token_write_is_told_what_to_grant():
    with pytest.raises(ConfigError, match=r"this job has no OIDC token \(ACTIONS_ID_TOKEN_REQUEST_URL and "
                                          r"ACTIONS_ID_TOKEN_REQUEST_TOKEN are not set\): give the job "
                                          r"`permissions: id-token: write`"):
        oidc.request_token({}, "sts.amazonaws.com", why=WHY)


def test_an_answer_without_a_token_is_refused(github):
    github.fail_next("idtoken", 200, body={"message": "no value here"})
    with pytest.raises(ConfigError, match=r'the answer holds no token \(expected JSON \{"value": "<JWT>"\}\)'):
        oidc.request_token(github.env(), "sts.amazonaws.com", why=WHY)


# --------------------------------------------------------------------------- the role settings

def test_settings_default_and_follow_the_environment():
    assert sccache.ROLE_VAR == aws_role.ROLE_VAR
    assert aws_role.settings({}) is None and aws_role.settings({"GHBUILD_AWS_ROLE_ARN": "  "}) is None
    role = aws_role.settings({"GHBUILD_AWS_ROLE_ARN": ROLE, "GITHUB_RUN_ID": "4711", "GITHUB_RUN_ATTEMPT": "2"},
                             sccache_region="eu-west-1")
    assert role == aws_role.RoleSettings(ROLE, 3600, "eu-west-1", None, "ghbuild-4711-2")
    role = aws_role.settings({"GHBUILD_AWS_ROLE_ARN": ROLE, "GHBUILD_AWS_ROLE_DURATION": "900",
                              "GHBUILD_AWS_REGION": "us-west-2", "AWS_ENDPOINT_URL_STS": "http://127.0.0.1:1"},
                             sccache_region="eu-west-1")
    assert (role.duration, role.region, role.endpoint, role.session_name) == (900, "us-west-2", "http://127.0.0.1:1",
                                                                               "ghbuild-local")


@pytest.mark.parametrize("env, message", [
    ({"GHBUILD_AWS_ROLE_ARN": "ghbuild-sccache"}, "GHBUILD_AWS_ROLE_ARN (aws-role-to-assume): 'ghbuild-sccache' is "
                                                  "not an IAM role ARN (arn:aws:iam::<12-digit account>:role/<name>)"),
    ({"GHBUILD_AWS_ROLE_ARN": "arn:aws:iam::123:user/me"}, "is not an IAM role ARN"),
    ({"GHBUILD_AWS_ROLE_ARN": ROLE, "GHBUILD_AWS_ROLE_DURATION": "1h"},
     "GHBUILD_AWS_ROLE_DURATION: '1h' is not a number of seconds from 900 to 43200"),
    ({"GHBUILD_AWS_ROLE_ARN": ROLE, "GHBUILD_AWS_ROLE_DURATION": "60"}, "'60' is not a number of seconds"),
])
def test_bad_settings_are_one_config_error_line(env, message):
    with pytest.raises(ConfigError) as err:
        aws_role.credentials(env)
    assert message in str(err.value) and err.value.exit_code == 3


# --------------------------------------------------------------------------- STS's refusal

# STS's answer when the role's trust policy does not match the token (AWS's documented error shape); moto's STS
# accepts any token, so this refusal is served by a stand-in.
ACCESS_DENIED = b"""<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <Error><Type>Sender</Type><Code>AccessDenied</Code>
    <Message>Not authorized to perform sts:AssumeRoleWithWebIdentity</Message></Error>
  <RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId>
</ErrorResponse>"""


class StsRefusing(FakeServer):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[str] = []
        self.route("POST", "/", self._refuse)

    def _refuse(self, request) -> Response:
        self.forms.append(request.body.decode())
        return Response(403, ACCESS_DENIED, {"Content-Type": "text/xml"})


def test_a_refusal_of_sts_names_the_code_and_the_trust_policy_never_the_token():
    token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJyZXBvOm8vcjpyZWY6cmVmcy9oZWFkcy9mZWF0dXJlIn0.c2ln"
    with StsRefusing() as sts:
        role = aws_role.settings({"GHBUILD_AWS_ROLE_ARN": ROLE, "AWS_ENDPOINT_URL_STS": sts.url})
        with pytest.raises(ConfigError) as err:
            aws_role.assume(role, token, sleep=no_sleep)
    assert str(err.value) == (f"GHBUILD_AWS_ROLE_ARN (aws-role-to-assume): AssumeRoleWithWebIdentity of {ROLE}: STS "
                              "refused (HTTP 403 AccessDenied: Not authorized to perform sts:AssumeRoleWithWebIdentity)"
                              "; the role's trust policy must trust token.actions.githubusercontent.com with this "
                              "repository's `sub` (docs/trust.md)")
    assert len(sts.forms) == 1, "a refusal is not tried again"
    assert sts.forms[0].startswith("Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=arn%3Aaws%3Aiam")
    assert "&DurationSeconds=3600" in sts.forms[0] and "WebIdentityToken=eyJ" in sts.forms[0]


# --------------------------------------------------------------------------- what a build is told

SCCACHE = SimpleNamespace(enabled=True, bucket="b", region="us-east-1", endpoint="", key_prefix="sccache")


def test_a_dry_run_counts_a_role_as_credentials_only_when_the_run_may_have_them():
    env = {"GHBUILD_AWS_ROLE_ARN": ROLE}
    trusted = sccache.planned(SCCACHE, None, env)
    assert trusted.mode == "read-write" and "the role in GHBUILD_AWS_ROLE_ARN not assumed" in trusted.reason
    untrusted = sccache.planned(SCCACHE, "not a trusted run: S3 write credentials are kept for the trusted build", env)
    assert untrusted.mode == "anonymous"
    assert untrusted.reason.endswith("kept for the trusted build (the role in GHBUILD_AWS_ROLE_ARN is not assumed)")


def test_the_decision_names_the_secret_values_for_the_log_redaction():
    decision = sccache.SccacheDecision("read-write", "ok", {}, "AWS_ACCESS_KEY_ID=ASIAX\nAWS_SECRET_ACCESS_KEY=s3cr"
                                                               "et\nAWS_SESSION_TOKEN=t0ken\n")
    assert decision.secret_values == ("s3cret", "t0ken")
    assert sccache.SccacheDecision("read-write", "dry", {}, "(masked)").secret_values == ()
    assert "s3cret" not in repr(decision)
