"""Keyless AWS credentials for sccache's bucket: the role in GHBUILD_AWS_ROLE_ARN (the reusable workflows'
`aws-role-to-assume` input), assumed with the job's OIDC token through STS AssumeRoleWithWebIdentity.

Only a trusted run assumes it (ghbuild.build.sccache.preflight asks this module only when the planner's
trust lets the credentials reach the build); only the trusted build jobs of build-images.yml have
`id-token: write` at all. The short-lived credentials (AccessKeyId, SecretAccessKey, SessionToken) take the
place of the static AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY: the S3 probe uses them, and they reach the
sccache server through the BuildKit secret `ghbuild_sccache`, never a build arg or a layer.

The call is STS's query API on ghbuild's own HTTP stack, no boto3: `POST https://sts.<region>.amazonaws.com/`
with the form `Action=AssumeRoleWithWebIdentity&Version=2011-06-15&RoleArn=...&RoleSessionName=...&
WebIdentityToken=...&DurationSeconds=...`, unsigned (the token is the proof); the answer is XML
(`<Credentials>`), an error `<ErrorResponse><Error><Code>`. 5xx, 429 and network errors are tried again
(ghbuild.http.retry), a refusal is not.

Settings (environment; none of them secret):
- GHBUILD_AWS_ROLE_ARN: the role; empty or unset, nothing is assumed;
- GHBUILD_AWS_ROLE_DURATION: seconds the credentials last, 900 to 43200 (default 3600; the role's
  maximum session duration must allow it; a build that outlives it loses sccache writes, not the build);
- the STS region: GHBUILD_AWS_REGION, else sccache.region, else AWS_REGION / AWS_DEFAULT_REGION, else us-east-1;
  an AWS region name (`us-east-1`), checked: it becomes the host name the job's OIDC token is sent to;
- AWS_ENDPOINT_URL_STS: another STS endpoint (the tests' moto). Not the generic AWS_ENDPOINT_URL, which points
  S3 elsewhere (a MinIO, a moto) and must not take the token along.
The session is named after the run (`ghbuild-<run id>-<attempt>`), which CloudTrail shows.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping
from typing import Any, NamedTuple
from urllib.parse import urlencode, urlsplit

from ghbuild.config.typed import AWS_REGION_RE
from ghbuild.errors import ConfigError
from ghbuild.github import gha, oidc
from ghbuild.http.retry import RetryingClient

ROLE_VAR = "GHBUILD_AWS_ROLE_ARN"    # also ghbuild.build.sccache.ROLE_VAR, which cannot import this module early
DURATION_VAR = "GHBUILD_AWS_ROLE_DURATION"
REGION_VAR = "GHBUILD_AWS_REGION"
AUDIENCE = "sts.amazonaws.com"       # what AWS's GitHub OIDC provider is set up with
DEFAULT_DURATION = 3600
STS_VERSION = "2011-06-15"
_ROLE_ARN_RE = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,512}$")
_SESSION_NAME_BAD = re.compile(r"[^\w+=,.@-]")
_REFUSALS_OF_THE_TRUST_POLICY = ("AccessDenied", "InvalidIdentityToken", "IDPRejectedClaim")


class RoleSettings(NamedTuple):
    role_arn: str
    duration: int
    region: str
    endpoint: str | None
    session_name: str


def settings(env: Mapping[str, str], sccache_region: str | None = None) -> RoleSettings | None:
    """The role settings from the environment, checked; None when no role is configured."""
    role = env.get(ROLE_VAR, "").strip()
    if not role:
        return None
    if not _ROLE_ARN_RE.match(role):
        raise ConfigError(f"{ROLE_VAR} (aws-role-to-assume): {role!r} is not an IAM role ARN "
                          "(arn:aws:iam::<12-digit account>:role/<name>)")
    raw = env.get(DURATION_VAR, "").strip()
    try:
        duration = int(raw) if raw else DEFAULT_DURATION
    except ValueError:
        duration = -1
    if not 900 <= duration <= 43200:
        raise ConfigError(f"{DURATION_VAR}: {raw!r} is not a number of seconds from 900 to 43200")
    region, origin = next(((v.strip(), name) for name, v in ((REGION_VAR, env.get(REGION_VAR)),
                                                            ("sccache.region", sccache_region),
                                                            ("AWS_REGION", env.get("AWS_REGION")),
                                                            ("AWS_DEFAULT_REGION", env.get("AWS_DEFAULT_REGION")))
                           if v and v.strip()), ("us-east-1", "default"))
    if not AWS_REGION_RE.match(region):
        raise ConfigError(f"{origin}: {region!r} is not an AWS region name (like us-east-1): it names the STS host "
                          f"the job's OIDC token goes to")
    endpoint = (env.get("AWS_ENDPOINT_URL_STS") or "").strip() or None
    run = "-".join(v for v in (env.get("GITHUB_RUN_ID", ""), env.get("GITHUB_RUN_ATTEMPT", "")) if v) or "local"
    session_name = _SESSION_NAME_BAD.sub("-", f"ghbuild-{run}")[:64]
    return RoleSettings(role, duration, region, endpoint, session_name)


def assume(role: RoleSettings, web_identity_token: str, **client_kwargs: Any) -> dict[str, str]:
    """AssumeRoleWithWebIdentity: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN of the role, the
    secret parts masked in the log. Errors: ConfigError, one line, naming the role and STS's error code, never the
    token."""
    endpoint = role.endpoint or f"https://sts.{role.region}.amazonaws.com"
    what = f"{ROLE_VAR} (aws-role-to-assume): AssumeRoleWithWebIdentity of {role.role_arn}"
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname or "@" in parts.netloc:
        raise ConfigError(f"{what}: the STS endpoint {endpoint!r} is not an http:// or https:// URL without user info")
    client = RetryingClient(endpoint, service="STS", unreachable_error=ConfigError, rate_limit_error=ConfigError,
                            secrets=[web_identity_token], **client_kwargs)
    form = urlencode({"Action": "AssumeRoleWithWebIdentity", "Version": STS_VERSION, "RoleArn": role.role_arn,
                      "RoleSessionName": role.session_name, "WebIdentityToken": web_identity_token,
                      "DurationSeconds": str(role.duration)})
    try:
        r = client.request("POST", client.api_url + "/", what, data=form.encode(),
                           headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8",
                                    "Accept": "text/xml"})
    finally:
        client.session.close()
    answer = _xml(r.content)
    if r.status_code != 200:
        code, message = _text(answer, "Code"), " ".join(_text(answer, "Message").split())[:200]
        hint = ("; the role's trust policy must trust token.actions.githubusercontent.com with this repository's "
                "`sub` (docs/trust.md)") if code in _REFUSALS_OF_THE_TRUST_POLICY else ""
        raise ConfigError(client.scrub(f"{what}: STS refused (HTTP {r.status_code} {code or 'error'}"
                                       f"{': ' + message if message else ''}){hint}"))
    found = {"AWS_ACCESS_KEY_ID": _text(answer, "AccessKeyId"),
             "AWS_SECRET_ACCESS_KEY": _text(answer, "SecretAccessKey"),
             "AWS_SESSION_TOKEN": _text(answer, "SessionToken")}
    if not all(found.values()):
        raise ConfigError(f"{what}: STS answered without credentials")
    gha.mask(found["AWS_SECRET_ACCESS_KEY"])
    gha.mask(found["AWS_SESSION_TOKEN"])
    return found


def _xml(content: bytes | None) -> ElementTree.Element | None:
    try:
        return ElementTree.fromstring(content or b"")
    except ElementTree.ParseError:
        return None


def _text(root: ElementTree.Element | None, name: str) -> str:
    """The text of the first element named `name` in any namespace ("" when there is none)."""
    if root is None:
        return ""
    found = next((e for e in root.iter() if e.tag == name or e.tag.endswith("}" + name)), None)
    return (found.text or "").strip() if found is not None else ""


def credentials(env: Mapping[str, str], sccache_region: str | None = None) -> dict[str, str] | None:
    """The role's short-lived credentials for this (trusted) run, None when no role is configured: the job's
    OIDC token for STS, exchanged for the role's credentials."""
    role = settings(env, sccache_region)
    if role is None:
        return None
    token = oidc.request_token(env, AUDIENCE, why=f"{ROLE_VAR} (aws-role-to-assume) {role.role_arn}")
    return assume(role, token)
