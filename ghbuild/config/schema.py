"""The config file's JSON schema, shipped in ghbuild/resources (also printed by `ghbuild schema`)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any


@lru_cache(maxsize=1)
def document() -> dict[str, Any]:
    """The JSON schema of the config file (also printed by `ghbuild schema`)."""
    # A file next to this module (ghbuild is never imported from a zip): importlib.resources would import
    # zipfile and its readers (~30 ms) at every start of a command that loads a config.
    text = (Path(__file__).resolve().parents[1] / "resources" / "ghbuild.schema.json").read_text("utf-8")
    return json.loads(text)
