"""The cosign edge: every `cosign` process ghbuild runs, behind `Cosign.sign` and `Cosign.verify`.

cosign reads its registry credentials where docker's login put them (DOCKER_CONFIG), and a key's password
from COSIGN_PASSWORD in the environment it inherits: nothing secret is on its command line. A failure is
one line: cosign's own `Error:` line, never its usage text. The binary (GHBUILD_COSIGN, else the first `cosign` on
PATH) must be cosign 2: its `cosign version` is asked once per binary; a build that says no version (a
distribution's `devel`) is taken at its word.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from typing import Any, NamedTuple

from ghbuild.errors import VerificationError
from ghbuild.sign.policy import (
    KeylessIdentity,
    Signer,
    Verifier,
    certificate_trigger,
    sign_args,
    trusted_trigger,
    verify_args,
)

TIMEOUT = 180.0   # seconds: keyless signing waits on Fulcio and Rekor
_checked: dict[str, str | None] = {}    # binary path -> why it is not usable (None: cosign 2, or no version said)


class Signature(NamedTuple):
    """What `Cosign.verify` found: the verified payloads and who signed them (one line)."""

    payloads: list[dict[str, Any]]
    signer: str


def version_problem(output: str) -> str | None:
    """Why `cosign version` (its JSON, or its text) is not cosign 2; None when it is, or says no version."""
    try:
        found = str((json.loads(output) or {}).get("gitVersion") or "")
    except (ValueError, AttributeError):
        match = re.search(r"GitVersion:\s*(\S+)", output)
        found = match.group(1) if match else ""
    major = re.match(r"v?(\d+)\.", found)
    if major and major.group(1) != "2":
        return f"cosign {found}: ghbuild needs cosign 2.x"
    return None


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
        if exe not in _checked:
            _checked[exe] = self._version_problem(exe)
        if _checked[exe]:
            raise VerificationError(f"{what}: {_checked[exe]} ({exe}): install cosign 2.x, or set GHBUILD_COSIGN "
                                    "to its path")
        try:
            return subprocess.run([exe, *argv], capture_output=True, text=True, errors="replace", env=self.env,
                                  timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            raise VerificationError(f"{what}: cosign did not finish within {self.timeout:.0f} s") from None

    def _version_problem(self, exe: str) -> str | None:
        try:
            proc = subprocess.run([exe, "version", "--json"], capture_output=True, text=True, errors="replace",
                                  env=self.env, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"`cosign version` failed ({type(exc).__name__})"
        return version_problem(proc.stdout.strip() or proc.stderr.strip())

    def sign(self, ref: str, signer: Signer, annotations: Mapping[str, str]) -> None:
        """Sign `ref` (repository@digest); the signature goes to `<repository>:sha256-<hex>.sig`."""
        proc = self._run(sign_args(signer, annotations, ref), f"sign {ref}")
        if proc.returncode != 0:
            raise VerificationError(f"sign {ref} ({signer.mode}): {_reason(proc)}")

    def verify(self, ref: str, verifier: Verifier, annotations: Mapping[str, str]) -> Signature:
        """The signatures of `ref` that verify with the key, else with the keyless identity (either is enough);
        raises with cosign's reasons when none does."""
        failures = []
        if verifier.key:
            proc = self._run(verify_args(annotations, ref, key=verifier.key), f"verify {ref}")
            if proc.returncode == 0:
                return Signature(self._payloads(ref, proc), f"cosign key {verifier.key}")
            failures.append(f"key {verifier.key}: {_reason(proc)}")
        if verifier.identity:
            found = self._keyless(ref, verifier.identity, annotations)
            if isinstance(found, Signature):
                return found
            failures.append(found)
        raise VerificationError(f"{ref}: signature not verified ({verifier.reason}): "
                                + ("; ".join(failures) or "no key and no keyless identity to verify with"))

    def _keyless(self, ref: str, identity: KeylessIdentity, annotations: Mapping[str, str]) -> Signature | str:
        """The keyless signatures of `ref` by `identity` from a trusted trigger, else why not (one phrase)."""
        proc = self._run(verify_args(annotations, ref, identity=identity), f"verify {ref}")
        if proc.returncode != 0:
            return f"keyless: {_reason(proc)}"
        kept, others = trusted_trigger(self._payloads(ref, proc))
        if not kept:
            return (f"keyless: signed only by runs triggered by {', '.join(sorted(set(others)))}, not "
                    "push, schedule or workflow_dispatch")
        subject = (kept[0].get("optional") or {}).get("Subject") or "(no subject)"
        return Signature(kept, f"{subject} ({certificate_trigger(kept[0])} run on {identity.ref})")

    @staticmethod
    def _payloads(ref: str, proc: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
        try:
            payloads = json.loads(proc.stdout or "[]")
        except ValueError:
            raise VerificationError(f"{ref}: cosign verify printed no JSON") from None
        return payloads if isinstance(payloads, list) else []
