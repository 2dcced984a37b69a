"""Registry credentials, from where CI already puts them.

Order per registry host: the Docker client config (`$DOCKER_CONFIG/config.json` or ~/.docker/config.json,
`auths.<host>.auth` as written by `docker login` and docker/login-action), then GHCR with GITHUB_TOKEN,
then ECR through boto3. None: anonymous (fine for pulls from public repositories and local registries).
Credential helpers (`credsStore`) are not run: CI writes plain `auths` entries.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path

from ghbuild.registry import Credentials, ecr_credentials

_HUB_KEYS = ("https://index.docker.io/v1/", "index.docker.io", "docker.io", "registry-1.docker.io")
_ECR_RE = re.compile(r"\d{12}\.dkr\.ecr(?:-fips)?\.[a-z0-9-]+\.amazonaws\.com(?:\.cn)?")


def _docker_config(env: Mapping[str, str]) -> dict:
    folder = Path(env.get("DOCKER_CONFIG") or Path(env.get("HOME", "~")).expanduser() / ".docker")
    try:
        return json.loads((folder / "config.json").read_text("utf-8"))
    except (OSError, ValueError):
        return {}


def for_host(host: str, env: Mapping[str, str] | None = None) -> Credentials | None:
    env = os.environ if env is None else env
    auths = _docker_config(env).get("auths") or {}
    keys = _HUB_KEYS if host in _HUB_KEYS else (host, f"https://{host}", f"http://{host}")
    for key in keys:
        entry = auths.get(key) or {}
        if entry.get("auth"):
            try:
                user, _, password = base64.b64decode(entry["auth"]).decode("utf-8").partition(":")
            except (ValueError, UnicodeDecodeError):
                continue
            if user and password:
                return Credentials(user, password)
    if host == "ghcr.io" and env.get("GITHUB_TOKEN"):
        return Credentials(env.get("GITHUB_ACTOR") or "github-actions", env["GITHUB_TOKEN"])
    if _ECR_RE.fullmatch(host):
        return ecr_credentials(host)
    return None
