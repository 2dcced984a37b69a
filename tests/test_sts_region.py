"""The STS host the job's OIDC token goes to (issue 26, finding 5): only an AWS region name makes it, and only
AWS_ENDPOINT_URL_STS moves it; the generic AWS_ENDPOINT_URL (S3's MinIO or moto) does not."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest

from ghbuild.build import aws_role
from ghbuild.config import configfile
from ghbuild.errors import ConfigError

ROLE = {"GHBUILD_AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/sccache"}


class Captured(Exception):
    pass


@pytest.fixture
def sts_origin(monkeypatch):
    """Where assume() would send the token (the client is stopped before any request)."""
    seen: dict[str, str] = {}

    class Client:
        def __init__(self, origin: str, **kwargs) -> None:
            seen["origin"] = origin
            raise Captured

    monkeypatch.setattr(aws_role, "RetryingClient", Client)

    def origin(env: dict[str, str], region: str | None = None) -> str:
        with pytest.raises(Captured):
            aws_role.assume(aws_role.settings({**ROLE, **env}, region), "eyJ.token.sig")
        return seen["origin"]
    return origin


@pytest.mark.parametrize("region, source", [("attacker.example#", "sccache.region"),
                                            ("evil.example/x?", "sccache.region")])
def test_a_region_that_is_not_one_is_refused_before_the_token_is_asked_for(region, source):
    with pytest.raises(ConfigError) as raised:
        aws_role.settings(ROLE, sccache_region=region)
    assert str(raised.value).startswith(f"{source}: {region!r} is not an AWS region name")
    with pytest.raises(ConfigError, match=r"GHBUILD_AWS_REGION: 'x\.example' is not an AWS region"):
        aws_role.settings({**ROLE, "GHBUILD_AWS_REGION": "x.example"})


def test_sts_is_the_regions_host_unless_aws_endpoint_url_sts_says_otherwise(sts_origin):
    assert urlsplit(sts_origin({}, "eu-central-1")).hostname == "sts.eu-central-1.amazonaws.com"
    assert urlsplit(sts_origin({"AWS_REGION": "us-gov-west-1"})).hostname == "sts.us-gov-west-1.amazonaws.com"
    assert sts_origin({"AWS_ENDPOINT_URL": "http://attacker.example:9000"}) == "https://sts.us-east-1.amazonaws.com"
    assert sts_origin({"AWS_ENDPOINT_URL_STS": "http://127.0.0.1:5002"}) == "http://127.0.0.1:5002"


def test_the_config_refuses_a_region_that_is_not_one(tmp_path):
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / "ghbuild.toml").write_text('[sccache]\nregion = "attacker.example#"\n'
                                           '[images.cpu]\ndockerfile = "Dockerfile"\n')
    with pytest.raises(ConfigError) as raised:
        configfile.load(None, {}, tmp_path)
    assert raised.value.message.endswith("sccache.region: 'attacker.example#' is not an AWS region name "
                                         "(like us-east-1)")
    assert "\n" not in raised.value.message
    ok = configfile.load(None, {"GHBUILD_SCCACHE_REGION": "ap-southeast-2"}, tmp_path)
    assert ok.sccache.region == "ap-southeast-2"
