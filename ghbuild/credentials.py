"""Registry credentials, from where CI already puts them.

Order per registry host: the Docker client config (`$DOCKER_CONFIG/config.json` or ~/.docker/config.json,
`auths.<host>.auth` as written by `docker login` and docker/login-action), then GHCR with GITHUB_TOKEN,
then ECR through boto3. None: anonymous (fine for pulls from public repositories and local registries).
Credential helpers (`credsStore`) are not run: CI writes plain `auths` entries.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from ghbuild.errors import require
from ghbuild.naming import DOCKER_HUB_HOSTS

GHCR_HOST = "ghcr.io"
# Keys `docker login` writes for Docker Hub: the legacy index URL and the host names.
_HUB_CONFIG_KEYS = ("https://index.docker.io/v1/", *sorted(DOCKER_HUB_HOSTS))
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


def _docker_config(env: Mapping[str, str]) -> dict:
    folder = Path(env.get("DOCKER_CONFIG") or Path(env.get("HOME", "~")).expanduser() / ".docker")
    try:
        return json.loads((folder / "config.json").read_text("utf-8"))
    except (OSError, ValueError):
        return {}


def for_host(host: str, env: Mapping[str, str] | None = None) -> Credentials | None:
    env = os.environ if env is None else env
    auths = _docker_config(env).get("auths") or {}
    keys = _HUB_CONFIG_KEYS if host in DOCKER_HUB_HOSTS else (host, f"https://{host}", f"http://{host}")
    for key in keys:
        entry = auths.get(key) or {}
        if entry.get("auth"):
            try:
                user, _, password = base64.b64decode(entry["auth"]).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError):
                continue
            if user and password:
                return Credentials(user, password)
    if host == GHCR_HOST and env.get("GITHUB_TOKEN"):
        return ghcr_credentials(env.get("GITHUB_ACTOR") or "", env["GITHUB_TOKEN"])
    if ECR_HOST_RE.fullmatch(host):
        return ecr_credentials(host)
    return None
