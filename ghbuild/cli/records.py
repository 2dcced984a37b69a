"""`ghbuild digests`: the records every build job wrote, collected into the build workflow's output."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ghbuild import render
from ghbuild.github import gha
from ghbuild.publish import records


def cmd_digests(args: argparse.Namespace) -> int:
    digests = records.collect(Path(args.records))
    planned = records.planned_jobs(args.matrix)
    gha.set_output("digests", digests)
    gha.add_summary(render.digests_summary(args.title, planned, digests))
    if args.out:
        records.write_all(Path(args.out), digests)
    print(json.dumps(digests, indent=2))
    return 0
