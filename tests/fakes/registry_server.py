"""A throwaway distribution registry (the `docker-registry` binary) on a free loopback port, for tests
that need a real registry but not the Docker engine."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from .httpserver import free_port


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/v2/", timeout=1) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def running_registry(root: Path) -> Iterator[str]:
    """Start a registry storing under `root`; yields its URL; stops it on exit.

    A missing binary fails under CI=true (a missing service is a failure there) and skips elsewhere.
    """
    binary = shutil.which("docker-registry")
    if binary is None:
        reason = "the docker-registry binary is not installed (apt-get install -y docker-registry)"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    proc = None
    url = ""
    for _attempt in range(3):  # a free port can be taken between the probe and the bind
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        config = root / "config.yml"
        config.write_text(
            "version: 0.1\n"
            "log:\n  level: error\n  accesslog:\n    disabled: true\n"
            f"storage:\n  filesystem:\n    rootdirectory: {root / 'data'}\n  delete:\n    enabled: true\n"
            "  maintenance:\n    uploadpurging:\n      enabled: false\n"
            f"http:\n  addr: 127.0.0.1:{port}\n"
        )
        with open(root / "registry.log", "ab") as log:
            proc = subprocess.Popen([binary, "serve", str(config)], stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and proc.poll() is None and not answers(url):
            time.sleep(0.05)
        if proc.poll() is None and answers(url):
            break
        proc.kill()
        proc.wait(5)
        proc = None
    if proc is None:
        pytest.fail("docker-registry did not start: " + (root / "registry.log").read_text(errors="replace")[-2000:])
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
