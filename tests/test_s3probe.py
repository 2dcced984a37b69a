"""The S3 preflight's addressing and answers, on an in-process loopback server (the signatures themselves are
checked by an S3 that verifies them: tests/services/engine/test_40_degraded.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fakes.httpserver import LoopbackService, reply

from ghbuild.build import s3probe


@pytest.mark.parametrize("bucket, region, endpoint, url", [
    ("cache", "eu-west-1", None, "https://cache.s3.eu-west-1.amazonaws.com"),
    ("my.cache", "us-east-1", None, "https://s3.us-east-1.amazonaws.com/my.cache"),
    ("Cache", "us-east-1", None, "https://s3.us-east-1.amazonaws.com/Cache"),
    ("a--b", "us-east-1", None, "https://s3.us-east-1.amazonaws.com/a--b"),
    ("cache", "us-east-1", "http://127.0.0.1:9000/", "http://127.0.0.1:9000/cache"),
])
def test_bucket_url(bucket, region, endpoint, url):
    assert s3probe.bucket_url(bucket, region, endpoint) == url


class _S3(LoopbackService):
    """Answers each request with the next status of `statuses` (the last one repeats) and records it."""

    def __init__(self, statuses):
        super().__init__()
        self.statuses, self.seen = list(statuses), []

    def handle(self, h):
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        self.seen.append((h.command, h.path, h.headers.get("Authorization"), body))
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        text = b"<Error><Code>AccessDenied</Code></Error>" if status == 403 else b""
        reply(h, status, text if h.command != "HEAD" else b"")


def _probe(server, creds):
    options = SimpleNamespace(bucket="b", region="us-east-1", endpoint=server.url, key_prefix="p/")
    return s3probe.probe(options, creds, "no AWS credentials in the environment", 5.0)


CREDS = {"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "secret-never-sent"}


def test_read_write_signs_head_put_delete():
    with _S3([200]) as server:
        mode, reason = _probe(server, CREDS)
    assert mode == "read-write", reason
    assert [(m, p) for m, p, _, _ in server.seen] == [("HEAD", "/b/"), ("PUT", "/b/p/.ghbuild-write-probe"),
                                                      ("DELETE", "/b/p/.ghbuild-write-probe")]
    assert all(auth and auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") for _, _, auth, _ in server.seen)
    assert server.seen[1][3] == b"ghbuild write probe"
    assert not any("secret-never-sent" in str(entry) for entry in server.seen)


def test_a_refused_write_is_read_only_with_the_code():
    with _S3([200, 403]) as server:
        mode, reason = _probe(server, CREDS)
    assert (mode, reason) == ("read-only", "S3 write probe failed (AccessDenied (403)): read-only, misses are not "
                                           "stored")


def test_refused_credentials_fall_back_to_an_unsigned_read():
    with _S3([403, 200]) as server:
        mode, reason = _probe(server, CREDS)
    assert mode == "anonymous" and "S3 refused the credentials (403 (403))" in reason
    assert server.seen[1][2] is None


def test_a_5xx_is_tried_once_more_then_local():
    with _S3([503]) as server:
        mode, reason = _probe(server, None)
    assert mode == "local" and "not reachable (503 (503))" in reason
    assert len(server.seen) == 2


def test_no_credentials_read_anonymously_unsigned():
    with _S3([200]) as server:
        mode, _ = _probe(server, None)
    assert mode == "anonymous" and [(m, a) for m, _, a, _ in server.seen] == [("HEAD", None)]
