"""The default sccache helper's pin: ghbuild/resources/sccache-helper.json, read by sccache.helper_image and
written by ghbuild's release (`python -m ghbuild.build.helper_pin IMAGE@sha256:DIGEST`, after sccache-helper.yml
published the image), so that what a trusted build mounts beside the S3 write key is fixed by the ghbuild
commit a caller pins, never by where a tag points that day."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NamedTuple

from ghbuild import naming
from ghbuild.errors import GhbuildError, UsageError

PIN_FILE = Path(__file__).resolve().parents[1] / "resources" / "sccache-helper.json"


class HelperPin(NamedTuple):
    image: str              # the default helper as configured: name:tag
    digest: str | None      # sha256:<64 hex>, or None between releases


def read(path: Path | None = None) -> HelperPin:
    data = json.loads((path or PIN_FILE).read_text("utf-8"))
    return HelperPin(data["image"], data.get("digest"))


def write(reference: str, path: Path | None = None) -> HelperPin:
    """Pin the default helper to `reference` (name[:tag]@sha256:...): same repository as the default's."""
    if not naming.is_digest_ref(reference):
        raise UsageError(f"{reference!r}: not a digest reference (name@sha256:<64 hex>)")
    path = path or PIN_FILE
    name, digest = reference.rsplit("@", 1)
    data = json.loads(path.read_text("utf-8"))
    if naming.pinned(data["image"], digest) != f"{name}@{digest}":
        raise UsageError(f"{reference!r}: not the default helper's repository ({data['image']})")
    data["digest"] = digest
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", "utf-8")
    tmp.replace(path)
    return HelperPin(data["image"], digest)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m ghbuild.build.helper_pin IMAGE@sha256:DIGEST", file=sys.stderr)
        return 2
    try:
        pin = write(argv[0])
    except GhbuildError as exc:
        print(f"ghbuild helper_pin: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"{PIN_FILE.name}: {pin.image}@{pin.digest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
