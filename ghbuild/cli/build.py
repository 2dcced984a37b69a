"""`ghbuild build`: one plan job built, pushed and reported.

The docker clients are asked first: they answer (tens of milliseconds each) while the build job's modules
load (ghbuild.cli.build_job), the config is read and the job planned. A dry run asks them only their
version.
"""

from __future__ import annotations

import argparse
import os

from ghbuild.build import engine


def cmd_build(args: argparse.Namespace) -> int:
    with engine.ClientProbe(os.environ, engine=not args.dry_run) as probe:
        from ghbuild.cli import build_job  # loads while the probe runs

        plan, report = build_job.run(args, probe)
    return build_job.done(args, plan, report)
