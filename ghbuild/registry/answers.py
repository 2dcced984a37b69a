"""What a registry's answer says beyond its status: the distribution error list, the error it makes, the
upload Location to go on with."""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit, urlunsplit

from ghbuild.errors import AuthError, RegistryError
from ghbuild.http.response import Response
from ghbuild.http.retry import Busy, retry_after_seconds, transient_error


def distribution_errors(r: Response) -> list[dict]:
    """The distribution error list of an answer (`{"errors": [{"code": .., "message": ..}]}`), if any."""
    try:
        errs = r.json().get("errors") or []
    except (ValueError, AttributeError, OSError):   # OSError: the error body itself was cut short
        return []
    return [e for e in errs if isinstance(e, dict)] if isinstance(errs, list) else []


def answer_error(r: Response, what: str) -> RegistryError:
    """The error an unwanted answer is: AuthError (401/403), TransientError (429, 5xx), else RegistryError."""
    code = " ".join(f"{e.get('code')}: {e.get('message')}" for e in distribution_errors(r))
    text = f"{what}: HTTP {r.status_code} {code}".rstrip()
    if r.status_code in (401, 403):
        return AuthError(text)
    if r.status_code == 429 or r.status_code >= 500:
        return transient_error(text, Busy(r.status_code, retry_after_seconds(r.headers.get("Retry-After")),
                                          rate_limited=r.status_code == 429))
    return RegistryError(text)


def location(r: Response, host: str, scheme: str) -> str:
    """Upload URL from Location: may be relative; keep our scheme when the host is ours."""
    loc = r.headers.get("Location")
    if not loc:
        raise RegistryError(f"{r.request.method} {r.url}: no Location header in {r.status_code} answer")
    u = urlsplit(urljoin(r.url, loc))
    if u.netloc == host and u.scheme != scheme:
        u = u._replace(scheme=scheme)
    return urlunsplit(u)
