"""Registry credentials, from where CI already puts them.

Order per registry host: the Docker client config (`$DOCKER_CONFIG/config.json` or ~/.docker/config.json),
read by the Docker SDK's auth handling as `docker push` reads it: `auths.<host>.auth` (what `docker login` and
docker/login-action write) and credential helpers (`credHelpers.<host>`, `credsStore`: common on self-hosted
runners); then GHCR with GITHUB_TOKEN, then ECR through boto3. None: anonymous (fine for pulls from public
repositories and local registries).
"""

from __future__ import annotations

import base64
import dataclasses
import os
import re
import warnings
from collections.abc import Mapping

from ghbuild.errors import require
from ghbuild.naming import DOCKER_HUB_HOSTS

GHCR_HOST = "ghcr.io"
ECR_HOST_RE = re.compile(r"(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?")


@dataclasses.dataclass(frozen=True)
class Credentials:
    """Username and password or token, sent as Basic to a token realm or to a Basic registry."""

    username: str
    password: str

    def basic(self) -> str:
        return "Basic " + base64.b64encode(f"{self.username}:{self.password}".encode()).decode()

    def __repr__(self) -> str:  # never print a secret
        return f"Credentials(username={self.username!r}, password=***)"


def ghcr_credentials(username: str, github_token: str) -> Credentials:
    """GHCR: GitHub user (any non-empty name works for GITHUB_TOKEN) + token; realm https://ghcr.io/token."""
    return Credentials(username or "github-actions", github_token)


def ecr_credentials(host: str, session=None) -> Credentials:
    """ECR: `get_authorization_token` gives base64("AWS:<password>"), valid 12 h; ECR challenges Basic."""
    m = ECR_HOST_RE.fullmatch(host)
    if not m:
        raise ValueError(f"not an ECR registry host: {host}")
    boto3 = require("boto3", "aws", f"logging in to the ECR registry {host}")   # lazy: only ECR needs it

    client = (session or boto3).client("ecr", region_name=m["region"])
    data = client.get_authorization_token(registryIds=[m["account"]])["authorizationData"][0]
    user, _, password = base64.b64decode(data["authorizationToken"]).decode().partition(":")
    return Credentials(user, password)


def _from_docker_config(host: str, env: Mapping[str, str]) -> Credentials | None:
    """What the Docker client config holds for `host`, credential helpers run (with `env`) when it names one."""
    from ghbuild.docker_client import docker_config_file

    path = docker_config_file(env)
    if not os.path.isfile(path):   # else the SDK falls back to this process's own config
        return None
    require("docker", "docker", f"reading registry credentials from {path}")   # lazy: only with a config file
    from docker import auth, errors

    try:
        with warnings.catch_warnings():   # a helper not on PATH: anonymous, and the registry's 401 says so
            warnings.simplefilter("ignore")
            config = auth.load_config(path, credstore_env=dict(env))
            # Docker Hub's entry is under the legacy index URL whatever host name the image used.
            entry = config.resolve_authconfig(None if host in DOCKER_HUB_HOSTS else host)
    except (errors.DockerException, OSError, ValueError):
        return None
    entry = {key.lower(): value for key, value in (entry or {}).items()}   # helpers answer "Username"
    username, password = entry.get("username"), entry.get("password")
    return Credentials(username, password) if username and password else None


def for_host(host: str, env: Mapping[str, str] | None = None) -> Credentials | None:
    env = os.environ if env is None else env
    found = _from_docker_config(host, env)
    if found:
        return found
    if host == GHCR_HOST and env.get("GITHUB_TOKEN"):
        return ghcr_credentials(env.get("GITHUB_ACTOR") or "", env["GITHUB_TOKEN"])
    if ECR_HOST_RE.fullmatch(host):
        return ecr_credentials(host)
    return None
