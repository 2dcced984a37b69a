"""Registry credentials, from where CI already puts them.

Order per registry host: the Docker client config (`$DOCKER_CONFIG/config.json` or ~/.docker/config.json),
read as `docker push` reads it: `auths.<host>.auth` (what `docker login` and docker/login-action write;
read here without the Docker SDK) and credential helpers (`credHelpers.<host>`, `credsStore`: common on
self-hosted runners; run through the Docker SDK's auth handling); then GHCR with GITHUB_TOKEN, then ECR
through boto3. None: anonymous (fine for pulls from public repositories and local registries).
"""

from __future__ import annotations

import base64
import importlib
import json
import os
import re
import warnings
from collections.abc import Mapping

from ghbuild.errors import require
from ghbuild.naming import DOCKER_HUB_HOSTS

GHCR_HOST = "ghcr.io"
ECR_HOST_RE = re.compile(r"(?P<account>\d{12})\.dkr\.ecr(?:-fips)?\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?")


class Sealed:
    """An immutable value that holds a secret, compared by its fields (`__slots__`). Not a tuple or a
    dataclass: it cannot be iterated, unpacked or JSON-encoded, and each subclass's __repr__ hides the secret.
    Subclasses set their fields in __init__ with object.__setattr__."""

    __slots__: tuple[str, ...] = ()

    def _values(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable: cannot set {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sealed) and type(other) is type(self) and other._values() == self._values()

    def __hash__(self) -> int:
        return hash(self._values())


class Credentials(Sealed):
    """Username and password or token, sent as Basic to a token realm or to a Basic registry."""

    __slots__ = ("username", "password")
    username: str
    password: str

    def __init__(self, username: str, password: str) -> None:
        object.__setattr__(self, "username", username)
        object.__setattr__(self, "password", password)

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


def docker_config_file(env: Mapping[str, str]) -> str:
    """The Docker client config the `docker` CLI would read: $DOCKER_CONFIG/config.json, else ~/.docker/."""
    folder = env.get("DOCKER_CONFIG") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".docker")
    return os.path.join(folder, "config.json")


def read_docker_config(path: str) -> dict | None:
    """The Docker client config at `path` as a JSON object; None when it is missing, not a regular file (a FIFO
    planted there would hang the read), not JSON or not an object."""
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
    except (OSError, ValueError):
        return None
    return config if isinstance(config, dict) else None


def _auths_key_host(key: str) -> str:
    """An `auths` key as the Docker SDK compares it: scheme and path dropped, Docker Hub's index as docker.io."""
    name = key.replace("http://", "").replace("https://", "").split("/", 1)[0]
    return "docker.io" if name == "index.docker.io" else name


def _plain_auths(path: str, host: str) -> tuple[bool, Credentials | None]:
    """(decided, credentials) from a config that names no credential helper: its `auths` entry for `host`
    read the way the Docker SDK reads it (exact key first, then by host name; `auth` is base64 of
    user:password; an identity token is no password). Not decided when a helper could apply or the entry has
    another shape: the SDK then reads it (and runs the helper). Why not always the SDK: importing it costs
    more start-up than a publish that finds everything in place spends on its requests."""
    config = read_docker_config(path)
    if config is None or config.get("credsStore") or config.get("credHelpers"):
        return False, None
    auths = config.get("auths") or {}
    if not isinstance(auths, dict):
        return False, None
    wanted = "docker.io" if host in DOCKER_HUB_HOSTS else host
    entry = auths.get(wanted)
    if entry is None:
        entry = next((value for key, value in auths.items() if _auths_key_host(key) == wanted), None)
    if entry is None:
        return True, None
    if not isinstance(entry, dict) or set(entry) - {"auth", "email", "identitytoken"}:
        return False, None
    if "identitytoken" in entry or not entry.get("auth"):
        return True, None
    try:
        username, _, password = base64.b64decode(entry["auth"]).decode("utf-8").partition(":")
    except (ValueError, UnicodeDecodeError):
        return False, None
    return True, (Credentials(username, password) if username and password else None)


def _from_docker_config(host: str, env: Mapping[str, str]) -> Credentials | None:
    """What the Docker client config holds for `host`, credential helpers run (with `env`) when it names one."""
    path = docker_config_file(env)
    if not os.path.isfile(path):   # else the SDK falls back to this process's own config
        return None
    decided, found = _plain_auths(path, host)
    if decided:
        return found
    # The Docker SDK is an extra (a missing one is named in the error), loaded only for a config with a helper.
    require("docker", "docker", f"reading registry credentials from {path}")
    auth, errors = importlib.import_module("docker.auth"), importlib.import_module("docker.errors")
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
