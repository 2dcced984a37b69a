"""The job's OIDC token from GitHub's token endpoint, as @actions/core's getIDToken asks for it.

A job with `permissions: id-token: write` finds ACTIONS_ID_TOKEN_REQUEST_URL (it already carries
`?api-version=2.0`) and ACTIONS_ID_TOKEN_REQUEST_TOKEN in its environment; a job without that permission
finds neither. The token is `GET <url>&audience=<audience>` with `Authorization: bearer <request token>`;
the answer is `{"value": "<JWT>"}`. The JWT says who runs (repository, ref, environment: its `sub`) and is
what a cloud's trust policy checks; it is masked in the log as soon as it arrives, and neither it nor the
request token ever reaches a message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from ghbuild.errors import ConfigError
from ghbuild.github import gha
from ghbuild.http.retry import RetryingClient

URL_VAR = "ACTIONS_ID_TOKEN_REQUEST_URL"
TOKEN_VAR = "ACTIONS_ID_TOKEN_REQUEST_TOKEN"


def available(env: Mapping[str, str]) -> bool:
    """Whether this job may ask for an OIDC token (it has `id-token: write`)."""
    return bool(env.get(URL_VAR) and env.get(TOKEN_VAR))


def request_token(env: Mapping[str, str], audience: str, *, why: str, **client_kwargs: Any) -> str:
    """The job's OIDC token (a JWT) for `audience`. `why` starts every error line (what needed the token).
    Errors: ConfigError (exit 3: the role to assume is a setting), one line, without the request token or the JWT."""
    url, request_token_value = env.get(URL_VAR, ""), env.get(TOKEN_VAR, "")
    if not (url and request_token_value):
        raise ConfigError(f"{why}: this job has no OIDC token ({URL_VAR} and {TOKEN_VAR} are not set): give the "
                         "job `permissions: id-token: write` (only the trusted build jobs of build-images.yml have it)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        raise ConfigError(f"{why}: {URL_VAR} is not an http:// or https:// URL without user info")
    origin = f"{parts.scheme}://{parts.netloc}"
    client = RetryingClient(origin, service="GitHub's OIDC token endpoint", unreachable_error=ConfigError,
                            rate_limit_error=ConfigError, secrets=[request_token_value], **client_kwargs)
    target = f"{url}{'&' if parts.query else '?'}audience={quote(audience, safe='')}"
    what = f"{why}: the job's OIDC token from {origin}"
    try:
        r = client.request("GET", target, what, headers={"Authorization": f"bearer {request_token_value}",
                                                         "Accept": "application/json; api-version=2.0"})
    finally:
        client.session.close()
    if r.status_code != 200:
        refused = " (the request token was refused)" if r.status_code in (401, 403) else ""
        raise ConfigError(f"{what}: HTTP {r.status_code}{refused}")
    try:
        body = r.json()
    except ValueError:
        body = None
    value = body.get("value") if isinstance(body, dict) else None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{what}: the answer holds no token (expected JSON {{\"value\": \"<JWT>\"}})")
    gha.mask(value)
    return value
