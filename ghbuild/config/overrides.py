"""Config overrides handed to a reusable workflow: `KEY=VALUE` lines -> GHBUILD_* variables.

A caller's `env:` does not reach a called workflow, so the workflows take one `overrides` input and
turn it into the job's environment with this. A key is a config key (`sccache.bucket`,
`images.cpu.target`) or its variable (`GHBUILD_SCCACHE_BUCKET`); a key that maps to no setting of
this config is refused (with a suggestion), and so is a value the config would refuse, before any
variable is set. Blank lines and `#` comments are skipped.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import Path

from ghbuild.config import configfile, environment
from ghbuild.errors import ConfigError

_KEY = re.compile(r"^[A-Za-z0-9_.-]+$")


def parse(text: str, where: str = "overrides") -> dict[str, str]:
    """{GHBUILD_* variable: value} from the lines, in order; syntax only (see `validate`)."""
    result: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition("=")
        key = key.strip()
        if not sep or not _KEY.match(key):
            raise ConfigError(f"{where} line {number}: expected KEY=VALUE (KEY a config key such as "
                              f"sccache.bucket, or its GHBUILD_* variable), got {key[:60]!r}")
        if key.upper().startswith(environment.ENV_PREFIX):
            var = key.upper()
        else:
            var = environment.ENV_PREFIX + "_".join(environment._env_segment(part) for part in key.split("."))
        result[var] = value.strip()
    return result


def validate(variables: Mapping[str, str], explicit_config: str | None, env: Mapping[str, str], cwd: Path,
             where: str = "overrides") -> None:
    """Refuse a variable that sets no key of this config, then load the config with them all."""
    path, raw = configfile.find_config(explicit_config, env, cwd)
    images = raw.get("images")
    mapping = environment.env_mapping(list(images) if isinstance(images, dict) else [])
    for var in variables:
        if var not in mapping:
            hint = difflib.get_close_matches(var, list(mapping), n=1)
            raise ConfigError(f"{where}: {var}: no such setting in {path.name}"
                              + (f" (did you mean {hint[0]}?)" if hint else ""))
    configfile.from_data(raw, path, {**env, **variables})
