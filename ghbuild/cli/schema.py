"""`ghbuild schema`: the JSON schema of ghbuild.toml."""

from __future__ import annotations

import argparse
import json

from ghbuild.config import schema


def cmd_schema(args: argparse.Namespace) -> int:
    print(json.dumps(schema.document(), indent=2))
    return 0
