"""The S3 preflight of sccache: is the bucket reachable, with the job's credentials or anonymously, and
can they write?

Three requests at most (HEAD the bucket, PUT and DELETE a probe object) on ghbuild's own HTTP session, signed
by ghbuild.http.sigv4. Why not a boto3 client, or botocore's signer: importing boto3 and loading the S3 service
model took about 0.4 s of CPU on every build, botocore.auth alone 60-80 ms, for three requests on the path
where the build waits (docs/benchmarks.md, the buildx path).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import NamedTuple
from urllib.parse import quote

from ghbuild.http.errors import HTTPConnectionError, HTTPTimeout, PermanentError, RequestException
from ghbuild.http.session import Session, session_for
from ghbuild.http.sigv4 import sign_s3

# Bucket names that can be a host name label (virtual-hosted style on AWS): no dots (TLS), lower case.
_DNS_BUCKET = re.compile(r"[a-z0-9][a-z0-9-]{1,61}[a-z0-9]")
_ERROR_CODE = re.compile(rb"<Code>([^<]{1,100})</Code>")
_TRANSIENT = frozenset({500, 502, 503, 504})


class S3Error(Exception):
    """S3 answered no (`status` set), or no answer came (`status` None)."""

    def __init__(self, cause: str, status: int | None = None):
        super().__init__(cause)
        self.cause, self.status = cause, status


class Bucket(NamedTuple):
    """Where the bucket is and how requests to it are signed (`creds` None: anonymous, unsigned)."""

    url: str                                   # the bucket's URL, without a trailing slash
    region: str
    creds: Mapping[str, str] | None
    timeout: float

    def request(self, session: Session, method: str, key: str = "", body: bytes = b"",
                attempts: int = 2) -> int:
        """The status of one request to the bucket (or to `key` in it); S3Error for any 4xx/5xx or no answer.
        A 5xx or a dropped connection is tried again, `attempts` tries in all (boto3's standard retry)."""
        url = self.url + ("/" + quote(key, safe="/~") if key else "/")
        for attempt in range(1, attempts + 1):
            headers = self._signed(method, url, body)
            try:
                r = session.request(method, url, headers=headers, data=body or None, timeout=self.timeout,
                                    allow_redirects=False)
            except (RequestException, PermanentError) as exc:
                if attempt == attempts or isinstance(exc, PermanentError):
                    raise S3Error(_no_answer(exc)) from None
                continue
            if r.status_code < 300:
                return r.status_code
            if r.status_code in _TRANSIENT and attempt < attempts:
                continue
            code = _ERROR_CODE.search(r.content or b"")
            raise S3Error(f"{code.group(1).decode() if code else r.status_code} ({r.status_code})", r.status_code)
        raise AssertionError("unreachable")

    def _signed(self, method: str, url: str, body: bytes) -> dict[str, str]:
        if not self.creds:
            return {}
        return sign_s3(method, url, body, self.creds, self.region)


def _no_answer(exc: Exception) -> str:
    if isinstance(exc, HTTPTimeout):
        return "timed out"
    if isinstance(exc, HTTPConnectionError):
        return "cannot connect"
    return str(exc) if isinstance(exc, PermanentError) else type(exc).__name__


def bucket_url(bucket: str, region: str, endpoint: str | None) -> str:
    """Path style on a configured endpoint (MinIO, R2, moto: what sccache uses there); on AWS virtual-hosted
    style for a bucket name that can be a host name, else path style on the regional endpoint."""
    if endpoint:
        return f"{endpoint.rstrip('/')}/{quote(bucket, safe='')}"
    if _DNS_BUCKET.fullmatch(bucket) and "--" not in bucket:
        return f"https://{bucket}.s3.{region}.amazonaws.com"
    return f"https://s3.{region}.amazonaws.com/{quote(bucket, safe='')}"


def probe(options, creds: Mapping[str, str] | None, why_no_creds: str, timeout: float) -> tuple[str, str]:
    """(mode, reason): read-write, read-only, anonymous or local. `creds`: the AWS variables this run may
    use, None when it may use none. Never raises for S3 trouble: a degraded mode carries the cause."""
    region = options.region or "us-east-1"
    # The AWS SDKs' own endpoint variables, as boto3 read them (a test or a proxy points "AWS" elsewhere).
    endpoint = options.endpoint or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    url = bucket_url(options.bucket, region, endpoint or None)
    signed = Bucket(url, region, creds, timeout)
    session = session_for(url)
    try:
        return _probe(session, signed, options, creds, why_no_creds)
    finally:
        session.close()


def _probe(session: Session, bucket: Bucket, options, creds: Mapping[str, str] | None,
           why_no_creds: str) -> tuple[str, str]:
    try:
        bucket.request(session, "HEAD")
    except S3Error as exc:
        if creds and exc.status is not None:
            # Credentials rejected or not allowed: a public bucket may still be readable anonymously.
            try:
                bucket._replace(creds=None).request(session, "HEAD", attempts=1)
            except S3Error:
                pass
            else:
                return "anonymous", (f"S3 refused the credentials ({exc.cause}): anonymous read of bucket "
                                     f"{options.bucket}")
        return "local", (f"S3 bucket {options.bucket} not reachable ({exc.cause}): local disk cache (lost with "
                         "the builder)")

    if not creds:
        return "anonymous", f"{why_no_creds}: anonymous read of bucket {options.bucket}, nothing written"

    probe_key = f"{options.key_prefix.rstrip('/')}/.ghbuild-write-probe"
    try:
        bucket.request(session, "PUT", probe_key, b"ghbuild write probe")
        try:
            bucket.request(session, "DELETE", probe_key)
        except S3Error:
            pass  # a missing delete permission does not stop caching
    except S3Error as exc:
        return "read-only", f"S3 write probe failed ({exc.cause}): read-only, misses are not stored"
    return "read-write", f"bucket {options.bucket} readable and writable"
