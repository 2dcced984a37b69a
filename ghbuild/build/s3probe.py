"""The S3 preflight of sccache: is the bucket reachable, with the job's credentials or anonymously, and
can they write? boto3 is the `aws` extra: `ghbuild.build.sccache.preflight` imports this module only for
a real build with a bucket configured."""

from __future__ import annotations

from collections.abc import Mapping

import boto3
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError


def probe(options, creds: Mapping[str, str] | None, why_no_creds: str, timeout: float) -> tuple[str, str]:
    """(mode, reason): read-write, read-only, anonymous or local. `creds`: the AWS variables this run may
    use, None when it may use none. Never raises for S3 trouble: a degraded mode carries the cause."""
    client = _client(options, creds, timeout)
    try:
        client.head_bucket(Bucket=options.bucket)
    except (BotoCoreError, ClientError) as exc:
        cause = _describe(exc)
        if creds and isinstance(exc, ClientError):
            # Credentials rejected or not allowed: a public bucket may still be readable anonymously.
            try:
                _client(options, None, timeout, attempts=1).head_bucket(Bucket=options.bucket)
            except (BotoCoreError, ClientError):
                pass
            else:
                return "anonymous", f"S3 refused the credentials ({cause}): anonymous read of bucket {options.bucket}"
        return "local", f"S3 bucket {options.bucket} not reachable ({cause}): local disk cache (lost with the builder)"

    if not creds:
        return "anonymous", f"{why_no_creds}: anonymous read of bucket {options.bucket}, nothing written"

    probe_key = f"{options.key_prefix.rstrip('/')}/.ghbuild-write-probe"
    try:
        client.put_object(Bucket=options.bucket, Key=probe_key, Body=b"ghbuild write probe")
        try:
            client.delete_object(Bucket=options.bucket, Key=probe_key)
        except (BotoCoreError, ClientError):
            pass  # a missing delete permission does not stop caching
    except (BotoCoreError, ClientError) as exc:
        return "read-only", f"S3 write probe failed ({_describe(exc)}): read-only, misses are not stored"
    return "read-write", f"bucket {options.bucket} readable and writable"


def _client(options, creds: Mapping[str, str] | None, timeout: float, attempts: int = 2):
    config = Config(connect_timeout=timeout, read_timeout=timeout,
                    retries={"max_attempts": attempts, "mode": "standard"},
                    signature_version=None if creds else UNSIGNED)
    creds = creds or {}
    session = boto3.session.Session(
        aws_access_key_id=creds.get("AWS_ACCESS_KEY_ID") or None,
        aws_secret_access_key=creds.get("AWS_SECRET_ACCESS_KEY") or None,
        aws_session_token=creds.get("AWS_SESSION_TOKEN") or None,
        region_name=options.region or "us-east-1")
    return session.client("s3", endpoint_url=options.endpoint or None, config=config)


def _describe(exc: Exception) -> str:
    if isinstance(exc, ClientError):
        err = exc.response.get("Error", {})
        return f"{err.get('Code', 'error')} ({exc.response.get('ResponseMetadata', {}).get('HTTPStatusCode')})"
    return type(exc).__name__
