"""`ghbuild init`: adopt ghbuild in the repository at the working directory."""

from __future__ import annotations

import argparse
from pathlib import Path

from ghbuild import adopt
from ghbuild.cli import common


def cmd_init(args: argparse.Namespace) -> int:
    platforms = tuple(common.listed(args.platform) or adopt.DEFAULT_PLATFORMS)
    pin = adopt.toolkit_pin(args.pin)
    adoption = adopt.adopt(Path.cwd(), pin, platforms)
    if args.diff and not args.force and (kept := adopt.existing(adoption)):
        # `init` then `init --diff | git apply`: the patch is about the Dockerfiles, so it is printed anyway.
        common.log(f"ghbuild init: {adopt.kept_message(kept)} (--force overwrites); the Dockerfile patch follows")
    else:
        for path in adopt.write(adoption, args.force):
            common.log(f"ghbuild init: wrote {path.relative_to(adoption.root)}")
    common.log(f"ghbuild init: the workflow calls {pin.repository}@{pin.ref} ({pin.source}); images: "
               + ", ".join(f"{f.image} ({f.path})" for f in adoption.dockerfiles))
    for item in adoption.dockerfiles:
        print(adopt.diff(adoption.root, item) if args.diff else adopt.instructions(item), end="")
        for line in item.skipped:
            common.log(f"ghbuild init: {line}")
    return 0
