"""AWS Signature Version 4, header form, for the few S3 requests ghbuild makes itself (the sccache preflight).

Standard library only. botocore's signer does the same, but importing botocore.auth costs 60-80 ms of CPU
before every build (most of it botocore.compat and its imports), on the path where a build waits for its
preflight; the signature is a page of hashing. tests/test_sigv4.py checks every signature here against
botocore's S3SigV4Auth, and the service tests against a moto that verifies signatures.

The payload is always signed (its SHA-256 in `x-amz-content-sha256`), which S3 accepts over HTTP and HTTPS.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from datetime import UTC, datetime
from urllib.parse import parse_qsl, quote, urlsplit

ALGORITHM = "AWS4-HMAC-SHA256"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()


def host_header(url: str) -> str:
    """The Host a client sends for `url` (the port dropped when it is the scheme's default)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:                                # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    port = parts.port
    return host if port is None or port == _DEFAULT_PORTS.get(parts.scheme) else f"{host}:{port}"


def canonical_query(query: str) -> str:
    pairs = parse_qsl(query, keep_blank_values=True)
    return "&".join(f"{quote(k, safe='-_.~')}={quote(v, safe='-_.~')}" for k, v in sorted(pairs))


def sign_s3(method: str, url: str, body: bytes, creds: Mapping[str, str], region: str,
            now: datetime | None = None, service: str = "s3") -> dict[str, str]:
    """The headers that sign one request: `x-amz-date`, `x-amz-content-sha256`, `x-amz-security-token` (with a
    session token) and `Authorization`. `url` as sent: its path already percent-encoded (S3 signs the path
    as it is, not encoded a second time). `creds`: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and optionally
    AWS_SESSION_TOKEN."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    parts = urlsplit(url)
    payload = hashlib.sha256(body).hexdigest()
    headers = {"host": host_header(url), "x-amz-content-sha256": payload, "x-amz-date": stamp}
    if creds.get("AWS_SESSION_TOKEN"):
        headers["x-amz-security-token"] = creds["AWS_SESSION_TOKEN"]
    names = sorted(headers)
    signed_headers = ";".join(names)
    canonical_request = "\n".join([
        method.upper(), parts.path or "/", canonical_query(parts.query),
        "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in names), signed_headers, payload])
    scope = f"{stamp[:8]}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, stamp, scope, hashlib.sha256(canonical_request.encode("utf-8")).hexdigest()])
    key = _hmac(("AWS4" + creds["AWS_SECRET_ACCESS_KEY"]).encode("utf-8"), stamp[:8])
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    signed = {"X-Amz-Date": stamp, "X-Amz-Content-SHA256": payload,
              "Authorization": f"{ALGORITHM} Credential={creds['AWS_ACCESS_KEY_ID']}/{scope}, "
                               f"SignedHeaders={signed_headers}, Signature={signature}"}
    if "x-amz-security-token" in headers:
        signed["X-Amz-Security-Token"] = headers["x-amz-security-token"]
    return signed
