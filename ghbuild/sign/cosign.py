"""The cosign edge: every `cosign` process ghbuild runs, behind `Cosign.sign` and `Cosign.verify`.

cosign reads its registry credentials where docker's login put them (DOCKER_CONFIG), and a key's password
from COSIGN_PASSWORD in the environment it inherits: nothing secret is on its command line. A failure is
one line: cosign's own `Error:` line, never its usage text.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any

from ghbuild.errors import VerificationError
from ghbuild.sign.policy import Signer, Verifier, sign_args, verify_args

TIMEOUT = 180.0   # seconds: keyless signing waits on Fulcio and Rekor


def _reason(proc: subprocess.CompletedProcess[str]) -> str:
    """cosign's `Error: ...` line (the first), else its last line of stderr."""
    lines = [line.strip() for line in (proc.stderr or "").splitlines() if line.strip()]
    errors = [line.removeprefix("Error:").strip() for line in lines if line.startswith("Error:")]
    return (errors or lines[-1:] or [f"exit {proc.returncode}"])[0]


class Cosign:
    """One cosign binary and the environment it runs in (COSIGN_PASSWORD, DOCKER_CONFIG pass through)."""

    def __init__(self, env: Mapping[str, str] | None = None, binary: str | None = None,
                 timeout: float = TIMEOUT) -> None:
        self.env = dict(os.environ if env is None else env)
        self.binary = binary or self.env.get("GHBUILD_COSIGN") or "cosign"
        self.timeout = timeout

    def _run(self, argv: list[str], what: str) -> subprocess.CompletedProcess[str]:
        exe = shutil.which(self.binary, path=self.env.get("PATH"))
        if exe is None:
            raise VerificationError(f"{what}: cosign not found ({self.binary}): install cosign 2.x, or set "
                                    "GHBUILD_COSIGN to its path")
        try:
            return subprocess.run([exe, *argv], capture_output=True, text=True, errors="replace", env=self.env,
                                  timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            raise VerificationError(f"{what}: cosign did not finish within {self.timeout:.0f} s") from None

    def sign(self, ref: str, signer: Signer, annotations: Mapping[str, str]) -> None:
        """Sign `ref` (repository@digest); the signature goes to `<repository>:sha256-<hex>.sig`."""
        proc = self._run(sign_args(signer, annotations, ref), f"sign {ref}")
        if proc.returncode != 0:
            raise VerificationError(f"sign {ref} ({signer.mode}): {_reason(proc)}")

    def verify(self, ref: str, verifier: Verifier, annotations: Mapping[str, str],
               sha: str | None = None) -> list[dict[str, Any]]:
        """The verified signature payloads of `ref`; raises with cosign's reason when none verifies."""
        proc = self._run(verify_args(verifier, annotations, ref, sha), f"verify {ref}")
        if proc.returncode != 0:
            raise VerificationError(f"{ref}: signature not verified ({verifier.reason}): {_reason(proc)}")
        try:
            payloads = json.loads(proc.stdout or "[]")
        except ValueError:
            raise VerificationError(f"{ref}: cosign verify printed no JSON") from None
        return payloads if isinstance(payloads, list) else []
