"""ghbuild.http.sigv4 against botocore's S3SigV4Auth, the oracle: the same request, credentials and clock must
give the same signature (botocore signs the payload on plain HTTP, as ghbuild always does)."""

from __future__ import annotations

import types
from datetime import UTC, datetime
from unittest import mock

import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest

from ghbuild.http import sigv4

NOW = datetime(2026, 12, 5, 18, 59, 7, tzinfo=UTC)
CREDS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}


def botocore_headers(method: str, url: str, body: bytes, creds: dict[str, str], region: str) -> dict[str, str]:
    request = AWSRequest(method=method, url=url, data=body, headers={})
    credentials = types.SimpleNamespace(access_key=creds["AWS_ACCESS_KEY_ID"],
                                        secret_key=creds["AWS_SECRET_ACCESS_KEY"], token=creds.get("AWS_SESSION_TOKEN"))
    with mock.patch("botocore.auth.get_current_datetime", return_value=NOW.replace(tzinfo=None)):
        S3SigV4Auth(credentials, "s3", region).add_auth(request)
    return {k.lower(): v for k, v in request.headers.items()}


@pytest.mark.parametrize("method, url, body, token, region", [
    ("HEAD", "http://127.0.0.1:9000/ghbuild-sccache/", b"", None, "us-east-1"),
    ("PUT", "http://127.0.0.1:9000/ghbuild-sccache/ghbuild/preflight/probe-1a2b", b"ghbuild preflight", None,
     "eu-west-1"),
    ("DELETE", "http://127.0.0.1:9000/ghbuild-sccache/a%20key/with~tilde", b"", "FwoGZXIvYXdzEXAMPLE//token+=",
     "us-east-1"),
    ("GET", "http://localhost:80/bucket/?list-type=2&prefix=a%2Fb&delimiter=", b"", None, "ap-southeast-2"),
])
def test_the_signature_is_botocores(method, url, body, token, region):
    creds = {**CREDS, **({"AWS_SESSION_TOKEN": token} if token else {})}
    ours = {k.lower(): v for k, v in sigv4.sign_s3(method, url, body, creds, region, now=NOW).items()}
    theirs = botocore_headers(method, url, body, creds, region)
    assert ours["authorization"] == theirs["authorization"]
    for header in ("x-amz-date", "x-amz-content-sha256", "x-amz-security-token"):
        assert ours.get(header) == theirs.get(header)


@pytest.mark.parametrize("url, host", [
    ("https://b.s3.eu-west-1.amazonaws.com/k", "b.s3.eu-west-1.amazonaws.com"),
    ("https://b.s3.eu-west-1.amazonaws.com:443/k", "b.s3.eu-west-1.amazonaws.com"),
    ("http://127.0.0.1:80/b", "127.0.0.1"),
    ("http://127.0.0.1:9000/b", "127.0.0.1:9000"),
    ("http://[::1]:9000/b", "[::1]:9000"),
])
def test_the_signed_host_is_what_the_client_sends(url, host):
    assert sigv4.host_header(url) == host


def test_the_secret_never_appears_in_the_headers():
    headers = sigv4.sign_s3("PUT", "http://127.0.0.1:9000/b/k", b"x", CREDS, "us-east-1", now=NOW)
    assert not any(CREDS["AWS_SECRET_ACCESS_KEY"] in v for v in headers.values())
