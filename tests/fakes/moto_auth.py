"""A moto_server of a test's own that checks credentials: the shared one of `make infra-up` accepts any key pair,
so it cannot tell a wrong or expired credential from a good one. Not a fake (moto is the S3/IAM/STS stand-in the
suite runs everywhere); here because two service folders start one."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from fakes.httpserver import LOOPBACK, free_port


@contextmanager
def authenticating_moto(moto: Path, log: Path, free_actions: int, env: Mapping[str, str],
                        timeout: float = 60.0) -> Iterator[str]:
    """moto_server on a free loopback port that lets the first `free_actions` requests (the caller's set-up)
    through unauthenticated and checks every request after them; yields its URL, stops it (its pid only)."""
    if not moto.exists():
        raise AssertionError(f"{moto} is missing (moto[server] is in the test extra of pyproject.toml)")
    port = free_port()
    server_env = {k: v for k, v in env.items() if not k.startswith(("AWS_", "MOTO_"))}
    server_env["INITIAL_NO_AUTH_ACTION_COUNT"] = str(free_actions)
    with open(log, "wb") as out:            # the server writes through its own descriptor
        proc = subprocess.Popen([str(moto), "-H", LOOPBACK, "-p", str(port)], env=server_env, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                socket.create_connection((LOOPBACK, port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None:
                    raise AssertionError(f"moto_server exited {proc.returncode} (log: {log})") from None
                if time.monotonic() > deadline:
                    raise AssertionError(f"moto_server does not answer on {LOOPBACK}:{port} after {timeout:g} s") \
                        from None
                time.sleep(0.1)
        yield f"http://{LOOPBACK}:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
