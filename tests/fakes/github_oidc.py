"""A stand-in for GitHub's OIDC token endpoint: what a job with `id-token: write` reaches through
ACTIONS_ID_TOKEN_REQUEST_URL (GitHub gives a URL that already carries `?api-version=2.0`).

Wire format, as @actions/core's getIDToken speaks it: `GET <url>&audience=<aud>` with
`Authorization: bearer <ACTIONS_ID_TOKEN_REQUEST_TOKEN>`; 200 and `{"value": "<JWT>"}`. A wrong or missing
bearer gets a 401 (the real endpoint's error body is not modelled: clients read its status only). The JWT
has GitHub's claims (iss, aud, sub `repo:<owner>/<repo>:environment:<env>` or `:ref:<ref>`, repository, ref,
environment) but a signature nobody can check: moto's STS accepts any JWT for AssumeRoleWithWebIdentity,
and checking the issuer's signature and the trust policy is AWS's job, not exercised here.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from typing import Any

from .httpserver import FakeServer, Request, Response

ISSUER = "https://token.actions.githubusercontent.com"
PATH = "/_apis/distributedtask/hubs/Actions/plans/p1/jobs/j1/idtoken"


def _b64(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).rstrip(b"=").decode()


def claims_of(jwt: str) -> dict[str, Any]:
    """The payload of a JWT (unverified)."""
    payload = jwt.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


class GitHubOidcFake(FakeServer):
    """The token endpoint of one job. `request_token`: the bearer it accepts; `issued`: the JWTs it handed out;
    `audiences`: the audience of every request (None: none asked)."""

    def __init__(self, repository: str = "ghbuild/ghbuild", ref: str = "refs/heads/main",
                 environment: str | None = "ghbuild-trusted") -> None:
        super().__init__()
        self.request_token = "ghs_oidc_request_" + secrets.token_hex(16)
        self.repository, self.ref, self.environment = repository, ref, environment
        self.issued: list[str] = []
        self.audiences: list[str | None] = []
        self.route("GET", PATH, self._token)

    def env(self, **overrides: str) -> dict[str, str]:
        """The two variables GitHub gives a job with `id-token: write`."""
        return {"ACTIONS_ID_TOKEN_REQUEST_URL": f"{self.url}{PATH}?api-version=2.0",
                "ACTIONS_ID_TOKEN_REQUEST_TOKEN": self.request_token, **overrides}

    def _token(self, request: Request) -> Response:
        auth = request.headers.get("Authorization") or ""
        scheme, _, value = auth.partition(" ")
        if scheme.lower() != "bearer" or value != self.request_token:
            return Response(401, {"message": "Unauthorized"})
        if request.arg("api-version") != "2.0":
            return Response(400, {"message": "api-version 2.0 expected"})
        audience = request.arg("audience")
        self.audiences.append(audience)
        where = f"environment:{self.environment}" if self.environment else f"ref:{self.ref}"
        now = int(time.time())
        claims = {"iss": ISSUER, "aud": audience or f"https://github.com/{self.repository.split('/')[0]}",
                  "sub": f"repo:{self.repository}:{where}", "repository": self.repository, "ref": self.ref,
                  "environment": self.environment, "jti": secrets.token_hex(8), "iat": now, "nbf": now - 5,
                  "exp": now + 300}
        jwt = ".".join([_b64({"alg": "RS256", "typ": "JWT", "kid": "stand-in"}), _b64(claims),
                        base64.urlsafe_b64encode(secrets.token_bytes(64)).rstrip(b"=").decode()])
        self.issued.append(jwt)
        return Response(200, {"value": jwt})
